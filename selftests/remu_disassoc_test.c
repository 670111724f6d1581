// SPDX-License-Identifier: GPL-2.0
/*
 * remu_disassoc_test - the device goes away under a live process.
 *
 * Each test makes its own device, remudx on a fresh veth (rdx0,
 * 10.79.0.1), opens it twice, connects an RC QP pair in loopback and
 * proves it moves data.  Then `rdma link delete remudx` runs while the
 * process still holds everything (objects, ring mappings, an armed CQ, a
 * thread blocked for a completion event, a thread posting traffic), and
 * the test checks what a process must see: the deletion completes
 * promptly, IBV_EVENT_DEVICE_FATAL arrives, every verb fails (poll_cq,
 * post_send, post_recv, req_notify_cq, reg_mr) instead of hanging or
 * returning junk, the blocked and the busy thread come back with errors,
 * every object can still be destroyed and the device closed, remu's
 * object counts return to where they were, and the module references the
 * process held (one per context and one per ring mapping) are returned.
 * The same with device memory: a DM allocation, mapped by libremu, with an
 * MR on it that the peer has just written into.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "remu_lib.h"

#define DEV	"remudx"
#define BUF	65536

static const char *const obj_types[] = {
	"ucontext", "pd", "mr", "cq", "qp", "ring", "dm"
};
#define NR_TYPES (sizeof(obj_types) / sizeof(obj_types[0]))

struct end {
	struct ibv_context *ctx;
	struct ibv_comp_channel *ch;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	union ibv_gid gid;
	int gid_index;
};

static int module_refcnt(void)
{
	return remu_read_num("/sys/module/remu/refcnt");
}

static int end_open(struct end *e)
{
	static const struct ibv_qp_cap cap = {
		.max_send_wr = 64, .max_recv_wr = 64,
		.max_send_sge = 1, .max_recv_sge = 1,
	};

	e->ctx = remu_open(DEV);
	if (!e->ctx)
		return -1;
	e->gid_index = remu_ipv4_gid(e->ctx, &e->gid);
	e->ch = ibv_create_comp_channel(e->ctx);
	e->pd = ibv_alloc_pd(e->ctx);
	e->cq = e->ch && e->pd ? ibv_create_cq(e->ctx, 256, NULL, e->ch, 0) :
				 NULL;
	e->buf = aligned_alloc(4096, BUF);
	if (e->gid_index < 0 || !e->cq || !e->buf)
		return -1;
	e->mr = ibv_reg_mr(e->pd, e->buf, BUF, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	e->qp = e->mr ? remu_create_qp(e->pd, e->cq, IBV_QPT_RC, &cap) : NULL;
	return e->qp ? 0 : -1;
}

static int end_connect(struct end *e, struct end *peer)
{
	static const struct remu_conn_attr ra = {
		.access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
		.psn = 7, .rd_atomic = 1, .min_rnr_timer = 1, .timeout = 14,
		.retry_cnt = 7, .rnr_retry = 7,
	};
	struct remu_conn_dest d = { .qpn = peer->qp->qp_num, .gid = peer->gid,
				    .mtu = IBV_MTU_1024 };

	return remu_qp_connect(e->qp, &ra, e->gid_index, &d);
}

static int post_recv(struct end *e, uint64_t id)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)e->buf + BUF / 2, .length = BUF / 2,
		.lkey = e->mr->lkey,
	};

	return remu_post_recv(e->qp, id, &sge, 1);
}

static int post_send(struct end *e, uint32_t len, uint64_t id)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)e->buf, .length = len, .lkey = e->mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = id, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
	};

	return remu_post_send(e->qp, &wr);
}

/* poll @e's CQ for one completion, up to 10 s; its status or -1 */
static int poll_one(struct end *e, struct ibv_wc *wc)
{
	int i, n;

	for (i = 0; i < 100000; i++) {
		n = ibv_poll_cq(e->cq, 1, wc);
		if (n < 0)
			return -1;
		if (n)
			return wc->status;
		usleep(100);
	}
	return -1;
}

static void end_close(struct end *e, struct __test_metadata *_metadata)
{
	/* after disassociation these still succeed: the kernel's objects are
	 * gone and libibverbs frees its own */
	if (e->qp)
		EXPECT_EQ(0, ibv_destroy_qp(e->qp));
	if (e->mr)
		EXPECT_EQ(0, ibv_dereg_mr(e->mr));
	if (e->cq)
		EXPECT_EQ(0, ibv_destroy_cq(e->cq));
	if (e->ch)
		EXPECT_EQ(0, ibv_destroy_comp_channel(e->ch));
	if (e->pd)
		EXPECT_EQ(0, ibv_dealloc_pd(e->pd));
	if (e->ctx)
		EXPECT_EQ(0, ibv_close_device(e->ctx));
	free(e->buf);
	memset(e, 0, sizeof(*e));
}

/* a thread blocked in ibv_get_cq_event() */
static void *wait_event(void *arg)
{
	struct end *e = arg;
	struct ibv_cq *cq;
	void *cq_ctx;
	int ret;

	ret = ibv_get_cq_event(e->ch, &cq, &cq_ctx);
	if (!ret)
		ibv_ack_cq_events(cq, 1);	/* or destroy_cq would wait */
	return (void *)(intptr_t)ret;
}

/* a thread sending until the device is gone: how many sends it made */
struct traffic {
	struct end *e;
	volatile int stop;
	long sent;
	int err;
};

static void *send_loop(void *arg)
{
	struct traffic *t = arg;
	struct ibv_wc wc;

	while (!t->stop) {
		if (post_send(t->e, 512, 1000 + t->sent)) {
			t->err = 1;
			break;
		}
		if (poll_one(t->e, &wc) != IBV_WC_SUCCESS) {
			t->err = 2;
			break;
		}
		t->sent++;
	}
	return NULL;
}

FIXTURE(gone) {
	struct end a, b;
	int base[NR_TYPES];
	int refcnt;
};

FIXTURE_SETUP(gone)
{
	unsigned int i;

	remu_sh("rdma link delete " DEV " 2>/dev/null; ip link del rdx0 2>/dev/null");
	/*
	 * Before the device exists: its own kernel objects (ib_mad's GSI QP,
	 * CQ, PD and MR) go away with it too.
	 */
	for (i = 0; i < NR_TYPES; i++)
		self->base[i] = remu_obj_count(obj_types[i]);
	ASSERT_EQ(0, remu_sh("ip link add rdx0 type veth peer name rdx1 && "
			     "ip addr add 10.79.0.1/24 dev rdx0 && "
			     "ip link set rdx1 up && ip link set rdx0 up"));
	/*
	 * Counted before the device exists: the device's own objects (the
	 * MAD layer's PD, MR, CQ and QP1) go with it, the process's with
	 * the disassociation.
	 */
	for (i = 0; i < NR_TYPES; i++)
		self->base[i] = remu_obj_count(obj_types[i]);
	ASSERT_EQ(0, remu_sh("rdma link add " DEV " type remu netdev rdx0"));
	self->refcnt = module_refcnt();
	ASSERT_LE(0, self->refcnt);
	ASSERT_EQ(0, end_open(&self->a));
	ASSERT_EQ(0, end_open(&self->b));
	ASSERT_EQ(0, end_connect(&self->a, &self->b));
	ASSERT_EQ(0, end_connect(&self->b, &self->a));
}

FIXTURE_TEARDOWN(gone)
{
	if (self->a.ctx)
		end_close(&self->a, _metadata);
	if (self->b.ctx)
		end_close(&self->b, _metadata);
	remu_sh("rdma link delete " DEV " 2>/dev/null; ip link del rdx0 2>/dev/null");
}

/* the pair works: a SEND of patterned bytes arrives intact */
static void prove_traffic(struct __test_metadata *_metadata,
			  FIXTURE_DATA(gone) *self)
{
	struct ibv_wc wc;
	uint32_t i;

	for (i = 0; i < 4000; i++)
		self->a.buf[i] = (uint8_t)(i * 7 + 3);
	memset(self->b.buf + BUF / 2, 0, 4000);
	ASSERT_EQ(0, post_recv(&self->b, 1));
	ASSERT_EQ(0, post_send(&self->a, 4000, 2));
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(&self->a, &wc));
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(&self->b, &wc));
	ASSERT_EQ(4000, wc.byte_len);
	ASSERT_EQ(0, memcmp(self->a.buf, self->b.buf + BUF / 2, 4000));
}

/* rdma link delete, within @secs seconds; its exit status */
static int delete_link(int secs)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "timeout %d rdma link delete " DEV, secs);
	return remu_sh(cmd);
}

static int wait_fatal(struct ibv_context *ctx)
{
	return remu_wait_fatal(ctx, 10);
}

static void expect_counts_back(struct __test_metadata *_metadata,
			       FIXTURE_DATA(gone) *self)
{
	unsigned int i;

	for (i = 0; i < NR_TYPES; i++) {
		EXPECT_EQ(self->base[i], remu_obj_count(obj_types[i]))
			TH_LOG("%s", obj_types[i]);
	}
}

TEST_F(gone, every_verb_fails_and_everything_is_released)
{
	struct ibv_wc wc;
	struct ibv_mr *mr;
	uint8_t *tmp;

	prove_traffic(_metadata, self);
	/* receives outstanding and the CQ armed while the device goes */
	ASSERT_EQ(0, post_recv(&self->b, 10));
	ASSERT_EQ(0, post_recv(&self->b, 11));
	ASSERT_EQ(0, ibv_req_notify_cq(self->b.cq, 0));
	ASSERT_LT(self->refcnt, module_refcnt());

	ASSERT_EQ(0, delete_link(30));
	EXPECT_FALSE(remu_device_listed(DEV));
	EXPECT_EQ(0, wait_fatal(self->a.ctx));
	EXPECT_EQ(0, wait_fatal(self->b.ctx));

	EXPECT_GT(0, ibv_poll_cq(self->a.cq, 1, &wc));
	EXPECT_GT(0, ibv_poll_cq(self->b.cq, 1, &wc));
	EXPECT_NE(0, post_send(&self->a, 16, 3));
	EXPECT_NE(0, post_recv(&self->b, 12));
	EXPECT_NE(0, ibv_req_notify_cq(self->a.cq, 0));
	tmp = malloc(4096);
	ASSERT_NE(NULL, tmp);
	mr = ibv_reg_mr(self->a.pd, tmp, 4096, IBV_ACCESS_LOCAL_WRITE);
	EXPECT_EQ(NULL, mr);
	if (mr)
		ibv_dereg_mr(mr);
	free(tmp);

	/* the kernel objects are gone already; the rings' mappings still
	 * exist (zapped) until the process releases them */
	expect_counts_back(_metadata, self);
	end_close(&self->a, _metadata);
	end_close(&self->b, _metadata);
	EXPECT_EQ(self->refcnt, module_refcnt());
	expect_counts_back(_metadata, self);
}

TEST_F(gone, blocked_and_busy_threads_return)
{
	struct traffic t = { .e = &self->a };
	pthread_t waiter, sender;
	struct timespec ts, t0, t1;
	void *ret = NULL;

	prove_traffic(_metadata, self);
	/* b answers a's sends; b's CQ is armed and a thread waits on it */
	for (int i = 0; i < 60; i++)
		ASSERT_EQ(0, post_recv(&self->b, 100 + i));
	ASSERT_EQ(0, ibv_req_notify_cq(self->b.cq, 0));
	ASSERT_EQ(0, pthread_create(&waiter, NULL, wait_event, &self->b));
	ASSERT_EQ(0, pthread_create(&sender, NULL, send_loop, &t));
	usleep(300000);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	ASSERT_EQ(0, delete_link(30));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	TH_LOG("rdma link delete took %ld ms",
	       (t1.tv_sec - t0.tv_sec) * 1000 +
	       (t1.tv_nsec - t0.tv_nsec) / 1000000);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 10;
	ASSERT_EQ(0, pthread_timedjoin_np(sender, NULL, &ts)) {
		t.stop = 1;
		TH_LOG("the sending thread did not come back");
	}
	EXPECT_NE(0, t.err);
	/* the waiter may have had an event from the traffic before: then
	 * it returned 0 long ago; otherwise the closed channel wakes it */
	ASSERT_EQ(0, pthread_timedjoin_np(waiter, &ret, &ts)) {
		TH_LOG("the thread blocked in ibv_get_cq_event did not return");
	}
	TH_LOG("%ld sends before the device went away, waiter returned %ld",
	       t.sent, (long)(intptr_t)ret);
	EXPECT_EQ(0, wait_fatal(self->a.ctx));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	TH_LOG("fatal event after %ld ms",
	       (t0.tv_sec - t1.tv_sec) * 1000 +
	       (t0.tv_nsec - t1.tv_nsec) / 1000000);
	end_close(&self->a, _metadata);
	end_close(&self->b, _metadata);
	TH_LOG("closed");
	EXPECT_EQ(self->refcnt, module_refcnt());
	expect_counts_back(_metadata, self);
}

/* device memory in use (mapped, with an MR) when the device goes */
TEST_F(gone, device_memory_released)
{
	struct ibv_alloc_dm_attr da = { .length = 3 * 4096 };
	uint8_t in[4000], out[4000];
	struct ibv_sge sge = { 0, sizeof(in), 0 };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;
	struct ibv_dm *dm;
	struct ibv_mr *dmr;
	uint32_t i;

	prove_traffic(_metadata, self);
	dm = ibv_alloc_dm(self->a.ctx, &da);
	ASSERT_NE(NULL, dm);
	dmr = ibv_reg_dm_mr(self->a.pd, dm, 4096, 2 * 4096,
			    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			    IBV_ACCESS_ZERO_BASED);
	ASSERT_NE(NULL, dmr);
	/* b writes into a's device memory */
	for (i = 0; i < sizeof(in); i++)
		in[i] = self->b.buf[i] = (uint8_t)(i * 13 + 1);
	sge.addr = (uintptr_t)self->b.buf;
	sge.lkey = self->b.mr->lkey;
	wr.wr.rdma.remote_addr = 100;
	wr.wr.rdma.rkey = dmr->rkey;
	ASSERT_EQ(0, ibv_post_send(self->b.qp, &wr, &bad));
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(&self->b, &wc));
	ASSERT_EQ(0, ibv_memcpy_from_dm(out, dm, 4096 + 100, sizeof(out)));
	ASSERT_EQ(0, memcmp(in, out, sizeof(in)));
	ASSERT_LT(self->refcnt, module_refcnt());

	ASSERT_EQ(0, delete_link(30));
	EXPECT_EQ(0, wait_fatal(self->a.ctx));
	/* the mapping is zapped: reads show zeros, nothing faults */
	memset(out, 0xff, sizeof(out));
	EXPECT_EQ(0, ibv_memcpy_from_dm(out, dm, 4096 + 100, sizeof(out)));
	EXPECT_EQ(0, out[0]);
	EXPECT_EQ(0, out[sizeof(out) - 1]);
	/* the allocation went back to the pool with the device's objects */
	expect_counts_back(_metadata, self);
	EXPECT_EQ(0, ibv_dereg_mr(dmr));
	EXPECT_EQ(0, ibv_free_dm(dm));
	end_close(&self->a, _metadata);
	end_close(&self->b, _metadata);
	EXPECT_EQ(self->refcnt, module_refcnt());
	expect_counts_back(_metadata, self);
}

TEST_F(gone, the_name_can_be_reused)
{
	prove_traffic(_metadata, self);
	ASSERT_EQ(0, delete_link(30));
	end_close(&self->a, _metadata);
	end_close(&self->b, _metadata);
	/* a new device under the same name works from scratch */
	ASSERT_EQ(0, remu_sh("rdma link add " DEV " type remu netdev rdx0"));
	ASSERT_EQ(0, end_open(&self->a));
	ASSERT_EQ(0, end_open(&self->b));
	ASSERT_EQ(0, end_connect(&self->a, &self->b));
	ASSERT_EQ(0, end_connect(&self->b, &self->a));
	prove_traffic(_metadata, self);
}

TEST_HARNESS_MAIN
