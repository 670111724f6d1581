// SPDX-License-Identifier: GPL-2.0
/*
 * remu_hostile_test - forged RoCEv2 packets against live QPs
 * (docs/security.md).  remu0 (init namespace, 10.77.0.1) and remu1
 * (namespace peer, 10.77.0.2) hold real QPs; remu_forge_lib.h sends packets
 * that pass the wire layer (good ICRC, valid headers) from three places:
 *   third    10.77.0.9, an extra address on v0: a host that is not the
 *            QP's peer
 *   as_b     10.77.0.2 in peer: remu1's address, to remu0
 *   as_a     10.77.0.1 in init: remu0's address, to remu1
 * The responder's FLUSH and ATOMIC_WRITE are driven the same way (a
 * forged requester).  Each case checks that the packet changes nothing it must not (memory,
 * completions, QP state), that the counter naming the reason moved, and,
 * as a control, that the same packet from the right place with the right
 * fields does take effect, so the drop is the check's doing.
 *
 * A QP "facing a ghost" is connected to a made-up QPN at the other
 * device's address: nothing answers it, so its requests stay outstanding
 * (timeout 18, about 1 s, several retries) and the forger plays the
 * responder; or the forger plays the requester and the ghost's side
 * receives the responses (counted as rcvd_no_qp there).
 */
#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>

#include "kselftest_harness.h"
#include "remu_lib.h"
#include "remu_forge_lib.h"

#define BUF_SIZE	(1 << 20)
#define MTU		1024
#define GHOST_QPN	0xabcde
#define THIRD_ADDR	"10.77.0.9"
#define PSN_A		0x1000
#define PSN_B		0x2000

struct side {
	const char *dev;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;
	union ibv_gid gid;
	int gidx;
};

static int side_open(struct side *s, const char *dev)
{
	s->dev = dev;
	s->ctx = remu_open(dev);
	s->gidx = s->ctx ? remu_ipv4_gid(s->ctx, &s->gid) : -1;
	s->pd = s->gidx >= 0 ? ibv_alloc_pd(s->ctx) : NULL;
	s->cq = s->pd ? ibv_create_cq(s->ctx, 64, NULL, NULL, 0) : NULL;
	s->buf = aligned_alloc(4096, BUF_SIZE);
	if (!s->cq || !s->buf)
		return -1;
	memset(s->buf, 0x5a, BUF_SIZE);
	s->mr = ibv_reg_mr(s->pd, s->buf, BUF_SIZE,
			   IBV_ACCESS_LOCAL_WRITE | REMU_ACCESS_REMOTE_ALL);
	return s->mr ? 0 : -1;
}

static void side_close(struct side *s)
{
	remu_close_objs(NULL, NULL, s->mr, s->cq, s->pd, s->ctx);
	free(s->buf);
}

/* a new RC or UC QP of @s */
static struct ibv_qp *qp_new(struct side *s, enum ibv_qp_type type)
{
	static const struct ibv_qp_cap cap = {
		.max_send_wr = 16, .max_recv_wr = 16,
		.max_send_sge = 1, .max_recv_sge = 1,
	};

	return remu_create_qp(s->pd, s->cq, type, &cap);
}

/*
 * connect @qp of @s towards @qpn at @peer's address, SQ/RQ PSN @psn, the
 * QP's remote rights @access
 */
static int qp_conn_acc(struct ibv_qp *qp, struct side *s, uint32_t qpn,
		       struct side *peer, uint32_t psn, unsigned int access)
{
	struct remu_conn_attr ra = REMU_RC_ATTR(psn);
	struct remu_conn_dest d = { .qpn = qpn, .gid = peer->gid,
				    .mtu = IBV_MTU_1024 };

	ra.timeout = 18;	/* ~1 s: a ghost's WQEs stay outstanding */
	ra.access = access;
	return remu_qp_connect(qp, &ra, s->gidx, &d);
}

static int qp_conn(struct ibv_qp *qp, struct side *s, uint32_t qpn,
		   struct side *peer, uint32_t psn)
{
	return qp_conn_acc(qp, s, qpn, peer, psn, REMU_ACCESS_REMOTE_ALL);
}

/* a new RC or UC QP of @s connected towards @qpn at @peer's address */
static struct ibv_qp *qp_towards_acc(struct side *s, enum ibv_qp_type type,
				     uint32_t qpn, struct side *peer,
				     uint32_t psn, unsigned int access)
{
	struct ibv_qp *qp = qp_new(s, type);

	if (qp && qp_conn_acc(qp, s, qpn, peer, psn, access)) {
		ibv_destroy_qp(qp);
		qp = NULL;
	}
	return qp;
}

static struct ibv_qp *qp_towards(struct side *s, enum ibv_qp_type type,
				 uint32_t qpn, struct side *peer, uint32_t psn)
{
	return qp_towards_acc(s, type, qpn, peer, psn,
			      REMU_ACCESS_REMOTE_ALL);
}

/* wait up to 2 s for @dev's counter @name to reach @want; its value */
static long long counter_reaches(const char *dev, const char *name,
				 long long want)
{
	long long v = -1;
	int i;

	for (i = 0; i < 50; i++) {
		v = remu_hw_counter(dev, name, true);
		if (v >= want)
			break;
		usleep(20000);
	}
	return v;
}

/* nothing on @cq within 0.3 s */
static int cq_stays_empty(struct ibv_cq *cq)
{
	struct ibv_wc wc;

	return remu_poll_one(cq, &wc, 0.3) == -1 ? 0 : -1;
}

FIXTURE(hostile)
{
	struct side a, b;
	struct remu_forge third, as_a, as_b;
};

FIXTURE_SETUP(hostile)
{
	memset(self, 0, sizeof(*self));
	self->third.fd = self->as_a.fd = self->as_b.fd = -1;
	ASSERT_EQ(0, side_open(&self->a, "remu0"));
	ASSERT_EQ(0, side_open(&self->b, "remu1"));
	remu_sh("ip addr add " THIRD_ADDR "/24 dev v0 2>/dev/null");
	ASSERT_EQ(0, remu_forge_open(&self->third, NULL, THIRD_ADDR,
				     "10.77.0.2"));
	ASSERT_EQ(0, remu_forge_open(&self->as_a, NULL, "10.77.0.1",
				     "10.77.0.2"));
	ASSERT_EQ(0, remu_forge_open(&self->as_b, "peer", "10.77.0.2",
				     "10.77.0.1"));
}

FIXTURE_TEARDOWN(hostile)
{
	remu_forge_close(&self->third);
	remu_forge_close(&self->as_a);
	remu_forge_close(&self->as_b);
	remu_sh("ip addr del " THIRD_ADDR "/24 dev v0 2>/dev/null");
	side_close(&self->a);
	side_close(&self->b);
}

/*
 * UC SEND into remu1's QP from a third address: dropped (rcvd_bad_path),
 * its receive untouched; the same packet from remu0's address lands.
 */
TEST_F(hostile, uc_send_from_third_host)
{
	struct side *a = &self->a, *b = &self->b;
	struct ibv_qp *qa = qp_new(a, IBV_QPT_UC);
	struct ibv_qp *qb = qp_new(b, IBV_QPT_UC);
	struct ibv_sge sge = { (uintptr_t)b->buf, 64, b->mr->lkey };
	static const char msg[] = "forged UC SEND payload";
	long long bad0 = remu_hw_counter("remu1", "rcvd_bad_path", true);
	struct remu_fpkt p;
	struct ibv_wc wc;

	ASSERT_NE(NULL, qa);
	ASSERT_NE(NULL, qb);
	ASSERT_EQ(0, qp_conn(qa, a, qb->qp_num, b, PSN_A));
	ASSERT_EQ(0, qp_conn(qb, b, qa->qp_num, a, PSN_A));
	ASSERT_EQ(0, remu_post_recv(qb, 1, &sge, 1));
	rf_bth(&p, RF_UC | RF_SEND_ONLY, qb->qp_num, PSN_A);
	rf_payload(&p, msg, sizeof(msg));
	ASSERT_EQ(0, remu_forge_send(&self->third, &p));
	EXPECT_EQ(bad0 + 1, counter_reaches("remu1", "rcvd_bad_path",
					    bad0 + 1));
	EXPECT_EQ(0, cq_stays_empty(b->cq));
	EXPECT_NE(0, memcmp(b->buf, msg, sizeof(msg)));

	/* control: from the peer's address it is a valid packet */
	ASSERT_EQ(0, remu_forge_send(&self->as_a, &p));
	ASSERT_EQ(IBV_WC_SUCCESS, remu_poll_one(b->cq, &wc, 5));
	EXPECT_EQ(sizeof(msg), wc.byte_len);
	EXPECT_EQ(0, memcmp(b->buf, msg, sizeof(msg)));
	ibv_destroy_qp(qb);
	ibv_destroy_qp(qa);
}

/* RC WRITE into remu1's MR from a third address: memory untouched */
TEST_F(hostile, rc_write_from_third_host)
{
	struct side *a = &self->a, *b = &self->b;
	struct ibv_qp *qb = qp_towards(b, IBV_QPT_RC, GHOST_QPN, a, PSN_B);
	long long bad0 = remu_hw_counter("remu1", "rcvd_bad_path", true);
	static const char msg[] = "forged RDMA WRITE";
	struct remu_fpkt p;
	int i;

	ASSERT_NE(NULL, qb);
	rf_bth(&p, RF_RC | RF_WRITE_ONLY, qb->qp_num, PSN_B);
	rf_reth(&p, (uintptr_t)b->buf + 4096, b->mr->rkey, sizeof(msg));
	rf_payload(&p, msg, sizeof(msg));
	ASSERT_EQ(0, remu_forge_send(&self->third, &p));
	EXPECT_EQ(bad0 + 1, counter_reaches("remu1", "rcvd_bad_path",
					    bad0 + 1));
	usleep(100000);
	EXPECT_NE(0, memcmp(b->buf + 4096, msg, sizeof(msg)));
	EXPECT_EQ(IBV_QPS_RTS, remu_qp_state(qb));

	/* control: from the peer's address the WRITE is placed */
	ASSERT_EQ(0, remu_forge_send(&self->as_a, &p));
	for (i = 0; i < 100 && memcmp(b->buf + 4096, msg, sizeof(msg)); i++)
		usleep(20000);
	EXPECT_EQ(0, memcmp(b->buf + 4096, msg, sizeof(msg)));
	ibv_destroy_qp(qb);
}

/*
 * An ACK or NAK for a PSN remu0's QP never sent is dropped
 * (rcvd_bad_resp_psn): its outstanding SEND neither completes nor fails.
 * Controls: the same ACK for the PSN it did send completes it; a NAK for
 * a sent PSN fails the next one with the NAK's status.
 */
TEST_F(hostile, ack_nak_for_unsent_psn)
{
	struct side *a = &self->a, *b = &self->b;
	struct ibv_qp *qa = qp_towards(a, IBV_QPT_RC, GHOST_QPN, b, PSN_A);
	struct ibv_sge sge = { (uintptr_t)a->buf, 100, a->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED };
	long long bad0 = remu_hw_counter("remu0", "rcvd_bad_resp_psn", true);
	struct remu_fpkt p;
	struct ibv_wc wc;

	ASSERT_NE(NULL, qa);
	ASSERT_EQ(0, remu_post_send(qa, &wr));
	/* ACK of PSN_A + 10: covers a SEND that does not exist */
	rf_bth(&p, RF_RC | RF_ACK, qa->qp_num, PSN_A + 10);
	rf_aeth(&p, RF_AETH_ACK, 1);
	ASSERT_EQ(0, remu_forge_send(&self->as_b, &p));
	/* a NAK "remote access error" of PSN_A + 10 */
	rf_bth(&p, RF_RC | RF_ACK, qa->qp_num, PSN_A + 10);
	rf_aeth(&p, RF_AETH_NAK_REM_ACC, 1);
	ASSERT_EQ(0, remu_forge_send(&self->as_b, &p));
	EXPECT_EQ(bad0 + 2, counter_reaches("remu0", "rcvd_bad_resp_psn",
					    bad0 + 2));
	EXPECT_EQ(0, cq_stays_empty(a->cq));
	EXPECT_EQ(IBV_QPS_RTS, remu_qp_state(qa));

	/* controls: the ACK of PSN_A completes the SEND ... */
	rf_bth(&p, RF_RC | RF_ACK, qa->qp_num, PSN_A);
	rf_aeth(&p, RF_AETH_ACK, 1);
	ASSERT_EQ(0, remu_forge_send(&self->as_b, &p));
	ASSERT_EQ(IBV_WC_SUCCESS, remu_poll_one(a->cq, &wc, 5));
	EXPECT_EQ(7, wc.wr_id);
	/* ... and a NAK of the next one's PSN fails it */
	wr.wr_id = 8;
	ASSERT_EQ(0, remu_post_send(qa, &wr));
	rf_bth(&p, RF_RC | RF_ACK, qa->qp_num, PSN_A + 1);
	rf_aeth(&p, RF_AETH_NAK_REM_ACC, 2);
	usleep(50000);
	ASSERT_EQ(0, remu_forge_send(&self->as_b, &p));
	ASSERT_EQ(IBV_WC_REM_ACCESS_ERR, remu_poll_one(a->cq, &wc, 5));
	EXPECT_EQ(8, wc.wr_id);
	ibv_destroy_qp(qa);
}

/* send READ response @opcode, number @k, of @len payload bytes from @data */
static int read_resp(struct remu_forge *f, uint32_t qpn, uint8_t opcode,
		     uint32_t k, const uint8_t *data, uint32_t len)
{
	struct remu_fpkt p;

	rf_bth(&p, RF_RC | opcode, qpn, PSN_A + k);
	if (opcode != RF_READ_RESP_MIDDLE)
		rf_aeth(&p, RF_AETH_ACK, 1);
	rf_payload(&p, data, len);
	return remu_forge_send(f, &p);
}

/*
 * READ responses of the wrong length are dropped (rcvd_bad_resp_len):
 * every response but the last is exactly one MTU, the last exactly the
 * rest and a LAST; the right ones complete the READ byte for byte.
 */
TEST_F(hostile, read_response_length)
{
	struct side *a = &self->a, *b = &self->b;
	struct ibv_qp *qa = qp_towards(a, IBV_QPT_RC, GHOST_QPN, b, PSN_A);
	const uint32_t len = 3 * MTU + 100;
	long long bad0 = remu_hw_counter("remu0", "rcvd_bad_resp_len", true);
	uint8_t data[4 * MTU];
	struct ibv_sge sge = { (uintptr_t)a->buf, len, a->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 9, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_READ,
				  .send_flags = IBV_SEND_SIGNALED };
	struct ibv_wc wc;
	unsigned int i;
	uint32_t q;

	ASSERT_NE(NULL, qa);
	q = qa->qp_num;
	for (i = 0; i < sizeof(data); i++)
		data[i] = i * 13 + 1;
	wr.wr.rdma.remote_addr = 0x100000;
	wr.wr.rdma.rkey = 0x1234;
	ASSERT_EQ(0, remu_post_send(qa, &wr));
	usleep(50000);
	/* short FIRST, long MIDDLE, short LAST, a MIDDLE in last place */
	ASSERT_EQ(0, read_resp(&self->as_b, q, RF_READ_RESP_FIRST, 0, data,
			       MTU - 4));
	ASSERT_EQ(0, read_resp(&self->as_b, q, RF_READ_RESP_MIDDLE, 1, data,
			       MTU + 4));
	ASSERT_EQ(0, read_resp(&self->as_b, q, RF_READ_RESP_LAST, 3, data,
			       96));
	ASSERT_EQ(0, read_resp(&self->as_b, q, RF_READ_RESP_MIDDLE, 3, data,
			       100));
	EXPECT_EQ(bad0 + 4, counter_reaches("remu0", "rcvd_bad_resp_len",
					    bad0 + 4));
	EXPECT_EQ(0, cq_stays_empty(a->cq));

	/* control: the right four complete it, byte for byte */
	for (i = 0; i < 4; i++)
		ASSERT_EQ(0, read_resp(&self->as_b, q,
				       i == 0 ? RF_READ_RESP_FIRST :
				       i == 3 ? RF_READ_RESP_LAST :
				       RF_READ_RESP_MIDDLE, i, data + i * MTU,
				       i == 3 ? 100 : MTU));
	ASSERT_EQ(IBV_WC_SUCCESS, remu_poll_one(a->cq, &wc, 5));
	EXPECT_EQ(9, wc.wr_id);
	EXPECT_EQ(-1, remu_cmp(a->buf, data, len));
	ibv_destroy_qp(qa);
}

/* a READ request to remu1's QP @q, PSN @psn, as remu0 */
static int read_req(struct remu_forge *f, uint32_t q, uint32_t psn,
		    uint64_t va, uint32_t rkey, uint32_t len)
{
	struct remu_fpkt p;

	rf_bth(&p, RF_RC | RF_READ_REQ, q, psn);
	rf_reth(&p, va, rkey, len);
	return remu_forge_send(f, &p);
}

/* remu1's sent_pkts moves by exactly @n within 2 s (and no more) */
static int sent_moves_by(long long before, long long n)
{
	long long v = counter_reaches("remu1", "sent_pkts", before + n);

	usleep(200000);
	v = remu_hw_counter("remu1", "sent_pkts", true);
	if (v != before + n)
		printf("# remu1 sent_pkts moved by %lld, expected %lld\n",
		       v - before, n);
	return v == before + n ? 0 : -1;
}

/*
 * A duplicate READ is executed again only as a repeat of a READ the
 * responder executed, from one of its response PSNs and for no more than
 * the rest of it; anything else is dropped (rcvd_stale_dup) without a
 * single response.
 */
TEST_F(hostile, duplicate_read_bounded)
{
	struct side *b = &self->b;
	struct ibv_qp *qb = qp_towards(b, IBV_QPT_RC, GHOST_QPN, &self->a,
				       PSN_B);
	uint64_t va = (uintptr_t)b->buf;
	uint32_t rkey = b->mr->rkey;
	long long s0, d0 = remu_hw_counter("remu1", "rcvd_stale_dup", true);

	ASSERT_NE(NULL, qb);
	s0 = remu_hw_counter("remu1", "sent_pkts", true);
	/* the READ itself: 2 responses */
	ASSERT_EQ(0, read_req(&self->as_a, qb->qp_num, PSN_B, va, rkey,
			      2 * MTU));
	ASSERT_EQ(0, sent_moves_by(s0, 2));
	/* its duplicate, whole: 2 again; from its second response: 1 */
	ASSERT_EQ(0, read_req(&self->as_a, qb->qp_num, PSN_B, va, rkey,
			      2 * MTU));
	ASSERT_EQ(0, sent_moves_by(s0, 4));
	ASSERT_EQ(0, read_req(&self->as_a, qb->qp_num, PSN_B + 1, va + MTU,
			      rkey, MTU));
	ASSERT_EQ(0, sent_moves_by(s0, 5));
	/* never executed (PSN behind it), longer, moved address: nothing */
	ASSERT_EQ(0, read_req(&self->as_a, qb->qp_num, PSN_B - 100, va, rkey,
			      64 * MTU));
	ASSERT_EQ(0, read_req(&self->as_a, qb->qp_num, PSN_B, va, rkey,
			      3 * MTU));
	ASSERT_EQ(0, read_req(&self->as_a, qb->qp_num, PSN_B + 1, va, rkey,
			      MTU));
	ASSERT_EQ(0, sent_moves_by(s0, 5));
	EXPECT_EQ(d0 + 3, remu_hw_counter("remu1", "rcvd_stale_dup", true));
	EXPECT_EQ(IBV_QPS_RTS, remu_qp_state(qb));
	ibv_destroy_qp(qb);
}

/* a READ that is a long way from its end: 256 MiB, 262144 responses */
#define BIG_READ	(256u << 20)
#define BIG_NPKTS	(BIG_READ / MTU)
/* what destroy_qp or modify_qp(RESET) may take with a READ in progress */
#define STOP_BOUND_S	3.0

/* remu1's sent_pkts reaches @want within 20 s; its value */
static long long sent_reaches(long long want)
{
	long long v = -1;
	int i;

	for (i = 0; i < 1000; i++) {
		v = remu_hw_counter("remu1", "sent_pkts", true);
		if (v >= want)
			break;
		usleep(20000);
	}
	return v;
}

/* remu1's sent_pkts once it has not moved for 0.3 s; -1: still moving at 10 s */
static long long sent_settles(void)
{
	long long v = remu_hw_counter("remu1", "sent_pkts", true), w;
	int i;

	for (i = 0; i < 33; i++) {
		usleep(300000);
		w = remu_hw_counter("remu1", "sent_pkts", true);
		if (w == v)
			return v;
		v = w;
	}
	printf("# remu1 sent_pkts still moving after 10 s\n");
	return -1;
}

/*
 * Start a BIG_READ through @rkey at @va to @q (PSN_B), wait until its
 * responses flow, and print their rate and what the whole READ would
 * take at it; the sent_pkts count before it in *@s0.
 */
static int big_read_flows(struct remu_forge *f, struct ibv_qp *q,
			  uint64_t va, uint32_t rkey, long long *s0)
{
	long long s1, s2;
	double t1, t2;

	*s0 = remu_hw_counter("remu1", "sent_pkts", true);
	if (read_req(f, q->qp_num, PSN_B, va, rkey, BIG_READ))
		return -1;
	s1 = sent_reaches(*s0 + 256);
	t1 = remu_now();
	usleep(500000);
	s2 = remu_hw_counter("remu1", "sent_pkts", true);
	t2 = remu_now();
	if (s1 < *s0 + 256 || s2 <= s1)
		return -1;
	printf("# READ of %u responses: %.0f responses/s, whole READ ~%.1f s\n",
	       BIG_NPKTS, (s2 - s1) / (t2 - t1),
	       BIG_NPKTS / ((s2 - s1) / (t2 - t1)));
	return 0;
}

/*
 * @what, which took @t seconds, stopped the big READ whose responses
 * had reached @s0 on remu1's sent_pkts: within STOP_BOUND_S, and short
 * of its end
 */
static void expect_stopped(struct __test_metadata *_metadata,
			   const char *what, double t, long long s0)
{
	long long s1 = sent_settles();

	ASSERT_LE(0, s1);
	printf("# %s: %.3f s, %lld of %u responses sent\n", what, t, s1 - s0,
	       BIG_NPKTS);
	EXPECT_GT(STOP_BOUND_S, t);
	EXPECT_GT(s0 + BIG_NPKTS, s1);
}

/*
 * A READ's responses go out a bounded number per engine round, so a peer
 * asking for a huge READ (or repeating one) does not hold the QP's
 * engines for the whole of it: destroy_qp and modify_qp(RESET), which wait
 * for the round in progress, return within STOP_BOUND_S while the READ is
 * far from its end, and the READ stops there (remu1 sends no more).  A
 * duplicate READ that asks again for the rest of the one in progress
 * (from its next-to-last response) replaces it: it sends those 2 and the
 * READ nothing more, and the next request (a READ of 2 responses, at the
 * PSN after the big READ) is executed after them.  The memory is an implicit ODP MR over a never-written
 * anonymous mapping: the READ reads the zero page.  Control: a new QP's
 * READ gets its responses.
 */
TEST_F(hostile, read_in_progress_bounded)
{
	struct side *b = &self->b;
	struct ibv_mr *imr = ibv_reg_mr(b->pd, NULL, SIZE_MAX,
					IBV_ACCESS_ON_DEMAND |
					IBV_ACCESS_REMOTE_READ);
	void *map = mmap(NULL, BIG_READ, PROT_READ,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	struct ibv_qp_attr ra = { .qp_state = IBV_QPS_RESET };
	uint64_t va = (uintptr_t)map;
	long long s0, s1;
	struct ibv_qp *qb;
	double t;

	ASSERT_NE(NULL, imr);
	ASSERT_NE(MAP_FAILED, map);

	/* destroy_qp with the READ in progress */
	qb = qp_towards(b, IBV_QPT_RC, GHOST_QPN, &self->a, PSN_B);
	ASSERT_NE(NULL, qb);
	ASSERT_EQ(0, big_read_flows(&self->as_a, qb, va, imr->rkey, &s0));
	t = remu_now();
	EXPECT_EQ(0, ibv_destroy_qp(qb));
	expect_stopped(_metadata, "destroy_qp", remu_now() - t, s0);

	/* modify_qp(RESET) with the READ in progress */
	qb = qp_towards(b, IBV_QPT_RC, GHOST_QPN, &self->a, PSN_B);
	ASSERT_NE(NULL, qb);
	ASSERT_EQ(0, big_read_flows(&self->as_a, qb, va, imr->rkey, &s0));
	t = remu_now();
	EXPECT_EQ(0, ibv_modify_qp(qb, &ra, IBV_QP_STATE));
	expect_stopped(_metadata, "modify_qp(RESET)", remu_now() - t, s0);
	EXPECT_EQ(IBV_QPS_RESET, remu_qp_state(qb));
	EXPECT_EQ(0, ibv_destroy_qp(qb));

	/* a duplicate replaces it; the next request comes after it */
	qb = qp_towards(b, IBV_QPT_RC, GHOST_QPN, &self->a, PSN_B);
	ASSERT_NE(NULL, qb);
	ASSERT_EQ(0, big_read_flows(&self->as_a, qb, va, imr->rkey, &s0));
	/* from its next-to-last response: 2, and nothing of it after */
	ASSERT_EQ(0, read_req(&self->as_a, qb->qp_num, PSN_B + BIG_NPKTS - 2,
			      va + BIG_READ - 2 * MTU, imr->rkey, 2 * MTU));
	ASSERT_EQ(0, read_req(&self->as_a, qb->qp_num, PSN_B + BIG_NPKTS,
			      (uintptr_t)b->buf, b->mr->rkey, 2 * MTU));
	s1 = sent_settles();
	ASSERT_LE(0, s1);
	printf("# a duplicate replaced it: %lld of %u responses sent\n",
	       s1 - s0, BIG_NPKTS);
	EXPECT_GT(s0 + BIG_NPKTS, s1);
	EXPECT_EQ(IBV_QPS_RTS, remu_qp_state(qb));
	/* the request after it was executed: a duplicate of it is too */
	ASSERT_EQ(0, read_req(&self->as_a, qb->qp_num, PSN_B + BIG_NPKTS,
			      (uintptr_t)b->buf, b->mr->rkey, 2 * MTU));
	EXPECT_EQ(0, sent_moves_by(s1, 2));
	EXPECT_EQ(0, ibv_destroy_qp(qb));

	/* control: the device works, a READ on a new QP is answered */
	qb = qp_towards(b, IBV_QPT_RC, GHOST_QPN, &self->a, PSN_B);
	ASSERT_NE(NULL, qb);
	s0 = remu_hw_counter("remu1", "sent_pkts", true);
	ASSERT_EQ(0, read_req(&self->as_a, qb->qp_num, PSN_B,
			      (uintptr_t)b->buf, b->mr->rkey, 2 * MTU));
	EXPECT_EQ(0, sent_moves_by(s0, 2));
	EXPECT_EQ(0, ibv_destroy_qp(qb));
	EXPECT_EQ(0, ibv_dereg_mr(imr));
	munmap(map, BIG_READ);
}

/* a READ longer than max_msg_sz is an invalid request: QP_REQ_ERR */
TEST_F(hostile, read_longer_than_max_msg)
{
	struct side *b = &self->b;
	struct ibv_qp *qb = qp_towards(b, IBV_QPT_RC, GHOST_QPN, &self->a,
				       PSN_B);
	struct ibv_async_event ev;
	struct ibv_port_attr pa;

	ASSERT_NE(NULL, qb);
	ASSERT_EQ(0, ibv_query_port(b->ctx, 1, &pa));
	ASSERT_EQ(0x80000000u, pa.max_msg_sz);
	ASSERT_EQ(0, read_req(&self->as_a, qb->qp_num, PSN_B,
			      (uintptr_t)b->buf, b->mr->rkey,
			      pa.max_msg_sz + 1));
	ASSERT_EQ(0, remu_next_async(b->ctx, 2000, &ev));
	EXPECT_EQ(IBV_EVENT_QP_REQ_ERR, ev.event_type);
	EXPECT_EQ(IBV_QPS_ERR, remu_qp_state(qb));
	ibv_destroy_qp(qb);
}

/*
 * The first packet of a WRITE whose RETH length is longer than max_msg_sz,
 * into an implicit ODP MR (the whole address space, so the key's range
 * does not refuse it first): RC, an invalid request (QP_REQ_ERR, the QP
 * in ERR); UC, the WRITE is dropped (rcvd_uc_bad_write) and the QP stays
 * in RTS.  Nothing is written either way.
 */
TEST_F(hostile, write_longer_than_max_msg)
{
	struct side *b = &self->b;
	unsigned int acc = IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE;
	struct ibv_mr *imr = ibv_reg_mr(b->pd, NULL, SIZE_MAX, acc);
	unsigned char *dst = b->buf + 8192, zero[MTU] = {}, data[MTU];
	long long bad0 = remu_hw_counter("remu1", "rcvd_uc_bad_write", true);
	struct ibv_qp *qb = NULL, *ub = NULL;
	struct ibv_async_event ev;
	struct remu_fpkt p;

	ASSERT_NE(NULL, imr);
	memset(data, 0x5a, sizeof(data));
	memset(dst, 0, MTU);
	qb = qp_towards(b, IBV_QPT_RC, GHOST_QPN, &self->a, PSN_B);
	ub = qp_towards(b, IBV_QPT_UC, GHOST_QPN + 1, &self->a, PSN_B);
	ASSERT_NE(NULL, qb);
	ASSERT_NE(NULL, ub);

	rf_bth(&p, RF_UC | RF_WRITE_FIRST, ub->qp_num, PSN_B);
	rf_reth(&p, (uintptr_t)dst, imr->rkey, 0x80000001u);
	rf_payload(&p, data, MTU);
	ASSERT_EQ(0, remu_forge_send(&self->as_a, &p));
	EXPECT_EQ(bad0 + 1, counter_reaches("remu1", "rcvd_uc_bad_write",
					    bad0 + 1));
	EXPECT_EQ(IBV_QPS_RTS, remu_qp_state(ub));

	rf_bth(&p, RF_RC | RF_WRITE_FIRST, qb->qp_num, PSN_B);
	rf_reth(&p, (uintptr_t)dst, imr->rkey, 0x80000001u);
	rf_payload(&p, data, MTU);
	ASSERT_EQ(0, remu_forge_send(&self->as_a, &p));
	ASSERT_EQ(0, remu_next_async(b->ctx, 2000, &ev));
	EXPECT_EQ(IBV_EVENT_QP_REQ_ERR, ev.event_type);
	EXPECT_EQ(qb, ev.element.qp);
	EXPECT_EQ(IBV_QPS_ERR, remu_qp_state(qb));
	EXPECT_EQ(0, memcmp(dst, zero, MTU));
	ibv_destroy_qp(ub);
	ibv_destroy_qp(qb);
	EXPECT_EQ(0, ibv_dereg_mr(imr));
}

/* IBA 1.5 rights (rdma-core 45's names; libibverbs 44 lacks them) */
#define ACCESS_FLUSH_GLOBAL	(1 << 8)
#define ACCESS_FLUSH_PERSISTENT	(1 << 9)

/* a FLUSH (FETH bits @feth) of @len at @va to @q, PSN @psn, as remu0 */
static int flush_req(struct remu_forge *f, uint32_t q, uint32_t psn,
		     uint32_t feth, uint64_t va, uint32_t rkey, uint32_t len)
{
	struct remu_fpkt p;

	rf_bth(&p, RF_RC | RF_FLUSH, q, psn);
	rf_be32(&p, feth);
	rf_reth(&p, va, rkey, len);
	return remu_forge_send(f, &p);
}

/* an ATOMIC_WRITE of @val (@len payload bytes) at @va to @q, as remu0 */
static int atomic_write_req(struct remu_forge *f, uint32_t q, uint32_t psn,
			    uint64_t va, uint32_t rkey, const void *val,
			    uint32_t len)
{
	struct remu_fpkt p;

	rf_bth(&p, RF_RC | RF_ATOMIC_WRITE, q, psn);
	rf_reth(&p, va, rkey, len);
	rf_payload(&p, val, len);
	return remu_forge_send(f, &p);
}

/* the next async event of @ctx is @type and @qp went to ERR */
static int qp_failed(struct ibv_context *ctx, struct ibv_qp *qp, int type)
{
	struct ibv_async_event ev;

	if (remu_next_async(ctx, 2000, &ev) || ev.event_type != type)
		return -1;
	return remu_qp_state(qp) == IBV_QPS_ERR ? 0 : -1;
}

/*
 * The responder's FLUSH and ATOMIC_WRITE (IBA 1.5), driven by a forged
 * requester: each is answered by one empty READ response; a duplicate is
 * answered again but not executed again (an ATOMIC_WRITE repeated after
 * the memory changed must not undo the change); FLUSH needs the FLUSH
 * right of its placement type on the QP and on the key (MR level: the
 * whole MR); ATOMIC_WRITE exactly 8 aligned bytes.
 */
TEST_F(hostile, flush_atomic_write_responder)
{
	static const uint64_t v1 = 0x1122334455667788ull, v2 = 0xcafe;
	struct side *b = &self->b;
	const unsigned int qacc = REMU_ACCESS_REMOTE_ALL | ACCESS_FLUSH_GLOBAL;
	struct ibv_mr *fmr = ibv_reg_mr(b->pd, b->buf + 65536, 65536,
					IBV_ACCESS_LOCAL_WRITE |
					IBV_ACCESS_REMOTE_WRITE |
					ACCESS_FLUSH_GLOBAL);
	uint64_t *tgt = (uint64_t *)(b->buf + 65536);
	uint64_t fva = (uintptr_t)tgt;
	struct ibv_qp *qb = qp_towards_acc(b, IBV_QPT_RC, GHOST_QPN, &self->a,
					   PSN_B, qacc);
	long long s0 = remu_hw_counter("remu1", "sent_pkts", true);
	struct remu_forge *f = &self->as_a;
	char why[256];

	/* a kernel without IBA 1.5 (6.1): no FLUSH right can be registered */
	if (remu_absent("remu1", "flush", why, sizeof(why))) {
		EXPECT_EQ(NULL, fmr);
		SKIP(return, "%s", why);
	}
	ASSERT_NE(NULL, fmr);
	ASSERT_NE(NULL, qb);
	/* not persistent memory: no FLUSH_PERSISTENT right can be had */
	EXPECT_EQ(NULL, ibv_reg_mr(b->pd, b->buf, 4096, IBV_ACCESS_LOCAL_WRITE |
				   ACCESS_FLUSH_PERSISTENT));
	EXPECT_EQ(EINVAL, errno);

	ASSERT_EQ(0, atomic_write_req(f, qb->qp_num, PSN_B, fva, fmr->rkey,
				      &v1, 8));
	ASSERT_EQ(0, sent_moves_by(s0, 1));
	EXPECT_EQ(v1, *tgt);
	*tgt = v2;
	ASSERT_EQ(0, atomic_write_req(f, qb->qp_num, PSN_B, fva, fmr->rkey,
				      &v1, 8));
	ASSERT_EQ(0, sent_moves_by(s0, 2));
	EXPECT_EQ(v2, *tgt);	/* answered again, not done again */
	/* FLUSH of a range, then of the whole MR, then a duplicate */
	ASSERT_EQ(0, flush_req(f, qb->qp_num, PSN_B + 1, RF_FLUSH_GLOBAL,
			       fva, fmr->rkey, 4096));
	ASSERT_EQ(0, flush_req(f, qb->qp_num, PSN_B + 2,
			       RF_FLUSH_GLOBAL | RF_FLUSH_MR, 0,
			       fmr->rkey, 0));
	ASSERT_EQ(0, flush_req(f, qb->qp_num, PSN_B + 1, RF_FLUSH_GLOBAL,
			       fva, fmr->rkey, 4096));
	ASSERT_EQ(0, sent_moves_by(s0, 5));
	EXPECT_EQ(IBV_QPS_RTS, remu_qp_state(qb));

	/* the key lacks the right (b's own MR has no FLUSH_GLOBAL) */
	ASSERT_EQ(0, flush_req(f, qb->qp_num, PSN_B + 3, RF_FLUSH_GLOBAL,
			       (uintptr_t)b->buf, b->mr->rkey, 64));
	EXPECT_EQ(0, qp_failed(b->ctx, qb, IBV_EVENT_QP_ACCESS_ERR));
	ibv_destroy_qp(qb);

	/* the QP lacks it */
	qb = qp_towards(b, IBV_QPT_RC, GHOST_QPN, &self->a, PSN_B);
	ASSERT_NE(NULL, qb);
	ASSERT_EQ(0, flush_req(f, qb->qp_num, PSN_B, RF_FLUSH_GLOBAL, fva,
			       fmr->rkey, 64));
	EXPECT_EQ(0, qp_failed(b->ctx, qb, IBV_EVENT_QP_ACCESS_ERR));
	ibv_destroy_qp(qb);

	/* ATOMIC_WRITE of 4 bytes: an invalid request, nothing written */
	qb = qp_towards_acc(b, IBV_QPT_RC, GHOST_QPN, &self->a, PSN_B, qacc);
	ASSERT_NE(NULL, qb);
	ASSERT_EQ(0, atomic_write_req(f, qb->qp_num, PSN_B, fva, fmr->rkey,
				      &v1, 4));
	EXPECT_EQ(0, qp_failed(b->ctx, qb, IBV_EVENT_QP_REQ_ERR));
	EXPECT_EQ(v2, *tgt);
	ibv_destroy_qp(qb);
	EXPECT_EQ(0, ibv_dereg_mr(fmr));
}

/*
 * Keys are not a counter: 64 registrations' keys have varied low bytes,
 * not each the last one plus one
 */
TEST(keys_vary)
{
	struct ibv_context *ctx = remu_open("remu0");
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	static uint8_t buf[4096];
	unsigned int i, seen[256] = {}, distinct = 0, step1 = 0;
	uint32_t prev = 0;

	ASSERT_NE(NULL, pd);
	for (i = 0; i < 64; i++) {
		struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf),
					       IBV_ACCESS_LOCAL_WRITE);

		ASSERT_NE(NULL, mr);
		if (!seen[mr->lkey & 0xff]++)
			distinct++;
		if (i && ((mr->lkey - prev) & 0xff) == 1)
			step1++;
		prev = mr->lkey;
		ASSERT_EQ(0, ibv_dereg_mr(mr));
	}
	EXPECT_GT(distinct, 24);
	EXPECT_LT(step1, 8);
	remu_close_objs(NULL, NULL, NULL, NULL, pd, ctx);
}

TEST_HARNESS_MAIN
