// SPDX-License-Identifier: GPL-2.0
/*
 * tour/mw.c - the tour's chapter on memory windows, a program written to
 * be read (`make demo CHAPTER=mw`).
 *
 * Registering memory is slow (pages are pinned or a page table is built)
 * and an MR's rkey, once given to a peer, is good for the whole MR until
 * it is deregistered.  A memory window is a cheap, revocable grant on
 * part of an MR: the owner binds it (a work request on its own QP, no
 * system call) to a range with some rights, gives the window's rkey to
 * a peer, and invalidates it when the peer should be done: from then on
 * that rkey opens nothing (docs/memory-windows.md).
 *
 * The story, in three lessons:
 *  1. The MR gives no remote rights at all, only the right to bind
 *     windows on it (IBV_ACCESS_MW_BIND).  remu1 binds a type 2 window
 *     (remu_mw_bind type=2B) to 2 of its 16 pages, READ and WRITE.
 *  2. The peer, remu0, writes and reads those 2 pages through the
 *     window's rkey.
 *  3. remu1 revokes the grant with a LOCAL_INV work request
 *     (remu_mw_invalidate).  The peer's next READ through the same rkey
 *     fails: REM_ACCESS_ERR on remu0 (remu_cqe_err), counted by remu1 as
 *     resp_remote_access_errors.
 */
#include "tour.h"

#define NPAGES	16

int main(void)
{
	struct ibv_send_wr wr = {}, *bad;
	long long errs0;
	const struct rt_ev *e;
	struct ibv_mw *mw;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	uint8_t *mem;
	uint64_t win;
	uint32_t rkey;
	int st;

	tour_start("mw", 2 * PG);
	mem = aligned_alloc(PG, NPAGES * PG);
	need(mem != NULL, "aligned_alloc");
	memset(mem, 0, NPAGES * PG);

	/* ---------------------------------------------------------------- */
	lesson("1. Binding a window to 2 pages of an MR");
	mr = ibv_reg_mr(t.b.pd, mem, NPAGES * PG,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	need(mr != NULL, "ibv_reg_mr");
	mw = ibv_alloc_mw(t.b.pd, IBV_MW_TYPE_2);
	need(mw != NULL, "ibv_alloc_mw");
	/*
	 * A type 2 window is bound by a work request on the owner's QP.  The
	 * new rkey is the window's with its low 8 bits (the tag) changed, so
	 * that a key from an earlier grant does not open this one.
	 */
	win = (uintptr_t)mem + 4 * PG;
	rkey = ibv_inc_rkey(mw->rkey);
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info = (struct ibv_mw_bind_info){
		.mr = mr, .addr = win, .length = 2 * PG,
		.mw_access_flags = IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_WRITE };
	trace_mark();
	need(!ibv_post_send(t.b.qp, &wr, &bad), "posting the bind");
	need(remu_poll_one(t.b.cq, &wc, 20) == IBV_WC_SUCCESS, "the bind");
	read_events();
	show("remu_mw_bind", 1);
	e = find(0, "remu_mw_bind", "remu1", "new_key", rkey);
	expect(field_is(e, "type", "2B") && field(e, "err") == 0 &&
	       field(e, "addr") == (long long)win &&
	       field(e, "length") == 2 * PG && field(e, "mr") == mr->lkey,
	       "remu_mw_bind: type=2B, the 2 pages of the MR, the new key");

	/* ---------------------------------------------------------------- */
	lesson("2. The peer uses the grant");
	trace_mark();
	need(peer_rdma(IBV_WR_RDMA_WRITE, 0, 2 * PG, win, rkey) ==
	     IBV_WC_SUCCESS, "the WRITE through the window");
	memset(t.src, 0, 2 * PG);
	st = peer_rdma(IBV_WR_RDMA_READ, 0, 2 * PG, win, rkey);
	read_events();
	expect(remu_cmp(mem + 4 * PG, t.src, 2 * PG) == -1 &&
	       mem[4 * PG] == 0x5a && st == IBV_WC_SUCCESS,
	       "a WRITE and a READ through the window's rkey, byte for byte");
	expect(count("remu_cqe_err", NULL, NULL, 0) == 0,
	       "no error completion");

	/* ---------------------------------------------------------------- */
	lesson("3. Revoking it: LOCAL_INV, then the peer's READ fails");
	errs0 = counter("remu1", "resp_remote_access_errors");
	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_LOCAL_INV;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.invalidate_rkey = rkey;
	trace_mark();
	need(!ibv_post_send(t.b.qp, &wr, &bad), "posting LOCAL_INV");
	need(remu_poll_one(t.b.cq, &wc, 20) == IBV_WC_SUCCESS, "LOCAL_INV");
	st = peer_rdma(IBV_WR_RDMA_READ, 0, 2 * PG, win, rkey);
	read_events();
	show("remu_mw_invalidate", 1);
	show("remu_cqe_err", 2);
	e = find(0, "remu_mw_invalidate", "remu1", "key", rkey);
	expect(e && field(e, "err") == 0 && field(e, "qpn") == 0,
	       "remu_mw_invalidate of the key (qpn=0: a LOCAL_INV)");
	printf("   the peer's READ completed with %s\n", ibv_wc_status_str(st));
	e = find(0, "remu_cqe_err", "remu0", NULL, 0);
	expect(st == IBV_WC_REM_ACCESS_ERR &&
	       field_is(e, "status", "REM_ACCESS_ERR"),
	       "the same READ now fails: REM_ACCESS_ERR on remu0");
	expect(counter("remu1", "resp_remote_access_errors") == errs0 + 1,
	       "remu1 counted it: resp_remote_access_errors +1");

	need(!ibv_dealloc_mw(mw), "ibv_dealloc_mw");
	ibv_dereg_mr(mr);
	free(mem);
	return tour_end();
}
