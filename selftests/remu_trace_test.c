// SPDX-License-Identifier: GPL-2.0
/*
 * remu_trace_test - remu's tracepoints (docs/tracing.md), read through
 * tracefs: each test switches every remu event on, runs a scenario that
 * must produce the events it checks, then reads the buffer and checks
 * each event's fields, with exact counts where the scenario fixes them.
 * remu0 (side a) is the requester, remu1 (side b) the responder; both
 * QPs are RC, connected by the test with the attributes it needs.
 *
 *  tr.reg_dereg		pinned, explicit and implicit ODP MRs: one
 *				remu_mr_reg and one remu_mr_dereg each (key,
 *				kind, iova, length, pages pinned)
 *  tr.rereg			remu_mr_rereg (same key, flags, new access)
 *				and the old MR's remu_mr_dereg
 *  tr.odp			a remote WRITE of 8 untouched pages: exactly
 *				8 remu_odp_fault (one per page, va and pages);
 *				MADV_DONTNEED of 3: remu_odp_invalidate
 *				(event clear, range, 3 pages); PREFETCH_WRITE:
 *				remu_odp_prefetch and one prefetch fault of 8
 *				pages; munmap: remu_odp_invalidate (unmap)
 *  tr.implicit_child		the first access in a 2 MiB range creates
 *				one child (start, size), the second none
 *  tr.dm			remu_dm_alloc, remu_dm_map, a DM MR's
 *				remu_mr_reg, remu_dm_free (same mmap offset)
 *  tr.dmabuf			remu_dmabuf_attach, a move by the test
 *				exporter (remu_dmabuf_move_notify dropped=1),
 *				the next access's remu_dmabuf_remap, a second
 *				move with nothing mapped (ret 0)
 *  tr.mw			remu_mw_bind of a type 2B window (keys, range,
 *				QP) and remu_mw_invalidate (LOCAL_INV)
 *  tr.packets			an RDMA WRITE of 3 MTUs + 100 bytes: 4
 *				remu_pkt_send on remu0 and 4 remu_pkt_recv on
 *				remu1 (opcodes, PSNs, payload lengths), ACKs
 *				back, the last one for the last PSN
 *  tr.qp_state			RESET->INIT->RTR->RTS and RTS->ERR
 *  tr.error_completion		a WRITE to a bad rkey: remu_cqe_err
 *				REM_ACCESS_ERR, the QP to ERR by the engine,
 *				then WR_FLUSH_ERR for the next WR
 *  tr.rnr			a SEND with no receive, rnr_retry 1: two RNR
 *				NAKs sent, one received and waited, one
 *				retransmission (rnr), then exceeded and
 *				RNR_RETRY_EXC_ERR
 *  tr.retransmit_timeout	a WRITE to a QP left in INIT (its packets are
 *				dropped), retry_cnt 2: two retransmissions
 *				(timeout) of the same PSN, then RETRY_EXC_ERR
 *  off.nothing_recorded	events off: the same WRITE records nothing
 */
#include <sys/ioctl.h>
#include <sys/mman.h>

#include "kselftest_harness.h"
#include "remu_verbs_lib.h"
#include "remu_dmabuf_lib.h"
#include "remu_trace_lib.h"

#define PSN0		0x100
#define PG		4096
#define ODP_RIGHTS	(IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE | \
			 IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

/* a's and b's RC connection with @ra (b gets the same) */
static int conn(struct side *a, struct side *b, struct remu_conn_attr ra)
{
	struct remu_conn_dest da = { .qpn = b->qp->qp_num, .gid = b->gid,
				     .mtu = remu_min_mtu(a->mtu, b->mtu) };
	struct remu_conn_dest db = { .qpn = a->qp->qp_num, .gid = a->gid,
				     .mtu = da.mtu };

	return remu_qp_connect(a->qp, &ra, GID_INDEX, &da) ?:
	       remu_qp_connect(b->qp, &ra, GID_INDEX, &db);
}

FIXTURE(tr)
{
	struct side a, b;
	struct rt_ev *ev;
	int n;
};

/* every remu event on (@on) or off, an empty buffer, the two sides */
static void trace_open(struct __test_metadata *_metadata, struct side *a,
		       struct side *b, int on)
{
	int err;

	memset(a, 0, sizeof(*a));
	memset(b, 0, sizeof(*b));
	err = rt_setup("remu_trace_test", 4096, on);
	ASSERT_EQ(0, err) TH_LOG("tracefs: %s", strerror(-err));
	ASSERT_EQ(0, side_open(a, "remu0"));
	ASSERT_EQ(0, side_open(b, "remu1"));
}

static void trace_close(struct side *a, struct side *b, struct rt_ev *ev)
{
	rt_close();
	side_close(a);
	side_close(b);
	free(ev);
}

FIXTURE_SETUP(tr)
{
	self->ev = NULL;
	trace_open(_metadata, &self->a, &self->b, 1);
}

FIXTURE_TEARDOWN(tr)
{
	trace_close(&self->a, &self->b, self->ev);
}

/* the same, with the events off */
FIXTURE(off)
{
	struct side a, b;
	struct rt_ev *ev;
	int n;
};

FIXTURE_SETUP(off)
{
	self->ev = NULL;
	trace_open(_metadata, &self->a, &self->b, 0);
}

FIXTURE_TEARDOWN(off)
{
	trace_close(&self->a, &self->b, self->ev);
}

/* read the buffer into self->ev/self->n (asserting it worked) */
#define READ_TRACE() do {						\
	free(self->ev);							\
	self->ev = NULL;						\
	self->n = rt_read(&self->ev);					\
	ASSERT_LE(0, self->n);						\
} while (0)

/* count of event @name on @dev (with field @key == @val, or any) */
#define COUNT(name, dev, key, val) \
	rt_count(self->ev, self->n, name, dev, key, val)
#define FIND(from, nth, name, dev, key, val) \
	rt_find(self->ev, self->n, from, nth, name, dev, key, val)
#define EV(i)	(&self->ev[i])

static const char *mr_kind_of(int odp_implicit, int odp)
{
	return odp_implicit ? "odp_implicit" : odp ? "odp" : "pinned";
}

TEST_F(tr, reg_dereg)
{
	uint8_t *buf;
	int k;

	buf = aligned_alloc(PG, 4 * PG);
	ASSERT_NE(NULL, buf);
	memset(buf, 1, 4 * PG);
	for (k = 0; k < 3; k++) {
		struct ibv_mr *mr;
		uint32_t key;
		int i;

		ASSERT_EQ(0, rt_clear());
		if (k == 2)
			mr = ibv_reg_mr(self->b.pd, NULL, SIZE_MAX, ODP_RIGHTS);
		else
			mr = ibv_reg_mr(self->b.pd, buf, 4 * PG,
					k ? ODP_RIGHTS : ACCESS_ALL);
		ASSERT_NE(NULL, mr);
		key = mr->rkey;
		ASSERT_EQ(0, ibv_dereg_mr(mr));
		READ_TRACE();
		EXPECT_EQ(1, COUNT("remu_mr_reg", "remu1", "key", key));
		EXPECT_EQ(1, COUNT("remu_mr_dereg", "remu1", "key", key));
		i = FIND(0, 0, "remu_mr_reg", "remu1", "key", key);
		ASSERT_LE(0, i);
		EXPECT_TRUE(rt_is(EV(i), "kind", mr_kind_of(k == 2, k == 1)))
			TH_LOG("%s", EV(i)->text);
		EXPECT_EQ(k ? 0 : 4, rt_num(EV(i), "pinned", -1));
		EXPECT_EQ(k == 2 ? 0 : (long long)(uintptr_t)buf,
			  rt_num(EV(i), "iova", -1));
		EXPECT_EQ(k == 2 ? (long long)UINT64_MAX : 4 * PG,
			  rt_num(EV(i), "length", -1));
		EXPECT_LT(i, FIND(0, 0, "remu_mr_dereg", "remu1", "key", key));
		i = FIND(0, 0, "remu_mr_dereg", "remu1", "key", key);
		EXPECT_EQ(k ? 0 : 4, rt_num(EV(i), "pinned", -1));
	}
	free(buf);
}

TEST_F(tr, rereg)
{
	uint8_t *buf;
	struct ibv_mr *mr;
	uint32_t key;
	int i;

	buf = aligned_alloc(PG, 2 * PG);
	ASSERT_NE(NULL, buf);
	mr = ibv_reg_mr(self->b.pd, buf, 2 * PG, ACCESS_ALL);
	ASSERT_NE(NULL, mr);
	key = mr->rkey;
	ASSERT_EQ(0, rt_clear());
	ASSERT_EQ(0, ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL,
				  0, IBV_ACCESS_LOCAL_WRITE |
				  IBV_ACCESS_REMOTE_READ));
	EXPECT_EQ(key, mr->rkey);
	READ_TRACE();
	EXPECT_EQ(1, COUNT("remu_mr_rereg", "remu1", "key", key));
	i = FIND(0, 0, "remu_mr_rereg", "remu1", "key", key);
	ASSERT_LE(0, i);
	EXPECT_EQ(0, rt_num(EV(i), "err", -1));
	EXPECT_TRUE(rt_is(EV(i), "flags", "A")) TH_LOG("%s", EV(i)->text);
	EXPECT_TRUE(rt_is(EV(i), "old_kind", "pinned"));
	EXPECT_TRUE(rt_is(EV(i), "new_kind", "pinned"));
	EXPECT_EQ(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ,
		  rt_num(EV(i), "access", -1));
	/* the new MR registered (under a key of its own until it takes
	 * the old one's), the old one deregistered under the key */
	EXPECT_EQ(1, COUNT("remu_mr_reg", "remu1", NULL, 0));
	EXPECT_EQ(1, COUNT("remu_mr_dereg", "remu1", "key", key));
	ASSERT_EQ(0, ibv_dereg_mr(mr));
	free(buf);
}

TEST_F(tr, odp)
{
	const size_t n = 8, len = n * PG;
	struct ibv_sge sge;
	struct ibv_mr *mr;
	uint8_t *p;
	uint32_t key;
	size_t k;
	int i;

	ASSERT_EQ(0, conn(&self->a, &self->b, REMU_RC_ATTR(PSN0)));
	p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, p);
	mr = ibv_reg_mr(self->b.pd, p, len, ODP_RIGHTS);
	ASSERT_NE(NULL, mr);
	key = mr->rkey;

	/* first touch: one fault per page, in order, one page each */
	ASSERT_EQ(0, rt_clear());
	fill(self->a.host, len, 3);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  post1(&self->a, IBV_WR_RDMA_WRITE, HOST(&self->a, 0),
			self->a.host_mr->lkey, len, (uintptr_t)p, key));
	EXPECT_EQ(-1, cmp(self->a.host, p, len));
	READ_TRACE();
	EXPECT_EQ(n, COUNT("remu_odp_fault", "remu1", "key", key));
	for (i = -1, k = 0; k < n; k++) {
		i = FIND(i + 1, 0, "remu_odp_fault", "remu1", "key", key);
		ASSERT_LE(0, i);
		EXPECT_EQ((long long)(uintptr_t)(p + k * PG),
			  rt_num(EV(i), "va", -1)) TH_LOG("%s", EV(i)->text);
		EXPECT_EQ(1, rt_num(EV(i), "pages", -1));
		EXPECT_EQ(1, rt_num(EV(i), "write", -1));
		EXPECT_EQ(0, rt_num(EV(i), "prefetch", -1));
		EXPECT_EQ(0, rt_num(EV(i), "err", -1));
		EXPECT_LT(0, rt_num(EV(i), "ns", -1));
	}
	/* the requester's MR is pinned: no fault there */
	EXPECT_EQ(0, COUNT("remu_odp_fault", "remu0", NULL, 0));

	/* the kernel takes 3 pages back */
	ASSERT_EQ(0, rt_clear());
	ASSERT_EQ(0, madvise(p + PG, 3 * PG, MADV_DONTNEED));
	READ_TRACE();
	i = FIND(0, 0, "remu_odp_invalidate", "remu1", "pages", 3);
	ASSERT_LE(0, i);
	EXPECT_EQ(1, COUNT("remu_odp_invalidate", "remu1", "pages", 3));
	EXPECT_EQ(0, COUNT("remu_odp_fault", "remu1", NULL, 0));
	EXPECT_EQ(key, rt_num(EV(i), "key", -1));
	EXPECT_EQ((long long)(uintptr_t)(p + PG), rt_num(EV(i), "start", -1));
	EXPECT_EQ((long long)(uintptr_t)(p + 4 * PG),
		  rt_num(EV(i), "end", -1));
	EXPECT_TRUE(rt_is(EV(i), "event", "clear")) TH_LOG("%s", EV(i)->text);

	/* prefetch the whole MR for writing: one piece of 8 pages */
	ASSERT_EQ(0, rt_clear());
	sge = (struct ibv_sge){ (uintptr_t)p, len, mr->lkey };
	ASSERT_EQ(0, ibv_advise_mr(self->b.pd,
				   IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
				   IBV_ADVISE_MR_FLAG_FLUSH, &sge, 1));
	READ_TRACE();
	EXPECT_EQ(1, COUNT("remu_odp_prefetch", "remu1", NULL, 0));
	i = FIND(0, 0, "remu_odp_prefetch", "remu1", NULL, 0);
	ASSERT_LE(0, i);
	EXPECT_TRUE(rt_is(EV(i), "advice", "PREFETCH_WRITE"));
	EXPECT_EQ(1, rt_num(EV(i), "flush", -1));
	EXPECT_EQ(1, rt_num(EV(i), "num_sge", -1));
	EXPECT_EQ(0, rt_num(EV(i), "err", -1));
	EXPECT_EQ(1, COUNT("remu_odp_fault", "remu1", "key", key));
	i = FIND(0, 0, "remu_odp_fault", "remu1", "key", key);
	ASSERT_LE(0, i);
	EXPECT_EQ(1, rt_num(EV(i), "prefetch", -1));
	EXPECT_EQ(n, rt_num(EV(i), "pages", -1));
	EXPECT_EQ(len, rt_num(EV(i), "len", -1));

	/* munmap: every page goes, with the unmap event */
	ASSERT_EQ(0, rt_clear());
	ASSERT_EQ(0, munmap(p, len));
	READ_TRACE();
	i = FIND(0, 0, "remu_odp_invalidate", "remu1", "pages", n);
	ASSERT_LE(0, i);
	EXPECT_TRUE(rt_is(EV(i), "event", "unmap")) TH_LOG("%s", EV(i)->text);
	EXPECT_EQ(key, rt_num(EV(i), "key", -1));
	ASSERT_EQ(0, ibv_dereg_mr(mr));
}

TEST_F(tr, implicit_child)
{
	const size_t two_m = 2 << 20;
	struct ibv_mr *mr;
	uint8_t *raw, *p;
	int i;

	ASSERT_EQ(0, conn(&self->a, &self->b, REMU_RC_ATTR(PSN0)));
	raw = mmap(NULL, 2 * two_m, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, raw);
	p = (uint8_t *)(((uintptr_t)raw + two_m - 1) & ~(two_m - 1));
	mr = ibv_reg_mr(self->b.pd, NULL, SIZE_MAX, ODP_RIGHTS);
	ASSERT_NE(NULL, mr);
	ASSERT_EQ(0, rt_clear());
	fill(self->a.host, PG, 5);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  post1(&self->a, IBV_WR_RDMA_WRITE, HOST(&self->a, 0),
			self->a.host_mr->lkey, PG, (uintptr_t)p + PG,
			mr->rkey));
	ASSERT_EQ(IBV_WC_SUCCESS,
		  post1(&self->a, IBV_WR_RDMA_WRITE, HOST(&self->a, 0),
			self->a.host_mr->lkey, PG, (uintptr_t)p + 5 * PG,
			mr->rkey));
	EXPECT_EQ(-1, cmp(self->a.host, p + 5 * PG, PG));
	READ_TRACE();
	EXPECT_EQ(1, COUNT("remu_odp_implicit_child", "remu1", "key",
			   mr->rkey));
	i = FIND(0, 0, "remu_odp_implicit_child", "remu1", "key", mr->rkey);
	ASSERT_LE(0, i);
	EXPECT_EQ((long long)(uintptr_t)p, rt_num(EV(i), "start", -1));
	EXPECT_EQ(two_m, rt_num(EV(i), "size", -1));
	EXPECT_EQ(0, rt_num(EV(i), "err", -1));
	/* the child comes before the fault that needed it */
	EXPECT_LT(i, FIND(0, 0, "remu_odp_fault", "remu1", "key", mr->rkey));
	EXPECT_EQ(2, COUNT("remu_odp_fault", "remu1", "key", mr->rkey));
	ASSERT_EQ(0, ibv_dereg_mr(mr));
	munmap(raw, 2 * two_m);
}

TEST_F(tr, dm)
{
	struct ibv_alloc_dm_attr da = { .length = 2 * PG + 100 };
	long long off, in_use;
	struct ibv_dm *dm;
	struct ibv_mr *mr;
	int i;

	ASSERT_EQ(0, rt_clear());
	dm = ibv_alloc_dm(self->b.ctx, &da);
	ASSERT_NE(NULL, dm) TH_LOG("alloc_dm: %s", strerror(errno));
	mr = ibv_reg_dm_mr(self->b.pd, dm, 0, PG, IBV_ACCESS_ZERO_BASED |
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	ASSERT_NE(NULL, mr);
	ASSERT_EQ(0, ibv_dereg_mr(mr));
	ASSERT_EQ(0, ibv_free_dm(dm));
	READ_TRACE();
	EXPECT_EQ(1, COUNT("remu_dm_alloc", "remu1", NULL, 0));
	i = FIND(0, 0, "remu_dm_alloc", "remu1", NULL, 0);
	ASSERT_LE(0, i);
	off = rt_num(EV(i), "mmap_off", -1);
	in_use = rt_num(EV(i), "in_use", -1);
	EXPECT_EQ(3 * PG, rt_num(EV(i), "size", -1));	/* whole pages */
	EXPECT_LE(3 * PG, in_use);
	/* libremu maps the allocation at once */
	EXPECT_EQ(1, COUNT("remu_dm_map", "remu1", "mmap_off", off));
	i = FIND(0, 0, "remu_dm_map", "remu1", NULL, 0);
	EXPECT_EQ(3 * PG, rt_num(EV(i), "size", -1));
	EXPECT_NE(0, rt_num(EV(i), "va", 0));
	i = FIND(0, 0, "remu_mr_reg", "remu1", NULL, 0);
	ASSERT_LE(0, i);
	EXPECT_TRUE(rt_is(EV(i), "kind", "dm")) TH_LOG("%s", EV(i)->text);
	EXPECT_EQ(0, rt_num(EV(i), "iova", -1));	/* zero based */
	EXPECT_EQ(PG, rt_num(EV(i), "length", -1));
	EXPECT_EQ(1, COUNT("remu_dm_free", "remu1", "mmap_off", off));
	i = FIND(0, 0, "remu_dm_free", "remu1", NULL, 0);
	ASSERT_LE(0, i);
	EXPECT_EQ(3 * PG, rt_num(EV(i), "size", -1));
	EXPECT_EQ(in_use - 3 * PG, rt_num(EV(i), "in_use", -1));
}

TEST_F(tr, dmabuf)
{
	struct ibv_mr *dmr;
	long long ino;
	int ctl, fd, i;

	ctl = open(TDB_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, ctl) TH_LOG("%s: %s (remu_test_dmabuf.ko loaded?)",
				 TDB_PATH, strerror(errno));
	fd = tdb_create(ctl, BUF_SIZE, 0);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, conn(&self->a, &self->b, REMU_RC_ATTR(PSN0)));
	ASSERT_EQ(0, rt_clear());
	dmr = ibv_reg_dmabuf_mr(self->b.pd, MR_OFF, MR_LEN, MR_IOVA, fd,
				ACCESS_ALL);
	ASSERT_NE(NULL, dmr) TH_LOG("reg_dmabuf_mr: %s", strerror(errno));
	ASSERT_EQ(0, tdb_move(ctl, fd, 0));
	fill(self->a.host, PG, 9);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  post1(&self->a, IBV_WR_RDMA_WRITE, HOST(&self->a, 0),
			self->a.host_mr->lkey, PG, MR_IOVA, dmr->rkey));
	ASSERT_EQ(0, tdb_move(ctl, fd, 0));	/* moves it again */
	ASSERT_EQ(0, tdb_move(ctl, fd, 0));	/* nothing mapped now */
	READ_TRACE();

	EXPECT_EQ(1, COUNT("remu_dmabuf_attach", "remu1", NULL, 0));
	i = FIND(0, 0, "remu_dmabuf_attach", "remu1", NULL, 0);
	ASSERT_LE(0, i);
	ino = rt_num(EV(i), "ino", -1);
	EXPECT_LT(0, ino);
	EXPECT_EQ(BUF_SIZE, rt_num(EV(i), "size", -1));
	EXPECT_EQ(0, rt_num(EV(i), "ret", -1));
	i = FIND(0, 0, "remu_mr_reg", "remu1", "key", dmr->rkey);
	ASSERT_LE(0, i);
	EXPECT_TRUE(rt_is(EV(i), "kind", "dmabuf")) TH_LOG("%s", EV(i)->text);
	EXPECT_EQ(MR_IOVA, rt_num(EV(i), "iova", -1));
	EXPECT_EQ(MR_LEN, rt_num(EV(i), "length", -1));
	/* move, re-map on the WRITE, move (dropped), move (nothing there) */
	EXPECT_EQ(3, COUNT("remu_dmabuf_move_notify", "remu1", "ino", ino));
	EXPECT_EQ(3, COUNT("remu_dmabuf_move_notify", "remu1", "key",
			   dmr->rkey));
	EXPECT_EQ(1, COUNT("remu_dmabuf_remap", "remu1", "ino", ino));
	i = FIND(0, 0, "remu_dmabuf_move_notify", "remu1", "ret", 1);
	ASSERT_LE(0, i);
	EXPECT_LT(i, FIND(0, 0, "remu_dmabuf_remap", "remu1", "ret", 0));
	EXPECT_LT(FIND(0, 0, "remu_dmabuf_remap", "remu1", "ret", 0),
		  FIND(0, 1, "remu_dmabuf_move_notify", "remu1", "ret", 1));
	EXPECT_EQ(2, COUNT("remu_dmabuf_move_notify", "remu1", "ret", 1));
	EXPECT_EQ(1, COUNT("remu_dmabuf_move_notify", "remu1", "ret", 0));
	i = FIND(0, 2, "remu_dmabuf_move_notify", "remu1", NULL, 0);
	ASSERT_LE(0, i);
	EXPECT_EQ(0, rt_num(EV(i), "ret", -1));
	ASSERT_EQ(0, ibv_dereg_mr(dmr));
	close(fd);
	close(ctl);
}

TEST_F(tr, mw)
{
	struct ibv_send_wr wr = {
		.wr_id = 0xb2, .opcode = IBV_WR_BIND_MW,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	uint32_t rkey;
	struct ibv_mr *mr;
	struct ibv_mw *mw;
	struct ibv_wc wc;
	int i;

	ASSERT_EQ(0, conn(&self->a, &self->b, REMU_RC_ATTR(PSN0)));
	mr = ibv_reg_mr(self->b.pd, self->b.host, BUF_SIZE,
			ACCESS_ALL | IBV_ACCESS_MW_BIND);
	ASSERT_NE(NULL, mr);
	mw = ibv_alloc_mw(self->b.pd, IBV_MW_TYPE_2);
	ASSERT_NE(NULL, mw);
	rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info = (struct ibv_mw_bind_info){
		.mr = mr, .addr = HOST(&self->b, PG), .length = 2 * PG,
		.mw_access_flags = IBV_ACCESS_REMOTE_READ };
	ASSERT_EQ(0, rt_clear());
	ASSERT_EQ(0, ibv_post_send(self->b.qp, &wr, &bad));
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->b.cq, &wc));
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 0x1f;
	wr.opcode = IBV_WR_LOCAL_INV;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.invalidate_rkey = rkey;
	ASSERT_EQ(0, ibv_post_send(self->b.qp, &wr, &bad));
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->b.cq, &wc));
	READ_TRACE();
	EXPECT_EQ(1, COUNT("remu_mw_bind", "remu1", NULL, 0));
	i = FIND(0, 0, "remu_mw_bind", "remu1", NULL, 0);
	ASSERT_LE(0, i);
	EXPECT_EQ(rkey, rt_num(EV(i), "new_key", -1)) TH_LOG("%s", EV(i)->text);
	EXPECT_EQ(mr->lkey, rt_num(EV(i), "mr", -1));
	EXPECT_TRUE(rt_is(EV(i), "type", "2B"));
	EXPECT_EQ((long long)HOST(&self->b, PG), rt_num(EV(i), "addr", -1));
	EXPECT_EQ(2 * PG, rt_num(EV(i), "length", -1));
	EXPECT_EQ(IBV_ACCESS_REMOTE_READ, rt_num(EV(i), "access", -1));
	EXPECT_EQ(self->b.qp->qp_num, rt_num(EV(i), "qpn", -1));
	EXPECT_EQ(0, rt_num(EV(i), "err", -1));
	EXPECT_EQ(1, COUNT("remu_mw_invalidate", "remu1", "key", rkey));
	i = FIND(0, 0, "remu_mw_invalidate", "remu1", NULL, 0);
	ASSERT_LE(0, i);
	EXPECT_EQ(0, rt_num(EV(i), "qpn", -1));	/* LOCAL_INV */
	EXPECT_EQ(0, rt_num(EV(i), "err", -1));
	ASSERT_EQ(0, ibv_dealloc_mw(mw));
	ASSERT_EQ(0, ibv_dereg_mr(mr));
}

/* one WRITE of 3 MTUs + 100 bytes from a to b, checked byte for byte */
static int write_3mtu(struct side *a, struct side *b, uint32_t *len)
{
	*len = 3 * (128u << remu_min_mtu(a->mtu, b->mtu)) + 100;
	fill(a->host, *len, 7);
	if (post1(a, IBV_WR_RDMA_WRITE, HOST(a, 0), a->host_mr->lkey, *len,
		  HOST(b, 0), b->host_mr->rkey) != IBV_WC_SUCCESS)
		return -1;
	return cmp(a->host, b->host, *len) == -1 ? 0 : -1;
}

TEST_F(tr, packets)
{
	static const char * const ops[] = {
		"RC_RDMA_WRITE_FIRST", "RC_RDMA_WRITE_MIDDLE",
		"RC_RDMA_WRITE_MIDDLE", "RC_RDMA_WRITE_LAST" };
	uint32_t mtu, len, aq = self->a.qp->qp_num, bq = self->b.qp->qp_num;
	int k, i, j, acks;

	ASSERT_EQ(0, conn(&self->a, &self->b, REMU_RC_ATTR(PSN0)));
	ASSERT_EQ(0, rt_clear());
	ASSERT_EQ(0, write_3mtu(&self->a, &self->b, &len));
	mtu = (len - 100) / 3;
	READ_TRACE();
	EXPECT_EQ(4, COUNT("remu_pkt_send", "remu0", "qpn", bq));
	EXPECT_EQ(4, COUNT("remu_pkt_recv", "remu1", "qpn", bq));
	for (k = 0, i = -1, j = -1; k < 4; k++) {
		i = FIND(i + 1, 0, "remu_pkt_send", "remu0", "qpn", bq);
		j = FIND(j + 1, 0, "remu_pkt_recv", "remu1", "qpn", bq);
		ASSERT_LE(0, i);
		ASSERT_LE(0, j);
		EXPECT_TRUE(rt_is(EV(i), "op", ops[k])) TH_LOG("%s", EV(i)->text);
		EXPECT_EQ(PSN0 + k, rt_num(EV(i), "psn", -1));
		EXPECT_EQ(k < 3 ? mtu : 100, rt_num(EV(i), "paylen", -1));
		EXPECT_TRUE(rt_is(EV(j), "op", ops[k])) TH_LOG("%s", EV(j)->text);
		EXPECT_EQ(PSN0 + k, rt_num(EV(j), "psn", -1));
		EXPECT_EQ(k < 3 ? mtu : 100, rt_num(EV(j), "paylen", -1));
	}
	EXPECT_EQ(1, rt_num(EV(i), "ackreq", -1));
	/* ACKs back (coalesced): as many arrive as left; the last ends it */
	acks = COUNT("remu_pkt_send", "remu1", "qpn", aq);
	EXPECT_LE(1, acks);
	EXPECT_EQ(acks, COUNT("remu_pkt_recv", "remu0", "qpn", aq));
	i = FIND(0, acks - 1, "remu_pkt_recv", "remu0", "qpn", aq);
	ASSERT_LE(0, i);
	EXPECT_TRUE(rt_is(EV(i), "op", "RC_ACKNOWLEDGE")) TH_LOG("%s", EV(i)->text);
	EXPECT_EQ(PSN0 + 3, rt_num(EV(i), "psn", -1));
	EXPECT_EQ(0, rt_num(EV(i), "paylen", -1));
	/* nothing went wrong */
	EXPECT_EQ(0, COUNT("remu_retransmit", NULL, NULL, 0));
	EXPECT_EQ(0, COUNT("remu_cqe_err", NULL, NULL, 0));
}

TEST_F(tr, qp_state)
{
	static const char * const st[][2] = {
		{ "RESET", "INIT" }, { "INIT", "RTR" }, { "RTR", "RTS" },
		{ "RTS", "ERR" } };
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_ERR };
	uint32_t aq = self->a.qp->qp_num;
	int k, i = -1;

	ASSERT_EQ(0, rt_clear());
	ASSERT_EQ(0, conn(&self->a, &self->b, REMU_RC_ATTR(PSN0)));
	ASSERT_EQ(0, ibv_modify_qp(self->a.qp, &qa, IBV_QP_STATE));
	READ_TRACE();
	EXPECT_EQ(4, COUNT("remu_qp_state", "remu0", "qpn", aq));
	EXPECT_EQ(3, COUNT("remu_qp_state", "remu1", "qpn",
			   self->b.qp->qp_num));
	for (k = 0; k < 4; k++) {
		i = FIND(i + 1, 0, "remu_qp_state", "remu0", "qpn", aq);
		ASSERT_LE(0, i);
		EXPECT_TRUE(rt_is(EV(i), "type", "RC"));
		EXPECT_TRUE(rt_is(EV(i), "old", st[k][0]) &&
			    rt_is(EV(i), "new", st[k][1]))
			TH_LOG("%d: %s", k, EV(i)->text);
	}
}

TEST_F(tr, error_completion)
{
	uint32_t aq = self->a.qp->qp_num;
	int i;

	ASSERT_EQ(0, conn(&self->a, &self->b, REMU_RC_ATTR(PSN0)));
	ASSERT_EQ(0, rt_clear());
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  post1(&self->a, IBV_WR_RDMA_WRITE, HOST(&self->a, 0),
			self->a.host_mr->lkey, 64, HOST(&self->b, 0),
			self->b.host_mr->rkey ^ 0x80));
	EXPECT_EQ(IBV_WC_WR_FLUSH_ERR,
		  post1(&self->a, IBV_WR_RDMA_WRITE, HOST(&self->a, 0),
			self->a.host_mr->lkey, 64, HOST(&self->b, 0),
			self->b.host_mr->rkey));
	READ_TRACE();
	EXPECT_EQ(2, COUNT("remu_cqe_err", "remu0", "qpn", aq));
	i = FIND(0, 0, "remu_cqe_err", "remu0", "qpn", aq);
	ASSERT_LE(0, i);
	EXPECT_TRUE(rt_is(EV(i), "status", "REM_ACCESS_ERR"))
		TH_LOG("%s", EV(i)->text);
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, rt_num(EV(i), "status_num", -1));
	EXPECT_EQ(IBV_WR_RDMA_WRITE, rt_num(EV(i), "wr_id", -1));
	/* the engine moved the QP to ERR before the completion was seen */
	EXPECT_EQ(1, COUNT("remu_qp_state", "remu0", "qpn", aq));
	EXPECT_GT(i, FIND(0, 0, "remu_qp_state", "remu0", "qpn", aq));
	i = FIND(0, 0, "remu_qp_state", "remu0", "qpn", aq);
	EXPECT_TRUE(rt_is(EV(i), "old", "RTS") && rt_is(EV(i), "new", "ERR"))
		TH_LOG("%s", EV(i)->text);
	i = FIND(0, 1, "remu_cqe_err", "remu0", "qpn", aq);
	ASSERT_LE(0, i);
	EXPECT_TRUE(rt_is(EV(i), "status", "WR_FLUSH_ERR"))
		TH_LOG("%s", EV(i)->text);
	/* the responder NAKed and moved its QP to ERR too */
	EXPECT_EQ(1, COUNT("remu_qp_state", "remu1", "qpn",
			   self->b.qp->qp_num));
}

TEST_F(tr, rnr)
{
	struct remu_conn_attr ra = REMU_RC_ATTR(PSN0);
	uint32_t aq = self->a.qp->qp_num, bq = self->b.qp->qp_num;
	struct ibv_send_wr wr = { .wr_id = 0x5e, .opcode = IBV_WR_SEND };
	struct ibv_sge sge;
	int i;

	ra.rnr_retry = 1;
	ra.min_rnr_timer = 1;	/* 10 us */
	ASSERT_EQ(0, conn(&self->a, &self->b, ra));
	sge = (struct ibv_sge){ HOST(&self->a, 0), 64,
				self->a.host_mr->lkey };
	wr.sg_list = &sge;
	wr.num_sge = 1;
	ASSERT_EQ(0, rt_clear());
	EXPECT_EQ(IBV_WC_RNR_RETRY_EXC_ERR,
		  remu_run_wr(self->a.qp, self->a.cq, &wr, 20));
	READ_TRACE();
	EXPECT_EQ(2, COUNT("remu_rnr", "remu1", "qpn", bq));
	EXPECT_EQ(2, rt_count(self->ev, self->n, "remu_rnr", "remu1", "psn",
			      PSN0));
	i = FIND(0, 0, "remu_rnr", "remu1", "qpn", bq);
	ASSERT_LE(0, i);
	EXPECT_TRUE(rt_is(EV(i), "what", "nak_sent")) TH_LOG("%s", EV(i)->text);
	EXPECT_EQ(10, rt_num(EV(i), "usecs", -1));
	EXPECT_EQ(2, COUNT("remu_rnr", "remu0", "qpn", aq));
	i = FIND(0, 0, "remu_rnr", "remu0", "qpn", aq);
	ASSERT_LE(0, i);
	EXPECT_TRUE(rt_is(EV(i), "what", "nak_rcvd")) TH_LOG("%s", EV(i)->text);
	EXPECT_EQ(0, rt_num(EV(i), "rnr_left", -1));
	EXPECT_EQ(10, rt_num(EV(i), "usecs", -1));
	i = FIND(0, 1, "remu_rnr", "remu0", "qpn", aq);
	ASSERT_LE(0, i);
	EXPECT_TRUE(rt_is(EV(i), "what", "exceeded")) TH_LOG("%s", EV(i)->text);
	EXPECT_EQ(1, COUNT("remu_retransmit", "remu0", "qpn", aq));
	i = FIND(0, 0, "remu_retransmit", "remu0", "qpn", aq);
	ASSERT_LE(0, i);
	EXPECT_TRUE(rt_is(EV(i), "reason", "rnr"));
	EXPECT_EQ(PSN0, rt_num(EV(i), "psn", -1));
	/* the SEND went out twice */
	EXPECT_EQ(2, COUNT("remu_pkt_send", "remu0", "qpn", bq));
	i = FIND(0, 0, "remu_cqe_err", "remu0", "qpn", aq);
	ASSERT_LE(0, i);
	EXPECT_TRUE(rt_is(EV(i), "status", "RNR_RETRY_EXC_ERR"));
	EXPECT_EQ(0x5e, rt_num(EV(i), "wr_id", -1));
}

TEST_F(tr, retransmit_timeout)
{
	struct remu_conn_attr ra = REMU_RC_ATTR(PSN0);
	struct remu_conn_dest d;
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_INIT,
				  .port_num = 1,
				  .qp_access_flags = REMU_ACCESS_REMOTE_ALL };
	uint32_t aq = self->a.qp->qp_num, bq = self->b.qp->qp_num;
	int k, i = -1;

	/* b stays in INIT: whatever arrives for it is dropped */
	ASSERT_EQ(0, ibv_modify_qp(self->b.qp, &qa, IBV_QP_STATE |
				   IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				   IBV_QP_ACCESS_FLAGS));
	ra.timeout = 12;	/* 16.8 ms */
	ra.retry_cnt = 2;
	d = (struct remu_conn_dest){ .qpn = bq, .gid = self->b.gid,
		.mtu = remu_min_mtu(self->a.mtu, self->b.mtu) };
	ASSERT_EQ(0, remu_qp_connect(self->a.qp, &ra, GID_INDEX, &d));
	ASSERT_EQ(0, rt_clear());
	EXPECT_EQ(IBV_WC_RETRY_EXC_ERR,
		  post1(&self->a, IBV_WR_RDMA_WRITE, HOST(&self->a, 0),
			self->a.host_mr->lkey, 64, HOST(&self->b, 0),
			self->b.host_mr->rkey));
	READ_TRACE();
	EXPECT_EQ(2, COUNT("remu_retransmit", "remu0", "qpn", aq));
	for (k = 0; k < 2; k++) {
		i = FIND(i + 1, 0, "remu_retransmit", "remu0", "qpn", aq);
		ASSERT_LE(0, i);
		EXPECT_TRUE(rt_is(EV(i), "reason", "timeout"))
			TH_LOG("%s", EV(i)->text);
		EXPECT_EQ(PSN0, rt_num(EV(i), "psn", -1));
		EXPECT_EQ(1 - k, rt_num(EV(i), "retries_left", -1));
	}
	/* the same packet three times, never an answer */
	EXPECT_EQ(3, COUNT("remu_pkt_send", "remu0", "psn", PSN0));
	EXPECT_EQ(3, COUNT("remu_pkt_recv", "remu1", "qpn", bq));
	EXPECT_EQ(0, COUNT("remu_pkt_send", "remu1", NULL, 0));
	i = FIND(0, 0, "remu_cqe_err", "remu0", "qpn", aq);
	ASSERT_LE(0, i);
	EXPECT_TRUE(rt_is(EV(i), "status", "RETRY_EXC_ERR"))
		TH_LOG("%s", EV(i)->text);
}

TEST_F(off, nothing_recorded)
{
	uint32_t len;

	ASSERT_EQ(0, conn(&self->a, &self->b, REMU_RC_ATTR(PSN0)));
	ASSERT_EQ(0, rt_clear());
	ASSERT_EQ(0, write_3mtu(&self->a, &self->b, &len));
	READ_TRACE();
	EXPECT_EQ(0, self->n);
}

TEST_HARNESS_MAIN
