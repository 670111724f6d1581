// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * queues.c - libremu's CQs, QPs, SRQs and AHs, and the fast path.
 *
 * Every queue is a ring shared with the kernel (remu_ring.h): posting a
 * receive writes the RQ/SRQ ring and makes no system call; posting sends
 * writes the SQ ring and rings the doorbell once per ibv_post_send() (a
 * POST_SEND command carrying no WRs; write() on the command fd, or the
 * ioctl that carries it where the kernel refuses that: remu_doorbell());
 * polling reads the CQ ring and makes
 * no system call.  Control verbs go through the ibv_cmd_* commands, whose
 * responses say where each ring is mapped.
 *
 * Inline receive: unless REMU_SCATTER_TO_CQE=0, CQs are created with
 * REMU_CREATE_CQ_INLINE_RECV; poll_cq then copies a small receive's data
 * from the CQE slot to the addresses the kernel checked and put there.
 *
 * The extended verbs share all of this: ibv_create_cq_ex() and the
 * ibv_start_poll() API are in cq_ex.c, ibv_create_qp_ex() and the
 * ibv_wr_* API in qp_ex.c; a send WQE is filled through wqe.h either way.
 *
 * Locking: one spinlock per ring (cq->lock, qp->sq_lock, qp->rq_lock,
 * srq->lock) serialises this process's threads on that ring's index;
 * a QP's or SRQ's are none on a parent domain with a thread domain
 * (struct remu_lock, domain.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "remu-abi.h"
#include "remu.h"
#include "wqe.h"

/* ---- CQ ---- */

/*
 * Inline receive (scatter to CQE) is on unless the environment says
 * REMU_SCATTER_TO_CQE=0 when the CQ is created (the name follows mlx5's
 * MLX5_SCATTER_TO_CQE), and only when the module offers it, for CQs of
 * at most REMU_CQ_INLINE_MAX_CQE entries: its slots are 256 bytes, a
 * plain one 64, and a CQ may have up to max_cqe (4 M) entries.
 */
#define REMU_CQ_INLINE_MAX_CQE	65536

int remu_want_inline_recv(struct ibv_context *ctx, int cqe)
{
	const char *env = getenv("REMU_SCATTER_TO_CQE");

	if (!(to_rctx(ctx)->kernel_caps & REMU_UCTX_INLINE_RECV) ||
	    cqe > REMU_CQ_INLINE_MAX_CQE)
		return 0;
	return !env || strcmp(env, "0");
}

/* The slot size of @cq's format (remu-abi.h). */
static uint32_t remu_cq_slot_size(const struct remu_cq *cq)
{
	uint32_t size = cq->inline_recv ? sizeof(struct remu_cqe_ext) :
					  sizeof(struct remu_cqe);

	return cq->timestamp ? size + REMU_CQE_TS_SIZE : size;
}

/*
 * Map the ring the kernel created for @cq (inline_recv and timestamp set
 * to what create_cq asked for): 0 or an errno (EPROTO when the slots are
 * not of that format).
 */
int remu_cq_map(struct remu_cq *cq, struct ibv_context *ctx,
		const struct remu_ring_info *info)
{
	if (info->slot_size != remu_cq_slot_size(cq))
		return EPROTO;
	return remu_uring_map(&cq->ring, ctx->cmd_fd, info, 0);
}

void remu_cq_free(struct remu_cq *cq)
{
	pthread_spin_destroy(&cq->lock);
	free(cq);
}

struct ibv_cq *remu_create_cq(struct ibv_context *ctx, int cqe,
			      struct ibv_comp_channel *channel, int comp_vector)
{
	struct remu_cmd_create_cq_resp resp = {};
	struct remu_cmd_create_cq cmd = {};
	struct remu_cq *cq;
	int ret;

	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return NULL;
	pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
	cq->inline_recv = remu_want_inline_recv(ctx, cqe);
	if (cq->inline_recv)
		cmd.flags = REMU_CREATE_CQ_INLINE_RECV;
	ret = ibv_cmd_create_cq(ctx, cqe, channel, comp_vector, &cq->vcq.cq,
				&cmd.ibv_cmd, sizeof(cmd), &resp.ibv_resp,
				sizeof(resp));
	if (ret)
		goto err_free;
	ret = remu_cq_map(cq, ctx, &resp.ring);
	if (ret) {
		ibv_cmd_destroy_cq(&cq->vcq.cq);
		goto err_free;
	}
	return &cq->vcq.cq;

err_free:
	remu_cq_free(cq);
	errno = ret;
	return NULL;
}

int remu_destroy_cq(struct ibv_cq *ibcq)
{
	struct remu_cq *cq = to_rcq(ibcq);
	int ret;

	ret = ibv_cmd_destroy_cq(ibcq);
	if (ret)
		return ret;
	remu_uring_unmap(&cq->ring);
	remu_parent_domain_put(cq->parent);
	remu_cq_free(cq);
	return 0;
}

/*
 * The kernel copies the pending CQEs into a new ring; switch to it under
 * the CQ lock so no poll sees half of the change.
 */
int remu_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct remu_cmd_resize_cq_resp resp = {};
	struct ibv_resize_cq cmd = {};
	struct remu_cq *cq = to_rcq(ibcq);
	struct remu_uring nr = {};
	int ret;

	pthread_spin_lock(&cq->lock);
	ret = ibv_cmd_resize_cq(ibcq, cqe, &cmd, sizeof(cmd), &resp.ibv_resp,
				sizeof(resp));
	if (!ret && resp.ring.slot_size != remu_cq_slot_size(cq))
		ret = EPROTO;
	if (!ret) {
		ret = remu_uring_map(&nr, ibcq->context->cmd_fd, &resp.ring, 0);
		if (!ret) {
			remu_uring_unmap(&cq->ring);
			cq->ring = nr;
		}
	}
	pthread_spin_unlock(&cq->lock);
	return ret;
}

/* The IBV_WC_* flags of @c (ibv_wc.wc_flags, ibv_wc_read_wc_flags()). */
unsigned int remu_cqe_wc_flags(const struct remu_cqe *c)
{
	unsigned int f = 0;

	if (c->flags & REMU_CQE_GRH)
		f |= IBV_WC_GRH;
	if (c->flags & REMU_CQE_WITH_IMM)
		f |= IBV_WC_WITH_IMM;
	if (c->flags & REMU_CQE_WITH_INV)
		f |= IBV_WC_WITH_INV;
	if (c->flags & REMU_CQE_IP_CSUM_OK)
		f |= IBV_WC_IP_CSUM_OK;
	return f;
}

/*
 * wc.sl of a UD receive, as mlx5's provider reports it on RoCE: the CQE's
 * packet type, bit 3 "has a UDP header" (RoCEv2) and bits 2:0 the L3
 * header (1 IPv6, 2 IPv4).  UCX's UD transport reads the GRH area's
 * destination by it (docs/compatibility.md).
 */
enum {
	REMU_WC_SL_ROCE_UDP	= 0x8,
	REMU_WC_SL_L3_IPV6	= 0x1,
	REMU_WC_SL_L3_IPV4	= 0x2,
};

uint8_t remu_cqe_sl(const struct remu_cqe *c)
{
	switch (c->network_hdr_type) {
	case REMU_NET_IPV4:
		return REMU_WC_SL_ROCE_UDP | REMU_WC_SL_L3_IPV4;
	case REMU_NET_IPV6:
		return REMU_WC_SL_ROCE_UDP | REMU_WC_SL_L3_IPV6;
	default:
		return c->sl;
	}
}

static void remu_cqe_to_wc(const struct remu_cqe *c, struct ibv_wc *wc)
{
	wc->wr_id = c->wr_id;
	wc->status = c->status;
	wc->opcode = c->opcode;
	wc->vendor_err = c->vendor_err;
	wc->byte_len = c->byte_len;
	wc->imm_data = c->ex_data;	/* also invalidated_rkey */
	wc->qp_num = c->qp_num;
	wc->src_qp = c->src_qp;
	wc->wc_flags = remu_cqe_wc_flags(c);
	wc->pkey_index = c->pkey_index;
	wc->slid = c->slid;
	wc->sl = remu_cqe_sl(c);
	wc->dlid_path_bits = c->dlid_path_bits;
}

/*
 * Inline receive: the kernel checked each address against the receive
 * WQE's lkeys and put the data in the slot; place it, in order.  The
 * slot is in memory the process can write, so take nothing for granted
 * that only bounds this process's own damage.
 */
void remu_cqe_place(const struct remu_cqe_ext *x)
{
	uint32_t n = x->cqe.inline_sges, off = 0, i;

	if (n > REMU_CQE_INLINE_SGES)
		n = REMU_CQE_INLINE_SGES;
	for (i = 0; i < n; i++) {
		uint32_t len = x->sge[i].length;

		if (len > REMU_CQE_INLINE_MAX - off)
			len = REMU_CQE_INLINE_MAX - off;
		memcpy((void *)(uintptr_t)x->sge[i].addr, x->data + off, len);
		off += len;
	}
}

/* Reads the ring only: no system call. */
int remu_poll_cq(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc)
{
	struct remu_cq *cq = to_rcq(ibcq);
	struct remu_cqe *c;
	int n = 0;

	pthread_spin_lock(&cq->lock);
	while (n < ne && (c = remu_uring_cons_slot(&cq->ring))) {
		if (cq->inline_recv && (c->flags & REMU_CQE_INLINE))
			remu_cqe_place((const struct remu_cqe_ext *)c);
		remu_cqe_to_wc(c, &wc[n++]);
		remu_uring_cons_advance(&cq->ring);
	}
	if (n)
		remu_uring_cons_publish(&cq->ring);
	/* checked after the reads: what they returned may be the dead page */
	if (remu_uring_dead(&cq->ring))
		n = -EIO;
	pthread_spin_unlock(&cq->lock);
	return n;
}

/*
 * Take QP @qpn's completions out of @cq, as mlx5's provider does when a
 * QP is reset or destroyed: the kernel posts none for it any more, and
 * a consumer that reuses the QP (or a new one with its number) must not
 * poll the old ones.  The other QPs' CQEs stay, in order: walking from
 * the newest CQE the kernel published down to ours, each kept CQE moves
 * up over the removed ones, then our consumer index skips the slots
 * freed at the old end.  The kernel writes only at and after the
 * producer index we read, and reuses the freed slots only after the
 * release-store of the new consumer index.  With @keep_recv (a QP on an
 * SRQ) receive completions stay: each consumed an SRQ WQE that only the
 * consumer can post again (mlx5 returns it to the SRQ; remu's kernel
 * has consumed it).
 */
static void remu_cq_clean(struct ibv_cq *ibcq, uint32_t qpn, int keep_recv)
{
	struct remu_cq *cq = to_rcq(ibcq);
	struct remu_uring *r = &cq->ring;
	uint32_t prod, i, gone = 0;
	struct remu_cqe *c;

	pthread_spin_lock(&cq->lock);
	if (remu_uring_dead(r))
		goto out;
	prod = __atomic_load_n(&r->hdr->prod, __ATOMIC_ACQUIRE);
	/* a producer index the kernel cannot have written: the process wrote
	 * over its own ring; leave it rather than walk 2^32 slots */
	if (prod - r->idx > r->num_slots)
		goto out;
	for (i = prod; i != r->idx; i--) {
		c = remu_uring_slot(r, i - 1);
		if (c->qp_num == qpn &&
		    !(keep_recv && (c->opcode & IBV_WC_RECV)))
			gone++;
		else if (gone)
			memcpy(remu_uring_slot(r, i - 1 + gone), c,
			       r->slot_size);
	}
	if (gone) {
		r->idx += gone;
		remu_uring_cons_publish(r);
	}
out:
	pthread_spin_unlock(&cq->lock);
}

/* Both CQs of @ibqp (remu_cq_clean()); after the kernel stopped it. */
static void remu_qp_clean_cqs(struct ibv_qp *ibqp)
{
	if (ibqp->recv_cq)
		remu_cq_clean(ibqp->recv_cq, ibqp->qp_num, !!ibqp->srq);
	if (ibqp->send_cq && ibqp->send_cq != ibqp->recv_cq)
		remu_cq_clean(ibqp->send_cq, ibqp->qp_num, 0);
}

int remu_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	return ibv_cmd_req_notify_cq(ibcq, solicited_only);
}

/* ---- QP ---- */

/*
 * CREATE_QP for @qp: the extended command when @attr has creation flags
 * (which the kernel judges), the plain one otherwise; remu's part of the
 * response in @drv.  0 or an errno.
 */
static int remu_cmd_qp(struct ibv_context *ctx, struct remu_qp *qp,
		       struct ibv_qp_init_attr_ex *attr,
		       struct remu_create_qp_resp *drv)
{
	int ret;

	if (attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) {
		struct remu_cmd_create_qp_ex_resp resp = {};
		struct remu_cmd_create_qp_ex cmd = {};

		cmd.ece_options = remu_ece_request(ctx);

		ret = ibv_cmd_create_qp_ex2(ctx, &qp->vqp, attr, &cmd.ibv_cmd,
					    sizeof(cmd), &resp.ibv_resp,
					    sizeof(resp));
		*drv = resp.drv_payload;
	} else {
		struct remu_cmd_create_qp_resp resp = {};
		struct remu_cmd_create_qp cmd = {};

		cmd.ece_options = remu_ece_request(ctx);

		ret = ibv_cmd_create_qp_ex(ctx, &qp->vqp, attr, &cmd.ibv_cmd,
					   sizeof(cmd), &resp.ibv_resp,
					   sizeof(resp));
		*drv = resp.drv_payload;
	}
	return ret;
}

/*
 * A QP as @attr says (comp_mask checked by the caller), its rings
 * mapped: the QP, or NULL with errno set.  Both ibv_create_qp() and
 * ibv_create_qp_ex() come here.  On a parent domain with a thread
 * domain its rings have no locks (domain.c).
 */
struct remu_qp *remu_qp_new(struct ibv_context *ctx,
			    struct ibv_qp_init_attr_ex *attr)
{
	struct remu_create_qp_resp resp;
	int fd = ctx->cmd_fd;
	struct remu_qp *qp;
	int ret;

	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return NULL;
	remu_lock_init(&qp->sq_lock, attr->pd);
	remu_lock_init(&qp->rq_lock, attr->pd);
	ret = remu_cmd_qp(ctx, qp, attr, &resp);
	if (ret)
		goto err_free;
	ret = remu_uring_map(&qp->sq, fd, &resp.sq, 1);
	if (ret)
		goto err_destroy;
	if (!attr->srq) {
		ret = remu_uring_map(&qp->rq, fd, &resp.rq, 1);
		if (ret)
			goto err_unmap;
	}
	qp->max_inline = resp.max_inline;
	qp->max_send_sge = resp.max_send_sge;
	qp->max_recv_sge = resp.max_recv_sge;
	qp->op_mask = remu_qp_op_mask(ctx, attr->qp_type);
	qp->get_ece = resp.ece_options;
	remu_parent_domain_get(attr->pd);
	return qp;

err_unmap:
	remu_uring_unmap(&qp->sq);
err_destroy:
	ibv_cmd_destroy_qp(&qp->vqp.qp);
err_free:
	remu_lock_destroy(&qp->sq_lock);
	remu_lock_destroy(&qp->rq_lock);
	free(qp);
	errno = ret;
	return NULL;
}

struct ibv_qp *remu_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct ibv_qp_init_attr_ex ax = {
		.qp_context = attr->qp_context,
		.send_cq = attr->send_cq,
		.recv_cq = attr->recv_cq,
		.srq = attr->srq,
		.cap = attr->cap,
		.qp_type = attr->qp_type,
		.sq_sig_all = attr->sq_sig_all,
		.comp_mask = IBV_QP_INIT_ATTR_PD,
		.pd = pd,
	};
	struct remu_qp *qp = remu_qp_new(pd->context, &ax);

	if (!qp)
		return NULL;
	attr->cap = ax.cap;
	return &qp->vqp.qp;
}

/*
 * A modify_qp with a rate limit or ECE options goes as the extended
 * command, which alone carries IBV_QP_RATE_LIMIT, with the burst and
 * @ece_options as remu's driver data (all 0: the plain ibv_modify_qp()).
 * A rate limit needs the module to offer it, else EOPNOTSUPP as from a
 * device without rate limits; ECE options are only ever set where it has
 * ECE (ece.c), and on success the kernel's answer is the QP's.
 */
static int remu_modify_qp_ex(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
			     int mask, uint32_t max_burst_sz,
			     uint16_t typical_pkt_sz, uint32_t ece_options)
{
	struct remu_cmd_modify_qp_ex_resp resp = {};
	struct remu_cmd_modify_qp_ex cmd = {};
	int ret;

	if ((mask & IBV_QP_RATE_LIMIT) &&
	    !(to_rctx(ibqp->context)->kernel_caps & REMU_UCTX_RATE_LIMIT))
		return EOPNOTSUPP;
	cmd.max_burst_sz = max_burst_sz;
	cmd.typical_pkt_sz = typical_pkt_sz;
	cmd.ece_options = ece_options;
	ret = ibv_cmd_modify_qp_ex(ibqp, attr, mask, &cmd.ibv_cmd, sizeof(cmd),
				   &resp.ibv_resp, sizeof(resp));
	if (!ret && ece_options)
		remu_ece_modified(to_rqp(ibqp), resp.ece_options);
	return ret;
}

/* libibverbs records the new state in ibqp->state; posting checks it. */
int remu_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	uint32_t ece_options = to_rqp(ibqp)->set_ece;	/* ece.c */
	struct ibv_modify_qp cmd = {};
	int ret;

	if ((mask & IBV_QP_RATE_LIMIT) || ece_options)
		ret = remu_modify_qp_ex(ibqp, attr, mask, 0, 0, ece_options);
	else
		ret = ibv_cmd_modify_qp(ibqp, attr, mask, &cmd, sizeof(cmd));
	if (!ret && (mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RESET)
		remu_qp_clean_cqs(ibqp);
	return ret;
}

/*
 * ibv_modify_qp_rate_limit(): the rate (kbps, 0: none), the burst and the
 * typical packet size, in the QP's current state (RTS, as mlx5 wants);
 * mlx5's provider rules: no comp_mask, no burst or typical size without a
 * rate (EINVAL).  The kernel checks the rest (docs/rate-limits.md).
 */
int remu_modify_qp_rate_limit(struct ibv_qp *ibqp,
			      struct ibv_qp_rate_limit_attr *attr)
{
	struct ibv_qp_attr qp_attr = {};

	if (attr->comp_mask)
		return EINVAL;
	if ((attr->max_burst_sz || attr->typical_pkt_sz) && !attr->rate_limit)
		return EINVAL;
	qp_attr.rate_limit = attr->rate_limit;
	return remu_modify_qp_ex(ibqp, &qp_attr, IBV_QP_RATE_LIMIT,
				 attr->max_burst_sz, attr->typical_pkt_sz, 0);
}

int remu_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
		  struct ibv_qp_init_attr *init)
{
	struct ibv_query_qp cmd = {};

	return ibv_cmd_query_qp(ibqp, attr, mask, init, &cmd, sizeof(cmd));
}

int remu_destroy_qp(struct ibv_qp *ibqp)
{
	struct remu_qp *qp = to_rqp(ibqp);
	int ret;

	ret = ibv_cmd_destroy_qp(ibqp);
	if (ret)
		return ret;
	remu_qp_clean_cqs(ibqp);
	remu_uring_unmap(&qp->sq);
	remu_uring_unmap(&qp->rq);
	remu_parent_domain_put(ibqp->pd ? to_rpd(ibqp->pd) : NULL);
	remu_lock_destroy(&qp->sq_lock);
	remu_lock_destroy(&qp->rq_lock);
	free(qp);
	return 0;
}

/* @cmd through the ioctl that carries a write() command, as libibverbs' */
static int remu_doorbell_ioctl(struct ibv_qp *ibqp, struct ibv_post_send *cmd)
{
	DECLARE_COMMAND_BUFFER(cmdb, UVERBS_OBJECT_DEVICE,
			       UVERBS_METHOD_INVOKE_WRITE, 3);
	struct ib_uverbs_post_send_resp resp;

	fill_attr_const_in(cmdb, UVERBS_ATTR_WRITE_CMD,
			   IB_USER_VERBS_CMD_POST_SEND);
	fill_attr_in(cmdb, UVERBS_ATTR_CORE_IN, &cmd->core_payload,
		     sizeof(cmd->core_payload));
	fill_attr_out(cmdb, UVERBS_ATTR_CORE_OUT, &resp, sizeof(resp));
	return execute_ioctl(ibqp->context, cmdb);
}

/*
 * The doorbell: a POST_SEND command with no WRs, written to the command
 * fd.  The kernel refuses write() on it to a process whose credentials
 * are not those of the process that opened it (EACCES,
 * ib_safe_file_access()): a context imported from another process
 * (import.c) or used by a child after fork().  There the command goes
 * through UVERBS_METHOD_INVOKE_WRITE, as libibverbs sends its own
 * commands, and does so from then on for the context.
 */
int remu_doorbell(struct ibv_qp *ibqp)
{
	struct remu_context *ctx = to_rctx(ibqp->context);
	struct ib_uverbs_post_send_resp resp;
	struct ibv_post_send cmd = {};

	cmd.hdr.command = IB_USER_VERBS_CMD_POST_SEND;
	cmd.hdr.in_words = sizeof(cmd) / 4;
	cmd.hdr.out_words = sizeof(resp) / 4;
	cmd.response = (uintptr_t)&resp;
	cmd.qp_handle = ibqp->handle;
	cmd.wr_count = 0;
	cmd.sge_count = 0;
	cmd.wqe_size = sizeof(struct ib_uverbs_send_wr);
	if (atomic_load_explicit(&ctx->doorbell_ioctl, memory_order_relaxed))
		return remu_doorbell_ioctl(ibqp, &cmd);
	if (write(ibqp->context->cmd_fd, &cmd, sizeof(cmd)) == sizeof(cmd))
		return 0;
	if (errno != EACCES)
		return errno;
	atomic_store_explicit(&ctx->doorbell_ioctl, true, memory_order_relaxed);
	return remu_doorbell_ioctl(ibqp, &cmd);
}

/* Validate @wr and write it into the slot @w; 0 or an errno. */
static int remu_build_send_wqe(struct remu_qp *qp, struct ibv_send_wr *wr,
			       struct remu_send_wqe *w, int type1_ok)
{
	struct ibv_qp *ibqp = &qp->vqp.qp;
	uint32_t len = 0;
	int i;

	/* ibv_send_wr has no field for what these carry: ibv_wr_* only */
	if (!remu_opcode_ok(qp, wr->opcode) ||
	    wr->opcode == IBV_WR_ATOMIC_WRITE || REMU_WR_IS_FLUSH(wr->opcode))
		return EINVAL;
	if (wr->opcode == IBV_WR_BIND_MW) {
		remu_wqe_init(w, wr->wr_id, wr->opcode, wr->send_flags);
		return remu_wqe_bind(w, wr->bind_mw.mw, wr->bind_mw.rkey,
				     &wr->bind_mw.bind_info, type1_ok);
	}
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->max_send_sge)
		return EINVAL;
	if (wr->send_flags & IBV_SEND_INLINE) {
		for (i = 0; i < wr->num_sge; i++)
			len += wr->sg_list[i].length;
		if (len > qp->max_inline)
			return EINVAL;
	}
	if (ibqp->qp_type == IBV_QPT_UD &&
	    (!wr->wr.ud.ah || !remu_pd_same(wr->wr.ud.ah->pd, ibqp->pd)))
		return EINVAL;

	remu_wqe_init(w, wr->wr_id, wr->opcode, wr->send_flags);
	if (wr->opcode == IBV_WR_SEND_WITH_IMM ||
	    wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
		w->ex_data = wr->imm_data;
	else if (wr->opcode == IBV_WR_SEND_WITH_INV ||
		 wr->opcode == IBV_WR_LOCAL_INV)
		w->ex_data = wr->invalidate_rkey;

	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		w->remote_addr = wr->wr.rdma.remote_addr;
		w->rkey = wr->wr.rdma.rkey;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		w->remote_addr = wr->wr.atomic.remote_addr;
		w->rkey = wr->wr.atomic.rkey;
		w->compare_add = wr->wr.atomic.compare_add;
		w->swap = wr->wr.atomic.swap;
		break;
	default:
		break;
	}
	if (ibqp->qp_type == IBV_QPT_UD)
		remu_wqe_ud(w, wr->wr.ud.ah, wr->wr.ud.remote_qpn,
			    wr->wr.ud.remote_qkey);

	if (wr->send_flags & IBV_SEND_INLINE) {
		remu_wqe_inline_start(w);
		for (i = 0; i < wr->num_sge; i++)
			remu_wqe_inline_add(w,
				(void *)(uintptr_t)wr->sg_list[i].addr,
				wr->sg_list[i].length);
	} else {
		remu_wqe_sges(w, wr->sg_list, wr->num_sge);
	}
	return 0;
}

/* Writes the SQ ring, then one doorbell for the whole list. */
static int remu_post_wrs(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
			 struct ibv_send_wr **bad_wr, int type1_ok)
{
	struct remu_qp *qp = to_rqp(ibqp);
	int ret = 0, posted = 0, db;
	void *slot;

	switch (ibqp->state) {
	case IBV_QPS_RESET:
	case IBV_QPS_INIT:
	case IBV_QPS_RTR:
		*bad_wr = wr;
		return EINVAL;
	default:
		break;
	}

	remu_lock(&qp->sq_lock);
	for (; wr; wr = wr->next) {
		if (remu_uring_dead(&qp->sq)) {
			ret = EIO;
			break;
		}
		slot = remu_uring_prod_slot(&qp->sq);
		if (!slot) {
			ret = ENOMEM;
			break;
		}
		ret = remu_build_send_wqe(qp, wr, slot, type1_ok);
		if (ret)
			break;
		remu_uring_prod_advance(&qp->sq);
		posted++;
	}
	if (posted)
		remu_uring_prod_publish(&qp->sq);
	remu_unlock(&qp->sq_lock);

	if (ret)
		*bad_wr = wr;
	if (posted) {
		db = remu_doorbell(ibqp);
		if (!ret)
			ret = db;
	}
	return ret;
}

int remu_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		   struct ibv_send_wr **bad_wr)
{
	return remu_post_wrs(ibqp, wr, bad_wr, 0);
}

/* ibv_bind_mw() of a type 1 window (mw.c): one bind WQE */
int remu_post_bind(struct ibv_qp *ibqp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;

	return remu_post_wrs(ibqp, wr, &bad, 1);
}

/* One receive WQE into @r; 0 or an errno.  Caller holds the ring's lock. */
static int remu_put_recv_wqe(struct remu_uring *r, uint32_t max_sge,
			     struct ibv_recv_wr *wr)
{
	struct remu_recv_wqe *w;
	struct remu_sge *sge;
	int i;

	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > max_sge)
		return EINVAL;
	if (remu_uring_dead(r))
		return EIO;
	w = remu_uring_prod_slot(r);
	if (!w)
		return ENOMEM;
	w->wr_id = wr->wr_id;
	w->num_sge = wr->num_sge;
	w->reserved = 0;
	sge = (struct remu_sge *)(w + 1);
	for (i = 0; i < wr->num_sge; i++) {
		sge[i].addr = wr->sg_list[i].addr;
		sge[i].length = wr->sg_list[i].length;
		sge[i].lkey = wr->sg_list[i].lkey;
	}
	remu_uring_prod_advance(r);
	return 0;
}

/*
 * Writes the RQ ring only.  In ERR the WQEs must be flushed, which needs
 * the kernel: then (and only then) the doorbell is rung.
 */
int remu_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		   struct ibv_recv_wr **bad_wr)
{
	struct remu_qp *qp = to_rqp(ibqp);
	int ret = 0, posted = 0;

	if (ibqp->srq || ibqp->state == IBV_QPS_RESET) {
		*bad_wr = wr;
		return EINVAL;
	}
	remu_lock(&qp->rq_lock);
	for (; wr; wr = wr->next) {
		ret = remu_put_recv_wqe(&qp->rq, qp->max_recv_sge, wr);
		if (ret)
			break;
		posted++;
	}
	if (posted)
		remu_uring_prod_publish(&qp->rq);
	remu_unlock(&qp->rq_lock);
	if (ret)
		*bad_wr = wr;
	if (posted && ibqp->state == IBV_QPS_ERR && !ret)
		ret = remu_doorbell(ibqp);
	return ret;
}

/* ---- SRQ ---- */

struct ibv_srq *remu_create_srq(struct ibv_pd *pd,
				struct ibv_srq_init_attr *attr)
{
	struct remu_cmd_create_srq_resp resp = {};
	struct remu_cmd_create_srq cmd = {};
	struct remu_srq *srq;
	int ret;

	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return NULL;
	remu_lock_init(&srq->lock, pd);	/* none with a thread domain */
	ret = ibv_cmd_create_srq(pd, &srq->ibsrq, attr, &cmd.ibv_cmd,
				 sizeof(cmd), &resp.ibv_resp, sizeof(resp));
	if (ret)
		goto err_free;
	ret = remu_uring_map(&srq->ring, pd->context->cmd_fd, &resp.ring, 1);
	if (ret) {
		ibv_cmd_destroy_srq(&srq->ibsrq);
		goto err_free;
	}
	srq->max_sge = resp.max_sge;
	return &srq->ibsrq;

err_free:
	remu_lock_destroy(&srq->lock);
	free(srq);
	errno = ret;
	return NULL;
}

int remu_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr, int mask)
{
	struct ibv_modify_srq cmd = {};

	return ibv_cmd_modify_srq(ibsrq, attr, mask, &cmd, sizeof(cmd));
}

int remu_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct ibv_query_srq cmd = {};

	return ibv_cmd_query_srq(ibsrq, attr, &cmd, sizeof(cmd));
}

int remu_destroy_srq(struct ibv_srq *ibsrq)
{
	struct remu_srq *srq = to_rsrq(ibsrq);
	int ret;

	ret = ibv_cmd_destroy_srq(ibsrq);
	if (ret)
		return ret;
	remu_uring_unmap(&srq->ring);
	remu_lock_destroy(&srq->lock);
	free(srq);
	return 0;
}

/* Writes the SRQ ring only: no system call. */
int remu_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
		       struct ibv_recv_wr **bad_wr)
{
	struct remu_srq *srq = to_rsrq(ibsrq);
	int ret = 0, posted = 0;

	remu_lock(&srq->lock);
	for (; wr; wr = wr->next) {
		ret = remu_put_recv_wqe(&srq->ring, srq->max_sge, wr);
		if (ret)
			break;
		posted++;
	}
	if (posted)
		remu_uring_prod_publish(&srq->ring);
	remu_unlock(&srq->lock);
	if (ret)
		*bad_wr = wr;
	return ret;
}

/* ---- AH ---- */

struct ibv_ah *remu_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct remu_cmd_create_ah_resp resp = {};
	struct remu_ah *ah;
	int ret;

	ah = calloc(1, sizeof(*ah));
	if (!ah)
		return NULL;
	ret = ibv_cmd_create_ah(pd, &ah->ibah, attr, &resp.ibv_resp,
				sizeof(resp));
	if (ret) {
		free(ah);
		errno = ret;
		return NULL;
	}
	ah->ah_num = resp.ah_num;
	return &ah->ibah;
}

int remu_destroy_ah(struct ibv_ah *ibah)
{
	int ret;

	ret = ibv_cmd_destroy_ah(ibah);
	if (ret)
		return ret;
	free(to_rah(ibah));
	return 0;
}
