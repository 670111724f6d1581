// SPDX-License-Identifier: GPL-2.0
/*
 * tour/odp.c - the tour's chapter on on-demand paging (ODP), a program
 * written to be read.  `make demo CHAPTER=odp` runs it in the test VM
 * (after scripts/remu-up); it prints what happens, shows the trace events
 * remu records (docs/tracing.md) and the port counters, and fails (exit
 * status 1) when it does not see what it teaches.
 *
 * The story, in four lessons:
 *  1. Registering memory.  An ordinary ("pinned") MR pins every page of
 *     the buffer when it is registered: the kernel must fault each page
 *     in and keep it in place for the NIC.  An ODP MR pins nothing: the
 *     NIC keeps its own page table for the range and fills it when it
 *     first touches a page.
 *  2. First touch.  A remote RDMA WRITE into untouched ODP memory makes
 *     the responding NIC take a page fault for each page it has not
 *     mapped yet; remu resolves it with hmm_range_fault() and goes on.
 *  3. Invalidation.  When the kernel takes a page back (here
 *     MADV_DONTNEED; also munmap, COW, reclaim, migration), it tells the
 *     NIC through an mmu_interval_notifier and the NIC forgets the page;
 *     the next access faults it in again.
 *  4. Prefetch.  ibv_advise_mr() asks the NIC to fault a range in ahead
 *     of time, so the data path takes no fault.
 *
 * Two devices, one process: remu0 (the requester, a pinned source
 * buffer) and remu1 (the responder, the ODP memory), one RC connection
 * between them over the veth pair of scripts/remu-up.
 */
#include "tour.h"

#define BIG		(64UL << 20)	/* lesson 1: a 64 MiB buffer */
#define NPAGES		16		/* lessons 2-4: 16 pages */

int main(void)
{
	struct ibv_mr *pinned, *odp;
	const struct rt_ev *e;
	long long f0, f1, sum, max;
	uint8_t *big, *mem;
	struct ibv_sge sge;
	double t0, t_pin, t_odp;
	int i, n;

	/*
	 * The stage (tour.h): remu's trace events switched on in a trace
	 * instance of our own (/sys/kernel/tracing/instances/remu_tour), so
	 * every event remu records from now on lands in a buffer we read;
	 * remu0 and remu1 connected; 16 pages of pinned memory on remu0 to
	 * send from.
	 */
	tour_start("odp", NPAGES * PG);

	/* ---------------------------------------------------------------- */
	lesson("1. Registering 64 MiB: pinned vs on-demand paging");
	/*
	 * Untouched anonymous memory: no page of it exists yet.  A pinned
	 * registration must create and pin all 16384 pages; an ODP one only
	 * allocates the NIC's page table (pfn_list/dma_list in ib_umem_odp).
	 */
	big = mmap(NULL, BIG, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	need(big != MAP_FAILED, "mmap");
	trace_mark();
	t0 = remu_now();
	pinned = ibv_reg_mr(t.b.pd, big, BIG, IBV_ACCESS_LOCAL_WRITE |
			    IBV_ACCESS_REMOTE_WRITE);
	t_pin = remu_now() - t0;
	need(pinned != NULL, "ibv_reg_mr (pinned)");
	ibv_dereg_mr(pinned);
	t0 = remu_now();
	odp = ibv_reg_mr(t.b.pd, big, BIG, IBV_ACCESS_ON_DEMAND |
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	t_odp = remu_now() - t0;
	need(odp != NULL, "ibv_reg_mr (ODP)");
	read_events();
	printf("   ibv_reg_mr, pinned:   %8.1f ms\n", t_pin * 1e3);
	printf("   ibv_reg_mr, ODP:      %8.1f ms\n", t_odp * 1e3);
	printf("   The registrations as remu traced them (remu_mr_reg):\n");
	show("remu_mr_reg", 4);
	expect(count("remu_mr_reg", "remu1", "pinned", BIG / PG) == 1,
	       "the pinned MR pinned every page: pinned=16384");
	e = find(0, "remu_mr_reg", "remu1", "key", odp->rkey);
	expect(field_is(e, "kind", "odp") && field(e, "pinned") == 0,
	       "the ODP MR pinned nothing: kind=odp pinned=0");
	expect(count("remu_odp_fault", NULL, NULL, 0) == 0,
	       "and registering it faulted nothing in (no remu_odp_fault)");
	ibv_dereg_mr(odp);
	munmap(big, BIG);

	/* ---------------------------------------------------------------- */
	lesson("2. First touch: a remote WRITE into untouched ODP memory");
	/*
	 * remu0 writes 16 pages into remu1's ODP MR.  remu1's responder
	 * copies each packet into the MR through its MR access layer; the
	 * translation of each page is missing, so it takes a fault, maps the
	 * page and goes on.  One fault per page: a fault maps the pages from
	 * the missing one to the end of the packet being placed.
	 */
	mem = mmap(NULL, NPAGES * PG, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	need(mem != MAP_FAILED, "mmap");
	odp = ibv_reg_mr(t.b.pd, mem, NPAGES * PG, IBV_ACCESS_ON_DEMAND |
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	need(odp != NULL, "ibv_reg_mr (ODP)");
	f0 = counter("remu1", "num_page_faults");
	trace_mark();
	need(peer_rdma(IBV_WR_RDMA_WRITE, 0, NPAGES * PG, (uintptr_t)mem,
		       odp->rkey) == IBV_WC_SUCCESS, "the WRITE");
	f1 = counter("remu1", "num_page_faults");
	read_events();
	show("remu_odp_fault", 4);
	n = count("remu_odp_fault", "remu1", "key", odp->rkey);
	expect(n == NPAGES, "16 device page faults, one per page (pages=1)");
	expect(f1 - f0 == NPAGES,
	       "the port counter num_page_faults went up by 16 as well");
	expect(remu_cmp(t.src, mem, NPAGES * PG) == -1,
	       "the data arrived, byte for byte");
	for (sum = max = 0, i = 0; (e = find(i, "remu_odp_fault", "remu1",
					     "key", odp->rkey)); i++) {
		sum += field(e, "ns");
		max = field(e, "ns") > max ? field(e, "ns") : max;
	}
	printf("   A fault took %.1f us on average, %.1f us at most"
	       " (field ns).\n", n ? sum / 1e3 / n : 0.0, max / 1e3);

	/* ---------------------------------------------------------------- */
	lesson("3. Invalidation: MADV_DONTNEED takes 4 pages back");
	/*
	 * The kernel frees pages 4..7.  Before it may, it calls remu's
	 * mmu_interval_notifier, which removes those translations (and
	 * waits for an access in flight on them).  The event says why:
	 * MADV_DONTNEED is the mmu_notifier event "clear".
	 */
	trace_mark();
	madvise(mem + 4 * PG, 4 * PG, MADV_DONTNEED);
	read_events();
	show("remu_odp_invalidate", 4);
	e = find(0, "remu_odp_invalidate", "remu1", "pages", 4);
	expect(count("remu_odp_invalidate", "remu1", "pages", 4) == 1 &&
	       field_is(e, "event", "clear"),
	       "one invalidation of 4 pages, event=clear");
	/* the same WRITE again: only the 4 forgotten pages fault */
	trace_mark();
	need(peer_rdma(IBV_WR_RDMA_WRITE, 0, NPAGES * PG, (uintptr_t)mem,
		       odp->rkey) == IBV_WC_SUCCESS, "the WRITE");
	read_events();
	show("remu_odp_fault", 4);
	expect(count("remu_odp_fault", "remu1", "key", odp->rkey) == 4,
	       "the same WRITE again faults only those 4 pages in");
	e = find(0, "remu_odp_fault", "remu1", "key", odp->rkey);
	expect(field(e, "va") == (long long)(uintptr_t)(mem + 4 * PG),
	       "starting at the first page taken back (va)");

	/* ---------------------------------------------------------------- */
	lesson("4. Prefetch: ibv_advise_mr faults the range in ahead of time");
	madvise(mem, NPAGES * PG, MADV_DONTNEED);
	trace_mark();
	sge = (struct ibv_sge){ (uintptr_t)mem, NPAGES * PG, odp->lkey };
	need(!ibv_advise_mr(t.b.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
			    IBV_ADVISE_MR_FLAG_FLUSH, &sge, 1), "ibv_advise_mr");
	need(peer_rdma(IBV_WR_RDMA_WRITE, 0, NPAGES * PG, (uintptr_t)mem,
		       odp->rkey) == IBV_WC_SUCCESS, "the WRITE");
	read_events();
	show("remu_odp_prefetch", 2);
	show("remu_odp_fault", 4);
	e = find(0, "remu_odp_fault", "remu1", "prefetch", 1);
	expect(field(e, "pages") == NPAGES,
	       "one prefetch fault mapped all 16 pages (prefetch=1 pages=16)");
	expect(count("remu_odp_fault", "remu1", "prefetch", 0) == 0,
	       "and the WRITE that followed took no fault at all");

	ibv_dereg_mr(odp);
	munmap(mem, NPAGES * PG);
	return tour_end();
}
