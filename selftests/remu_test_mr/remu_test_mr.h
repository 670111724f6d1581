/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * remu_test_mr.h - the ioctl interface of remu_test_mr.ko, the test module
 * that drives remu's MR access layer from userspace (selftests only; not
 * part of remu's ABI).  Included by the module and by remu_mr_test.c.
 *
 * Open /dev/remu_test_mr, name a remu device with REMU_TMR_SET_DEV, then
 * each ioctl returns 0 or fails with the errno the access layer returned.
 */
#ifndef REMU_TEST_MR_H
#define REMU_TEST_MR_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define REMU_TMR_DEVNAME	"remu_test_mr"
#define REMU_TMR_MAX_LEN	(64u << 20)	/* largest copy */
#define REMU_TMR_MAX_SGE	8

/* values of dir, as enum remu_copy_dir */
#define REMU_TMR_TO_MR		0
#define REMU_TMR_FROM_MR	1

/* flags of struct remu_tmr_copy */
#define REMU_TMR_SKB		0x1	/* go through remu_mr_copy_skb() */
#define REMU_TMR_NO_CHECK	0x2	/* skip remu_mr_check() */
#define REMU_TMR_RKEY		0x4	/* look the key up as an rkey */

struct remu_tmr_dev {
	char name[64];			/* RDMA device name, e.g. "remu0" */
};

/* PD selection everywhere: pd_key 0 = the MR's own PD, else the PD of the
 * MR whose key is pd_key. */
struct remu_tmr_copy {
	__u32 key;
	__u32 pd_key;
	__u32 dir;
	__u32 access;			/* IB_ACCESS_* passed to remu_mr_check */
	__u32 flags;
	__u32 reserved;
	__aligned_u64 iova;
	__aligned_u64 len;
	__aligned_u64 buf;		/* user buffer of len bytes */
};

struct remu_tmr_atomic {
	__u32 key;
	__u32 pd_key;
	__u32 op;			/* 0 CMP_SWP, 1 FETCH_ADD */
	__u32 access;
	__aligned_u64 iova;
	__aligned_u64 a;
	__aligned_u64 b;
	__aligned_u64 orig;		/* out */
};

struct remu_tmr_sge {
	__aligned_u64 addr;
	__u32 length;
	__u32 lkey;
};

struct remu_tmr_sges {
	__u32 pd_key;			/* required here: 0 means "no PD check" */
	__u32 n;
	__u32 dir;
	__u32 access;
	__aligned_u64 offset;
	__aligned_u64 len;
	__aligned_u64 buf;
	struct remu_tmr_sge sge[REMU_TMR_MAX_SGE];
};

/* in-kernel scenario: DMA MR, fast registration, invalidation, dereg wait */
struct remu_tmr_kernel {
	__u32 step;			/* out: the step that failed, 0 if none */
	__s32 err;			/* out: errno seen at that step */
};

/*
 * Kernel consumer scenarios (remu_test_ulp.c): a kernel PD/CQ/RC QP pair in
 * loopback on the device, a fast-reg MR over scattered kernel pages
 * registered with IB_WR_REG_MR on QP A, the peer QP B accessing it.
 */
enum {
	REMU_TMR_ULP_REG_RW = 1,	/* REG_MR, B WRITEs and READs through it */
	REMU_TMR_ULP_LOCAL_INV,		/* LOCAL_INV, then the old rkey fails */
	REMU_TMR_ULP_SEND_INV,		/* SEND_WITH_INV invalidates A's MR */
	REMU_TMR_ULP_REREG,		/* invalidate, re-register, new key */
	REMU_TMR_ULP_REG_VALID,		/* REG_MR of a valid MR fails */
	REMU_TMR_ULP_INV_BAD_KEY,	/* LOCAL_INV of a wrong key fails */
	REMU_TMR_ULP_RIGHTS,		/* the registration's rights hold */
	REMU_TMR_ULP_BAD_ACCESS,	/* REMOTE_WRITE without LOCAL_WRITE */
	REMU_TMR_ULP_OTHER_PD,		/* an MR of another PD; post errors */
	REMU_TMR_ULP_SG_GAPS,		/* IB_MR_TYPE_SG_GAPS: WRITE/READ, SGEs */
	REMU_TMR_ULP_SG_GAPS_MISUSE,	/* ... too many entries, bad offsets */
	REMU_TMR_ULP_MAX = REMU_TMR_ULP_SG_GAPS_MISUSE,
};

struct remu_tmr_ulp {
	__u32 scenario;			/* in: REMU_TMR_ULP_* */
	__u32 step;			/* out: the check that failed, 0 if none */
	__s32 err;			/* out: errno or IB_WC_* status seen there */
	__u32 line;			/* out: its line in remu_test_ulp.c */
};

#define REMU_TMR_SET_DEV	_IOW('R', 1, struct remu_tmr_dev)
#define REMU_TMR_COPY		_IOW('R', 2, struct remu_tmr_copy)
#define REMU_TMR_ATOMIC		_IOWR('R', 3, struct remu_tmr_atomic)
#define REMU_TMR_SGE_COPY	_IOW('R', 4, struct remu_tmr_sges)
#define REMU_TMR_KERNEL		_IOR('R', 5, struct remu_tmr_kernel)
#define REMU_TMR_ULP		_IOWR('R', 6, struct remu_tmr_ulp)

#ifdef __KERNEL__
struct ib_device;
struct remu_dev;
/* remu_test_ulp.c */
void tmr_ulp_run(struct ib_device *dev, struct remu_dev *rdev,
		 struct remu_tmr_ulp *res);
#endif

#endif /* REMU_TEST_MR_H */
