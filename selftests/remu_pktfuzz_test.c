// SPDX-License-Identifier: GPL-2.0
/*
 * remu_pktfuzz_test - a RoCEv2 packet fuzzer against live QPs, while a
 * validated transfer runs beside it (docs/security.md, "The packet
 * fuzzer").
 *
 * remu0 (init namespace, 10.77.0.1) and remu1 (namespace peer,
 * 10.77.0.2) hold fuzzed QPs of every type and state: RC and UC pairs
 * connected across the veth and an RC pair in loopback on remu0, in RTS,
 * with traffic of their own, reset and reconnected, moved to SQD and
 * back, or failed, as the run goes; RC, UC and UD QPs kept in RESET,
 * INIT, RTR, SQD and ERR (RC/UC ones connected to a QPN nobody holds at
 * the other device's address); UD QPs in RTS; and the GSI QP (QP1,
 * ib_mad's) of each device.  remu_forge_lib.h sends valid-looking packets
 * (the right extended headers for the opcode, a good ICRC) with mutated
 * fields: opcode (the target's transport, another one, any byte), QPN
 * (live ones, their neighbours, 0, 1, 0xffffff, random), PSN (around the
 * QP's, far), lengths, pad, RETH/AtomicETH/FETH values (inside, at the
 * edges of and outside MRs whose keys the fuzzer knows, a key with no
 * remote right, random keys), AETH syndromes, DETH Q_Keys, payloads
 * (none, truncated headers, up to 8 KiB), header bits (SE, M, TVer,
 * P_Key, reserved bits, AckReq), random bit flips, a wrong ICRC or none;
 * from each QP's real peer address (so they pass the path check), and
 * from third addresses (10.77.0.9 on v0, 10.77.0.8 on v1).
 *
 * Meanwhile a thread with contexts of its own runs RC WRITE, READ and
 * SEND between remu0 and remu1 in a loop, checking every byte.  Its QPs
 * are only targeted from third addresses (so no forged packet can
 * legitimately break them); every iteration must succeed.
 *
 * At the end: the transfer finished byte for byte; nothing outside the
 * registered ranges changed (every MR a fuzzed QP can reach sits in a
 * mapping whose bytes before and after the MR, in the MR's own first and
 * last pages too, hold a canary pattern) and the MR with no remote
 * rights is untouched; every datagram that reached remu's UDP port or
 * its loopback path is counted by remu's wire layer (the namespaces' UDP
 * InDatagrams plus both devices' loopback_pkts equal rcvd_pkts plus the
 * wire drop counters plus rx_no_device); the object
 * counts are back to their baseline; and a fresh connection still moves
 * data byte for byte.  The per-counter figures are printed ("# fuzz:").
 *
 * Deterministic for a seed (REMU_FUZZ_SEED, printed; the time otherwise),
 * bounded in time: REMU_FUZZ_SECONDS (default 20) of fuzzing.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>

#include "kselftest_harness.h"
#include "remu_lib.h"
#include "remu_forge_lib.h"

#define PAGE		4096
#define MTU_BYTES	1024
#define ARENA_PAGES	64
#define MR_FIRST_PAGE	8
#define MR_LAST_PAGE	56	/* exclusive */
#define MR_EDGE		100	/* the MR starts/ends this far into a page */
#define QP1_QKEY	0x80010000u
#define FUZZ_QKEY	0x11111111u
#define GHOST_QPN	0xabcdef
#define QPS_PER_SIDE	32
#define ADDR_A		"10.77.0.1"
#define ADDR_B		"10.77.0.2"
#define THIRD_A		"10.77.0.8"	/* on v1 (peer), towards remu0 */
#define THIRD_B		"10.77.0.9"	/* on v0 (init), towards remu1 */

/* ---- memory with canaries --------------------------------------------- */

/*
 * An arena of ARENA_PAGES pages filled with a pattern; the MR covers
 * [lo, hi), which starts and ends MR_EDGE bytes inside a page: every
 * byte outside it must keep the pattern.
 */
struct arena {
	uint8_t *base;
	size_t lo, hi;
	uint8_t salt;
	struct ibv_mr *mr;
};

static uint8_t pattern(const struct arena *a, size_t i)
{
	return (uint8_t)(i * 131 + a->salt);
}

static int arena_make(struct arena *a, struct ibv_pd *pd, unsigned int access,
		      uint8_t salt)
{
	size_t i, size = ARENA_PAGES * PAGE;

	a->base = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (a->base == MAP_FAILED) {
		a->base = NULL;
		return -1;
	}
	a->salt = salt;
	for (i = 0; i < size; i++)
		a->base[i] = pattern(a, i);
	a->lo = MR_FIRST_PAGE * PAGE + MR_EDGE;
	a->hi = MR_LAST_PAGE * PAGE - MR_EDGE;
	a->mr = ibv_reg_mr(pd, a->base + a->lo, a->hi - a->lo, access);
	return a->mr ? 0 : -1;
}

/* the first byte outside [lo, hi) (@all: anywhere) that lost the pattern */
static long arena_damage(const struct arena *a, bool all)
{
	size_t i;

	if (!a->base)
		return -1;
	for (i = 0; i < ARENA_PAGES * PAGE; i++) {
		if (!all && i == a->lo)
			i = a->hi;
		if (a->base[i] != pattern(a, i))
			return i;
	}
	return -1;
}

static void arena_free(struct arena *a)
{
	if (a->mr)
		ibv_dereg_mr(a->mr);
	if (a->base)
		munmap(a->base, ARENA_PAGES * PAGE);
	memset(a, 0, sizeof(*a));
}

/* ---- the fuzzed side -------------------------------------------------- */

enum { F_TO_A_PEER, F_TO_A_THIRD, F_TO_A_SELF, F_TO_B_PEER, F_TO_B_THIRD,
       F_COUNT };
static const char *const forge_name[F_COUNT] = {
	"remu1's address -> remu0", "third -> remu0",
	"remu0's address -> remu0 (lo)", "remu0's address -> remu1",
	"third -> remu1",
};

struct side;

/*
 * A fuzzed QP.  @live: an RC/UC pair member in RTS that carries traffic
 * and is churned (@peer is its partner); otherwise it stays in @state.
 */
struct fqp {
	struct ibv_qp *qp;
	struct side *s;
	struct fqp *peer;
	enum ibv_qp_type type;
	int state;
	bool live;
	bool gsi;
	uint32_t qpn;
	uint32_t psn;
	int peer_forge;		/* the forge with its peer's address */
};

struct side {
	const char *dev;
	int id;			/* 0: remu0, 1: remu1 */
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	union ibv_gid gid;
	int gidx;
	struct arena rw, odp, secret;
	struct ibv_ah *ah;	/* towards the other side (UD traffic) */
	struct fqp q[QPS_PER_SIDE];
	int nq;
	int third_forge, peer_forge;
};

/* ---- the validated transfer ------------------------------------------- */

#define XFER_MAX	(32 * 1024)

struct xfer {
	struct side a, b;	/* ctx/pd/cq only */
	struct ibv_qp *qa, *qb;
	struct arena ma, mb;	/* rw MRs with canaries */
	pthread_t thread;
	atomic_bool stop;
	long iterations;
	long long bytes;
	int failed;		/* 0, or the line of the failed check */
	int status;
	long fail_iter;
};

/* the whole run */
struct fuzz {
	struct side s[2];
	struct remu_forge f[F_COUNT];
	struct xfer x;
	uint32_t xfer_qpn[2];
	long sent[F_COUNT], send_fail, wc_ok, wc_err, async_events;
	long opclass[4];	/* target's transport, other transport, any, truncated */
	long resets, sqd, errs;
};

static const unsigned int RW_ACCESS = IBV_ACCESS_LOCAL_WRITE |
	REMU_ACCESS_REMOTE_ALL;

static struct ibv_qp *qp_make(struct side *s, enum ibv_qp_type type)
{
	static const struct ibv_qp_cap cap = {
		.max_send_wr = 32, .max_recv_wr = 32,
		.max_send_sge = 2, .max_recv_sge = 2, .max_inline_data = 64,
	};

	return remu_create_qp(s->pd, s->cq, type, &cap);
}

/* INIT of a UD QP, then on to @state (RTR, RTS, SQD, ERR) */
static int ud_to(struct ibv_qp *qp, int state)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qkey = FUZZ_QKEY };

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_QKEY))
		return -1;
	if (state == IBV_QPS_INIT)
		return 0;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return -1;
	if (state == IBV_QPS_RTR)
		return 0;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		return -1;
	if (state == IBV_QPS_RTS)
		return 0;
	a.qp_state = state;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

/* RC/UC @qp of @s towards @qpn at @peer's address, PSN @psn, to @state */
static int conn_to(struct ibv_qp *qp, struct side *s, struct side *peer,
		   uint32_t qpn, uint32_t psn, int state)
{
	struct remu_conn_attr ra = REMU_RC_ATTR(psn);
	struct remu_conn_dest d = { .qpn = qpn, .gid = peer->gid,
				    .mtu = IBV_MTU_1024 };
	struct ibv_qp_attr a = {};

	ra.reset = true;
	ra.timeout = 16;	/* 268 ms: forged NAKs and losses recover */
	ra.rtr_only = state == IBV_QPS_RTR;
	if (state == IBV_QPS_RESET) {
		a.qp_state = IBV_QPS_RESET;
		return ibv_modify_qp(qp, &a, IBV_QP_STATE);
	}
	if (state == IBV_QPS_INIT) {
		a.qp_state = IBV_QPS_RESET;
		if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
			return -1;
		a.qp_state = IBV_QPS_INIT;
		a.port_num = 1;
		a.qp_access_flags = REMU_ACCESS_REMOTE_ALL;
		return ibv_modify_qp(qp, &a, IBV_QP_STATE |
				     IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				     IBV_QP_ACCESS_FLAGS);
	}
	if (remu_qp_connect(qp, &ra, s->gidx, &d))
		return -1;
	if (state == IBV_QPS_RTR || state == IBV_QPS_RTS)
		return 0;
	a.qp_state = state;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

static struct fqp *fqp_add(struct side *s, struct ibv_qp *qp,
			   enum ibv_qp_type type, int state)
{
	struct fqp *q = &s->q[s->nq++];

	q->qp = qp;
	q->s = s;
	q->type = type;
	q->state = state;
	q->qpn = qp ? qp->qp_num : 1;
	q->gsi = !qp;
	q->peer_forge = s->peer_forge;
	return q;
}

static int side_open(struct side *s, const char *dev, int id, bool odp)
{
	s->dev = dev;
	s->id = id;
	s->ctx = remu_open(dev);
	s->gidx = s->ctx ? remu_ipv4_gid(s->ctx, &s->gid) : -1;
	s->pd = s->gidx >= 0 ? ibv_alloc_pd(s->ctx) : NULL;
	s->cq = s->pd ? ibv_create_cq(s->ctx, 4096, NULL, NULL, 0) : NULL;
	if (!s->cq)
		return -1;
	if (fcntl(s->ctx->async_fd, F_SETFL,
		  fcntl(s->ctx->async_fd, F_GETFL) | O_NONBLOCK))
		return -1;
	if (arena_make(&s->rw, s->pd, RW_ACCESS, 0x10 + id) ||
	    arena_make(&s->secret, s->pd, IBV_ACCESS_LOCAL_WRITE, 0x30 + id))
		return -1;
	if (odp && arena_make(&s->odp, s->pd,
			      RW_ACCESS | IBV_ACCESS_ON_DEMAND, 0x50 + id))
		return -1;
	return 0;
}

static void side_close(struct side *s)
{
	int i;

	for (i = 0; i < s->nq; i++)
		if (s->q[i].qp)
			ibv_destroy_qp(s->q[i].qp);
	s->nq = 0;
	if (s->ah)
		ibv_destroy_ah(s->ah);
	arena_free(&s->rw);
	arena_free(&s->odp);
	arena_free(&s->secret);
	remu_close_objs(NULL, NULL, NULL, s->cq, s->pd, s->ctx);
	memset(s, 0, sizeof(*s));
}

/* a UD AH from @s to @peer */
static struct ibv_ah *ah_to(struct side *s, struct side *peer)
{
	struct ibv_ah_attr a;

	remu_set_av(&a, &peer->gid, s->gidx, 0);
	return ibv_create_ah(s->pd, &a);
}

/* a live RC/UC pair between @s and @t (may be the same side) */
static int live_pair(struct side *s, struct side *t, enum ibv_qp_type type)
{
	struct ibv_qp *x = qp_make(s, type), *y = qp_make(t, type);
	uint32_t psn = remu_rnd_n(1 << 24);
	struct fqp *p, *q;

	if (!x || !y || conn_to(x, s, t, y->qp_num, psn, IBV_QPS_RTS) ||
	    conn_to(y, t, s, x->qp_num, psn, IBV_QPS_RTS))
		return -1;
	p = fqp_add(s, x, type, IBV_QPS_RTS);
	q = fqp_add(t, y, type, IBV_QPS_RTS);
	p->live = q->live = true;
	p->peer = q;
	q->peer = p;
	p->psn = q->psn = psn;
	if (s == t)
		p->peer_forge = q->peer_forge = F_TO_A_SELF;
	return 0;
}

/* the fixed-state QPs of @s (RC/UC towards a ghost at @t's address) */
static int fixed_qps(struct side *s, struct side *t)
{
	static const int rcuc[] = { IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR,
				    IBV_QPS_SQD, IBV_QPS_ERR };
	static const int ud[] = { IBV_QPS_RESET, IBV_QPS_RTR, IBV_QPS_RTS,
				  IBV_QPS_RTS, IBV_QPS_SQD, IBV_QPS_ERR };
	enum ibv_qp_type types[2] = { IBV_QPT_RC, IBV_QPT_UC };
	unsigned int i, k;

	for (k = 0; k < 2; k++)
		for (i = 0; i < sizeof(rcuc) / sizeof(rcuc[0]); i++) {
			struct ibv_qp *qp = qp_make(s, types[k]);
			uint32_t psn = remu_rnd_n(1 << 24);

			if (!qp || conn_to(qp, s, t, GHOST_QPN, psn, rcuc[i]))
				return -1;
			fqp_add(s, qp, types[k], rcuc[i])->psn = psn;
		}
	for (i = 0; i < sizeof(ud) / sizeof(ud[0]); i++) {
		struct ibv_qp *qp = qp_make(s, IBV_QPT_UD);

		if (!qp || (ud[i] != IBV_QPS_RESET && ud_to(qp, ud[i])))
			return -1;
		fqp_add(s, qp, IBV_QPT_UD, ud[i]);
	}
	fqp_add(s, NULL, IBV_QPT_UD, IBV_QPS_RTS);	/* QP1 */
	return 0;
}

/* ---- the validated transfer ------------------------------------------- */

#define XCHECK(cond) do {						\
	if (!(cond)) {							\
		x->failed = __LINE__;					\
		x->fail_iter = x->iterations;				\
		return -1;						\
	}								\
} while (0)

static int xfer_open(struct xfer *x)
{
	struct remu_conn_attr ra = REMU_RC_ATTR(0x777);
	struct remu_conn_dest da, db;
	struct side *a = &x->a, *b = &x->b;
	static const struct ibv_qp_cap cap = {
		.max_send_wr = 8, .max_recv_wr = 8,
		.max_send_sge = 1, .max_recv_sge = 1,
	};

	a->ctx = remu_open("remu0");
	b->ctx = remu_open("remu1");
	if (!a->ctx || !b->ctx)
		return -1;
	a->gidx = remu_ipv4_gid(a->ctx, &a->gid);
	b->gidx = remu_ipv4_gid(b->ctx, &b->gid);
	a->pd = ibv_alloc_pd(a->ctx);
	b->pd = ibv_alloc_pd(b->ctx);
	a->cq = a->pd ? ibv_create_cq(a->ctx, 64, NULL, NULL, 0) : NULL;
	b->cq = b->pd ? ibv_create_cq(b->ctx, 64, NULL, NULL, 0) : NULL;
	if (!a->cq || !b->cq || arena_make(&x->ma, a->pd, RW_ACCESS, 0x70) ||
	    arena_make(&x->mb, b->pd, RW_ACCESS, 0x71))
		return -1;
	x->qa = ibv_create_qp(a->pd, &(struct ibv_qp_init_attr){
		.send_cq = a->cq, .recv_cq = a->cq, .cap = cap,
		.qp_type = IBV_QPT_RC });
	x->qb = ibv_create_qp(b->pd, &(struct ibv_qp_init_attr){
		.send_cq = b->cq, .recv_cq = b->cq, .cap = cap,
		.qp_type = IBV_QPT_RC });
	if (!x->qa || !x->qb)
		return -1;
	/* patient: the fuzzer loads the CPUs and the veth's backlog */
	ra.timeout = 17;
	da = (struct remu_conn_dest){ .qpn = x->qb->qp_num, .gid = b->gid,
				      .mtu = IBV_MTU_4096 };
	db = (struct remu_conn_dest){ .qpn = x->qa->qp_num, .gid = a->gid,
				      .mtu = IBV_MTU_4096 };
	if (remu_qp_connect(x->qa, &ra, a->gidx, &da) ||
	    remu_qp_connect(x->qb, &ra, b->gidx, &db))
		return -1;
	return 0;
}

static void xfer_close(struct xfer *x)
{
	if (x->qa)
		ibv_destroy_qp(x->qa);
	if (x->qb)
		ibv_destroy_qp(x->qb);
	arena_free(&x->ma);
	arena_free(&x->mb);
	remu_close_objs(NULL, NULL, NULL, x->a.cq, x->a.pd, x->a.ctx);
	remu_close_objs(NULL, NULL, NULL, x->b.cq, x->b.pd, x->b.ctx);
	x->qa = x->qb = NULL;
	memset(&x->a, 0, sizeof(x->a));
	memset(&x->b, 0, sizeof(x->b));
}

/*
 * One completion of @cq within @secs, polling with short sleeps (the
 * fuzzer needs the CPUs): its status, or -1
 */
static int xpoll(struct ibv_cq *cq, struct ibv_wc *wc, double secs)
{
	double end = remu_now() + secs;
	int n;

	do {
		n = ibv_poll_cq(cq, 1, wc);
		if (n)
			return n < 0 ? -1 : (int)wc->status;
		usleep(50);
	} while (remu_now() < end);
	return -1;
}

/* @wr posted signalled on @qp, its completion awaited on @cq */
static int xrun(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;
	struct ibv_wc wc;

	wr->send_flags = IBV_SEND_SIGNALED;
	if (ibv_post_send(qp, wr, &bad))
		return -1;
	return xpoll(cq, &wc, 30);
}

/*
 * One iteration, with lengths and offsets from @seed: WRITE a random
 * block from remu0 into remu1's MR, READ it back into another place of
 * remu0's MR, SEND it from remu1 into a receive on remu0; every byte of
 * each copy compared.
 */
static int xfer_once(struct xfer *x, uint64_t seed)
{
	uint8_t *ma = x->ma.base + x->ma.lo, *mb = x->mb.base + x->mb.lo;
	size_t room = x->ma.hi - x->ma.lo;
	uint32_t len = 1 + seed % XFER_MAX;
	size_t src = (seed >> 20) % (room / 3 - XFER_MAX);
	size_t dst = (seed >> 36) % (room - XFER_MAX);
	size_t chk = room / 3 + (seed >> 44) % (room / 3 - XFER_MAX);
	size_t rcv = 2 * room / 3 + (seed >> 52) % (room / 3 - XFER_MAX);
	struct ibv_sge sge = { (uintptr_t)ma + src, len, x->ma.mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE };
	struct ibv_wc wc;
	size_t i;
	int st;

	for (i = 0; i < len; i++)
		ma[src + i] = (uint8_t)(seed >> (i % 7)) ^ (uint8_t)i;
	wr.wr.rdma.remote_addr = (uintptr_t)mb + dst;
	wr.wr.rdma.rkey = x->mb.mr->rkey;
	st = xrun(x->qa, x->a.cq, &wr);
	x->status = st;
	XCHECK(st == IBV_WC_SUCCESS);
	XCHECK(!memcmp(mb + dst, ma + src, len));
	sge.addr = (uintptr_t)ma + chk;
	wr.opcode = IBV_WR_RDMA_READ;
	st = xrun(x->qa, x->a.cq, &wr);
	x->status = st;
	XCHECK(st == IBV_WC_SUCCESS);
	XCHECK(!memcmp(ma + chk, ma + src, len));
	sge = (struct ibv_sge){ (uintptr_t)ma + rcv, len, x->ma.mr->lkey };
	XCHECK(!remu_post_recv(x->qa, 5, &sge, 1));
	sge = (struct ibv_sge){ (uintptr_t)mb + dst, len, x->mb.mr->lkey };
	wr = (struct ibv_send_wr){ .sg_list = &sge, .num_sge = 1,
				   .opcode = IBV_WR_SEND };
	st = xrun(x->qb, x->b.cq, &wr);
	x->status = st;
	XCHECK(st == IBV_WC_SUCCESS);
	st = xpoll(x->a.cq, &wc, 30);
	x->status = st;
	XCHECK(st == IBV_WC_SUCCESS && wc.byte_len == len);
	XCHECK(!memcmp(ma + rcv, ma + src, len));
	x->bytes += 3ll * len;
	return 0;
}

static void *xfer_main(void *arg)
{
	struct xfer *x = arg;
	uint64_t seed = 0x9e3779b97f4a7c15ull;

	while (!atomic_load(&x->stop)) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		if (xfer_once(x, seed ^ (seed >> 29)))
			break;
		x->iterations++;
	}
	return NULL;
}

/* ---- packets ---------------------------------------------------------- */

/* a 64-bit value near an interesting edge */
static uint64_t edge64(void)
{
	static const uint64_t v[] = { 0, 1, 7, 8, 0x7fffffff, 0x80000000,
				      0xffffffff, 0x100000000ull,
				      0x7fffffffffffffffull,
				      0xfffffffffffffff8ull, ~0ull };

	return v[remu_rnd_n(sizeof(v) / sizeof(v[0]))] + (remu_chance(30) ? remu_rnd_n(9) - 4 : 0);
}

/* an MR the fuzzer knows on the target's device, or NULL */
static const struct arena *pick_arena(struct side *s)
{
	switch (remu_rnd_n(6)) {
	case 0: case 1: case 2:
		return &s->rw;
	case 3:
		return s->odp.mr ? &s->odp : &s->rw;
	case 4:
		return &s->secret;
	}
	return NULL;
}

/* rkey, va and length of a RETH or AtomicETH */
static void pick_target(struct side *s, uint32_t *rkey, uint64_t *va,
			uint32_t *len, bool atomic)
{
	const struct arena *a = pick_arena(s);
	uint64_t lo, hi;

	*len = remu_chance(50) ? remu_rnd_n(3 * MTU_BYTES) :
	       remu_chance(50) ? (uint32_t)edge64() : remu_rnd_n(1 << 20);
	if (!a) {
		*rkey = remu_chance(50) ? (uint32_t)remu_rnd() :
			s->rw.mr->rkey + (remu_rnd_n(5) - 2) * (remu_chance(50) ? 1 : 256);
		*va = remu_chance(50) ? remu_rnd() : (uintptr_t)s->rw.base + remu_rnd_n(1 << 20);
		return;
	}
	*rkey = a->mr->rkey;
	lo = (uintptr_t)a->base + a->lo;
	hi = (uintptr_t)a->base + a->hi;
	switch (remu_rnd_n(5)) {
	case 0:		/* inside */
		*va = lo + remu_rnd_n(hi - lo);
		if (*len > hi - *va && remu_chance(70))
			*len = hi - *va;
		break;
	case 1:		/* at the end */
		*va = hi - remu_rnd_n(2 * MTU_BYTES);
		break;
	case 2:		/* before the start */
		*va = lo - remu_rnd_n(64);
		break;
	case 3:		/* just past the end */
		*va = hi + remu_rnd_n(64);
		break;
	default:
		*va = edge64();
	}
	if (atomic && remu_chance(80))
		*va &= ~7ull;
}

static uint8_t pick_syndrome(void)
{
	static const uint8_t v[] = { 0x00, 0x1f, 0x20, 0x21, 0x3f, 0x40,
				     0x5f, 0x60, 0x61, 0x62, 0x63, 0x64,
				     0x7f, 0x80, 0xff };

	return remu_chance(80) ? v[remu_rnd_n(sizeof(v))] : (uint8_t)remu_rnd();
}

/*
 * Build a packet of @opcode to @qpn of @s (@t: the fuzzed QP, if it is
 * one) with a PSN around @psn, then mutate it.  Returns how the ICRC
 * goes.
 */
static enum rf_icrc build(struct fuzz *z, struct remu_fpkt *p, uint8_t opcode,
			  struct side *s, const struct fqp *t, uint32_t qpn,
			  uint32_t psn)
{
	static uint8_t data[9000];
	unsigned int lay = rf_layout(opcode), i, n;
	uint32_t rkey, len, plen;
	uint64_t va;

	/* around the QP's PSN, or anywhere */
	if (remu_chance(75))
		psn += remu_rnd_n(200) - 40;
	else if (remu_chance(50))
		psn = remu_rnd_n(1 << 24);
	else
		psn += (1 << 23) + remu_rnd_n(3) - 1;
	rf_bth(p, opcode, qpn, psn);
	if (remu_chance(50))
		p->b[8] &= 0x7f;		/* AckReq off */
	if (remu_chance(10))
		p->b[1] |= remu_rnd_n(4) << 6;	/* SE, M */
	if (remu_chance(3))
		p->b[1] |= 1 + remu_rnd_n(15);	/* TVer */
	if (remu_chance(3)) {
		p->b[2] = remu_rnd();
		p->b[3] = remu_rnd();		/* P_Key */
	}
	if (remu_chance(8))
		p->b[4] = remu_rnd();		/* FECN, BECN, Resv6a */
	if (remu_chance(8))
		p->b[8] |= remu_rnd_n(128);		/* Resv7 */
	if (!lay && remu_chance(50))
		lay = rf_layout((opcode & 0x1f) | RF_RC);
	if (lay & RF_H_FETH)
		rf_be32(p, remu_chance(70) ? remu_rnd_n(4) | remu_rnd_n(2) << 4 : remu_rnd());
	if (lay & RF_H_DETH)
		rf_deth(p, remu_chance(60) ? (t && t->gsi ? QP1_QKEY : FUZZ_QKEY) :
			   remu_chance(50) ? QP1_QKEY : (uint32_t)remu_rnd(),
			remu_rnd_n(1 << 24));
	if (lay & RF_H_RETH) {
		pick_target(s, &rkey, &va, &len, false);
		rf_reth(p, va, rkey, len);
	}
	if (lay & RF_H_AETH)
		rf_aeth(p, pick_syndrome(), remu_rnd_n(1 << 24));
	if (lay & RF_H_ATMETH) {
		pick_target(s, &rkey, &va, &len, true);
		rf_atmeth(p, va, rkey, remu_rnd(), remu_rnd());
	}
	if (lay & RF_H_ATMACK)
		rf_be64(p, remu_rnd());
	if (lay & RF_H_IMM)
		rf_be32(p, remu_rnd());
	if (lay & RF_H_IETH)
		rf_be32(p, remu_chance(50) ? s->rw.mr->rkey : (uint32_t)remu_rnd());
	if ((lay & RF_H_PAYLOAD) || remu_chance(5)) {
		plen = remu_chance(40) ? remu_rnd_n(64) :
		       remu_chance(50) ? remu_rnd_n(MTU_BYTES + 1) :
		       remu_chance(50) ? MTU_BYTES + remu_rnd_n(9) - 4 :
		       remu_rnd_n(8192);
		if (plen == 8 || remu_chance(5))
			plen = 8;		/* ATOMIC_WRITE's size */
		n = plen < sizeof(data) ? plen : sizeof(data);
		for (i = 0; i < n; i++)
			data[i] = remu_rnd();
		rf_payload(p, data, n);
		if (remu_chance(10))			/* PadCnt that lies */
			p->b[1] = (p->b[1] & ~0x30) | remu_rnd_n(4) << 4;
	}
	/* a few flipped bits anywhere */
	if (remu_chance(8))
		for (i = 0, n = 1 + remu_rnd_n(3); i < n; i++)
			p->b[remu_rnd_n(p->len)] ^= 1 << remu_rnd_n(8);
	/* truncated */
	if (remu_chance(4)) {
		p->len = remu_rnd_n(p->len + 1);
		z->opclass[3]++;
	}
	return remu_chance(97) ? RF_ICRC_GOOD : remu_chance(60) ? RF_ICRC_BAD :
	       RF_ICRC_NONE;
}

static const uint8_t rc_ops[] = { 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06,
	0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11,
	0x12, 0x13, 0x14, 0x16, 0x17, 0x1c, 0x1d };

/* an opcode for a packet to @t (NULL: any QPN) */
static uint8_t pick_opcode(struct fuzz *z, const struct fqp *t)
{
	uint8_t tr;

	if (!t || remu_chance(15)) {
		z->opclass[2]++;
		return remu_chance(60) ? RF_RC + rc_ops[remu_rnd_n(sizeof(rc_ops))] :
		       remu_chance(50) ? RF_UC + remu_rnd_n(12) : (uint8_t)remu_rnd();
	}
	tr = t->type == IBV_QPT_RC ? RF_RC :
	     t->type == IBV_QPT_UC ? RF_UC : RF_UD;
	if (remu_chance(10)) {
		z->opclass[1]++;
		tr = remu_chance(50) ? RF_UD : tr == RF_RC ? RF_UC : RF_RC;
	} else {
		z->opclass[0]++;
	}
	if (tr == RF_UD)
		return RF_UD + 4 + remu_rnd_n(2);
	if (tr == RF_UC)
		return RF_UC + remu_rnd_n(12);
	return RF_RC + rc_ops[remu_rnd_n(sizeof(rc_ops))];
}

/* one forged packet */
static void fuzz_one(struct fuzz *z)
{
	struct side *s = &z->s[remu_rnd_n(2)];
	const struct fqp *t = NULL;
	struct remu_fpkt p;
	enum rf_icrc how;
	uint32_t qpn, psn = remu_rnd_n(1 << 24);
	int f, i;

	switch (remu_rnd_n(20)) {
	case 0:
		qpn = remu_chance(50) ? z->xfer_qpn[s->id] : remu_rnd_n(4);
		break;
	case 1:
		qpn = remu_chance(50) ? 0xffffff : remu_rnd_n(1 << 24);
		break;
	case 2:
		qpn = s->q[remu_rnd_n(s->nq)].qpn + remu_rnd_n(7) - 3;
		break;
	default:
		t = &s->q[remu_rnd_n(s->nq)];
		qpn = t->qpn;
		psn = t->psn;
	}
	f = t && remu_chance(75) ? t->peer_forge :
	    remu_chance(50) ? s->third_forge : s->peer_forge;
	/* the validated transfer's QPs only hear from third addresses */
	for (i = 0; i < 2; i++)
		if (qpn == z->xfer_qpn[i] && s->id == i)
			f = s->third_forge;
	how = build(z, &p, pick_opcode(z, t), s, t, qpn, psn);
	if (remu_forge_send_icrc(&z->f[f], &p, how))
		z->send_fail++;
	else
		z->sent[f]++;
}

/* ---- traffic and churn on the fuzzed QPs ------------------------------ */

/* a UD QP of @t in RTS, or none (0) */
static uint32_t ud_target(struct side *t)
{
	int i, k = remu_rnd_n(t->nq);

	for (i = 0; i < t->nq; i++, k = (k + 1) % t->nq)
		if (t->q[k].type == IBV_QPT_UD && t->q[k].qp &&
		    t->q[k].state == IBV_QPS_RTS)
			return t->q[k].qpn;
	return 0;
}

static void post_some(struct fuzz *z, struct fqp *q)
{
	struct side *s = q->s, *t = q->peer ? q->peer->s : NULL;
	uint64_t lo = (uintptr_t)s->rw.base + s->rw.lo;
	uint32_t len = remu_rnd_n(3 * MTU_BYTES);
	struct ibv_sge sge = { lo + remu_rnd_n(s->rw.hi - s->rw.lo - len), len,
			       s->rw.mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	remu_post_recv(q->qp, 1, &sge, 1);
	if (q->type == IBV_QPT_UD) {
		if (!s->ah || len > MTU_BYTES)
			return;
		wr.opcode = IBV_WR_SEND;
		wr.wr.ud.ah = s->ah;
		wr.wr.ud.remote_qpn = ud_target(&z->s[!s->id]);
		wr.wr.ud.remote_qkey = FUZZ_QKEY;
		ibv_post_send(q->qp, &wr, &bad);
		return;
	}
	if (!t)
		return;
	wr.opcode = q->type == IBV_QPT_UC || remu_chance(40) ? IBV_WR_SEND :
		    remu_chance(50) ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
	if (q->type == IBV_QPT_UC && remu_chance(50))
		wr.opcode = IBV_WR_RDMA_WRITE;
	wr.wr.rdma.rkey = t->rw.mr->rkey;
	wr.wr.rdma.remote_addr = (uintptr_t)t->rw.base + t->rw.lo +
				 remu_rnd_n(t->rw.hi - t->rw.lo - len);
	ibv_post_send(q->qp, &wr, &bad);
}

/*
 * Stop the fuzzed QPs' own traffic before the count: an RC SEND to a peer
 * with no receive posted is retried for ever (rnr_retry 7, a 10 us RNR
 * timer), as on any NIC, and such a loop keeps thousands of datagrams a
 * second moving while the counters are read.  A QP in ERR sends nothing
 * more; packets still on their way are counted where they arrive.
 */
static void quiesce(struct fuzz *z)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	int k, i;

	for (k = 0; k < 2; k++)
		for (i = 0; i < z->s[k].nq; i++)
			if (z->s[k].q[i].qp)
				ibv_modify_qp(z->s[k].q[i].qp, &a, IBV_QP_STATE);
}

static void drain(struct fuzz *z)
{
	struct ibv_async_event ev;
	struct ibv_wc wc[64];
	int i, k, n;

	for (k = 0; k < 2; k++) {
		while ((n = ibv_poll_cq(z->s[k].cq, 64, wc)) > 0)
			for (i = 0; i < n; i++) {
				if (wc[i].status == IBV_WC_SUCCESS)
					z->wc_ok++;
				else
					z->wc_err++;
			}
		while (!ibv_get_async_event(z->s[k].ctx, &ev)) {
			ibv_ack_async_event(&ev);
			z->async_events++;
		}
	}
}

/* reset and reconnect the live pair of @q with a new PSN */
static void reconnect(struct fuzz *z, struct fqp *q)
{
	struct fqp *r = q->peer;
	uint32_t psn = remu_rnd_n(1 << 24);

	conn_to(q->qp, q->s, r->s, r->qpn, psn, IBV_QPS_RTS);
	conn_to(r->qp, r->s, q->s, q->qpn, psn, IBV_QPS_RTS);
	q->psn = r->psn = psn;
	z->resets++;
}

static void churn(struct fuzz *z)
{
	struct side *s = &z->s[remu_rnd_n(2)];
	struct fqp *q = &s->q[remu_rnd_n(s->nq)];
	struct ibv_qp_attr a = {};
	int st;

	if (!q->live)
		return;
	st = remu_qp_state(q->qp);
	if (st == IBV_QPS_ERR || st == IBV_QPS_RESET || remu_chance(10)) {
		reconnect(z, q);
	} else if (st == IBV_QPS_SQD) {
		a.qp_state = IBV_QPS_RTS;
		ibv_modify_qp(q->qp, &a, IBV_QP_STATE);
	} else if (remu_chance(40)) {
		a.qp_state = IBV_QPS_SQD;
		if (!ibv_modify_qp(q->qp, &a, IBV_QP_STATE))
			z->sqd++;
	} else if (remu_chance(20)) {
		a.qp_state = IBV_QPS_ERR;
		if (!ibv_modify_qp(q->qp, &a, IBV_QP_STATE))
			z->errs++;
	}
}

/* ---- counters --------------------------------------------------------- */

#define MAX_CNT 96

struct counters {
	int n;
	char name[MAX_CNT][48];
	long long v[MAX_CNT];
};

static void counters_read(const char *dev, struct counters *c)
{
	char path[256];
	struct dirent *d;
	DIR *dir;

	usleep(REMU_HW_STATS_SETTLE_US);
	snprintf(path, sizeof(path),
		 "/sys/class/infiniband/%s/ports/1/hw_counters", dev);
	c->n = 0;
	dir = opendir(path);
	if (!dir)
		return;
	while ((d = readdir(dir)) && c->n < MAX_CNT) {
		if (d->d_name[0] == '.' || !strcmp(d->d_name, "lifespan"))
			continue;
		if (strlen(d->d_name) >= sizeof(c->name[0]))
			continue;
		strcpy(c->name[c->n], d->d_name);
		c->v[c->n] = remu_hw_counter(dev, d->d_name, false);
		c->n++;
	}
	closedir(dir);
}

static long long counter_of(const struct counters *c, const char *name)
{
	int i;

	for (i = 0; i < c->n; i++)
		if (!strcmp(c->name[i], name))
			return c->v[i];
	return 0;
}

/* what remu's wire layer counted: every datagram it was handed, once */
static long long wire_total(const struct counters *c)
{
	static const char *const wire[] = {
		"rcvd_pkts", "rcvd_icrc_err", "rcvd_too_short",
		"rcvd_ip_options", "rcvd_bad_opcode", "rcvd_bad_version",
		"rcvd_bad_pkey", "rcvd_bad_length",
	};
	long long sum = 0;
	unsigned int i;

	for (i = 0; i < sizeof(wire) / sizeof(wire[0]); i++)
		sum += counter_of(c, wire[i]);
	return sum;
}

/* packets both devices handed to a local remu device without UDP */
static long long loopback(const struct counters c[2])
{
	return counter_of(&c[0], "loopback_pkts") +
	       counter_of(&c[1], "loopback_pkts");
}

/* UDP InDatagrams of the namespace @ns ("" for the caller's) */
static long long udp_in(const char *ns)
{
	char cmd[160], line[1024];
	long long v = -1;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "%s%s awk '/^Udp: [0-9]/ { print $2 }' /proc/net/snmp",
		 *ns ? "ip netns exec " : "", ns);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	if (fgets(line, sizeof(line), f))
		v = atoll(line);
	pclose(f);
	return v;
}

static long long rx_no_device(void)
{
	char line[128];
	long long v = -1;
	FILE *f = fopen("/sys/kernel/debug/remu/wire", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		sscanf(line, "rx_no_device %lld", &v);
	fclose(f);
	return v;
}

static void counters_print(const char *dev, const struct counters *a,
			   const struct counters *b)
{
	int i;

	for (i = 0; i < b->n; i++) {
		long long d = b->v[i] - counter_of(a, b->name[i]);

		if (d)
			printf("# fuzz: %s %-34s %lld\n", dev, b->name[i], d);
	}
}

/* ---- the test --------------------------------------------------------- */

static const char *const objtypes[] = { "pd", "mr", "cq", "qp", "ah",
					"ring", "ucontext" };
#define NOBJ (sizeof(objtypes) / sizeof(objtypes[0]))

static bool have_odp(const char *dev)
{
	struct ibv_context *ctx = remu_open(dev);
	struct ibv_device_attr_ex a = {};
	bool ok;

	if (!ctx)
		return false;
	ok = !ibv_query_device_ex(ctx, NULL, &a) &&
	     (a.odp_caps.per_transport_caps.rc_odp_caps & IBV_ODP_SUPPORT_WRITE);
	ibv_close_device(ctx);
	return ok;
}

FIXTURE(pktfuzz)
{
	struct fuzz z;
	int obj0[NOBJ];
};

FIXTURE_SETUP(pktfuzz)
{
	unsigned int i;

	memset(&self->z, 0, sizeof(self->z));
	for (i = 0; i < F_COUNT; i++)
		self->z.f[i].fd = -1;
	for (i = 0; i < NOBJ; i++)
		self->obj0[i] = remu_obj_count(objtypes[i]);
	remu_sh("ip addr add " THIRD_B "/24 dev v0 2>/dev/null");
	remu_sh("ip netns exec peer ip addr add " THIRD_A "/24 dev v1 2>/dev/null");
}

FIXTURE_TEARDOWN(pktfuzz)
{
	unsigned int i;

	for (i = 0; i < F_COUNT; i++)
		remu_forge_close(&self->z.f[i]);
	remu_sh("ip addr del " THIRD_B "/24 dev v0 2>/dev/null");
	remu_sh("ip netns exec peer ip addr del " THIRD_A "/24 dev v1 2>/dev/null");
}

/* a short validated transfer on fresh QPs: the devices still work */
static int fresh_transfer(void)
{
	struct xfer x = {};
	int i, ret = -1;

	if (xfer_open(&x))
		goto out;
	for (i = 0; i < 20; i++)
		if (xfer_once(&x, 0x1234567 + i * 0x9e3779b97f4a7c15ull))
			goto out;
	ret = 0;
out:
	xfer_close(&x);
	return ret;
}

TEST_F_TIMEOUT(pktfuzz, fuzz, 600)
{
	struct fuzz *z = &self->z;
	long secs = remu_env_long("REMU_FUZZ_SECONDS", 20);
	uint64_t seed = remu_env_long("REMU_FUZZ_SEED", 0);
	struct counters c0[2], c1[2];
	long long udp0, udp1, nodev0, nodev1, loop0, loop1, total = 0;
	long long prev = -1;
	double start, end, next_churn;
	bool odp = have_odp("remu0");
	long n = 0, i, k;
	unsigned int o;

	if (!seed)
		seed = (uint64_t)time(NULL) * 2654435761u;
	remu_rnd_seed(seed);
	printf("# fuzz: seed %llu (REMU_FUZZ_SEED), %ld s (REMU_FUZZ_SECONDS)%s\n",
	       (unsigned long long)seed, secs, odp ? ", ODP MRs" : "");

	z->s[0].peer_forge = F_TO_A_PEER;
	z->s[0].third_forge = F_TO_A_THIRD;
	z->s[1].peer_forge = F_TO_B_PEER;
	z->s[1].third_forge = F_TO_B_THIRD;
	ASSERT_EQ(0, side_open(&z->s[0], "remu0", 0, odp));
	ASSERT_EQ(0, side_open(&z->s[1], "remu1", 1, odp));
	z->s[0].ah = ah_to(&z->s[0], &z->s[1]);
	z->s[1].ah = ah_to(&z->s[1], &z->s[0]);
	ASSERT_NE(NULL, z->s[0].ah);
	ASSERT_NE(NULL, z->s[1].ah);
	for (i = 0; i < 3; i++)
		ASSERT_EQ(0, live_pair(&z->s[0], &z->s[1], IBV_QPT_RC));
	for (i = 0; i < 2; i++)
		ASSERT_EQ(0, live_pair(&z->s[0], &z->s[1], IBV_QPT_UC));
	ASSERT_EQ(0, live_pair(&z->s[0], &z->s[0], IBV_QPT_RC));
	ASSERT_EQ(0, fixed_qps(&z->s[0], &z->s[1]));
	ASSERT_EQ(0, fixed_qps(&z->s[1], &z->s[0]));

	ASSERT_EQ(0, remu_forge_open(&z->f[F_TO_A_PEER], "peer", ADDR_B, ADDR_A));
	ASSERT_EQ(0, remu_forge_open(&z->f[F_TO_A_THIRD], "peer", THIRD_A, ADDR_A));
	ASSERT_EQ(0, remu_forge_open(&z->f[F_TO_A_SELF], NULL, ADDR_A, ADDR_A));
	ASSERT_EQ(0, remu_forge_open(&z->f[F_TO_B_PEER], NULL, ADDR_A, ADDR_B));
	ASSERT_EQ(0, remu_forge_open(&z->f[F_TO_B_THIRD], NULL, THIRD_B, ADDR_B));

	ASSERT_EQ(0, xfer_open(&z->x));
	z->xfer_qpn[0] = z->x.qa->qp_num;
	z->xfer_qpn[1] = z->x.qb->qp_num;

	counters_read("remu0", &c0[0]);
	counters_read("remu1", &c0[1]);
	loop0 = loopback(c0);
	udp0 = udp_in("") + udp_in("peer");
	nodev0 = rx_no_device();
	ASSERT_EQ(0, pthread_create(&z->x.thread, NULL, xfer_main, &z->x));

	start = remu_now();
	end = start + secs;
	next_churn = start;
	while (remu_now() < end && !z->x.failed) {
		for (k = 0; k < 32; k++, n++)
			fuzz_one(z);
		for (k = 0; k < 2; k++) {
			struct side *s = &z->s[remu_rnd_n(2)];
			struct fqp *q = &s->q[remu_rnd_n(s->nq)];

			if (q->qp && (q->live || q->type == IBV_QPT_UD))
				post_some(z, q);
		}
		drain(z);
		if (remu_now() > next_churn) {
			churn(z);
			next_churn = remu_now() + 0.2;
		}
		usleep(1000);	/* let the transfer and the engines run */
	}
	atomic_store(&z->x.stop, true);
	pthread_join(z->x.thread, NULL);
	quiesce(z);

	/* let every queued packet be processed before counting */
	usleep(500000);
	drain(z);
	/*
	 * Packets sent before the QPs went to ERR may still be on their way:
	 * count when no datagram arrived while remu's counters were read
	 * (UDP counts a datagram after remu's encap_rcv returned; each
	 * counter file may come from a fresher snapshot than the one before)
	 * and no loopback packet since the previous reading (loopback_pkts
	 * is read with the other counters)
	 */
	for (k = 0; k < 50; k++) {
		long long before = udp_in("") + udp_in("peer");

		counters_read("remu0", &c1[0]);
		counters_read("remu1", &c1[1]);
		nodev1 = rx_no_device();
		udp1 = udp_in("") + udp_in("peer");
		loop1 = loopback(c1);
		if (udp1 == before && loop1 == prev)
			break;
		prev = loop1;
		usleep(100000);
	}
	printf("# fuzz: counters read when stable, after %ld reading(s)\n", k + 1);
	EXPECT_GT(50, k) {
		printf("# fuzz: packets still moving after 50 readings with every QP in ERR\n");
	}

	printf("# fuzz: %ld packets in %.1f s (%ld could not be sent: larger than the MTU)\n",
	       n, remu_now() - start, z->send_fail);
	for (i = 0; i < F_COUNT; i++)
		printf("# fuzz: from %-30s %ld\n", forge_name[i], z->sent[i]);
	printf("# fuzz: opcodes: of the target's transport %ld, of another %ld, any %ld; truncated %ld\n",
	       z->opclass[0], z->opclass[1], z->opclass[2], z->opclass[3]);
	printf("# fuzz: fuzzed QPs' own traffic: %ld completions ok, %ld with errors; %ld async events; %ld reconnects, %ld to SQD, %ld to ERR\n",
	       z->wc_ok, z->wc_err, z->async_events, z->resets, z->sqd, z->errs);
	printf("# fuzz: validated transfer: %ld iterations, %lld bytes checked\n",
	       z->x.iterations, z->x.bytes);
	counters_print("remu0", &c0[0], &c1[0]);
	counters_print("remu1", &c0[1], &c1[1]);
	for (k = 0; k < 2; k++)
		total += wire_total(&c1[k]) - wire_total(&c0[k]);
	printf("# fuzz: datagrams to UDP 4791: %lld, loopback packets: %lld; counted by remu's wire layer: %lld, rx_no_device %lld\n",
	       udp1 - udp0, loop1 - loop0, total, nodev1 - nodev0);

	EXPECT_EQ(0, z->x.failed) {
		printf("# validated transfer failed at line %d, iteration %ld, status %d\n",
		       z->x.failed, z->x.fail_iter, z->x.status);
	}
	EXPECT_LT(0, z->x.iterations);
	EXPECT_EQ(udp1 - udp0 + loop1 - loop0, total + nodev1 - nodev0);
	for (k = 0; k < 2; k++) {
		struct side *s = &z->s[k];

		EXPECT_EQ(-1, arena_damage(&s->rw, false));
		EXPECT_EQ(-1, arena_damage(&s->odp, false));
		EXPECT_EQ(-1, arena_damage(&s->secret, true));
	}
	EXPECT_EQ(-1, arena_damage(&z->x.ma, false));
	EXPECT_EQ(-1, arena_damage(&z->x.mb, false));

	xfer_close(&z->x);
	side_close(&z->s[0]);
	side_close(&z->s[1]);
	for (o = 0; o < NOBJ; o++) {
		int now = remu_obj_count(objtypes[o]);

		if (now != self->obj0[o])
			printf("# %s: %d objects, %d before\n", objtypes[o], now,
			       self->obj0[o]);
		EXPECT_EQ(self->obj0[o], now);
	}
	EXPECT_EQ(0, fresh_transfer());
}

TEST_HARNESS_MAIN
