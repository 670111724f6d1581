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
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "../selftests/remu_verbs_lib.h"
#include "../selftests/remu_trace_lib.h"

#define GID_INDEX	1		/* the IPv4-mapped RoCEv2 GID */
#define PG		4096
#define BIG		(64UL << 20)	/* lesson 1: a 64 MiB buffer */
#define NPAGES		16		/* lessons 2-4: 16 pages */

static int failed;

/* say what the reader should see, and whether it was there */
static void expect(int ok, const char *what)
{
	printf("   %s %s\n", ok ? "[seen]   " : "[MISSING]", what);
	if (!ok)
		failed = 1;
}

static void lesson(const char *title)
{
	printf("\n== %s\n", title);
}

/* the remu events recorded since the last rt_clear(), and their number */
static struct rt_ev *ev;
static int nev;

static void read_events(void)
{
	free(ev);
	ev = NULL;
	nev = rt_read(&ev);
	if (nev < 0) {
		perror("reading /sys/kernel/tracing/trace");
		exit(1);
	}
}

/* print the recorded events called @name (at most @max of them) */
static void show(const char *name, int max)
{
	int i, shown = 0;

	for (i = 0; i < nev; i++) {
		if (strcmp(ev[i].name, name))
			continue;
		if (shown++ < max)
			printf("     %s: %s\n", ev[i].name, ev[i].text);
	}
	if (shown > max)
		printf("     ... and %d more %s\n", shown - max, name);
}

static double seconds(void)
{
	return remu_now();
}

int main(void)
{
	static const struct ibv_qp_cap cap = {
		.max_send_wr = 16, .max_recv_wr = 16,
		.max_send_sge = 1, .max_recv_sge = 1,
	};
	struct remu_conn_attr ra = REMU_RC_ATTR(0x100);
	struct remu_end a = {}, b = {};
	struct ibv_mr *src_mr, *pinned, *odp;
	long long f0, f1;
	uint8_t *src, *big, *mem;
	struct ibv_sge sge;
	double t0, t_pin, t_odp;
	int i, n, err;

	setvbuf(stdout, NULL, _IOLBF, 0);
	/*
	 * Switch remu's trace events on, in a trace instance of our own
	 * (/sys/kernel/tracing/instances/remu_tour): every event remu
	 * records from now on lands in its buffer, where we read it.
	 */
	err = rt_setup("remu_tour", 4096, 1);
	if (err) {
		fprintf(stderr, "tracefs: %s (root? remu loaded?)\n",
			strerror(-err));
		return 1;
	}
	if (remu_end_open(&a, "remu0", GID_INDEX, 16, &cap) ||
	    remu_end_open(&b, "remu1", GID_INDEX, 16, &cap) ||
	    remu_end_connect(&a, &b, &ra, GID_INDEX) ||
	    remu_end_connect(&b, &a, &ra, GID_INDEX)) {
		fprintf(stderr, "cannot connect remu0 and remu1 (remu-up?)\n");
		return 1;
	}
	src = aligned_alloc(PG, NPAGES * PG);
	src_mr = src ? ibv_reg_mr(a.pd, src, NPAGES * PG,
				  IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!src_mr)
		return 1;
	memset(src, 0x5a, NPAGES * PG);

	/* ---------------------------------------------------------------- */
	lesson("1. Registering 64 MiB: pinned vs on-demand paging");
	/*
	 * Untouched anonymous memory: no page of it exists yet.  A pinned
	 * registration must create and pin all 16384 pages; an ODP one only
	 * allocates the NIC's page table (pfn_list/dma_list in ib_umem_odp).
	 */
	big = mmap(NULL, BIG, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (big == MAP_FAILED)
		return 1;
	rt_clear();
	t0 = seconds();
	pinned = ibv_reg_mr(b.pd, big, BIG, IBV_ACCESS_LOCAL_WRITE |
			    IBV_ACCESS_REMOTE_WRITE);
	t_pin = seconds() - t0;
	if (!pinned)
		return 1;
	ibv_dereg_mr(pinned);
	t0 = seconds();
	odp = ibv_reg_mr(b.pd, big, BIG, IBV_ACCESS_ON_DEMAND |
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	t_odp = seconds() - t0;
	if (!odp)
		return 1;
	read_events();
	printf("   ibv_reg_mr, pinned:   %8.1f ms\n", t_pin * 1e3);
	printf("   ibv_reg_mr, ODP:      %8.1f ms\n", t_odp * 1e3);
	printf("   The registrations as remu traced them (remu_mr_reg):\n");
	show("remu_mr_reg", 4);
	expect(rt_count(ev, nev, "remu_mr_reg", "remu1", "pinned",
			BIG / PG) == 1,
	       "the pinned MR pinned every page: pinned=16384");
	i = rt_find(ev, nev, 0, 0, "remu_mr_reg", "remu1", "key", odp->rkey);
	expect(i >= 0 && rt_is(&ev[i], "kind", "odp") &&
	       rt_num(&ev[i], "pinned", -1) == 0,
	       "the ODP MR pinned nothing: kind=odp pinned=0");
	expect(rt_count(ev, nev, "remu_odp_fault", NULL, NULL, 0) == 0,
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
	odp = mem == MAP_FAILED ? NULL :
	      ibv_reg_mr(b.pd, mem, NPAGES * PG, IBV_ACCESS_ON_DEMAND |
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!odp)
		return 1;
	f0 = remu_hw_counter("remu1", "num_page_faults", true);
	rt_clear();
	if (remu_rdma1(a.qp, a.cq, IBV_WR_RDMA_WRITE, (uintptr_t)src,
		       src_mr->lkey, NPAGES * PG, (uintptr_t)mem, odp->rkey,
		       20) != IBV_WC_SUCCESS)
		return 1;
	f1 = remu_hw_counter("remu1", "num_page_faults", true);
	read_events();
	show("remu_odp_fault", 4);
	n = rt_count(ev, nev, "remu_odp_fault", "remu1", "key", odp->rkey);
	expect(n == NPAGES, "16 device page faults, one per page (pages=1)");
	expect(f1 - f0 == NPAGES,
	       "the port counter num_page_faults went up by 16 as well");
	expect(remu_cmp(src, mem, NPAGES * PG) == -1,
	       "the data arrived, byte for byte");
	{
		long long sum = 0, max = 0, ns;

		for (i = 0; i < nev; i++) {
			if (!rt_match(&ev[i], "remu_odp_fault", "remu1",
				      "key", odp->rkey))
				continue;
			ns = rt_num(&ev[i], "ns", 0);
			sum += ns;
			max = ns > max ? ns : max;
		}
		printf("   A fault took %.1f us on average, %.1f us at most"
		       " (field ns).\n", n ? sum / 1e3 / n : 0.0, max / 1e3);
	}

	/* ---------------------------------------------------------------- */
	lesson("3. Invalidation: MADV_DONTNEED takes 4 pages back");
	/*
	 * The kernel frees pages 4..7.  Before it may, it calls remu's
	 * mmu_interval_notifier, which removes those translations (and
	 * waits for an access in flight on them).  The event says why:
	 * MADV_DONTNEED is the mmu_notifier event "clear".
	 */
	rt_clear();
	madvise(mem + 4 * PG, 4 * PG, MADV_DONTNEED);
	read_events();
	show("remu_odp_invalidate", 4);
	expect(rt_count(ev, nev, "remu_odp_invalidate", "remu1", "pages",
			4) == 1 &&
	       rt_find(ev, nev, 0, 0, "remu_odp_invalidate", "remu1",
		       "pages", 4) >= 0 &&
	       rt_is(&ev[rt_find(ev, nev, 0, 0, "remu_odp_invalidate",
				 "remu1", "pages", 4)], "event", "clear"),
	       "one invalidation of 4 pages, event=clear");
	/* the same WRITE again: only the 4 forgotten pages fault */
	rt_clear();
	if (remu_rdma1(a.qp, a.cq, IBV_WR_RDMA_WRITE, (uintptr_t)src,
		       src_mr->lkey, NPAGES * PG, (uintptr_t)mem, odp->rkey,
		       20) != IBV_WC_SUCCESS)
		return 1;
	read_events();
	show("remu_odp_fault", 4);
	expect(rt_count(ev, nev, "remu_odp_fault", "remu1", "key",
			odp->rkey) == 4,
	       "the same WRITE again faults only those 4 pages in");
	i = rt_find(ev, nev, 0, 0, "remu_odp_fault", "remu1", "key",
		    odp->rkey);
	expect(i >= 0 && rt_num(&ev[i], "va", 0) ==
			 (long long)(uintptr_t)(mem + 4 * PG),
	       "starting at the first page taken back (va)");

	/* ---------------------------------------------------------------- */
	lesson("4. Prefetch: ibv_advise_mr faults the range in ahead of time");
	madvise(mem, NPAGES * PG, MADV_DONTNEED);
	rt_clear();
	sge = (struct ibv_sge){ (uintptr_t)mem, NPAGES * PG, odp->lkey };
	if (ibv_advise_mr(b.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
			  IBV_ADVISE_MR_FLAG_FLUSH, &sge, 1))
		return 1;
	if (remu_rdma1(a.qp, a.cq, IBV_WR_RDMA_WRITE, (uintptr_t)src,
		       src_mr->lkey, NPAGES * PG, (uintptr_t)mem, odp->rkey,
		       20) != IBV_WC_SUCCESS)
		return 1;
	read_events();
	show("remu_odp_prefetch", 2);
	show("remu_odp_fault", 4);
	i = rt_find(ev, nev, 0, 0, "remu_odp_fault", "remu1", "prefetch", 1);
	expect(i >= 0 && rt_num(&ev[i], "pages", 0) == NPAGES,
	       "one prefetch fault mapped all 16 pages (prefetch=1 pages=16)");
	expect(rt_count(ev, nev, "remu_odp_fault", "remu1", "prefetch", 0) ==
	       0, "and the WRITE that followed took no fault at all");

	ibv_dereg_mr(odp);
	munmap(mem, NPAGES * PG);
	ibv_dereg_mr(src_mr);
	free(src);
	remu_end_close(&a);
	remu_end_close(&b);
	rt_close();
	free(ev);
	printf("\nChapter odp: %s\n", failed ? "FAILED (see [MISSING])" :
	       "everything it teaches was seen");
	return failed;
}
