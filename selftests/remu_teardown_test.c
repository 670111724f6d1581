// SPDX-License-Identifier: GPL-2.0
/*
 * remu_teardown_test - one side of a connection goes away in the middle
 * of a large RC transfer.
 *
 * The test process (the survivor) owns an RC QP on remu0; a child process
 * owns the other end on remu1 (netdev v1 in namespace peer), with a 4 MiB
 * MR the survivor writes into.  The survivor streams 256 KiB RDMA WRITEs
 * (8 in flight), checks that the 16 MiB landed byte for byte (the child
 * compares), posts 8 more and, with those in flight, takes the peer away
 * (and then posts 8 more):
 *   - peer_killed: kill -9 of the child.  `rmmod remu` while both are
 *     live first fails with EBUSY and disturbs nothing.
 *   - peer_link_deleted: `rdma link delete remu1` (in namespace peer);
 *     the child gets IBV_EVENT_DEVICE_FATAL, closes everything and exits
 *     0; remu1 is added again afterwards.
 *   - sender_killed: the child is the one streaming WRITEs (into the
 *     survivor's MR) and is killed; its QP is destroyed with WRITEs in
 *     flight, the survivor's QP stays usable.
 * In the first two the survivor's QP (timeout 12 = 16.8 ms, retry_cnt 2)
 * retries into the void: exactly one WQE completes with RETRY_EXC_ERR, every
 * WQE behind it with WR_FLUSH_ERR, none is lost, the QP is in ERR, a WQE
 * posted afterwards is flushed too, and retry_exceeded_err counts it, all
 * within seconds.  In every case remu's object counts return to where they
 * were before the test once both processes released their objects.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "remu_lib.h"

#define BUF		(4 << 20)
#define CHUNK		(256 << 10)
#define DEPTH		8
#define QP_TIMEOUT	12
#define RETRY_CNT	2

static const char *const obj_types[] = {
	"ucontext", "pd", "mr", "cq", "qp", "ring"
};
#define NR_TYPES (sizeof(obj_types) / sizeof(obj_types[0]))

/* what one end tells the other */
struct wire {
	uint32_t qpn;
	uint32_t rkey;
	uint64_t addr;
	union ibv_gid gid;
};

struct end {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	union ibv_gid gid;
	int gid_index;
};

static int end_open(struct end *e, const char *dev)
{
	static const struct ibv_qp_cap cap = {
		.max_send_wr = 32, .max_recv_wr = 4,
		.max_send_sge = 1, .max_recv_sge = 1,
	};

	memset(e, 0, sizeof(*e));
	e->ctx = remu_open(dev);
	if (!e->ctx)
		return -1;
	e->gid_index = remu_ipv4_gid(e->ctx, &e->gid);
	e->pd = ibv_alloc_pd(e->ctx);
	e->cq = e->pd ? ibv_create_cq(e->ctx, 64, NULL, NULL, 0) : NULL;
	e->buf = aligned_alloc(4096, BUF);
	if (e->gid_index < 0 || !e->cq || !e->buf)
		return -1;
	e->mr = ibv_reg_mr(e->pd, e->buf, BUF, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE);
	e->qp = e->mr ? remu_create_qp(e->pd, e->cq, IBV_QPT_RC, &cap) : NULL;
	return e->qp ? 0 : -1;
}

/* every verb's status, so that a device already gone is seen as an error */
static int end_close(struct end *e)
{
	int err = remu_close_objs(e->qp, NULL, e->mr, e->cq, e->pd, e->ctx);

	free(e->buf);
	memset(e, 0, sizeof(*e));
	return err;
}

static void end_wire(struct end *e, struct wire *w)
{
	w->qpn = e->qp->qp_num;
	w->rkey = e->mr->rkey;
	w->addr = (uintptr_t)e->buf;
	w->gid = e->gid;
}

static int end_connect(struct end *e, const struct wire *peer)
{
	static const struct remu_conn_attr ra = {
		.access = IBV_ACCESS_REMOTE_WRITE, .psn = 11, .rd_atomic = 1,
		.min_rnr_timer = 1, .timeout = QP_TIMEOUT,
		.retry_cnt = RETRY_CNT, .rnr_retry = 7,
	};
	struct remu_conn_dest d = { .qpn = peer->qpn, .gid = peer->gid,
				    .mtu = IBV_MTU_4096 };

	return remu_qp_connect(e->qp, &ra, e->gid_index, &d);
}

static int post_write(struct end *e, const struct wire *peer, uint64_t id)
{
	uint32_t off = (id % (BUF / CHUNK)) * CHUNK;
	struct ibv_sge sge = { (uintptr_t)e->buf + off, CHUNK, e->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = id, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	wr.wr.rdma.remote_addr = peer->addr + off;
	wr.wr.rdma.rkey = peer->rkey;
	return ibv_post_send(e->qp, &wr, &bad);
}

static uint8_t pattern(int i)
{
	return (uint8_t)(i * 7 + (i >> 12));
}

static long hw_counter(const char *dev, const char *name)
{
	return remu_hw_counter(dev, name, false);
}

static int wait_fatal(struct ibv_context *ctx, int secs)
{
	return remu_wait_fatal(ctx, secs);
}

static int xfer(int fd, void *p, size_t n, int out)
{
	ssize_t r = out ? write(fd, p, n) : read(fd, p, n);

	return r == (ssize_t)n ? 0 : -1;
}

/* the child's roles, once the survivor says go */
enum role { PASSIVE, WAIT_FATAL, SENDER };

/*
 * The child: open remu1, send its wire info, take the survivor's, connect
 * and say "ready" (one byte).  Then it answers 'c' with 'y' if its buffer
 * holds the survivor's pattern byte for byte ('n' if not), until 'g';
 * then, as PASSIVE, sleep until killed; as
 * WAIT_FATAL, wait for DEVICE_FATAL, close everything and exit 0; as
 * SENDER, stream WRITEs into the survivor until killed.
 */
static void child(int rfd, int wfd, enum role role)
{
	struct wire me, peer;
	struct ibv_wc wc;
	struct end e;
	uint64_t id = 0;
	char c = 'r';
	int i;

	if (end_open(&e, "remu1"))
		_exit(10);
	memset(e.buf, 0x5a, BUF);
	end_wire(&e, &me);
	if (xfer(wfd, &me, sizeof(me), 1) || xfer(rfd, &peer, sizeof(peer), 0))
		_exit(11);
	if (end_connect(&e, &peer))
		_exit(12);
	if (xfer(wfd, &c, 1, 1))
		_exit(13);
	while (role != SENDER) {
		if (xfer(rfd, &c, 1, 0))
			_exit(20);
		if (c == 'g')
			break;
		c = 'y';
		for (i = 0; i < BUF; i++)
			if (e.buf[i] != pattern(i))
				c = 'n';
		if (xfer(wfd, &c, 1, 1))
			_exit(21);
	}
	switch (role) {
	case PASSIVE:
		for (;;)
			pause();
	case WAIT_FATAL:
		if (wait_fatal(e.ctx, 30))
			_exit(14);
		/* the device is gone: destroying still works, verbs fail */
		_exit(end_close(&e) ? 15 : 0);
	case SENDER:
		for (i = 0; i < DEPTH; i++)
			if (post_write(&e, &peer, id++))
				_exit(16);
		for (;;) {
			if (remu_poll_one(e.cq, &wc, 30) != IBV_WC_SUCCESS)
				_exit(17);
			if (post_write(&e, &peer, id++))
				_exit(18);
		}
	}
	_exit(19);
}

FIXTURE(td) {
	int base[NR_TYPES];
	struct end a;
	struct wire peer;
	pid_t pid;
	int rfd, wfd;
};

static void counts(int *c)
{
	unsigned int i;

	for (i = 0; i < NR_TYPES; i++)
		c[i] = remu_obj_count(obj_types[i]);
}

/* the counts back at the baseline (objects are released as the process
 * exits, so allow a moment) */
static int counts_back(const int *base)
{
	int c[NR_TYPES], i;

	for (i = 0; i < 50; i++) {
		counts(c);
		if (!memcmp(c, base, sizeof(c)))
			return 0;
		usleep(100000);
	}
	for (i = 0; i < (int)NR_TYPES; i++)
		if (c[i] != base[i])
			fprintf(stderr, "# %s: %d, %d before\n", obj_types[i],
				c[i], base[i]);
	return -1;
}

static int start(struct __test_metadata *_metadata, FIXTURE_DATA(td) *self,
		 enum role role)
{
	int up[2], down[2];
	struct wire me;
	char c;

	counts(self->base);
	if (self->base[0] < 0 || pipe(up) || pipe(down))
		return -1;
	self->pid = fork();
	if (self->pid < 0)
		return -1;
	if (!self->pid) {
		close(up[0]);
		close(down[1]);
		child(down[0], up[1], role);
	}
	close(up[1]);
	close(down[0]);
	self->rfd = up[0];
	self->wfd = down[1];
	if (end_open(&self->a, "remu0"))
		return -1;
	memset(self->a.buf, 0, BUF);
	end_wire(&self->a, &me);
	if (xfer(self->rfd, &self->peer, sizeof(self->peer), 0) ||
	    xfer(self->wfd, &me, sizeof(me), 1))
		return -1;
	if (end_connect(&self->a, &self->peer))
		return -1;
	return xfer(self->rfd, &c, 1, 0);
}

FIXTURE_SETUP(td)
{
	self->pid = -1;
	self->rfd = self->wfd = -1;
}

FIXTURE_TEARDOWN(td)
{
	int st;

	if (self->pid > 0) {
		kill(self->pid, SIGKILL);
		waitpid(self->pid, &st, 0);
	}
	if (self->rfd >= 0)
		close(self->rfd);
	if (self->wfd >= 0)
		close(self->wfd);
	end_close(&self->a);
}

/*
 * Stream WRITEs of the survivor's buffer (the pattern, to the same offsets
 * in the peer's MR) until @mib MiB completed, keeping DEPTH in flight;
 * then let them drain and have the peer check its buffer; then post DEPTH
 * more, which are in flight when the caller takes the peer away.  Returns
 * the next id.
 */
static uint64_t stream(struct __test_metadata *_metadata,
		       FIXTURE_DATA(td) *self, int mib)
{
	struct ibv_wc wc;
	uint64_t id = 0, done = 0;
	int i;

	char c = 'c';

	for (i = 0; i < BUF; i++)
		self->a.buf[i] = pattern(i);
	for (i = 0; i < DEPTH; i++)
		EXPECT_EQ(0, post_write(&self->a, &self->peer, id++));
	while (done < id) {
		if (remu_poll_one(self->a.cq, &wc, 30) != IBV_WC_SUCCESS) {
			TH_LOG("WRITE %lu: status %d", (unsigned long)done,
			       wc.status);
			return 0;
		}
		EXPECT_EQ(done, wc.wr_id);
		done++;
		if (id * CHUNK < (uint64_t)mib << 20)
			EXPECT_EQ(0, post_write(&self->a, &self->peer, id++));
	}
	EXPECT_EQ(0, xfer(self->wfd, &c, 1, 1));
	EXPECT_EQ(0, xfer(self->rfd, &c, 1, 0));
	EXPECT_EQ('y', c) TH_LOG("the peer's MR differs from what was written");
	c = 'g';
	EXPECT_EQ(0, xfer(self->wfd, &c, 1, 1));
	for (i = 0; i < DEPTH; i++)
		EXPECT_EQ(0, post_write(&self->a, &self->peer, id++));
	return id;
}

/*
 * After the peer is gone: DEPTH more WRITEs are posted behind the DEPTH
 * still in flight from stream(); all of them complete, in order: SUCCESS
 * for those that had arrived, then one RETRY_EXC_ERR, then WR_FLUSH_ERR;
 * the QP is in ERR and flushes a new WQE at once.  All within 10 s of
 * @t0 (the peer's going away began), times REMU_TIMEOUT_SCALE: on the
 * debug kernel the peer's `rdma link delete` alone took 10 s once.
 */
static void expect_retry_exceeded(struct __test_metadata *_metadata,
				  FIXTURE_DATA(td) *self, uint64_t id,
				  long x0, double t0)
{
	uint64_t first = id - DEPTH, k;
	int st, ok = 0, exc = 0, flushed = 0, i;
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr qa;
	struct ibv_wc wc;

	for (i = 0; i < DEPTH; i++)
		ASSERT_EQ(0, post_write(&self->a, &self->peer, id++));
	for (k = first; k < id; k++) {
		st = remu_poll_one(self->a.cq, &wc, 20);
		ASSERT_LE(0, st) TH_LOG("WQE %lu never completed",
					(unsigned long)k);
		EXPECT_EQ(k, wc.wr_id);
		if (st == IBV_WC_SUCCESS) {
			EXPECT_EQ(0, exc);
			ok++;
		} else if (st == IBV_WC_RETRY_EXC_ERR) {
			EXPECT_EQ(0, exc);
			exc++;
		} else {
			EXPECT_EQ(IBV_WC_WR_FLUSH_ERR, st);
			EXPECT_EQ(1, exc);
			flushed++;
		}
	}
	TH_LOG("%d WRITEs completed, %d RETRY_EXC_ERR, %d flushed, in %.2f s",
	       ok, exc, flushed, remu_now() - t0);
	EXPECT_EQ(1, exc);
	EXPECT_GT(10.0 * remu_timeout_scale(), remu_now() - t0);
	EXPECT_EQ(0, ibv_poll_cq(self->a.cq, 1, &wc));
	ASSERT_EQ(0, ibv_query_qp(self->a.qp, &qa, IBV_QP_STATE, &ia));
	EXPECT_EQ(IBV_QPS_ERR, qa.qp_state);
	ASSERT_EQ(0, post_write(&self->a, &self->peer, id));
	EXPECT_EQ(IBV_WC_WR_FLUSH_ERR, remu_poll_one(self->a.cq, &wc, 5));
	EXPECT_EQ(id, wc.wr_id);
	EXPECT_LT(x0, hw_counter("remu0", "retry_exceeded_err"));
}

TEST_F(td, peer_killed)
{
	long x0 = hw_counter("remu0", "retry_exceeded_err");
	uint64_t id;
	double t0;
	int st;

	ASSERT_LE(0, x0);
	ASSERT_EQ(0, start(_metadata, self, PASSIVE));
	/* both processes hold remu devices: rmmod is refused (EBUSY, which
	 * rmmod reports as "in use") and changes nothing (the transfer below
	 * proves both ends still work) */
	EXPECT_EQ(0, remu_sh("rmmod remu 2>&1 | grep -q 'in use'"));
	EXPECT_TRUE(remu_device_listed("remu0"));
	id = stream(_metadata, self, 16);
	ASSERT_LT(0, id);
	/* kill -9 with DEPTH WRITEs in flight */
	t0 = remu_now();
	ASSERT_EQ(0, kill(self->pid, SIGKILL));
	ASSERT_EQ(self->pid, waitpid(self->pid, &st, 0));
	self->pid = -1;
	EXPECT_TRUE(WIFSIGNALED(st));
	expect_retry_exceeded(_metadata, self, id, x0, t0);
	EXPECT_EQ(0, end_close(&self->a));
	EXPECT_EQ(0, counts_back(self->base));
}

TEST_F(td, peer_link_deleted)
{
	long x0 = hw_counter("remu0", "retry_exceeded_err");
	uint64_t id;
	double t0;
	int st;

	ASSERT_LE(0, x0);
	ASSERT_EQ(0, start(_metadata, self, WAIT_FATAL));
	id = stream(_metadata, self, 16);
	ASSERT_LT(0, id);
	t0 = remu_now();
	ASSERT_EQ(0, remu_sh("timeout 30 ip netns exec peer rdma link delete remu1"));
	expect_retry_exceeded(_metadata, self, id, x0, t0);
	ASSERT_EQ(self->pid, waitpid(self->pid, &st, 0));
	self->pid = -1;
	EXPECT_TRUE(WIFEXITED(st));
	EXPECT_EQ(0, WEXITSTATUS(st));
	EXPECT_EQ(0, end_close(&self->a));
	/* remu1 again, for the tests after this one; remu1's own objects
	 * (GSI QP and what ib_mad keeps) come back with it */
	ASSERT_EQ(0, remu_sh("ip netns exec peer rdma link add remu1 type remu netdev v1"));
	EXPECT_EQ(0, counts_back(self->base));
}

TEST_F(td, sender_killed)
{
	uint8_t pat[CHUNK];
	struct ibv_wc wc;
	double t0;
	int st, i;

	ASSERT_EQ(0, start(_metadata, self, SENDER));
	/* the child streams 0x5a into our buffer; wait for a full buffer */
	t0 = remu_now();
	memset(pat, 0x5a, sizeof(pat));
	while (memcmp(self->a.buf + BUF - CHUNK, pat, CHUNK) &&
	       remu_now() - t0 < 30)
		usleep(10000);
	ASSERT_EQ(0, memcmp(self->a.buf + BUF - CHUNK, pat, CHUNK));
	usleep(200000);
	ASSERT_EQ(0, kill(self->pid, SIGKILL));
	ASSERT_EQ(self->pid, waitpid(self->pid, &st, 0));
	self->pid = -1;
	EXPECT_TRUE(WIFSIGNALED(st));
	/* the survivor (a pure responder) is still in RTS and its CQ empty */
	EXPECT_EQ(0, ibv_poll_cq(self->a.cq, 1, &wc));
	for (i = 0; i < BUF; i += CHUNK)
		EXPECT_EQ(0, memcmp(self->a.buf + i, pat, CHUNK));
	EXPECT_EQ(0, end_close(&self->a));
	EXPECT_EQ(0, counts_back(self->base));
}

TEST_HARNESS_MAIN
