// SPDX-License-Identifier: GPL-2.0
/*
 * tour/rereg.c - the tour's chapter on re-registration, a program written
 * to be read (`make demo CHAPTER=rereg`).
 *
 * ibv_rereg_mr() changes an MR while its keys stay the same: a peer that
 * holds the rkey goes on using it and reaches what the MR is now.  Three
 * things can change (flags): the translation (IBV_REREG_MR_CHANGE_
 * TRANSLATION: another address range), the PD, and the access rights.
 * remu makes a new MR with the new attributes under a key of its own,
 * hands it the old key, and deregisters the old MR once the accesses in
 * flight on it are done (docs/memory-regions.md, "Re-registration").
 *
 * The story, in three lessons:
 *  1. The peer (remu0) writes into buffer A through remu1's MR.
 *  2. CHANGE_TRANSLATION moves the MR to buffer B: the keys are the
 *     same (remu_mr_rereg flags=T), the new MR pinned B's pages
 *     (remu_mr_reg) and the old one is gone (remu_mr_dereg, same key).
 *     The peer's WRITE with the same rkey lands in B; A does not change.
 *  3. CHANGE_ACCESS takes the remote WRITE right away (flags=A): the
 *     peer can still READ with the same rkey, and its WRITE now fails
 *     with REM_ACCESS_ERR.
 */
#include "tour.h"

#define LEN	(4 * PG)

int main(void)
{
	uint8_t *a, *b, *copy;
	const struct rt_ev *e;
	struct ibv_mr *mr;
	uint32_t lkey, rkey;
	int st;

	tour_start("rereg", LEN);
	a = aligned_alloc(PG, LEN);
	b = aligned_alloc(PG, LEN);
	copy = malloc(LEN);
	need(a && b && copy, "aligned_alloc");
	memset(a, 0, LEN);
	memset(b, 0, LEN);

	/* ---------------------------------------------------------------- */
	lesson("1. An MR over buffer A, and the peer writes into it");
	mr = ibv_reg_mr(t.b.pd, a, LEN, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	need(mr != NULL, "ibv_reg_mr");
	lkey = mr->lkey;
	rkey = mr->rkey;
	printf("   lkey 0x%x, rkey 0x%x, over A at %p\n", lkey, rkey, a);
	need(peer_rdma(IBV_WR_RDMA_WRITE, 0, LEN, (uintptr_t)a, rkey) ==
	     IBV_WC_SUCCESS, "the WRITE into A");
	expect(remu_cmp(t.src, a, LEN) == -1, "the WRITE landed in A");

	/* ---------------------------------------------------------------- */
	lesson("2. CHANGE_TRANSLATION: the same keys, now over buffer B");
	memcpy(copy, a, LEN);
	trace_mark();
	need(!ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, b, LEN,
			   0), "ibv_rereg_mr(CHANGE_TRANSLATION)");
	read_events();
	show("remu_mr_rereg", 1);
	show("remu_mr_reg", 1);
	show("remu_mr_dereg", 1);
	printf("   lkey 0x%x, rkey 0x%x, over B at %p\n", mr->lkey, mr->rkey,
	       b);
	expect(mr->lkey == lkey && mr->rkey == rkey, "the keys did not change");
	e = find(0, "remu_mr_rereg", "remu1", "key", rkey);
	expect(field_is(e, "flags", "T") && field(e, "err") == 0 &&
	       field(e, "iova") == (long long)(uintptr_t)b,
	       "remu_mr_rereg: key kept, flags=T, the new iova (B)");
	e = find(0, "remu_mr_reg", "remu1", NULL, 0);
	expect(field_is(e, "kind", "pinned") && field(e, "pinned") == LEN / PG,
	       "a new MR pinned B's 4 pages (remu_mr_reg pinned=4)...");
	expect(count("remu_mr_dereg", "remu1", "key", rkey) == 1,
	       "...and the old MR is gone, under the key (remu_mr_dereg)");
	memset(t.src, 0x77, LEN);
	need(peer_rdma(IBV_WR_RDMA_WRITE, 0, LEN, (uintptr_t)b, rkey) ==
	     IBV_WC_SUCCESS, "the WRITE into B");
	expect(remu_cmp(t.src, b, LEN) == -1,
	       "the peer's WRITE with the same rkey landed in B");
	expect(remu_cmp(copy, a, LEN) == -1, "and A did not change");

	/* ---------------------------------------------------------------- */
	lesson("3. CHANGE_ACCESS: the same keys, no remote WRITE any more");
	trace_mark();
	need(!ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ),
	     "ibv_rereg_mr(CHANGE_ACCESS)");
	memset(t.src, 0, LEN);
	need(peer_rdma(IBV_WR_RDMA_READ, 0, LEN, (uintptr_t)b, rkey) ==
	     IBV_WC_SUCCESS, "the READ of B");
	expect(remu_cmp(t.src, b, LEN) == -1 && b[0] == 0x77,
	       "the peer still READs B with the same rkey");
	st = peer_rdma(IBV_WR_RDMA_WRITE, 0, LEN, (uintptr_t)b, rkey);
	read_events();
	show("remu_mr_rereg", 1);
	show("remu_cqe_err", 1);
	e = find(0, "remu_mr_rereg", "remu1", "key", rkey);
	expect(field_is(e, "flags", "A") && field(e, "access") ==
	       (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ),
	       "remu_mr_rereg: key kept, flags=A, the new access");
	printf("   the peer's WRITE completed with %s\n",
	       ibv_wc_status_str(st));
	expect(st == IBV_WC_REM_ACCESS_ERR,
	       "its WRITE now fails: REM_ACCESS_ERR");

	ibv_dereg_mr(mr);
	free(a);
	free(b);
	free(copy);
	return tour_end();
}
