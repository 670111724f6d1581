/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * remudv.h - remu's direct verbs: what libremu offers beyond libibverbs.
 *
 * Installed with the provider as <infiniband/remudv.h>.  Names, types and
 * semantics mirror mlx5's <infiniband/mlx5dv.h>, so code written for
 * mlx5dv ports by renaming mlx5dv_ to remudv_ and MLX5DV_ to REMUDV_.
 * Link with the provider (-l:libremu-rdmav34.so, see docs/indirect-keys.md).
 *
 * Indirect memory keys (user-mode memory registration):
 *	remudv_create_mkey()		an empty key with max_entries entries
 *	remudv_wr_mr_list()		configure it, in an ibv_wr_* batch on
 *	remudv_wr_mr_interleaved()	an RC QP (IBV_SEND_INLINE required)
 *	IBV_WR_LOCAL_INV, SEND_WITH_INV	invalidate it (then configure again)
 *	remudv_destroy_mkey()
 * Device memory as a dma-buf:
 *	remudv_dm_export_dmabuf_fd()	ibv_dm_export_dmabuf_fd() (rdma-core
 *					62) for any libibverbs release
 * Every function fails with EOPNOTSUPP on an object that is not remu's.
 */
#ifndef REMUDV_H
#define REMUDV_H

#include <stdbool.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Is @device a remu device (driven by this libremu)? */
bool remudv_is_supported(struct ibv_device *device);

enum remudv_mkey_init_attr_flags {
	REMUDV_MKEY_INIT_ATTR_FLAGS_INDIRECT = 1 << 0,
	REMUDV_MKEY_INIT_ATTR_FLAGS_REMOTE_INVALIDATE = 1 << 4,
};

struct remudv_mkey_init_attr {
	struct ibv_pd *pd;
	uint32_t create_flags;	/* enum remudv_mkey_init_attr_flags */
	uint16_t max_entries;	/* in: wanted; out: what the key takes */
};

struct remudv_mkey {
	uint32_t lkey;
	uint32_t rkey;
};

/* NULL and errno on failure */
struct remudv_mkey *remudv_create_mkey(struct remudv_mkey_init_attr *attr);
/* 0, or an errno value */
int remudv_destroy_mkey(struct remudv_mkey *mkey);

struct remudv_mr_interleaved {
	uint64_t addr;
	uint32_t bytes_count;
	uint32_t bytes_skip;
	uint32_t lkey;
};

/* the completion opcode of a signaled UMR (as MLX5DV_WC_UMR) */
enum remudv_wc_opcode {
	REMUDV_WC_UMR = IBV_WC_DRIVER1,
};

struct remudv_qp_ex {
	uint64_t comp_mask;
	void (*wr_mr_interleaved)(struct remudv_qp_ex *mqp,
				  struct remudv_mkey *mkey,
				  uint32_t access_flags, uint32_t repeat_count,
				  uint16_t num_interleaved,
				  struct remudv_mr_interleaved *data);
	void (*wr_mr_list)(struct remudv_qp_ex *mqp, struct remudv_mkey *mkey,
			   uint32_t access_flags, uint16_t num_sges,
			   struct ibv_sge *sge);
};

/*
 * A dma-buf over the whole of @dm (its length rounded up to pages): the fd
 * (O_RDWR, close-on-exec), or -1 and errno.  What ibv_dm_export_dmabuf_fd()
 * does in rdma-core 62 and later, for any release.  The dma-buf serves
 * peer-to-peer importers only (another RDMA device's ibv_reg_dmabuf_mr(),
 * a GPU) and is revoked when @dm is freed: importers' accesses fail from
 * then on (docs/dma-buf.md).  Close the fd when done.
 */
int remudv_dm_export_dmabuf_fd(struct ibv_dm *dm);

/* the remu side of an ibv_qp_ex of a remu QP; NULL (EOPNOTSUPP) otherwise */
struct remudv_qp_ex *remudv_qp_ex_from_ibv_qp_ex(struct ibv_qp_ex *qp);

static inline void remudv_wr_mr_interleaved(struct remudv_qp_ex *mqp,
					    struct remudv_mkey *mkey,
					    uint32_t access_flags,
					    uint32_t repeat_count,
					    uint16_t num_interleaved,
					    struct remudv_mr_interleaved *data)
{
	mqp->wr_mr_interleaved(mqp, mkey, access_flags, repeat_count,
			       num_interleaved, data);
}

static inline void remudv_wr_mr_list(struct remudv_qp_ex *mqp,
				     struct remudv_mkey *mkey,
				     uint32_t access_flags, uint16_t num_sges,
				     struct ibv_sge *sge)
{
	mqp->wr_mr_list(mqp, mkey, access_flags, num_sges, sge);
}

#ifdef __cplusplus
}
#endif

#endif /* REMUDV_H */
