// SPDX-License-Identifier: GPL-2.0
/*
 * tour/dm.c - the tour's chapter on device memory (DM), a program written
 * to be read (`make demo CHAPTER=dm`).
 *
 * A real NIC has a little memory of its own (mlx5: MEMIC, 128 KiB to a
 * few MiB).  A process can allocate some of it, reach it with the CPU,
 * and register it as an MR, so that the peer's RDMA accesses are served
 * from the NIC without crossing PCIe into host memory: the place for a
 * counter or a lock that many peers hit with atomics.  remu reserves a
 * pool of pages per device for it (docs/device-memory.md).
 *
 * The story, in four lessons:
 *  1. ibv_alloc_dm takes whole pages from the device's pool, and libremu
 *     maps them into the process at once (remu_dm_alloc, remu_dm_map;
 *     /sys/class/infiniband/remu1/dm_in_use).
 *  2. The CPU reaches device memory with ibv_memcpy_to_dm() and
 *     ibv_memcpy_from_dm(), through that mapping: no verb, no packet,
 *     no trace event, as a store to a NIC's BAR is invisible to it.
 *     The copies are of whole 4-byte words (offset and length), the unit
 *     of mlx5's BAR access, which libremu keeps.
 *  3. A DM MR (ibv_reg_dm_mr, zero based: iova 0 is the allocation's
 *     first byte) lets the peer use it: remu0 adds 1 to a 64-bit counter
 *     in remu1's device memory, 8 times, with RDMA FETCH_ADD, and each
 *     atomic returns the value it found.
 *  4. Freeing gives the pages back to the pool (remu_dm_free).
 */
#include "tour.h"

#define DM_LEN	100		/* bytes asked for: a page is taken */
#define COUNTER	8		/* the counter's offset (8-byte aligned) */
#define ADDS	8

static long long dm_in_use(void)
{
	return remu_read_num("/sys/class/infiniband/remu1/dm_in_use");
}

int main(void)
{
	/* 40 bytes: the CPU copies whole 4-byte words, as on mlx5 */
	static const char hello[40] = "written by the CPU into device memory";
	struct ibv_alloc_dm_attr da = { .length = DM_LEN };
	struct ibv_send_wr wr = { .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD };
	struct ibv_sge sge;
	char back[sizeof(hello)];
	uint64_t *old = NULL, value = 0;
	long long use0, off;
	const struct rt_ev *e;
	struct ibv_dm *dm;
	struct ibv_mr *mr;
	int i, ok;

	tour_start("dm", PG);

	/* ---------------------------------------------------------------- */
	lesson("1. Allocating device memory");
	use0 = dm_in_use();
	trace_mark();
	dm = ibv_alloc_dm(t.b.ctx, &da);
	need(dm != NULL, "ibv_alloc_dm");
	read_events();
	show("remu_dm_alloc", 1);
	show("remu_dm_map", 1);
	e = find(0, "remu_dm_alloc", "remu1", NULL, 0);
	off = field(e, "mmap_off");
	expect(field(e, "size") == PG,
	       "100 bytes asked for, one whole page taken (size=4096)");
	expect(count("remu_dm_map", "remu1", "mmap_off", off) == 1,
	       "libremu mapped it into the process at once (same mmap_off)");
	printf("   dm_in_use: %lld -> %lld bytes\n", use0, dm_in_use());
	expect(dm_in_use() == use0 + PG, "the pool's dm_in_use grew by 4096");

	/* ---------------------------------------------------------------- */
	lesson("2. The CPU reads and writes it directly");
	trace_mark();
	need(!ibv_memcpy_to_dm(dm, 16, hello, sizeof(hello)),
	     "ibv_memcpy_to_dm");
	need(!ibv_memcpy_from_dm(back, dm, 16, sizeof(back)),
	     "ibv_memcpy_from_dm");
	read_events();
	printf("   read back: \"%s\"\n", back);
	expect(!memcmp(back, hello, sizeof(hello)),
	       "what ibv_memcpy_to_dm wrote, ibv_memcpy_from_dm reads back");
	expect(t.nev == 0, "and the device saw nothing of it: no remu event");

	/* ---------------------------------------------------------------- */
	lesson("3. A counter in device memory, incremented by the peer");
	need(!ibv_memcpy_to_dm(dm, COUNTER, &value, sizeof(value)),
	     "ibv_memcpy_to_dm");
	mr = ibv_reg_dm_mr(t.b.pd, dm, 0, DM_LEN, IBV_ACCESS_ZERO_BASED |
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
			   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
	need(mr != NULL, "ibv_reg_dm_mr");
	trace_mark();
	/* each FETCH_ADD returns the old value into t.src[i * 8] */
	old = (uint64_t *)t.src;
	for (i = 0; i < ADDS; i++) {
		sge = (struct ibv_sge){ (uintptr_t)&old[i], 8, t.src_mr->lkey };
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.wr.atomic.remote_addr = COUNTER;	/* zero based */
		wr.wr.atomic.rkey = mr->rkey;
		wr.wr.atomic.compare_add = 1;
		need(remu_run_wr(t.a.qp, t.a.cq, &wr, 20) == IBV_WC_SUCCESS,
		     "FETCH_ADD");
	}
	need(!ibv_memcpy_from_dm(&value, dm, COUNTER, sizeof(value)),
	     "ibv_memcpy_from_dm");
	read_events();
	show("remu_pkt_recv", 2);
	printf("   the values the atomics found:");
	for (ok = 1, i = 0; i < ADDS; i++) {
		printf(" %llu", (unsigned long long)old[i]);
		ok &= old[i] == (uint64_t)i;
	}
	printf("\n   the counter, read by the CPU: %llu\n",
	       (unsigned long long)value);
	expect(count("remu_pkt_recv", "remu1", "opcode", 0x14) == ADDS,
	       "remu1 received 8 RC_FETCH_ADD packets");
	expect(ok, "each returned the count before it: 0 1 2 ... 7");
	expect(value == ADDS, "and the counter in device memory reads 8");

	/* ---------------------------------------------------------------- */
	lesson("4. Freeing it gives the page back to the pool");
	trace_mark();
	need(!ibv_dereg_mr(mr), "ibv_dereg_mr");
	need(!ibv_free_dm(dm), "ibv_free_dm");
	read_events();
	show("remu_dm_free", 1);
	e = find(0, "remu_dm_free", "remu1", "mmap_off", off);
	expect(field(e, "size") == PG && field(e, "in_use") == use0,
	       "remu_dm_free: the page is back, in_use as before");
	return tour_end();
}
