// SPDX-License-Identifier: GPL-2.0
/*
 * tour/implicit.c - the tour's chapter on implicit on-demand paging, a
 * program written to be read (`make demo CHAPTER=implicit`).  Read
 * tour/odp.c first: this chapter builds on it.
 *
 * The story, in three lessons:
 *  1. One key for everything.  ibv_reg_mr(pd, NULL, SIZE_MAX,
 *     IBV_ACCESS_ON_DEMAND | ...) registers the whole address space of
 *     the process at once: no buffer is named, no page is pinned, and
 *     the NIC's page table is not even allocated yet.  The rkey reaches
 *     any address, and the iova is the virtual address.
 *  2. Children.  The NIC cuts the address space into 2 MiB pieces and
 *     builds the page table of a piece (a "child" umem, with its own
 *     mmu_interval_notifier) the first time it touches an address in it.
 *     Then it faults the page in, as an explicit ODP MR would.  A second
 *     access in the same 2 MiB makes no new child.
 *  3. Invalidation works per child: munmap of memory under the implicit
 *     MR invalidates the pages of the child it was in, with event=unmap.
 *
 * remu0 (the peer) writes into remu1's memory through the implicit MR.
 */
#include "tour.h"

#define TWO_M	(2UL << 20)

int main(void)
{
	struct ibv_device_attr_ex da = {};
	struct ibv_mr *mr;
	const struct rt_ev *e, *f;
	long long pages0, pages1, f0, f1;
	uint8_t *raw, *p;

	tour_start("implicit", PG);

	/* ---------------------------------------------------------------- */
	lesson("1. One MR for the whole address space");
	/* the device says it can: IBV_ODP_SUPPORT_IMPLICIT */
	need(!ibv_query_device_ex(t.b.ctx, NULL, &da), "ibv_query_device_ex");
	expect(da.odp_caps.general_caps & IBV_ODP_SUPPORT_IMPLICIT,
	       "remu1 offers implicit ODP (odp_caps: IBV_ODP_SUPPORT_IMPLICIT)");
	pages0 = counter("remu1", "num_odp_mr_pages");
	trace_mark();
	mr = ibv_reg_mr(t.b.pd, NULL, SIZE_MAX, IBV_ACCESS_ON_DEMAND |
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ);
	need(mr != NULL, "ibv_reg_mr(NULL, SIZE_MAX, ON_DEMAND)");
	read_events();
	show("remu_mr_reg", 1);
	e = find(0, "remu_mr_reg", "remu1", "key", mr->rkey);
	expect(field_is(e, "kind", "odp_implicit") &&
	       field(e, "length") == -1 && field(e, "pinned") == 0,
	       "kind=odp_implicit, length 2^64-1, nothing pinned");
	expect(counter("remu1", "num_odp_mr_pages") == pages0,
	       "no page table yet: num_odp_mr_pages did not move");

	/* ---------------------------------------------------------------- */
	lesson("2. The first access in a 2 MiB range creates its child");
	/*
	 * 4 MiB of fresh memory, and p, the first 2 MiB boundary in it:
	 * p and p + 5 pages are in one 2 MiB range, p + 2 MiB in the next.
	 */
	raw = mmap(NULL, 2 * TWO_M, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	need(raw != MAP_FAILED, "mmap");
	p = (uint8_t *)(((uintptr_t)raw + TWO_M - 1) & ~(TWO_M - 1));
	f0 = counter("remu1", "num_page_faults");
	trace_mark();
	need(peer_rdma(IBV_WR_RDMA_WRITE, 0, PG, (uintptr_t)p + PG,
		       mr->rkey) == IBV_WC_SUCCESS, "WRITE 1");
	need(peer_rdma(IBV_WR_RDMA_WRITE, 0, PG, (uintptr_t)p + 5 * PG,
		       mr->rkey) == IBV_WC_SUCCESS, "WRITE 2");
	read_events();
	printf("   Two WRITEs into one 2 MiB range:\n");
	show("remu_odp_implicit_child", 2);
	show("remu_odp_fault", 2);
	e = find(0, "remu_odp_implicit_child", "remu1", "key", mr->rkey);
	expect(count("remu_odp_implicit_child", "remu1", "key",
		     mr->rkey) == 1 &&
	       field(e, "start") == (long long)(uintptr_t)p &&
	       field(e, "size") == (long long)TWO_M,
	       "one child, for the 2 MiB at the first address (start, size)");
	f = find(0, "remu_odp_fault", "remu1", "key", mr->rkey);
	expect(e && f && e < f, "made before the first fault, which needed it");
	expect(count("remu_odp_fault", "remu1", "key", mr->rkey) == 2,
	       "then one fault per WRITE, as with an explicit ODP MR");
	expect(remu_cmp(t.src, p + 5 * PG, PG) == -1,
	       "the data arrived, byte for byte");

	trace_mark();
	need(peer_rdma(IBV_WR_RDMA_WRITE, 0, PG, (uintptr_t)p + TWO_M,
		       mr->rkey) == IBV_WC_SUCCESS, "WRITE 3");
	f1 = counter("remu1", "num_page_faults");
	pages1 = counter("remu1", "num_odp_mr_pages");
	read_events();
	printf("   A WRITE 2 MiB further:\n");
	show("remu_odp_implicit_child", 2);
	e = find(0, "remu_odp_implicit_child", "remu1", "key", mr->rkey);
	expect(count("remu_odp_implicit_child", "remu1", "key",
		     mr->rkey) == 1 &&
	       field(e, "start") == (long long)(uintptr_t)(p + TWO_M),
	       "a second child, for the next 2 MiB");
	expect(f1 - f0 == 3, "num_page_faults: +3, one per WRITE");
	printf("   num_odp_mr_pages: +%lld (the children's page tables)\n",
	       pages1 - pages0);
	expect(pages1 - pages0 == 2 * TWO_M / PG,
	       "num_odp_mr_pages: +1024, two children of 512 pages");

	/* ---------------------------------------------------------------- */
	lesson("3. munmap invalidates, child by child");
	trace_mark();
	munmap(raw, 2 * TWO_M);
	read_events();
	show("remu_odp_invalidate", 4);
	e = find(0, "remu_odp_invalidate", "remu1", "start",
		 (long long)(uintptr_t)p);
	expect(field_is(e, "event", "unmap") && field(e, "pages") == 2,
	       "the first child: event=unmap, its 2 mapped pages removed");
	e = find(0, "remu_odp_invalidate", "remu1", "start",
		 (long long)(uintptr_t)(p + TWO_M));
	expect(field_is(e, "event", "unmap") && field(e, "pages") == 1,
	       "the second child: event=unmap, its 1 page removed");

	ibv_dereg_mr(mr);
	return tour_end();
}
