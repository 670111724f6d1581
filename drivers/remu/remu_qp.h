/* SPDX-License-Identifier: GPL-2.0 */
/*
 * remu_qp.h - the queue objects (CQ, QP, SRQ, AH) and the interface the
 * data-path engines (requester, responder, completer, wire) use:
 *   remu_cq_post()          write a completion
 *   remu_qp_get()/put()     find a QP by number for the receive path
 *   remu_eng_run()          the engines, in the QP's work item or the
 *                           doorbell's caller (remu_eng.h)
 *   remu_srq_limit_event()  raise SRQ_LIMIT_REACHED
 *   remu_ah_resolve()       the address vector of a UD WQE's AH
 */
#ifndef REMU_QP_H
#define REMU_QP_H

#include <linux/mutex.h>
#include <linux/refcount.h>
#include <linux/completion.h>
#include <linux/workqueue.h>
#include <rdma/ib_mad.h>

#include "remu.h"
#include "remu_eng.h"

extern struct workqueue_struct *remu_wq;

/**
 * struct remu_cq - completion queue
 * @ib_cq:	core object
 * @lock:	producer side of @ring, @notify, @overflowed; for kernel
 *		CQs also the consumer side (poll_cq)
 * @ring:	CQEs (struct remu_cqe)
 * @notify:	0, IB_CQ_SOLICITED or IB_CQ_NEXT_COMP: armed for an event
 * @overflowed:	a CQE was lost; IB_EVENT_CQ_ERR has been raised
 * @inline_recv, @timestamp: the slot format, chosen at creation (remu-abi.h)
 */
struct remu_cq {
	struct ib_cq ib_cq;
	spinlock_t lock;	/* @ring's producer side, @notify, @overflowed */
	struct remu_queue ring;
	u8 notify;
	bool overflowed;
	bool inline_recv;	/* slots are struct remu_cqe_ext */
	bool timestamp;		/* slots end in struct remu_cqe_ts */
};

/**
 * struct remu_wq - a send or receive work queue (also the SRQ's)
 * @ring:	WQEs
 * @prod_lock:	producer side for kernel consumers' posts
 * @cons_lock:	consumer side (the engines, and the flush)
 * @max_wr:	usable slots
 * @max_sge:	SGEs per WQE
 */
struct remu_wq {
	struct remu_queue ring;
	spinlock_t prod_lock;	/* kernel consumers' posts */
	spinlock_t cons_lock;	/* the engines and the flush */
	u32 max_wr;
	u32 max_sge;
};

/**
 * struct remu_srq - shared receive queue
 * @ib_srq:	core object
 * @rq:		the receive ring
 * @limit:	armed limit (0: not armed), under @rq.cons_lock
 */
struct remu_srq {
	struct ib_srq ib_srq;
	struct remu_wq rq;
	u32 limit;
};

/**
 * struct remu_qp - queue pair
 * @ib_qp:	core object; @ib_qp.av_sgid_attr is the source GID of the
 *		primary path, referenced by the core for the QP's life
 * @rdev:	the device
 * @ref:	lookups by remu_qp_get(); 0 until the QP is ready
 * @released:	completed when @ref drops to 0 in destroy
 * @mutex:	modify_qp/query_qp and the attributes below
 * @state:	current state; written under @mutex, read with READ_ONCE()
 * @attr:	every attribute set by modify_qp (ah_attr without its
 *		sgid_attr reference: use @ib_qp.av_sgid_attr)
 * @sq:		send queue
 * @rq:		receive queue (no ring when @srq is set)
 * @srq:	shared receive queue or NULL
 * @scq, @rcq:	completion queues
 * @max_inline:	inline bytes per send WQE
 * @sq_sig_all:	every send WQE is signalled
 * @is_user:	rings are mapped by a process
 * @last_wqe:	IB_EVENT_QP_LAST_WQE_REACHED was raised since the QP last
 *		entered ERR (QPs on an SRQ; under @mutex)
 * @path_src, @path_dst: RC/UC: the source and destination GIDs of the
 *		primary path (IPv4 as ::ffff:a.b.c.d), set with the AV under
 *		@mutex before @state is published; the receive path drops a
 *		packet whose IP addresses are not @path_dst -> @path_src
 * @mcast_no_self: created with IB_QP_CREATE_BLOCK_MULTICAST_LOOPBACK: no
 *		copy of its own multicast sends (remu_mcast.c); fixed
 * @ece:	the ECE options negotiated for the QP (uapi remu-abi.h), set
 *		at creation and by modify_qp under @mutex; nothing on the
 *		wire depends on them yet
 * @send_work:	runs remu_qp_send_work() on remu_wq: the engines' work
 *		item (remu_eng_run()), and the doorbell when its caller
 *		cannot run them
 * @eng:	the engines' state (remu_eng.h), owned by whoever runs them
 */
struct remu_qp {
	struct ib_qp ib_qp;
	struct remu_dev *rdev;
	refcount_t ref;
	struct completion released;
	struct mutex mutex;	/* modify_qp/query_qp: @state, @attr */
	enum ib_qp_state state;
	struct ib_qp_attr attr;
	struct remu_wq sq;
	struct remu_wq rq;
	struct remu_srq *srq;
	struct remu_cq *scq;
	struct remu_cq *rcq;
	u32 max_inline;
	bool sq_sig_all;
	bool is_user;
	bool last_wqe;
	bool mcast_no_self;
	u32 ece;
	struct in6_addr path_src;
	struct in6_addr path_dst;
	struct work_struct send_work;
	struct remu_qp_eng eng;
};

/**
 * struct remu_ah - address handle
 * @ib_ah:	core object (@ib_ah.sgid_attr referenced by the core)
 * @attr:	the address vector (sgid_attr not referenced here)
 * @ah_num:	handle carried by UD WQEs, in remu_dev_queues.ah_xa
 * @net_type:	RDMA_NETWORK_IPV4 or RDMA_NETWORK_IPV6
 */
struct remu_ah {
	struct ib_ah ib_ah;
	struct rdma_ah_attr attr;
	u32 ah_num;
	enum rdma_network_type net_type;
};

/**
 * remu_qp_type - the transport a QP runs
 * @qp: the QP
 *
 * The GSI QP (QP1, ib_mad's) is a UD QP with fixed rules (QPN 1, Q_Key
 * IB_QP1_QKEY, MAD-sized messages); the engines treat it as UD and check
 * ib_qp.qp_type only where those rules differ.
 */
static inline enum ib_qp_type remu_qp_type(const struct remu_qp *qp)
{
	return qp->ib_qp.qp_type == IB_QPT_GSI ? IB_QPT_UD : qp->ib_qp.qp_type;
}

static inline bool remu_qp_is_gsi(const struct remu_qp *qp)
{
	return qp->ib_qp.qp_type == IB_QPT_GSI;
}

static inline struct remu_cq *to_remu_cq(struct ib_cq *ibcq)
{
	return container_of(ibcq, struct remu_cq, ib_cq);
}

static inline struct remu_qp *to_remu_qp(struct ib_qp *ibqp)
{
	return container_of(ibqp, struct remu_qp, ib_qp);
}

static inline struct remu_srq *to_remu_srq(struct ib_srq *ibsrq)
{
	return container_of(ibsrq, struct remu_srq, ib_srq);
}

static inline struct remu_ah *to_remu_ah(struct ib_ah *ibah)
{
	return container_of(ibah, struct remu_ah, ib_ah);
}

/* remu_cq.c */
int remu_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		   struct uverbs_attr_bundle *attrs);
int remu_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata);
int remu_resize_cq(struct ib_cq *ibcq, int cqe, struct ib_udata *udata);
int remu_poll_cq(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc);
int remu_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags);
int remu_cq_post(struct remu_cq *cq, const struct remu_cqe *cqe,
		 bool solicited);
int remu_cq_post_ext(struct remu_cq *cq, const struct remu_cqe_ext *ext,
		     bool solicited);

/* remu_qp.c */
int remu_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init,
		   struct ib_udata *udata);
int remu_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		   struct ib_udata *udata);
int remu_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		  struct ib_qp_init_attr *init);
int remu_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata);
int remu_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		   const struct ib_send_wr **bad_wr);
int remu_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		   const struct ib_recv_wr **bad_wr);
struct remu_qp *remu_qp_get(struct remu_dev *rdev, u32 qpn);
void remu_qp_put(struct remu_qp *qp);
int remu_wq_post_recv(struct remu_wq *wq, const struct ib_recv_wr *wr);
int remu_check_av(struct rdma_ah_attr *ah);
int remu_fill_res_qp_entry(struct sk_buff *msg, struct ib_qp *ibqp);

/* remu_srq.c */
int remu_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init,
		    struct ib_udata *udata);
int remu_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
		    enum ib_srq_attr_mask mask, struct ib_udata *udata);
int remu_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr);
int remu_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata);
int remu_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
		       const struct ib_recv_wr **bad_wr);
void remu_srq_limit_event(struct remu_srq *srq);

/* remu_ah.c */
int remu_create_ah(struct ib_ah *ibah, struct rdma_ah_init_attr *init,
		   struct ib_udata *udata);
int remu_destroy_ah(struct ib_ah *ibah, u32 flags);
int remu_query_ah(struct ib_ah *ibah, struct rdma_ah_attr *attr);
int remu_ah_resolve(struct remu_dev *rdev, u32 ah_num, struct ib_pd *pd,
		    struct rdma_ah_attr *attr);

#endif /* REMU_QP_H */
