// SPDX-License-Identifier: GPL-2.0
/*
 * remu_uverbsfuzz_test - random and mutated uverbs commands against remu
 * (docs/security.md, "The uverbs fuzzer").
 *
 * Each round is a child process with a seed of its own (REMU_FUZZ_SEED,
 * printed; each round's seed is derived from it).  It opens remu0 (and
 * remu1), makes a set of objects through the verbs (PDs, CQs, QPs of
 * every type, an SRQ, MRs, windows, AHs, device memory, a completion
 * channel), and learns the handle numbers of a second process's objects
 * (a forked child with its own context, whose numbers mean other objects
 * or nothing here).  Then two threads issue, at random:
 *   - verbs calls with random attributes: create/resize/destroy CQs
 *     (ibv_create_cq_ex with random wc_flags, comp_mask, flags), QPs
 *     (ibv_create_qp_ex with random capacities, types, flags, ops),
 *     modify_qp with random attributes and masks, SRQs, MRs (random
 *     addresses, lengths, access bits, rereg flags, advise), windows,
 *     AHs, DM (random lengths, alignments, copies), multicast attach
 *     and detach (a few IPv4-mapped groups, or any GID, any QP);
 *   - raw write() commands on the context's fd (every legacy and
 *     extended command number, with remu's driver data after the core
 *     struct): the right sizes or wrong ones (in_words, out_words,
 *     provider words), fields filled from the process's own handles,
 *     the other process's handles, small numbers, 0, ~0, random words,
 *     response pointers to a buffer, NULL, a read-only page or a kernel
 *     address; remu's driver words (create_cq flags and reserved field)
 *     random;
 *   - raw RDMA_VERBS_IOCTL calls: every object and method id, attributes
 *     of random ids (the core's, UHW in/out, remu's DM attribute), flags,
 *     lengths and data (inline values, handles, buffers, fds);
 *   - mmap of the context fd at random offsets, sizes and flags (the
 *     rings' real offsets too), mprotect, mremap, munmap of the rings;
 *   - garbage written over ring memory (WQEs, headers and their indices,
 *     CQEs) of objects given up to it, then the doorbell (a raw POST_SEND
 *     with no WR) and a random modify_qp, while the kernel works on them;
 *   - a fork whose child issues raw commands on the inherited fd.
 * Raw commands that destroy never name an object the provider made (its
 * structures would outlive the object: a crash of the process itself, on
 * mlx5 as well); every other raw command may.
 * A round ends with the child's exit, or with SIGKILL from the parent at
 * a random moment (so cleanup runs in the middle of everything).
 *
 * Checks: every call succeeds or fails with an errno a user may see (a
 * kernel-internal code such as ENOTSUPP (524) leaking, or a write() that
 * returns something else than -1 or its length, is a failure); no child
 * dies of anything but the parent's SIGKILL; after each round remu's
 * object counts (debugfs remu/objects) are back to their baseline; at the
 * end remu0 and remu1 still move data byte for byte.  The kernel log scan
 * of scripts/vm catches warnings.  Figures (commands tried by kind,
 * errnos seen) are printed ("# uverbsfuzz:").  Bounded in time:
 * REMU_FUZZ_SECONDS (default 20).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/rdma_user_ioctl.h>
#include <rdma/remu-abi.h>

#include "kselftest_harness.h"
#include "remu_lib.h"

#define PAGE		4096
/* the PROT_NONE guard after w.buf: more than any length uptr() is asked for */
#define BUF_GUARD	(0x10000 + PAGE)
#define NHANDLES	128
#define NMAPS		64
#define MAX_ERRNO	600

/* shared between the rounds' children and the parent (MAP_SHARED) */
struct stats {
	atomic_long verbs, writes, ioctls, mmaps, garbage, forks, ok;
	atomic_long errnos[MAX_ERRNO];
	atomic_long bad;		/* calls that did not fail cleanly */
	struct {
		int line, err;
		long ret;
	} bad_what[8];			/* the first ones */
	atomic_int nbad_what;
};

static struct stats *st;

/* ---- what the child knows --------------------------------------------- */

struct world {
	struct ibv_context *ctx[2];
	struct ibv_pd *pd[2];
	struct ibv_comp_channel *ch;
	union ibv_gid gid[2];
	int gidx[2];
	uint8_t *buf;		/* 4 MiB of ordinary memory */
	uint8_t *ro;		/* a read-only page */
	pthread_mutex_t lock;	/* the verbs object lists below */
	pthread_mutex_t maplock; /* fuzz_mmap()'s mappings vs garbage() */
	struct ibv_cq *cq[16];
	struct ibv_qp *qp[16];
	bool garbled[16];	/* the QP's rings were given to garbage */
	/*
	 * made with a CQ of the other context: the kernel read its number
	 * in this context's table, so the provider's QP points at a CQ the
	 * kernel QP does not hold, and that CQ must outlive the QP (the
	 * provider's destroy cleans it)
	 */
	bool crossed[16];
	struct ibv_srq *srq[4];
	struct ibv_mr *mr[16];
	struct ibv_mw *mw[8];
	struct ibv_ah *ah[8];
	struct ibv_dm *dm[4];
	uint32_t handles[NHANDLES];	/* own and foreign handle numbers */
	atomic_int nhandles;
	uint64_t map_off[NMAPS];	/* mmap offsets seen in responses */
	atomic_int nmaps;
};

static struct world w;

static void note_handle(uint32_t h)
{
	int i = atomic_fetch_add(&w.nhandles, 1);

	w.handles[i % NHANDLES] = h;
}

/*
 * Handle numbers of the objects the provider made for this process (PDs,
 * CQs, QPs, SRQs, MRs, windows, AHs), counted per number (the two
 * contexts have numbers of their own), under w.lock.  A raw command that
 * destroys must not name one: the provider would later use what it keeps
 * of the object (a QP's destroy cleans its CQs' rings) after the kernel
 * freed it and reused the number, a use-after-free in the process that
 * would crash it on mlx5 too, not a finding about the kernel.
 */
#define OWN_MAX		4096
static uint8_t own[OWN_MAX];
static bool in_forked_user;	/* a fork_user() child: its parent holds w.lock */

static void note_own(uint32_t h)
{
	note_handle(h);
	if (h < OWN_MAX)
		own[h]++;
}

static void forget_own(uint32_t h)
{
	if (h < OWN_MAX && own[h])
		own[h]--;
}

static uint32_t not_own(uint32_t v)
{
	return v < OWN_MAX && own[v] ? ~0u : v;
}

/* the raw commands that destroy an object of a kind the provider makes */
static bool write_destroys(uint32_t command)
{
	switch (command) {
	case IB_USER_VERBS_CMD_DEALLOC_PD:
	case IB_USER_VERBS_CMD_DEREG_MR:
	case IB_USER_VERBS_CMD_DEALLOC_MW:
	case IB_USER_VERBS_CMD_DESTROY_CQ:
	case IB_USER_VERBS_CMD_DESTROY_QP:
	case IB_USER_VERBS_CMD_DESTROY_AH:
	case IB_USER_VERBS_CMD_DESTROY_SRQ:
		return true;
	}
	return false;
}

static bool ioctl_destroys(uint16_t object, uint16_t method)
{
	static const uint16_t m[][2] = {
		{ UVERBS_OBJECT_PD, UVERBS_METHOD_PD_DESTROY },
		{ UVERBS_OBJECT_MR, UVERBS_METHOD_MR_DESTROY },
		{ UVERBS_OBJECT_MW, UVERBS_METHOD_MW_DESTROY },
		{ UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_DESTROY },
		{ UVERBS_OBJECT_QP, UVERBS_METHOD_QP_DESTROY },
		{ UVERBS_OBJECT_AH, UVERBS_METHOD_AH_DESTROY },
		{ UVERBS_OBJECT_SRQ, UVERBS_METHOD_SRQ_DESTROY },
		{ UVERBS_OBJECT_DEVICE, UVERBS_METHOD_INVOKE_WRITE },
	};
	unsigned int i;

	for (i = 0; i < sizeof(m) / sizeof(m[0]); i++)
		if (m[i][0] == object && m[i][1] == method)
			return true;
	return false;
}

/* w.lock for a raw command that destroys (held already in a forked user) */
static void destroy_lock(bool lock)
{
	if (in_forked_user)
		return;
	if (lock)
		pthread_mutex_lock(&w.lock);
	else
		pthread_mutex_unlock(&w.lock);
}

static void note_map(uint64_t off)
{
	int i = atomic_fetch_add(&w.nmaps, 1);

	w.map_off[i % NMAPS] = off;
}

static uint32_t a_handle(void)
{
	int n = atomic_load(&w.nhandles);

	return n ? w.handles[remu_rnd_n(n < NHANDLES ? n : NHANDLES)] : 0;
}

/* a 32-bit word for a command field */
static uint32_t word(void)
{
	switch (remu_rnd_n(10)) {
	case 0: case 1: case 2: case 3:
		return a_handle();
	case 4: case 5:
		return remu_rnd_n(17);
	case 6:
		return 0;
	case 7:
		return ~0u - remu_rnd_n(3);
	case 8:
		return 1u << remu_rnd_n(32);
	default:
		return remu_rnd();
	}
}

/* a user pointer for a command: good, NULL, read-only, kernel, wild */
static uint64_t uptr(size_t need)
{
	switch (remu_rnd_n(12)) {
	case 0:
		return 0;
	case 1:
		return (uintptr_t)w.ro;
	case 2:
		return 0xffffffff81000000ull + remu_rnd_n(PAGE);
	case 3:
		return remu_rnd();
	case 4:		/* the last bytes of the buffer: runs past it */
		return (uintptr_t)w.buf + (4 << 20) - remu_rnd_n(need + 1);
	default:
		return (uintptr_t)w.buf + remu_rnd_n((4 << 20) - need - 64);
	}
}

/* ---- bookkeeping of calls --------------------------------------------- */

enum { K_VERBS, K_WRITE, K_IOCTL, K_MMAP };

static void bad(int line, long ret, int err)
{
	int i = atomic_fetch_add(&st->nbad_what, 1);

	atomic_fetch_add(&st->bad, 1);
	if (i < 8) {
		st->bad_what[i].line = line;
		st->bad_what[i].ret = ret;
		st->bad_what[i].err = err;
	}
}

/*
 * A call (at @line) returned @ret where @okret is success; otherwise it
 * must be -1 with an errno a user may see, or, for a verb (@kind
 * K_VERBS) that returns an error number, that number (verbs return 0 or
 * a positive errno, or NULL/-1 with errno; a negative errno is not
 * theirs to return).
 */
static void account_at(int line, int kind, long ret, long okret)
{
	int e = errno;

	if (ret == okret) {
		atomic_fetch_add(&st->ok, 1);
		return;
	}
	if (kind == K_VERBS && ret > 0)
		e = ret;
	else if (ret != -1)
		e = -1;
	if (e > 0 && e < 512 && e < MAX_ERRNO) {
		atomic_fetch_add(&st->errnos[e], 1);
		return;
	}
	/* a kernel-internal errno, or a return value that is neither */
	bad(line, ret, errno);
}

#define account(kind, ret, okret) account_at(__LINE__, kind, ret, okret)

/* ---- raw write() commands --------------------------------------------- */

struct wcmd {
	uint32_t cmd;
	uint16_t req, resp;	/* the core's struct sizes */
	uint16_t drv_in, drv_out; /* remu's driver data after them */
	bool ex;
};

#define C(c, rq, rp, di, dout) { IB_USER_VERBS_CMD_##c, sizeof(struct rq), \
				 rp, di, dout, false }
#define X(c, rq, rp) { IB_USER_VERBS_EX_CMD_##c, sizeof(struct rq), rp, 0, 0, \
		       true }
static const struct wcmd wcmds[] = {
	C(GET_CONTEXT, ib_uverbs_get_context,
	  sizeof(struct ib_uverbs_get_context_resp), 0,
	  sizeof(struct remu_alloc_ucontext_resp)),
	C(QUERY_DEVICE, ib_uverbs_query_device,
	  sizeof(struct ib_uverbs_query_device_resp), 0, 0),
	C(QUERY_PORT, ib_uverbs_query_port,
	  sizeof(struct ib_uverbs_query_port_resp), 0, 0),
	C(ALLOC_PD, ib_uverbs_alloc_pd, sizeof(struct ib_uverbs_alloc_pd_resp),
	  0, 0),
	C(DEALLOC_PD, ib_uverbs_dealloc_pd, 0, 0, 0),
	C(CREATE_AH, ib_uverbs_create_ah,
	  sizeof(struct ib_uverbs_create_ah_resp), 0,
	  sizeof(struct remu_create_ah_resp)),
	C(MODIFY_AH, ib_uverbs_create_ah, 0, 0, 0),
	C(QUERY_AH, ib_uverbs_create_ah, 0, 0, 0),
	C(DESTROY_AH, ib_uverbs_destroy_ah, 0, 0, 0),
	C(REG_MR, ib_uverbs_reg_mr, sizeof(struct ib_uverbs_reg_mr_resp), 0, 0),
	C(REG_SMR, ib_uverbs_reg_mr, 0, 0, 0),
	C(REREG_MR, ib_uverbs_rereg_mr,
	  sizeof(struct ib_uverbs_rereg_mr_resp), 0, 0),
	C(QUERY_MR, ib_uverbs_dereg_mr, 0, 0, 0),
	C(DEREG_MR, ib_uverbs_dereg_mr, 0, 0, 0),
	C(ALLOC_MW, ib_uverbs_alloc_mw, sizeof(struct ib_uverbs_alloc_mw_resp),
	  0, 0),
	C(BIND_MW, ib_uverbs_dealloc_mw, 0, 0, 0),
	C(DEALLOC_MW, ib_uverbs_dealloc_mw, 0, 0, 0),
	C(CREATE_COMP_CHANNEL, ib_uverbs_create_comp_channel,
	  sizeof(struct ib_uverbs_create_comp_channel_resp), 0, 0),
	C(CREATE_CQ, ib_uverbs_create_cq,
	  sizeof(struct ib_uverbs_create_cq_resp),
	  sizeof(struct remu_create_cq_cmd),
	  sizeof(struct remu_create_cq_resp)),
	C(RESIZE_CQ, ib_uverbs_resize_cq,
	  sizeof(struct ib_uverbs_resize_cq_resp), 0,
	  sizeof(struct remu_resize_cq_resp)),
	C(DESTROY_CQ, ib_uverbs_destroy_cq,
	  sizeof(struct ib_uverbs_destroy_cq_resp), 0, 0),
	C(POLL_CQ, ib_uverbs_poll_cq, sizeof(struct ib_uverbs_poll_cq_resp),
	  0, 4 * sizeof(struct ib_uverbs_wc)),
	C(PEEK_CQ, ib_uverbs_poll_cq, 0, 0, 0),
	C(REQ_NOTIFY_CQ, ib_uverbs_req_notify_cq, 0, 0, 0),
	C(CREATE_QP, ib_uverbs_create_qp,
	  sizeof(struct ib_uverbs_create_qp_resp),
	  sizeof(struct remu_create_qp_cmd),
	  sizeof(struct remu_create_qp_resp)),
	C(QUERY_QP, ib_uverbs_query_qp, sizeof(struct ib_uverbs_query_qp_resp),
	  0, 0),
	C(MODIFY_QP, ib_uverbs_modify_qp, 0, 0, 0),
	C(DESTROY_QP, ib_uverbs_destroy_qp,
	  sizeof(struct ib_uverbs_destroy_qp_resp), 0, 0),
	C(POST_SEND, ib_uverbs_post_send,
	  sizeof(struct ib_uverbs_post_send_resp),
	  2 * sizeof(struct ib_uverbs_send_wr) + 4 * sizeof(struct ib_uverbs_sge),
	  0),
	C(POST_RECV, ib_uverbs_post_recv,
	  sizeof(struct ib_uverbs_post_recv_resp),
	  2 * sizeof(struct ib_uverbs_recv_wr) + 4 * sizeof(struct ib_uverbs_sge),
	  0),
	C(ATTACH_MCAST, ib_uverbs_attach_mcast, 0, 0, 0),
	C(DETACH_MCAST, ib_uverbs_detach_mcast, 0, 0, 0),
	C(CREATE_SRQ, ib_uverbs_create_srq,
	  sizeof(struct ib_uverbs_create_srq_resp), 0,
	  sizeof(struct remu_create_srq_resp)),
	C(MODIFY_SRQ, ib_uverbs_modify_srq, 0, 0, 0),
	C(QUERY_SRQ, ib_uverbs_query_srq,
	  sizeof(struct ib_uverbs_query_srq_resp), 0, 0),
	C(DESTROY_SRQ, ib_uverbs_destroy_srq,
	  sizeof(struct ib_uverbs_destroy_srq_resp), 0, 0),
	C(POST_SRQ_RECV, ib_uverbs_post_srq_recv,
	  sizeof(struct ib_uverbs_post_srq_recv_resp),
	  2 * sizeof(struct ib_uverbs_recv_wr) + 4 * sizeof(struct ib_uverbs_sge),
	  0),
	C(OPEN_XRCD, ib_uverbs_open_xrcd,
	  sizeof(struct ib_uverbs_open_xrcd_resp), 0, 0),
	C(CLOSE_XRCD, ib_uverbs_close_xrcd, 0, 0, 0),
	C(CREATE_XSRQ, ib_uverbs_create_xsrq,
	  sizeof(struct ib_uverbs_create_srq_resp), 0, 0),
	C(OPEN_QP, ib_uverbs_open_qp, sizeof(struct ib_uverbs_create_qp_resp),
	  0, 0),
	X(QUERY_DEVICE, ib_uverbs_ex_query_device,
	  sizeof(struct ib_uverbs_ex_query_device_resp)),
	X(CREATE_CQ, ib_uverbs_ex_create_cq,
	  sizeof(struct ib_uverbs_ex_create_cq_resp)),
	X(CREATE_QP, ib_uverbs_ex_create_qp,
	  sizeof(struct ib_uverbs_ex_create_qp_resp)),
	X(MODIFY_QP, ib_uverbs_ex_modify_qp,
	  sizeof(struct ib_uverbs_ex_modify_qp_resp)),
	X(CREATE_FLOW, ib_uverbs_flow_attr, 16),
	X(DESTROY_FLOW, ib_uverbs_dealloc_mw, 0),
	X(CREATE_WQ, ib_uverbs_ex_create_qp, 32),
	X(MODIFY_WQ, ib_uverbs_ex_modify_qp, 0),
	X(DESTROY_WQ, ib_uverbs_dealloc_mw, 16),
	X(CREATE_RWQ_IND_TBL, ib_uverbs_dealloc_mw, 16),
	X(DESTROY_RWQ_IND_TBL, ib_uverbs_dealloc_mw, 0),
	X(MODIFY_CQ, ib_uverbs_ex_modify_cq, 0),
};
#undef C
#undef X

/* learn what a successful create answered: handles, ring offsets */
static void learn(const struct wcmd *c, const uint8_t *resp, size_t len)
{
	const struct remu_ring_info *ri;
	size_t i;

	if (!c->resp || len < 4)
		return;
	switch (c->cmd | (c->ex ? 0x80000000u : 0)) {
	case IB_USER_VERBS_CMD_ALLOC_PD:
	case IB_USER_VERBS_CMD_CREATE_AH:
	case IB_USER_VERBS_CMD_ALLOC_MW:
	case IB_USER_VERBS_CMD_CREATE_CQ:
	case IB_USER_VERBS_CMD_CREATE_QP:
	case IB_USER_VERBS_CMD_CREATE_SRQ:
		note_handle(*(const uint32_t *)resp);
		break;
	case IB_USER_VERBS_CMD_REG_MR:
		note_handle(*(const uint32_t *)resp);
		break;
	}
	/* remu's rings in the driver part of the answer */
	if (c->drv_out >= sizeof(*ri) && len >= c->resp + sizeof(*ri) &&
	    c->cmd != IB_USER_VERBS_CMD_GET_CONTEXT &&
	    c->cmd != IB_USER_VERBS_CMD_CREATE_AH)
		for (i = 0; i + sizeof(*ri) <= c->drv_out && i < 2 * sizeof(*ri);
		     i += sizeof(*ri)) {
			ri = (const void *)(resp + c->resp + i);
			if (ri->mmap_size)
				note_map(ri->mmap_offset);
		}
}

static void raw_write(int fd)
{
	static __thread uint8_t cmd[4096], resp[4096];
	const struct wcmd *c = &wcmds[remu_rnd_n(sizeof(wcmds) / sizeof(wcmds[0]))];
	struct ib_uverbs_cmd_hdr *h = (void *)cmd;
	struct ib_uverbs_ex_cmd_hdr *xh = (void *)(cmd + sizeof(*h));
	size_t body, pre, len, i, outlen;
	bool destroys;
	uint8_t *p;
	long ret;

	pre = sizeof(*h) + (c->ex ? sizeof(*xh) : 0);
	body = c->req + c->drv_in;
	if (remu_chance(15))
		body = remu_chance(50) ? remu_rnd_n(body + 1) : body + remu_rnd_n(64);
	if (c->ex)
		body = (body + 7) & ~7ul;
	else
		body = (body + 3) & ~3ul;
	if (pre + body > sizeof(cmd))
		body = sizeof(cmd) - pre;
	len = pre + body;
	p = cmd + pre;
	for (i = 0; i + 4 <= body; i += 4)
		*(uint32_t *)(p + i) = word();
	/* 64-bit fields: addresses of memory now and then */
	for (i = 8; i + 8 <= body; i += 8)
		if (remu_chance(15))
			*(uint64_t *)(p + i) = uptr(PAGE);
	/* remu's create_cq driver words: flags and the reserved field */
	if (c->cmd == IB_USER_VERBS_CMD_CREATE_CQ && !c->ex &&
	    body >= c->req + 8) {
		*(uint32_t *)(p + c->req) = remu_chance(60) ? remu_rnd_n(4) : word();
		*(uint32_t *)(p + c->req + 4) = remu_chance(80) ? 0 : word();
	}
	/* create_qp's: ECE options of any version, the reserved field */
	if (c->cmd == IB_USER_VERBS_CMD_CREATE_QP && !c->ex &&
	    body >= c->req + 8)
		*(uint32_t *)(p + c->req + 4) = remu_chance(80) ? 0 : word();
	outlen = c->resp + c->drv_out;
	if (remu_chance(15))
		outlen = remu_chance(50) ? remu_rnd_n(outlen + 1) : outlen + remu_rnd_n(256);
	if (outlen > sizeof(resp))
		outlen = sizeof(resp);
	memset(resp, 0, outlen);
	h->command = c->cmd | (c->ex ? IB_USER_VERBS_CMD_FLAG_EXTENDED : 0);
	if (remu_chance(2))
		h->command = remu_rnd_n(64) | (remu_chance(50) ?
					  IB_USER_VERBS_CMD_FLAG_EXTENDED : 0);
	if (c->ex) {
		h->in_words = body / 8;
		h->out_words = (outlen + 7) / 8;
		xh->response = remu_chance(85) ? (uintptr_t)resp : uptr(outlen);
		xh->provider_in_words = 0;
		xh->provider_out_words = 0;
		xh->cmd_hdr_reserved = remu_chance(90) ? 0 : remu_rnd();
		if (remu_chance(10)) {
			xh->provider_in_words = remu_rnd_n(4);
			xh->provider_out_words = remu_rnd_n(4);
		}
		/* the in_words of an ex command exclude the ex header */
		len = sizeof(*h) + sizeof(*xh) +
		      (h->in_words + xh->provider_in_words) * 8;
		if (len > sizeof(cmd))
			len = sizeof(cmd);
	} else {
		h->in_words = len / 4;
		h->out_words = outlen / 4;
		if (c->resp && body >= 8)
			*(uint64_t *)p = remu_chance(85) ? (uintptr_t)resp :
					 uptr(outlen);
	}
	if (remu_chance(5)) {
		h->in_words = remu_rnd();
		h->out_words = remu_rnd();
	}
	destroys = write_destroys(h->command);
	if (destroys) {
		destroy_lock(true);
		for (i = 0; i + 4 <= body; i += 4)
			*(uint32_t *)(p + i) = not_own(*(uint32_t *)(p + i));
	}
	ret = write(fd, cmd, len);
	if (destroys)
		destroy_lock(false);
	atomic_fetch_add(&st->writes, 1);
	account(K_WRITE, ret, len);
	if (ret == (long)len && (c->ex || *(uint64_t *)p == (uintptr_t)resp))
		learn(c, resp, outlen);
}

/* ---- raw ioctl() commands --------------------------------------------- */

static int fds_for_attr(void)
{
	switch (remu_rnd_n(5)) {
	case 0:
		return w.ch ? w.ch->fd : -1;
	case 1:
		return w.ctx[0]->async_fd;
	case 2:
		return w.ctx[0]->cmd_fd;
	case 3:
		return 0;
	}
	return remu_rnd_n(64) - 1;
}

static void raw_ioctl(int fd)
{
	static __thread uint64_t raw[(sizeof(struct ib_uverbs_ioctl_hdr) +
				      16 * sizeof(struct ib_uverbs_attr)) / 8];
	static __thread uint8_t bufs[16][256];
	struct ib_uverbs_ioctl_hdr *h = (void *)raw;
	unsigned int i, n = remu_rnd_n(9), j;
	bool destroys;
	long ret;

	memset(raw, 0, sizeof(raw));
	h->object_id = remu_chance(90) ? remu_rnd_n(UVERBS_OBJECT_ASYNC_EVENT + 1) :
		       (remu_chance(50) ? remu_rnd_n(0x10) | UVERBS_ID_NS_SHIFT << 0 |
		        1 << UVERBS_ID_NS_SHIFT : remu_rnd());
	h->method_id = remu_chance(90) ? remu_rnd_n(10) : remu_rnd();
	/*
	 * Not GET_CONTEXT: on a file that has its context it fails, and
	 * ib_core (6.1 to 7.3) then leaks a reference on the calling task
	 * (tools/remu_getctx_leak, docs/security.md), which the debug
	 * kernel's kmemleak reports.  The write() GET_CONTEXT, whose error
	 * path is right, is still fuzzed.
	 */
	if (h->object_id == UVERBS_OBJECT_DEVICE &&
	    h->method_id == UVERBS_METHOD_GET_CONTEXT)
		h->method_id = UVERBS_METHOD_QUERY_CONTEXT;
	h->num_attrs = n;
	h->length = sizeof(*h) + n * sizeof(struct ib_uverbs_attr);
	if (remu_chance(3))
		h->length = remu_rnd_n(sizeof(raw));
	h->driver_id = remu_chance(95) ? RDMA_DRIVER_UNKNOWN : remu_rnd();
	h->reserved1 = remu_chance(95) ? 0 : remu_rnd();
	h->reserved2 = remu_chance(95) ? 0 : remu_rnd();
	for (i = 0; i < n; i++) {
		struct ib_uverbs_attr *a = &h->attrs[i];

		a->attr_id = remu_chance(70) ? remu_rnd_n(14) :
			     remu_chance(50) ? UVERBS_ATTR_UHW_IN + remu_rnd_n(2) :
			     remu_chance(50) ? REMU_ATTR_ALLOC_DM_RESP : remu_rnd();
		a->flags = remu_chance(70) ? (remu_chance(50) ? UVERBS_ATTR_F_MANDATORY
						     : 0) : remu_rnd_n(8);
		a->attr_data.reserved = remu_chance(95) ? 0 : remu_rnd();
		switch (remu_rnd_n(5)) {
		case 0:		/* inline value */
			a->len = remu_rnd_n(9);
			a->data = remu_chance(50) ? word() : remu_rnd();
			break;
		case 1:		/* a handle */
			a->len = remu_chance(70) ? 0 : remu_rnd_n(9);
			a->data = a_handle();
			break;
		case 2:		/* an fd */
			a->len = 0;
			a->data_s64 = fds_for_attr();
			break;
		default:	/* a buffer of words, handles among them */
			a->len = remu_chance(80) ? 4 * (1 + remu_rnd_n(32)) :
				 remu_rnd_n(0x10000);
			for (j = 0; j < sizeof(bufs[i]) / 4; j++)
				((uint32_t *)bufs[i])[j] = word();
			/*
			 * An output attribute is written up to its length:
			 * longer than bufs[i], it would run over this
			 * thread's TLS (and the stack guard in the TCB
			 * beyond it).  So a long one points into w.buf,
			 * whose end is followed by a guard (BUF_GUARD).
			 */
			a->data = remu_chance(85) && a->len <= sizeof(bufs[i]) ?
				  (uintptr_t)bufs[i] : uptr(a->len);
			break;
		}
	}
	destroys = ioctl_destroys(h->object_id, h->method_id);
	if (destroys) {
		destroy_lock(true);
		for (i = 0; i < n; i++) {
			struct ib_uverbs_attr *a = &h->attrs[i];

			a->data = (a->data & ~0xffffffffull) |
				  not_own((uint32_t)a->data);
			for (j = 0; j < sizeof(bufs[i]) / 4; j++)
				((uint32_t *)bufs[i])[j] =
					not_own(((uint32_t *)bufs[i])[j]);
		}
	}
	ret = ioctl(fd, RDMA_VERBS_IOCTL, h);
	if (destroys)
		destroy_lock(false);
	atomic_fetch_add(&st->ioctls, 1);
	account(K_IOCTL, ret, 0);
}

/* ---- mappings and ring garbage ---------------------------------------- */

static void fuzz_mmap(int fd)
{
	int n = atomic_load(&w.nmaps);
	uint64_t off = n && remu_chance(70) ? w.map_off[remu_rnd_n(n < NMAPS ? n : NMAPS)]
				       : (uint64_t)remu_rnd_n(256) * PAGE;
	size_t len = PAGE * (remu_chance(70) ? 1 + remu_rnd_n(4) : remu_rnd_n(1 << 12));
	int prot = remu_chance(80) ? PROT_READ | PROT_WRITE : (int)remu_rnd_n(8);
	int flags = remu_chance(85) ? MAP_SHARED : MAP_PRIVATE;
	size_t nlen;
	void *p, *q;

	if (remu_chance(5))
		off += remu_rnd_n(PAGE);
	pthread_mutex_lock(&w.maplock);
	p = mmap(NULL, len, prot, flags, fd, off);
	atomic_fetch_add(&st->mmaps, 1);
	account(K_MMAP, p == MAP_FAILED ? -1 : 0, 0);
	if (p == MAP_FAILED) {
		pthread_mutex_unlock(&w.maplock);
		return;
	}
	if (prot & PROT_WRITE && remu_chance(50))
		memset(p, remu_rnd(), remu_rnd_n(len));
	switch (remu_rnd_n(5)) {
	case 0:
		account(K_MMAP, mprotect(p, len, remu_rnd_n(8)), 0);
		break;
	case 1:		/* move or grow it: refused, or done */
		nlen = len + (remu_chance(50) ? PAGE : 0);
		q = mremap(p, len, nlen, MREMAP_MAYMOVE);
		account(K_MMAP, q == MAP_FAILED ? -1 : 0, 0);
		if (q != MAP_FAILED)	/* only what is ours: not a page more */
			munmap(q, nlen);
		else
			munmap(p, len);
		pthread_mutex_unlock(&w.maplock);
		return;
	case 2:		/* split it */
		if (len > PAGE)
			account(K_MMAP, munmap((uint8_t *)p + PAGE, PAGE), 0);
		break;
	case 3:
		account(K_MMAP, madvise(p, len, remu_chance(50) ? MADV_DONTNEED :
						MADV_DONTFORK), 0);
		break;
	}
	munmap(p, len);
	pthread_mutex_unlock(&w.maplock);
}

/*
 * Garbage over the ring memory of this process (what it has mapped of
 * the uverbs device), then the doorbell of a QP whose rings were given
 * up to garbage
 */
static void garbage(int fd)
{
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");
	unsigned long lo, hi;
	int i, k;

	if (!f)
		return;
	/* no mapping comes or goes meanwhile */
	pthread_mutex_lock(&w.lock);
	pthread_mutex_lock(&w.maplock);
	while (fgets(line, sizeof(line), f)) {
		if (!strstr(line, "/dev/infiniband/uverbs") ||
		    sscanf(line, "%lx-%lx", &lo, &hi) != 2 ||
		    !strstr(line, "rw") || remu_chance(50))
			continue;
		for (i = 0, k = remu_rnd_n(64); i < k; i++) {
			unsigned long at = lo + remu_rnd_n(hi - lo - 8);

			at &= ~3ul;
			if (remu_chance(30))
				at = lo + (remu_chance(50) ? 0 : 64) + 4 * remu_rnd_n(16);
			*(volatile uint32_t *)at = word();
		}
	}
	fclose(f);
	pthread_mutex_unlock(&w.maplock);
	atomic_fetch_add(&st->garbage, 1);
	/* the doorbell of a QP: a POST_SEND with no WR */
	for (i = 0; i < 16; i++) {
		struct {
			struct ib_uverbs_cmd_hdr h;
			struct ib_uverbs_post_send c;
		} db = {};
		struct ib_uverbs_post_send_resp r;
		long ret;

		if (!w.qp[i] || !w.garbled[i])
			continue;
		db.h.command = IB_USER_VERBS_CMD_POST_SEND;
		db.h.in_words = sizeof(db) / 4;
		db.h.out_words = sizeof(r) / 4;
		db.c.response = (uintptr_t)&r;
		db.c.qp_handle = w.qp[i]->handle;
		db.c.wqe_size = sizeof(struct ib_uverbs_send_wr);
		ret = write(fd, &db, sizeof(db));
		atomic_fetch_add(&st->writes, 1);
		account(K_WRITE, ret, sizeof(db));
	}
	pthread_mutex_unlock(&w.lock);
}

/* ---- verbs with random attributes ------------------------------------- */

/* a QP of the other context points at @cq (struct world, crossed) */
static bool cq_crossed(struct ibv_cq *cq)
{
	int j;

	for (j = 0; j < 16; j++)
		if (w.qp[j] && w.crossed[j] &&
		    (w.qp[j]->send_cq == cq || w.qp[j]->recv_cq == cq))
			return true;
	return false;
}

static void verbs_cq(void)
{
	struct ibv_cq_init_attr_ex ca = {
		.cqe = remu_chance(80) ? 1 + remu_rnd_n(512) : word(),
		.wc_flags = remu_chance(70) ? remu_rnd_n(1 << 12) : remu_rnd(),
		.comp_mask = remu_chance(80) ? remu_rnd_n(4) : word(),
		.flags = remu_chance(80) ? remu_rnd_n(4) : word(),
		.channel = remu_chance(30) ? w.ch : NULL,
		.comp_vector = remu_chance(90) ? 0 : word(),
	};
	struct ibv_cq_ex *cx;
	int i = remu_rnd_n(16);

	pthread_mutex_lock(&w.lock);
	if (w.cq[i]) {
		if (remu_chance(50) || cq_crossed(w.cq[i])) {
			account(K_VERBS, ibv_resize_cq(w.cq[i], remu_chance(80) ?
						       1 + remu_rnd_n(4096) : word()), 0);
		} else {
			uint32_t h = w.cq[i]->handle;

			if (!ibv_destroy_cq(w.cq[i])) {
				forget_own(h);
				w.cq[i] = NULL;
			}
		}
		pthread_mutex_unlock(&w.lock);
		return;
	}
	cx = ibv_create_cq_ex(w.ctx[remu_rnd_n(2)], &ca);
	account(K_VERBS, cx ? 0 : -1, 0);
	if (cx) {
		w.cq[i] = ibv_cq_ex_to_cq(cx);
		note_own(w.cq[i]->handle);
	}
	pthread_mutex_unlock(&w.lock);
}

static struct ibv_cq *a_cq(int dev)
{
	int i;

	for (i = 0; i < 16; i++) {
		struct ibv_cq *cq = w.cq[(i + remu_rnd_n(16)) % 16];

		if (cq && cq->context == w.ctx[dev])
			return cq;
	}
	return NULL;
}

static void verbs_qp(void)
{
	static const enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC,
		IBV_QPT_UD, IBV_QPT_RAW_PACKET, IBV_QPT_XRC_SEND,
		IBV_QPT_DRIVER };
	int i = remu_rnd_n(16), dev = remu_rnd_n(2);
	struct ibv_qp_init_attr_ex qa = {
		.qp_type = remu_chance(85) ? types[remu_rnd_n(3)] : types[remu_rnd_n(6)],
		.cap = {
			.max_send_wr = remu_chance(80) ? remu_rnd_n(300) : word(),
			.max_recv_wr = remu_chance(80) ? remu_rnd_n(300) : word(),
			.max_send_sge = remu_chance(80) ? remu_rnd_n(20) : word(),
			.max_recv_sge = remu_chance(80) ? remu_rnd_n(20) : word(),
			.max_inline_data = remu_chance(80) ? remu_rnd_n(300) : word(),
		},
		.comp_mask = IBV_QP_INIT_ATTR_PD |
			     (remu_chance(50) ? IBV_QP_INIT_ATTR_SEND_OPS_FLAGS : 0) |
			     (remu_chance(10) ? remu_rnd_n(1 << 10) : 0),
		.send_ops_flags = remu_chance(80) ? remu_rnd_n(1 << 11) : remu_rnd(),
		.create_flags = remu_chance(85) ? 0 : word(),
		.sq_sig_all = remu_rnd_n(2),
	};
	struct ibv_qp_attr a = {};
	struct ibv_qp *qp;

	pthread_mutex_lock(&w.lock);
	if (w.qp[i]) {
		uint32_t h = w.qp[i]->handle;

		if (remu_chance(70)) {
			a.qp_state = remu_rnd_n(7);
			a.cur_qp_state = remu_rnd_n(7);
			a.path_mtu = remu_rnd_n(7);
			a.qkey = word();
			a.rq_psn = word();
			a.sq_psn = word();
			a.dest_qp_num = word();
			a.qp_access_flags = remu_chance(80) ? remu_rnd_n(1 << 10) : word();
			a.pkey_index = remu_rnd_n(3);
			a.port_num = remu_chance(90) ? 1 : remu_rnd_n(4);
			a.timeout = remu_rnd_n(32);
			a.retry_cnt = remu_rnd_n(8);
			a.rnr_retry = remu_rnd_n(8);
			a.min_rnr_timer = remu_rnd_n(32);
			a.max_rd_atomic = remu_rnd_n(256);
			a.max_dest_rd_atomic = remu_rnd_n(256);
			a.ah_attr.is_global = remu_chance(90);
			a.ah_attr.port_num = 1;
			a.ah_attr.grh.dgid = w.gid[remu_rnd_n(2)];
			if (remu_chance(20))
				a.ah_attr.grh.dgid.raw[remu_rnd_n(16)] = remu_rnd();
			a.ah_attr.grh.sgid_index = remu_chance(80) ? w.gidx[dev] :
						   remu_rnd_n(256);
			a.ah_attr.grh.hop_limit = remu_rnd();
			a.sq_draining = remu_rnd_n(2);
			a.en_sqd_async_notify = remu_rnd_n(2);
			account(K_VERBS, ibv_modify_qp(w.qp[i], &a,
						       remu_chance(80) ? remu_rnd_n(1 << 21) :
						       word()), 0);
		} else if (remu_chance(50) && !ibv_destroy_qp(w.qp[i])) {
			forget_own(h);
			w.qp[i] = NULL;
			w.garbled[i] = false;
		} else {
			struct ibv_qp_init_attr ia;

			account(K_VERBS, ibv_query_qp(w.qp[i], &a, word(), &ia),
				0);
		}
		pthread_mutex_unlock(&w.lock);
		return;
	}
	qa.pd = w.pd[dev];
	qa.send_cq = remu_chance(95) ? a_cq(dev) : a_cq(!dev);
	qa.recv_cq = remu_chance(95) ? a_cq(dev) : a_cq(!dev);
	if (remu_chance(20) && w.srq[0] && dev == 0)
		qa.srq = w.srq[remu_rnd_n(4)];
	if (!qa.send_cq || !qa.recv_cq) {
		pthread_mutex_unlock(&w.lock);
		return;
	}
	qp = ibv_create_qp_ex(w.ctx[dev], &qa);
	account(K_VERBS, qp ? 0 : -1, 0);
	if (qp) {
		w.qp[i] = qp;
		w.crossed[i] = qa.send_cq->context != w.ctx[dev] ||
			       qa.recv_cq->context != w.ctx[dev];
		w.garbled[i] = remu_chance(30);	/* its rings are garbage's */
		note_own(qp->handle);
	}
	pthread_mutex_unlock(&w.lock);
}

static void verbs_mr(void)
{
	int i = remu_rnd_n(16), dev = remu_rnd_n(2);
	unsigned int access = remu_chance(80) ? remu_rnd_n(1 << 10) : word();
	size_t len = remu_chance(80) ? remu_rnd_n(1 << 20) : (size_t)remu_rnd();
	uint8_t *addr = remu_chance(85) ? w.buf + remu_rnd_n(3 << 20) : (uint8_t *)uptr(len);
	struct ibv_mr *mr;

	pthread_mutex_lock(&w.lock);
	if (w.mr[i]) {
		uint32_t h = w.mr[i]->handle;

		switch (remu_rnd_n(3)) {
		case 0:
			if (!ibv_dereg_mr(w.mr[i])) {
				forget_own(h);
				w.mr[i] = NULL;
			}
			break;
		case 1:
			/* IBV_REREG_MR_ERR_* (negative), errno set */
			account(K_VERBS, ibv_rereg_mr(w.mr[i], remu_rnd_n(16),
						      w.pd[remu_rnd_n(2)], addr, len,
						      access) ? -1 : 0, 0);
			break;
		default: {
			struct ibv_sge sge = { (uintptr_t)addr, (uint32_t)len,
					       w.mr[i]->lkey };

			account(K_VERBS, ibv_advise_mr(w.pd[dev], remu_rnd_n(3),
						       remu_rnd_n(4), &sge, 1), 0);
		}
		}
		pthread_mutex_unlock(&w.lock);
		return;
	}
	mr = ibv_reg_mr(w.pd[dev], addr, len, access);
	account(K_VERBS, mr ? 0 : -1, 0);
	if (mr) {
		w.mr[i] = mr;
		note_own(mr->handle);
	}
	pthread_mutex_unlock(&w.lock);
}

static void verbs_misc(void)
{
	int dev = remu_rnd_n(2), i = remu_rnd_n(4), k = remu_rnd_n(8);
	struct ibv_srq_init_attr sa = {
		.attr = { .max_wr = remu_chance(80) ? remu_rnd_n(600) : word(),
			  .max_sge = remu_chance(80) ? remu_rnd_n(20) : word(),
			  .srq_limit = remu_chance(80) ? remu_rnd_n(600) : word() },
	};
	struct ibv_alloc_dm_attr da = {
		.length = remu_chance(80) ? remu_rnd_n(300000) : remu_rnd(),
		.log_align_req = remu_chance(80) ? remu_rnd_n(24) : word(),
		.comp_mask = remu_chance(90) ? 0 : word(),
	};
	struct ibv_ah_attr ah;
	union ibv_gid g = {};
	struct ibv_qp *qp;
	uint8_t tmp[64];
	uint32_t h;

	pthread_mutex_lock(&w.lock);
	switch (remu_rnd_n(5)) {
	case 0:
		if (w.srq[i]) {
			struct ibv_srq_attr a = { .max_wr = word(),
						  .srq_limit = word() };

			h = w.srq[i]->handle;
			if (remu_chance(50)) {
				account(K_VERBS, ibv_modify_srq(w.srq[i], &a,
								remu_rnd_n(4)), 0);
			} else if (!ibv_destroy_srq(w.srq[i])) {
				forget_own(h);
				w.srq[i] = NULL;
			}
			break;
		}
		w.srq[i] = ibv_create_srq(w.pd[0], &sa);
		account(K_VERBS, w.srq[i] ? 0 : -1, 0);
		if (w.srq[i])
			note_own(w.srq[i]->handle);
		break;
	case 1:
		if (w.mw[k]) {
			h = w.mw[k]->handle;
			if (!ibv_dealloc_mw(w.mw[k])) {
				forget_own(h);
				w.mw[k] = NULL;
			}
			break;
		}
		w.mw[k] = ibv_alloc_mw(w.pd[dev], remu_chance(80) ? 1 + remu_rnd_n(2) :
				       word());
		account(K_VERBS, w.mw[k] ? 0 : -1, 0);
		if (w.mw[k])
			note_own(w.mw[k]->handle);
		break;
	case 2:
		if (w.ah[k]) {
			h = w.ah[k]->handle;
			if (!ibv_destroy_ah(w.ah[k])) {
				forget_own(h);
				w.ah[k] = NULL;
			}
			break;
		}
		remu_set_av(&ah, &w.gid[remu_rnd_n(2)], remu_chance(80) ? w.gidx[dev] :
			    remu_rnd_n(256), remu_rnd());
		ah.is_global = remu_chance(90);
		ah.port_num = remu_chance(90) ? 1 : remu_rnd_n(4);
		if (remu_chance(20))
			ah.grh.dgid.raw[remu_rnd_n(16)] = remu_rnd();
		w.ah[k] = ibv_create_ah(w.pd[dev], &ah);
		account(K_VERBS, w.ah[k] ? 0 : -1, 0);
		if (w.ah[k])
			note_own(w.ah[k]->handle);
		break;
	case 3:
		/* one of 16 IPv4-mapped groups (239.77.0.x), or any GID */
		qp = w.qp[remu_rnd_n(16)];
		if (!qp)
			break;
		if (remu_chance(85)) {
			g.raw[10] = g.raw[11] = 0xff;
			g.raw[12] = 239;
			g.raw[13] = 77;
			g.raw[15] = remu_rnd_n(16);
		} else {
			for (k = 0; k < 16; k++)
				g.raw[k] = remu_rnd();
		}
		if (remu_chance(60))
			account(K_VERBS, ibv_attach_mcast(qp, &g, remu_chance(90) ?
							  0 : remu_rnd()), 0);
		else
			account(K_VERBS, ibv_detach_mcast(qp, &g, remu_chance(90) ?
							  0 : remu_rnd()), 0);
		break;
	default:
		if (w.dm[i]) {
			uint64_t off = remu_chance(80) ? remu_rnd_n(8192) : remu_rnd();
			size_t n = remu_rnd_n(sizeof(tmp) + 1);

			if (remu_chance(40))
				account(K_VERBS, ibv_memcpy_to_dm(w.dm[i], off,
								  tmp, n), 0);
			else if (remu_chance(40))
				account(K_VERBS, ibv_memcpy_from_dm(tmp, w.dm[i],
								    off, n), 0);
			else if (!ibv_free_dm(w.dm[i]))
				w.dm[i] = NULL;
			break;
		}
		w.dm[i] = ibv_alloc_dm(w.ctx[dev], &da);
		account(K_VERBS, w.dm[i] ? 0 : -1, 0);
	}
	pthread_mutex_unlock(&w.lock);
}

/*
 * fork(), and in the child: die with the parent, as the parent of the
 * rounds may SIGKILL it at any moment (an orphan would keep its context,
 * and the objects in it, alive)
 */
static pid_t fork_tied(void)
{
	pid_t parent = getpid(), pid = fork();

	if (!pid && (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent))
		_exit(0);
	return pid;
}

/* a fork whose child sends raw commands on the inherited fd, then exits */
static void fork_user(int fd)
{
	pid_t pid;
	int i, s;

	/* the child sees the own handles of now: none made until it is done */
	pthread_mutex_lock(&w.lock);
	pid = fork_tied();
	if (pid < 0) {
		pthread_mutex_unlock(&w.lock);
		return;
	}
	if (!pid) {
		in_forked_user = true;
		remu_rnd_state ^= getpid();
		for (i = 0; i < 50; i++)
			if (remu_chance(60))
				raw_write(fd);
			else
				raw_ioctl(fd);
		_exit(0);
	}
	atomic_fetch_add(&st->forks, 1);
	waitpid(pid, &s, 0);
	pthread_mutex_unlock(&w.lock);
	if (!WIFEXITED(s))
		bad(__LINE__, s, 0);
}

static atomic_bool stop_threads;

static void *worker(void *arg)
{
	uint64_t seed = (uintptr_t)arg;

	remu_rnd_seed(seed);
	while (!atomic_load(&stop_threads)) {
		int fd = w.ctx[remu_chance(80) ? 0 : 1]->cmd_fd;

		switch (remu_rnd_n(100)) {
		case 0 ... 9:
			verbs_cq();
			atomic_fetch_add(&st->verbs, 1);
			break;
		case 10 ... 21:
			verbs_qp();
			atomic_fetch_add(&st->verbs, 1);
			break;
		case 22 ... 29:
			verbs_mr();
			atomic_fetch_add(&st->verbs, 1);
			break;
		case 30 ... 37:
			verbs_misc();
			atomic_fetch_add(&st->verbs, 1);
			break;
		case 38 ... 69:
			raw_write(fd);
			break;
		case 70 ... 89:
			raw_ioctl(fd);
			break;
		case 90 ... 94:
			fuzz_mmap(fd);
			break;
		case 95 ... 98:
			garbage(fd);
			break;
		default:
			fork_user(fd);
		}
	}
	return NULL;
}

/* handle numbers of another process's objects, through a pipe */
static void foreign_handles(void)
{
	uint32_t h[8];
	int p[2], i, n;
	pid_t pid;

	if (pipe(p))
		return;
	pid = fork_tied();
	if (!pid) {
		struct ibv_context *ctx = remu_open("remu0");
		struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
		struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 8, NULL, NULL, 0) :
					 NULL;
		struct ibv_pd *pd2 = pd ? ibv_alloc_pd(ctx) : NULL;
		struct ibv_pd *pd3 = pd2 ? ibv_alloc_pd(ctx) : NULL;

		n = 0;
		if (cq) {
			h[n++] = pd->handle;
			h[n++] = cq->handle;
			h[n++] = pd2->handle;
			if (pd3)
				h[n++] = pd3->handle;
		}
		if (write(p[1], h, n * sizeof(h[0])) < 0)
			_exit(1);
		/* the objects live until the parent has used the numbers */
		close(p[1]);
		pause();
		_exit(0);
	}
	close(p[1]);
	n = read(p[0], h, sizeof(h));
	for (i = 0; i < n / 4; i++)
		note_handle(h[i] + 16);	/* beyond ours: maybe nothing */
	close(p[0]);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* the child of one round */
static int round_child(uint64_t seed, double secs)
{
	struct ibv_qp_init_attr ia = { .cap = { .max_send_wr = 8,
						.max_recv_wr = 8,
						.max_send_sge = 1,
						.max_recv_sge = 1 } };
	pthread_t t[2];
	double end;
	int i, k;

	remu_rnd_seed(seed);
	pthread_mutex_init(&w.lock, NULL);
	pthread_mutex_init(&w.maplock, NULL);
	/*
	 * 4 MiB, then a guard no access reaches (PROT_NONE), longer than
	 * any length the calls give: a pointer near the end (uptr()) runs
	 * into the guard, an EFAULT, never into another mapping
	 */
	w.buf = mmap(NULL, (4 << 20) + BUF_GUARD, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	w.ro = mmap(NULL, PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (w.buf == MAP_FAILED || w.ro == MAP_FAILED ||
	    mprotect(w.buf + (4 << 20), BUF_GUARD, PROT_NONE))
		return 2;
	memset(w.buf, 0x5a, 4 << 20);
	for (k = 0; k < 2; k++) {
		w.ctx[k] = remu_open(k ? "remu1" : "remu0");
		if (!w.ctx[k])
			return 3;
		w.gidx[k] = remu_ipv4_gid(w.ctx[k], &w.gid[k]);
		w.pd[k] = ibv_alloc_pd(w.ctx[k]);
		if (!w.pd[k])
			return 4;
		note_own(w.pd[k]->handle);
		w.cq[k] = ibv_create_cq(w.ctx[k], 64, NULL, NULL, 0);
		if (!w.cq[k])
			return 5;
		note_own(w.cq[k]->handle);
	}
	w.ch = ibv_create_comp_channel(w.ctx[0]);
	for (i = 0; i < 6; i++) {
		k = i % 2;
		ia.send_cq = ia.recv_cq = w.cq[k];
		ia.qp_type = i < 2 ? IBV_QPT_RC : i < 4 ? IBV_QPT_UC : IBV_QPT_UD;
		w.qp[i] = ibv_create_qp(w.pd[k], &ia);
		if (w.qp[i]) {
			note_own(w.qp[i]->handle);
			w.garbled[i] = i >= 3;
		}
	}
	foreign_handles();
	for (i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, worker,
			       (void *)(uintptr_t)(seed * (i + 3)));
	end = remu_now() + secs;
	while (remu_now() < end)
		usleep(20000);
	atomic_store(&stop_threads, true);
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	/* exit with everything open: the kernel cleans up */
	return 0;
}

static const char *const objtypes[] = { "pd", "mr", "cq", "qp", "srq", "ah",
					"mw", "dm", "ring", "ucontext",
					"mcast_grp", "mcast_attach" };
#define NOBJ (sizeof(objtypes) / sizeof(objtypes[0]))

/* every count back at @base within 5 s: -1, or the index of the first not */
static int counts_back(const int *base)
{
	return remu_obj_counts_back(objtypes, NOBJ, base, 5);
}

FIXTURE(uverbsfuzz)
{
	int base[NOBJ];
};

FIXTURE_SETUP(uverbsfuzz)
{
	unsigned int i;

	st = mmap(NULL, sizeof(*st), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, st);
	memset(st, 0, sizeof(*st));
	for (i = 0; i < NOBJ; i++)
		self->base[i] = remu_obj_count(objtypes[i]);
	ASSERT_LE(0, self->base[0]);
}

FIXTURE_TEARDOWN(uverbsfuzz)
{
	munmap(st, sizeof(*st));
}

TEST_F_TIMEOUT(uverbsfuzz, fuzz, 3600)
{
	long secs = remu_env_long("REMU_FUZZ_SECONDS", 20), killed = 0, rounds = 0;
	uint64_t seed = remu_env_long("REMU_FUZZ_SEED", 0);
	double end, start = remu_now();
	int i, status, bad_counts = -1;

	if (!seed)
		seed = (uint64_t)time(NULL) * 2654435761u;
	remu_rnd_seed(seed);
	printf("# uverbsfuzz: seed %llu (REMU_FUZZ_SEED), %ld s (REMU_FUZZ_SECONDS)\n",
	       (unsigned long long)seed, secs);
	end = start + secs;
	while (remu_now() < end) {
		uint64_t rseed = remu_rnd();
		double rsecs = 0.5 + remu_rnd_n(3000) / 1000.0;
		bool kill_it = remu_chance(35);
		pid_t pid = fork();

		ASSERT_LE(0, pid);
		if (!pid)
			_exit(round_child(rseed, rsecs));
		if (kill_it) {
			usleep(remu_rnd_n((unsigned int)(rsecs * 1e6) + 200000));
			kill(pid, SIGKILL);
		}
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
		rounds++;
		if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL &&
		    kill_it) {
			killed++;
		} else if (!WIFEXITED(status) || WEXITSTATUS(status)) {
			printf("# round seed %llu: %s %d\n",
			       (unsigned long long)rseed,
			       WIFEXITED(status) ? "exit" : "signal",
			       WIFEXITED(status) ? WEXITSTATUS(status) :
						    WTERMSIG(status));
			EXPECT_TRUE(WIFEXITED(status));
			EXPECT_EQ(0, WEXITSTATUS(status));
		}
		bad_counts = counts_back(self->base);
		if (bad_counts >= 0) {
			printf("# round seed %llu: %s count %d, %d before\n",
			       (unsigned long long)rseed, objtypes[bad_counts],
			       remu_obj_count(objtypes[bad_counts]),
			       self->base[bad_counts]);
			break;
		}
	}
	printf("# uverbsfuzz: %ld rounds in %.0f s (%ld killed mid-way)\n",
	       rounds, remu_now() - start, killed);
	printf("# uverbsfuzz: verbs calls %ld, raw writes %ld, raw ioctls %ld, mmaps %ld, ring garbage %ld, forked users %ld; succeeded %ld\n",
	       atomic_load(&st->verbs), atomic_load(&st->writes),
	       atomic_load(&st->ioctls), atomic_load(&st->mmaps),
	       atomic_load(&st->garbage), atomic_load(&st->forks),
	       atomic_load(&st->ok));
	for (i = 1; i < MAX_ERRNO; i++)
		if (atomic_load(&st->errnos[i]))
			printf("# uverbsfuzz: errno %3d %-16s %ld\n", i,
			       strerrorname_np(i) ?: "?",
			       atomic_load(&st->errnos[i]));
	for (i = 0; i < atomic_load(&st->nbad_what) && i < 8; i++)
		printf("# uverbsfuzz: unclean: the call at line %d returned %ld, errno %d\n",
		       st->bad_what[i].line, st->bad_what[i].ret,
		       st->bad_what[i].err);
	EXPECT_EQ(-1, bad_counts);
	EXPECT_EQ(0, atomic_load(&st->bad));
	EXPECT_EQ(0, remu_pair_check("remu0", "remu1", 1 << 16));
}

TEST_HARNESS_MAIN
