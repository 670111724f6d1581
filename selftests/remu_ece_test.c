// SPDX-License-Identifier: GPL-2.0
/*
 * remu_ece_test - ECE, enhanced connection establishment: ibv_set_ece(),
 * ibv_query_ece(), and their use by the RDMA CM (rdma_set_local_ece(),
 * rdma_get_remote_ece(), and librdmacm's own handshake for the QPs it
 * makes), mlx5's contract (docs/compatibility.md, "ECE").
 *
 * remu's options: vendor id REMU_ECE_VENDOR_ID (0xffffff, the device's
 * vendor_id), version 1 in bits 31:28, no capability bit; the kernel
 * answers a request with the lower version and the capability bits both
 * have (none), 0 for version 0.
 *
 * Fixture qp (remu0, no traffic): a new QP answers remu's offer (version
 * 1); a comp_mask or another vendor's id is refused (EINVAL; vendor id 0
 * EOPNOTSUPP, libibverbs' check, the same on mlx5) and changes nothing;
 * ibv_set_ece() clears the answer until the next modify_qp, whose kernel
 * answer is the negotiated options (version 3 with capability bits
 * comes back as version 1; version 0 as 0); options 0 turn ECE off; a
 * modify_qp that fails keeps the request for the next one.
 *
 * Fixture cm (the RDMA CM from remu0 in the initial namespace to a server
 * on remu1, 10.77.0.2 in namespace peer; the server's QP is librdmacm's,
 * made by rdma_get_request(), so librdmacm negotiates for it):
 *   managed         the client's QP is librdmacm's too: both QPs end with
 *                   version 1
 *   higher_version  the client's QP is its own (an external QP): it asks
 *                   rdma_set_local_ece() for version 3 and capability
 *                   bits, the server's QP settles on version 1, the
 *                   client reads that with rdma_get_remote_ece(), sets it
 *                   and its QP answers version 1 too
 *   other_vendor    the client asks under another vendor's id: the server
 *                   turns ECE off (0) and answers 0 under that id
 * Every connection then moves a message each way, compared byte for byte.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <rdma/remu-abi.h>

#include "kselftest_harness.h"
#include "remu_lib.h"
#include "remu_cm_lib.h"	/* remu_enter_netns() */

#define GID_INDEX	1
#define V1		(1u << 28)		/* remu's offer: version 1 */
#define V3_CAPS		(0x30000000u | 0xf)	/* a newer peer's request */
#define OTHER_VENDOR	0x15b3
#define MSG		4096
#define SERVER_ADDR	"10.77.0.2"

static const struct ibv_qp_cap ecap = { .max_send_wr = 4, .max_recv_wr = 4,
					.max_send_sge = 1, .max_recv_sge = 1 };

static uint32_t ece_of(struct ibv_qp *qp)
{
	struct ibv_ece e = {};

	if (ibv_query_ece(qp, &e) || e.vendor_id != REMU_ECE_VENDOR_ID ||
	    e.comp_mask)
		return 0xdeadbeef;
	return e.options;
}

static int set_ece(struct ibv_qp *qp, uint32_t vendor, uint32_t options)
{
	struct ibv_ece e = { .vendor_id = vendor, .options = options };

	return ibv_set_ece(qp, &e);
}

/* ---- fixture qp: the verbs on remu0 ---- */

FIXTURE(qp) {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
};

FIXTURE_SETUP(qp)
{
	self->ctx = remu_open("remu0");
	ASSERT_NE(NULL, self->ctx);
	self->pd = ibv_alloc_pd(self->ctx);
	self->cq = ibv_create_cq(self->ctx, 8, NULL, NULL, 0);
	ASSERT_NE(NULL, self->cq);
	self->qp = remu_create_qp(self->pd, self->cq, IBV_QPT_RC, &ecap);
	ASSERT_NE(NULL, self->qp);
}

FIXTURE_TEARDOWN(qp)
{
	remu_close_objs(self->qp, NULL, NULL, self->cq, self->pd, self->ctx);
}

static int to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };

	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			     IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static int to_reset(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };

	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

TEST_F(qp, offer_at_creation)
{
	struct ibv_qp *ud = remu_create_qp(self->pd, self->cq, IBV_QPT_UD,
					   &ecap);
	struct ibv_ece e = { .vendor_id = 1, .options = 2, .comp_mask = 3 };

	ASSERT_EQ(0, ibv_query_ece(self->qp, &e));
	EXPECT_EQ(REMU_ECE_VENDOR_ID, e.vendor_id);
	EXPECT_EQ(V1, e.options);
	EXPECT_EQ(0, e.comp_mask);
	ASSERT_NE(NULL, ud);
	EXPECT_EQ(V1, ece_of(ud));
	EXPECT_EQ(0, ibv_destroy_qp(ud));
}

TEST_F(qp, refused)
{
	struct ibv_ece e = { .vendor_id = REMU_ECE_VENDOR_ID, .options = V1,
			     .comp_mask = 1 };

	EXPECT_EQ(EINVAL, ibv_set_ece(self->qp, &e));
	EXPECT_EQ(EINVAL, set_ece(self->qp, OTHER_VENDOR, V1));
	/* vendor id 0 is libibverbs' own refusal, before any provider's */
	EXPECT_EQ(EOPNOTSUPP, set_ece(self->qp, 0, V1));
	/* nothing changed, nothing waits for the next modify */
	EXPECT_EQ(V1, ece_of(self->qp));
	ASSERT_EQ(0, to_init(self->qp));
	EXPECT_EQ(V1, ece_of(self->qp));
}

TEST_F(qp, negotiated_by_modify)
{
	/* a newer peer's options: cleared until the kernel answered */
	ASSERT_EQ(0, set_ece(self->qp, REMU_ECE_VENDOR_ID, V3_CAPS));
	EXPECT_EQ(0, ece_of(self->qp));
	ASSERT_EQ(0, to_init(self->qp));
	EXPECT_EQ(V1, ece_of(self->qp));
	/* answered once: a modify without a request keeps it */
	ASSERT_EQ(0, to_init(self->qp));
	EXPECT_EQ(V1, ece_of(self->qp));
	/* version 0: ECE off */
	ASSERT_EQ(0, set_ece(self->qp, REMU_ECE_VENDOR_ID, 0xf));
	ASSERT_EQ(0, to_reset(self->qp));
	EXPECT_EQ(0, ece_of(self->qp));
	/* version 1 again, with bits remu does not have */
	ASSERT_EQ(0, set_ece(self->qp, REMU_ECE_VENDOR_ID, V1 | 0x0ffffff0));
	ASSERT_EQ(0, to_init(self->qp));
	EXPECT_EQ(V1, ece_of(self->qp));
	/* options 0: nothing to negotiate, the QP answers 0 from now on */
	ASSERT_EQ(0, set_ece(self->qp, REMU_ECE_VENDOR_ID, 0));
	EXPECT_EQ(0, ece_of(self->qp));
	ASSERT_EQ(0, to_reset(self->qp));
	EXPECT_EQ(0, ece_of(self->qp));
}

TEST_F(qp, failed_modify_keeps_request)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS };

	ASSERT_EQ(0, set_ece(self->qp, REMU_ECE_VENDOR_ID, V3_CAPS));
	/* RESET -> RTS is no transition */
	EXPECT_NE(0, ibv_modify_qp(self->qp, &a, IBV_QP_STATE));
	EXPECT_EQ(0, ece_of(self->qp));
	ASSERT_EQ(0, to_init(self->qp));
	EXPECT_EQ(V1, ece_of(self->qp));
}

/* ---- fixture cm: remu0 -> remu1 through the RDMA CM ---- */

/* what the server reports through its pipe */
struct srv_report {
	uint32_t qp_ece;	/* its QP's options after accepting */
	int err;		/* its failed step, or 0 */
};

static void pattern(uint8_t *p, size_t len, uint32_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 5 + seed + (i >> 8));
}

/*
 * The server, in namespace peer: one connection on @port through a QP
 * librdmacm makes; reports its QP's ECE after rdma_accept(), then takes a
 * message (checked) and sends one back.  Exits with 0 or a step.
 */
static int ece_server(const char *port, int ready, int report)
{
	struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE,
				       .ai_port_space = RDMA_PS_TCP }, *res;
	struct ibv_qp_init_attr attr = { .cap = ecap, .sq_sig_all = 1 };
	static uint8_t rbuf[MSG], sbuf[MSG], want[MSG];
	struct srv_report rep = {};
	struct rdma_cm_id *listen_id, *id;
	struct ibv_mr *rmr, *smr;
	struct ibv_wc wc;

	alarm(60);
	if (remu_enter_netns("peer") ||
	    rdma_getaddrinfo(SERVER_ADDR, port, &hints, &res) ||
	    rdma_create_ep(&listen_id, res, NULL, &attr) ||
	    rdma_listen(listen_id, 4) || write(ready, "r", 1) != 1)
		return 1;
	if (rdma_get_request(listen_id, &id))
		return 2;
	rmr = rdma_reg_msgs(id, rbuf, MSG);
	smr = rdma_reg_msgs(id, sbuf, MSG);
	if (!rmr || !smr || rdma_post_recv(id, NULL, rbuf, MSG, rmr) ||
	    rdma_accept(id, NULL))
		return 3;
	rep.qp_ece = ece_of(id->qp);
	if (write(report, &rep, sizeof(rep)) != sizeof(rep))
		return 4;
	pattern(want, MSG, 1);
	if (rdma_get_recv_comp(id, &wc) != 1 || wc.status ||
	    wc.byte_len != MSG || memcmp(rbuf, want, MSG))
		return 5;
	pattern(sbuf, MSG, 2);
	/* acknowledged: the reply is in the client's CQ, exit may come */
	if (rdma_post_send(id, NULL, sbuf, MSG, smr, 0) ||
	    rdma_get_send_comp(id, &wc) != 1 || wc.status)
		return 6;
	return 0;
}

struct cli_result {
	struct ibv_ece remote;	/* rdma_get_remote_ece() (external QP) */
	uint32_t qp_ece;	/* the client's QP's options, connected */
	int err;
};

/* @id's external QP through INIT, RTR (after ibv_set_ece) and RTS */
static int external_qp_up(struct rdma_cm_id *id, struct ibv_qp *qp,
			  const struct ibv_ece *ece)
{
	static const enum ibv_qp_state st[] = { IBV_QPS_INIT, IBV_QPS_RTR,
						IBV_QPS_RTS };
	struct ibv_qp_attr a;
	unsigned int i;
	int mask;

	for (i = 0; i < 3; i++) {
		memset(&a, 0, sizeof(a));
		a.qp_state = st[i];
		if (rdma_init_qp_attr(id, &a, &mask))
			return -1;
		if (st[i] == IBV_QPS_RTR && ece->vendor_id ==
		    REMU_ECE_VENDOR_ID && ibv_set_ece(qp, (struct ibv_ece *)ece))
			return -1;
		if (ibv_modify_qp(qp, &a, mask))
			return -1;
	}
	return 0;
}

static int post_one_recv(struct ibv_qp *qp, uint8_t *buf, struct ibv_mr *mr)
{
	struct ibv_sge sge = { (uintptr_t)buf, MSG, mr->lkey };

	return remu_post_recv(qp, 1, &sge, 1);
}

/*
 * The client in this namespace: connect to the server on remu0, with
 * librdmacm's QP (@local NULL) or its own QP that asks for @local; one
 * message each way, checked.  0 or a step in @r->err.
 */
static void ece_client(const char *port, const struct ibv_ece *local,
		       struct cli_result *r)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *res;
	struct ibv_qp_init_attr attr = { .cap = ecap, .sq_sig_all = 1,
					 .qp_type = IBV_QPT_RC };
	static uint8_t rbuf[MSG], sbuf[MSG], want[MSG];
	struct rdma_conn_param cp = { .responder_resources = 1,
				      .initiator_depth = 1, .retry_count = 7,
				      .rnr_retry_count = 7 };
	struct rdma_cm_id *id;
	struct ibv_mr *rmr, *smr;
	struct ibv_pd *pd = NULL;
	struct ibv_cq *cq = NULL;
	struct ibv_qp *qp;
	struct ibv_wc wc;

	memset(r, 0, sizeof(*r));
	if (rdma_getaddrinfo(SERVER_ADDR, port, &hints, &res) ||
	    rdma_create_ep(&id, res, NULL, local ? NULL : &attr)) {
		r->err = 10;
		return;
	}
	if (local) {
		pd = ibv_alloc_pd(id->verbs);
		cq = pd ? ibv_create_cq(id->verbs, 8, NULL, NULL, 0) : NULL;
		attr.send_cq = attr.recv_cq = cq;
		qp = cq ? ibv_create_qp(pd, &attr) : NULL;
		if (!qp || rdma_set_local_ece(id, (struct ibv_ece *)local)) {
			r->err = 11;
			return;
		}
		cp.qp_num = qp->qp_num;
		rmr = ibv_reg_mr(pd, rbuf, MSG, IBV_ACCESS_LOCAL_WRITE);
		smr = ibv_reg_mr(pd, sbuf, MSG, 0);
	} else {
		qp = id->qp;
		rmr = rdma_reg_msgs(id, rbuf, MSG);
		smr = rdma_reg_msgs(id, sbuf, MSG);
	}
	if (!rmr || !smr) {
		r->err = 12;
		return;
	}
	/* librdmacm's QP is in INIT already, an external one after the REP */
	if (!local && post_one_recv(qp, rbuf, rmr)) {
		r->err = 13;
		return;
	}
	if (rdma_connect(id, &cp)) {
		r->err = 14;
		return;
	}
	if (local) {
		/* the REP's options: what the server settled on */
		if (rdma_get_remote_ece(id, &r->remote) ||
		    external_qp_up(id, qp, &r->remote) ||
		    post_one_recv(qp, rbuf, rmr) || rdma_establish(id)) {
			r->err = 15;
			return;
		}
	}
	r->qp_ece = ece_of(qp);
	pattern(sbuf, MSG, 1);
	pattern(want, MSG, 2);
	{
		struct ibv_sge sge = { (uintptr_t)sbuf, MSG, smr->lkey };
		struct ibv_send_wr wr = { .wr_id = 2, .sg_list = &sge,
					  .num_sge = 1, .opcode = IBV_WR_SEND };
		struct ibv_cq *scq = local ? cq : id->send_cq;
		struct ibv_cq *rcq = local ? cq : id->recv_cq;

		if (remu_run_wr(qp, scq, &wr, 20)) {
			r->err = 16;
			return;
		}
		if (remu_poll_one(rcq, &wc, 20) || wc.byte_len != MSG ||
		    memcmp(rbuf, want, MSG)) {
			r->err = 17;
			return;
		}
	}
	rdma_disconnect(id);
}

FIXTURE(cm) {
	pid_t srv;
	int report;
	char port[16];
	struct srv_report rep;
	struct cli_result cli;
};

FIXTURE_SETUP(cm)
{
	int ready[2], report[2];
	char c;

	snprintf(self->port, sizeof(self->port), "%u",
		 21000 + (unsigned int)getpid() % 20000);
	ASSERT_EQ(0, pipe(ready));
	ASSERT_EQ(0, pipe(report));
	fflush(stdout);
	fflush(stderr);
	self->srv = fork();
	ASSERT_LE(0, self->srv);
	if (!self->srv) {
		close(ready[0]);
		close(report[0]);
		_exit(ece_server(self->port, ready[1], report[1]));
	}
	close(ready[1]);
	close(report[1]);
	ASSERT_EQ(1, read(ready[0], &c, 1));
	close(ready[0]);
	self->report = report[0];
}

FIXTURE_TEARDOWN(cm)
{
	int st;

	close(self->report);
	/*
	 * Only a server still to reap: srv is 0 when the setup stopped
	 * before fork(), -1 once cm_run() reaped it, and kill(0) or
	 * kill(-1) would take this process group or every process the test
	 * may signal (as root in the VM: run_tests.sh and all).
	 */
	if (self->srv > 0) {
		kill(self->srv, SIGKILL);
		waitpid(self->srv, &st, 0);
	}
}

/* run the client, then collect the server's report and exit status */
static int cm_run(FIXTURE_DATA(cm) *self, const struct ibv_ece *local)
{
	int st;

	ece_client(self->port, local, &self->cli);
	if (self->cli.err)
		return self->cli.err;
	if (read(self->report, &self->rep, sizeof(self->rep)) !=
	    sizeof(self->rep))
		return 20;
	if (waitpid(self->srv, &st, 0) != self->srv || !WIFEXITED(st))
		return 21;
	self->srv = -1;
	return WEXITSTATUS(st) ? 100 + WEXITSTATUS(st) : 0;
}

TEST_F(cm, managed)
{
	ASSERT_EQ(0, cm_run(self, NULL));
	EXPECT_EQ(V1, self->cli.qp_ece);
	EXPECT_EQ(V1, self->rep.qp_ece);
}

TEST_F(cm, higher_version)
{
	struct ibv_ece local = { .vendor_id = REMU_ECE_VENDOR_ID,
				 .options = V3_CAPS };

	ASSERT_EQ(0, cm_run(self, &local));
	EXPECT_EQ(V1, self->rep.qp_ece);
	EXPECT_EQ(REMU_ECE_VENDOR_ID, self->cli.remote.vendor_id);
	EXPECT_EQ(V1, self->cli.remote.options);
	EXPECT_EQ(V1, self->cli.qp_ece);
}

TEST_F(cm, other_vendor)
{
	struct ibv_ece local = { .vendor_id = OTHER_VENDOR,
				 .options = 0x20000001 };

	ASSERT_EQ(0, cm_run(self, &local));
	EXPECT_EQ(0, self->rep.qp_ece);
	EXPECT_EQ(OTHER_VENDOR, self->cli.remote.vendor_id);
	EXPECT_EQ(0, self->cli.remote.options);
	/* the client set nothing: its QP keeps its offer */
	EXPECT_EQ(V1, self->cli.qp_ece);
}

TEST_HARNESS_MAIN
