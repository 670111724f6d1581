/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * remu.h - objects of the remu provider.
 *
 * Each one embeds the libibverbs object it extends; the to_*() helpers go
 * from the libibverbs pointer back to the remu object.
 */
#ifndef REMU_H
#define REMU_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <infiniband/driver.h>

#include "remu_ring.h"
#include "remudv.h"

/*
 * REMU_HAVE_WR_FLUSH, set by CMakeLists.txt's compile probe: the tree's
 * verbs.h has IBA 1.5 FLUSH (ibv_qp_ex.wr_flush, IBV_WR_FLUSH; rdma-core
 * 45 and later).  Without it libremu offers no FLUSH (qp_ex.c), so no
 * opcode of that number passes remu_opcode_ok() either.
 */
#if REMU_HAVE_WR_FLUSH
#define REMU_WR_IS_FLUSH(op)	((op) == IBV_WR_FLUSH)
#else
#define REMU_WR_IS_FLUSH(op)	0
#endif

struct remu_device {
	struct verbs_device vdev;
};

struct remu_context {
	struct verbs_context vctx;
	uint32_t kernel_caps;	/* REMU_UCTX_* the module offered */
	/* the doorbell through the ioctl: write() is refused (queues.c) */
	atomic_bool doorbell_ioctl;
};

/*
 * The lock of one side of a ring (domain.c).  An object made on a parent
 * domain with a thread domain has none: the application has promised
 * that one thread at a time uses it (ibv_alloc_td(3)), mlx5's contract,
 * and a second thread caught inside is reported and the process aborted,
 * as mlx5 does.
 */
struct remu_lock {
	pthread_spinlock_t spin;
	bool need_lock;
	bool in_use;
};

/* A thread domain: only what makes objects lock-free (domain.c). */
struct remu_td {
	struct ibv_td ibtd;
	atomic_int refs;	/* 1 + the parent domains on it */
};

/*
 * A protection domain, or a parent domain (@parent set), or a PD taken
 * from another process's context (@imported); domain.c, import.c.
 */
struct remu_pd {
	struct ibv_pd ibpd;
	atomic_int refs;	/* 1 + parent domains on it (+ a parent
				 * domain's QPs and CQs) */
	struct remu_pd *parent;	/* parent domain: the PD it was made on */
	struct remu_td *td;	/* parent domain: its thread domain or NULL */
	/* parent domain: the allocators, kept and never called (docs) */
	void *(*alloc)(struct ibv_pd *pd, void *pd_context, size_t size,
		       size_t alignment, uint64_t resource_type);
	void (*free)(struct ibv_pd *pd, void *pd_context, void *ptr,
		     uint64_t resource_type);
	void *pd_context;
	bool imported;
};

/*
 * A CQ: the provider consumes its ring in poll_cq, or between
 * ibv_start_poll() and ibv_end_poll() (cq_ex.c), under @lock.
 */
struct remu_cq {
	struct verbs_cq vcq;		/* ibv_cq, or ibv_cq_ex */
	pthread_spinlock_t lock;
	bool single_threaded;	/* IBV_CREATE_CQ_ATTR_SINGLE_THREADED: no
				 * lock from ibv_start_poll() to
				 * ibv_end_poll() */
	struct remu_pd *parent;	/* ibv_create_cq_ex() on a parent domain */
	struct remu_uring ring;
	int inline_recv;	/* slots are struct remu_cqe_ext */
	int timestamp;		/* slots end in struct remu_cqe_ts */
	struct remu_cqe *cur;	/* start_poll..end_poll: what read_* read */
};

/*
 * A QP: the provider produces into its SQ and RQ rings.  The ibv_wr_*
 * state (qp_ex.c) belongs to the batch between ibv_wr_start() and
 * ibv_wr_complete()/ibv_wr_abort(), which holds @sq_lock throughout.
 */
struct remu_qp {
	struct verbs_qp vqp;		/* ibv_qp, or ibv_qp_ex */
	struct remu_lock sq_lock;
	struct remu_lock rq_lock;
	struct remu_uring sq;
	struct remu_uring rq;		/* unmapped with an SRQ */
	uint32_t max_inline;
	uint32_t max_send_sge;
	uint32_t max_recv_sge;
	uint32_t op_mask;		/* 1 << IBV_WR_*: opcodes it may post */
	struct remu_send_wqe *wr_cur;	/* the WQE ibv_wr_set_* fill, or NULL */
	uint32_t wr_start;		/* sq.idx at ibv_wr_start(): rollback */
	int wr_err;			/* the batch's first error */
	struct remudv_qp_ex dv;		/* remudv_qp_ex_from_ibv_qp_ex() */
	uint32_t set_ece;		/* ibv_set_ece(): for the next modify */
	uint32_t get_ece;		/* ibv_query_ece() answers this (ece.c) */
};

/* an indirect key (mkey.c): the MW object that carries it in the kernel */
struct remu_mkey {
	struct remudv_mkey dv;
	struct ibv_mw mw;
	uint16_t max_entries;
};

struct remu_srq {
	struct ibv_srq ibsrq;
	struct remu_lock lock;
	struct remu_uring ring;
	uint32_t max_sge;
};

/* A device memory allocation, mapped at @va (dm.c). */
struct remu_dm {
	struct verbs_dm vdm;
	void *va;
	size_t map_size;		/* bytes mapped: a multiple of pages */
	uint64_t length;		/* bytes the user asked for */
};

struct remu_ah {
	struct ibv_ah ibah;
	uint32_t ah_num;		/* what UD send WQEs carry */
};

static inline struct remu_cq *to_rcq(struct ibv_cq *ibcq)
{
	return container_of(ibcq, struct remu_cq, vcq.cq);
}

static inline struct remu_cq *ex_to_rcq(struct ibv_cq_ex *cqx)
{
	return container_of(cqx, struct remu_cq, vcq.cq_ex);
}

static inline struct remu_qp *to_rqp(struct ibv_qp *ibqp)
{
	return container_of(ibqp, struct remu_qp, vqp.qp);
}

static inline struct remu_qp *ex_to_rqp(struct ibv_qp_ex *qpx)
{
	return container_of(qpx, struct remu_qp, vqp.qp_ex);
}

static inline struct remu_srq *to_rsrq(struct ibv_srq *ibsrq)
{
	return container_of(ibsrq, struct remu_srq, ibsrq);
}

static inline struct remu_ah *to_rah(struct ibv_ah *ibah)
{
	return container_of(ibah, struct remu_ah, ibah);
}

static inline struct remu_dm *to_rdm(struct ibv_dm *ibdm)
{
	return container_of(ibdm, struct remu_dm, vdm.dm);
}

static inline struct remu_pd *to_rpd(struct ibv_pd *ibpd)
{
	return container_of(ibpd, struct remu_pd, ibpd);
}

static inline struct remu_td *to_rtd(struct ibv_td *ibtd)
{
	return container_of(ibtd, struct remu_td, ibtd);
}

/* The protection domain behind @ibpd, a PD or a parent domain. */
static inline struct ibv_pd *remu_pd_base(struct ibv_pd *ibpd)
{
	struct remu_pd *pd = to_rpd(ibpd);

	while (pd->parent)
		pd = pd->parent;
	return &pd->ibpd;
}

/* Do @a and @b (PDs or parent domains) name the same protection domain? */
static inline bool remu_pd_same(struct ibv_pd *a, struct ibv_pd *b)
{
	return a && b && remu_pd_base(a) == remu_pd_base(b);
}

/* domain.c */
void remu_lock_init(struct remu_lock *l, struct ibv_pd *pd);
void remu_lock_destroy(struct remu_lock *l);
void remu_lock_violation(void) __attribute__((noreturn));
struct ibv_pd *remu_alloc_pd(struct ibv_context *ctx);
int remu_dealloc_pd(struct ibv_pd *ibpd);
struct ibv_td *remu_alloc_td(struct ibv_context *ctx,
			     struct ibv_td_init_attr *attr);
int remu_dealloc_td(struct ibv_td *ibtd);
struct ibv_pd *remu_alloc_parent_domain(struct ibv_context *ctx,
				struct ibv_parent_domain_init_attr *attr);
struct remu_pd *remu_parent_domain_get(struct ibv_pd *ibpd);
void remu_parent_domain_put(struct remu_pd *pd);

/* import.c */
struct verbs_context *remu_import_context(struct ibv_device *ibdev,
					  int cmd_fd);
struct ibv_pd *remu_import_pd(struct ibv_context *ctx, uint32_t pd_handle);
void remu_unimport_pd(struct ibv_pd *ibpd);
struct ibv_mr *remu_import_mr(struct ibv_pd *pd, uint32_t mr_handle);
void remu_unimport_mr(struct ibv_mr *mr);
struct ibv_dm *remu_import_dm(struct ibv_context *ctx, uint32_t dm_handle);
void remu_unimport_dm(struct ibv_dm *ibdm);

/* ece.c */
int remu_set_ece(struct ibv_qp *ibqp, struct ibv_ece *ece);
int remu_query_ece(struct ibv_qp *ibqp, struct ibv_ece *ece);
uint32_t remu_ece_request(struct ibv_context *ctx);
void remu_ece_modified(struct remu_qp *qp, uint32_t options);

/*
 * The lock of a ring (struct remu_lock).  Without need_lock: taking it
 * while it is in use means two threads are in an object the application
 * promised to use from one at a time.  The check is a hint, not a
 * guarantee (a plain flag and a fence, as mlx5's).
 */
static inline void remu_lock(struct remu_lock *l)
{
	if (l->need_lock) {
		pthread_spin_lock(&l->spin);
		return;
	}
	if (l->in_use)
		remu_lock_violation();
	l->in_use = true;
	atomic_thread_fence(memory_order_acq_rel);
}

static inline void remu_unlock(struct remu_lock *l)
{
	if (l->need_lock)
		pthread_spin_unlock(&l->spin);
	else
		l->in_use = false;
}

/* queues.c */
struct ibv_cq *remu_create_cq(struct ibv_context *ctx, int cqe,
			      struct ibv_comp_channel *channel, int comp_vector);
int remu_want_inline_recv(struct ibv_context *ctx, int cqe);
int remu_cq_map(struct remu_cq *cq, struct ibv_context *ctx,
		const struct remu_ring_info *info);
void remu_cq_free(struct remu_cq *cq);
void remu_cqe_place(const struct remu_cqe_ext *x);
unsigned int remu_cqe_wc_flags(const struct remu_cqe *c);
uint8_t remu_cqe_sl(const struct remu_cqe *c);
int remu_destroy_cq(struct ibv_cq *ibcq);
int remu_resize_cq(struct ibv_cq *ibcq, int cqe);
int remu_poll_cq(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc);
int remu_req_notify_cq(struct ibv_cq *ibcq, int solicited_only);
struct ibv_qp *remu_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
struct remu_qp *remu_qp_new(struct ibv_context *ctx,
			    struct ibv_qp_init_attr_ex *attr);
int remu_doorbell(struct ibv_qp *ibqp);
int remu_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask);
int remu_modify_qp_rate_limit(struct ibv_qp *ibqp,
			      struct ibv_qp_rate_limit_attr *attr);
int remu_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
		  struct ibv_qp_init_attr *init);
int remu_destroy_qp(struct ibv_qp *ibqp);
int remu_post_bind(struct ibv_qp *ibqp, struct ibv_send_wr *wr);
int remu_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		   struct ibv_send_wr **bad_wr);
int remu_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		   struct ibv_recv_wr **bad_wr);
struct ibv_srq *remu_create_srq(struct ibv_pd *pd,
				struct ibv_srq_init_attr *attr);
int remu_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr, int mask);
int remu_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr);
int remu_destroy_srq(struct ibv_srq *ibsrq);
int remu_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
		       struct ibv_recv_wr **bad_wr);
struct ibv_ah *remu_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr);
int remu_destroy_ah(struct ibv_ah *ibah);

static inline struct remu_device *to_rdev(struct verbs_device *vdev)
{
	return container_of(vdev, struct remu_device, vdev);
}

static inline struct remu_context *to_rctx(struct ibv_context *ibctx)
{
	return container_of(ibctx, struct remu_context, vctx.context);
}

/* remu.c */
int remu_context_ready(struct remu_context *ctx,
		       const struct remu_alloc_ucontext_resp *resp);

/* dm.c */
struct ibv_dm *remu_alloc_dm(struct ibv_context *ctx,
			     struct ibv_alloc_dm_attr *attr);
int remu_dm_map(struct remu_dm *dm, struct ibv_context *ctx,
		uint64_t mmap_offset, uint64_t mmap_size, uint64_t length);
int remu_free_dm(struct ibv_dm *ibdm);
int remu_dm_export_dmabuf_fd(struct ibv_dm *ibdm);
struct ibv_mr *remu_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *ibdm,
			      uint64_t dm_offset, size_t length,
			      unsigned int access);

/* mr.c */
struct ibv_mr *remu_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
			   uint64_t hca_va, int access);
struct ibv_mr *remu_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
				  size_t length, uint64_t iova, int fd,
				  int access);
int remu_dereg_mr(struct verbs_mr *vmr);
int remu_is_remu_context(struct ibv_context *ctx);
void remu_qp_fill_dv_ops(struct remu_qp *qp);
int remu_rereg_mr(struct verbs_mr *vmr, int flags, struct ibv_pd *pd,
		  void *addr, size_t length, int access);
int remu_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
		   uint32_t flags, struct ibv_sge *sg_list, uint32_t num_sge);

/* cq_ex.c: ibv_create_cq_ex() and the ibv_start_poll() API */
struct ibv_cq_ex *remu_create_cq_ex(struct ibv_context *ctx,
				    struct ibv_cq_init_attr_ex *attr);
int remu_query_rt_values(struct ibv_context *ctx, struct ibv_values_ex *values);

/* qp_ex.c: ibv_create_qp_ex() and the ibv_wr_* API */
uint32_t remu_qp_op_mask(struct ibv_context *ctx, enum ibv_qp_type type);
struct ibv_qp *remu_create_qp_ex(struct ibv_context *ctx,
				 struct ibv_qp_init_attr_ex *attr);

/* mw.c */
struct ibv_mw *remu_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int remu_dealloc_mw(struct ibv_mw *mw);
int remu_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw,
		 struct ibv_mw_bind *mw_bind);

#endif /* REMU_H */
