// SPDX-License-Identifier: GPL-2.0
/*
 * remu_test_ulp.c - part of the test module remu_test_mr.ko: remu used the
 * way a kernel consumer (a ULP: NVMe-oF, iSER, SMB Direct) uses an RDMA
 * device, through the ordinary kernel verbs only.
 *
 * Each scenario (ioctl REMU_TMR_ULP, enum REMU_TMR_ULP_*) builds its own
 * objects on the device the file was set to: two PDs, and in each a CQ
 * and an RC QP (A and B), connected in loopback through GID index 1 with
 * a 1024-byte path MTU; a fast-reg MR in A's PD over four scattered pages
 * (the tail of one, two whole ones, the head of one) mapped with
 * ib_map_mr_sg(); one kernel buffer per side, reached through each PD's
 * local_dma_lkey.  A registers the MR with IB_WR_REG_MR and B reaches it
 * with RDMA WRITE/READ and the rkey, as the remote end of a ULP does;
 * data are compared byte for byte with the MR's pages themselves.  A
 * scenario frees everything it took before it returns, so the selftest
 * can check remu's object counts afterwards.
 *
 * The SG_GAPS scenarios add an IB_MR_TYPE_SG_GAPS MR over six pieces of
 * one 32 KiB kernel buffer (struct tulp_gap: any offset, any length, one
 * byte to four pages, out of order), and check every byte of the buffer
 * against a model: the pieces get the data, the gaps keep theirs.
 *
 * The result is the first check that failed: its number (counted from the
 * start of the scenario, set-up included), the errno or IB_WC_* value seen
 * there and its line in this file; step 0 means every check passed.
 *
 * Locking: none of its own; one scenario runs per ioctl call, on objects
 * only that call can see.
 */
#include <linux/delay.h>
#include <linux/jiffies.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_verbs.h>

#include "../../drivers/remu/remu.h"
#include "remu_test_mr.h"

#define TULP_PAGES	4
#define TULP_BUF	(4 * PAGE_SIZE)
#define TULP_PSN	0x12345
#define TULP_GID_INDEX	1		/* the IPv4 GID of the test topology */
#define TULP_WAIT_MS	10000		/* TCG guests are slow */

#define TULP_RW		(IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE | \
			 IB_ACCESS_REMOTE_READ)

/* wr_ids, so that every completion is matched to its WR */
enum {
	TULP_ID_REG = 0x100,
	TULP_ID_INV,
	TULP_ID_RDMA,
	TULP_ID_SEND,
	TULP_ID_RECV,
	TULP_ID_AFTER,
};

struct tulp {
	struct ib_device *dev;
	struct remu_dev *rdev;
	struct remu_tmr_ulp *res;
	struct ib_pd *pd_a, *pd_b;
	struct ib_cq *cq_a, *cq_b;
	struct ib_qp *qp_a, *qp_b;
	struct ib_mr *mr;		/* in pd_a */
	struct ib_mr *mr2;		/* OTHER_PD: in pd_b */
	struct page *pages[TULP_PAGES];
	struct scatterlist sg[TULP_PAGES];
	bool sg_mapped;
	size_t len;			/* bytes the four pages give the MR */
	u8 *abuf, *bbuf;		/* A's and B's buffers, TULP_BUF each */
	u64 adma, bdma;			/* ... as DMA addresses */
	bool a_mapped, b_mapped;
	u8 *exp, *got;			/* scratch, TULP_BUF each */
	/* SG_GAPS scenarios (tulp_gaps_setup) */
	struct page *gpages;		/* TULP_GAPS_SPAN bytes, contiguous */
	u8 *gbase;			/* ... their address */
	u8 *shadow;			/* what gbase must hold */
	struct scatterlist gsg[6];	/* the pieces, tulp_gaps[] */
	bool gsg_mapped;
	struct ib_mr *gmr;		/* IB_MR_TYPE_SG_GAPS, in pd_a */
};

/* the pieces: offset in gbase and length; out of order, any alignment */
struct tulp_gap {
	u32 off;
	u32 len;
};

static const struct tulp_gap tulp_gaps[] = {
	{ 20100, 1 },		/* one byte */
	{ 4000, 9000 },		/* across two page boundaries */
	{ 22529, 777 },
	{ 24576, 4096 },	/* a whole page */
	{ 29695, 1 },
	{ 13500, 2500 },	/* 500 bytes after the second piece */
};

#define TULP_GAPS	ARRAY_SIZE(tulp_gaps)
#define TULP_GAPS_LEN	16375u			/* the lengths' sum */
#define TULP_GAPS_SPAN	32768u			/* gbase's size */

/* a mapping of pieces [first, first + n), the first from byte @skip on */
struct tulp_glayout {
	unsigned int first, n;
	u32 skip;
};

/* one check: counts the step, records what was seen when it fails */
#define TULP_CHECK(t, cond, seen)				\
	do {							\
		(t)->res->step++;				\
		if (!(cond)) {					\
			(t)->res->err = (seen);			\
			(t)->res->line = __LINE__;		\
			return -EIO;				\
		}						\
	} while (0)

#define TULP_TRY(call)						\
	do {							\
		int __err = (call);				\
								\
		if (__err)					\
			return __err;				\
	} while (0)

static void tulp_fill(u8 *p, size_t len, u8 seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (u8)(i * 13 + seed + (i >> 8));
}

/* the MR's bytes as the four pages hold them, in order */
static void tulp_mr_read(struct tulp *t, u8 *buf)
{
	sg_copy_to_buffer(t->sg, TULP_PAGES, buf, t->len);
}

static void tulp_mr_write(struct tulp *t, const u8 *buf)
{
	sg_copy_from_buffer(t->sg, TULP_PAGES, buf, t->len);
}

/* is @key usable as an rkey right now (the MR layer's own view)? */
static bool tulp_key_valid(struct tulp *t, u32 key)
{
	struct remu_mr *mr = remu_mr_lookup(t->rdev, key, REMU_RKEY);

	if (mr)
		remu_mr_put(mr);
	return mr;
}

/*
 * Move @len bytes between @buf and the bytes of key offset @koff of an
 * SG_GAPS MR mapped as @g, as they lie in @backing (gbase or its model).
 */
static void tulp_gaps_move(const struct tulp_glayout *g, u8 *backing,
			   u8 *buf, u64 koff, u64 len, bool to_backing)
{
	u64 pos = 0;
	unsigned int i;

	for (i = g->first; i < g->first + g->n && len; i++) {
		u32 eoff = tulp_gaps[i].off, elen = tulp_gaps[i].len;
		u64 in, n;

		if (i == g->first) {
			eoff += g->skip;
			elen -= g->skip;
		}
		if (koff < pos + elen) {
			in = koff - pos;
			n = min_t(u64, len, elen - in);
			if (to_backing)
				memcpy(backing + eoff + in, buf, n);
			else
				memcpy(buf, backing + eoff + in, n);
			buf += n;
			koff += n;
			len -= n;
		}
		pos += elen;
	}
}

/* ---- set-up ---- */

static int tulp_connect(struct ib_qp *qp, u32 dqpn, union ib_gid *gid)
{
	struct ib_qp_attr a = {};
	int err;

	a.qp_state = IB_QPS_INIT;
	a.port_num = 1;
	a.pkey_index = 0;
	a.qp_access_flags = TULP_RW;
	err = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_PKEY_INDEX |
			   IB_QP_PORT | IB_QP_ACCESS_FLAGS);
	if (err)
		return err;

	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTR;
	a.path_mtu = IB_MTU_1024;	/* several packets per message */
	a.dest_qp_num = dqpn;
	a.rq_psn = TULP_PSN;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1;
	a.ah_attr.type = RDMA_AH_ATTR_TYPE_ROCE;
	rdma_ah_set_port_num(&a.ah_attr, 1);
	rdma_ah_set_grh(&a.ah_attr, gid, 0, TULP_GID_INDEX, 64, 0);
	err = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU |
			   IB_QP_DEST_QPN | IB_QP_RQ_PSN |
			   IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER);
	if (err)
		return err;

	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTS;
	a.sq_psn = TULP_PSN;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	return ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_SQ_PSN |
			    IB_QP_TIMEOUT | IB_QP_RETRY_CNT |
			    IB_QP_RNR_RETRY | IB_QP_MAX_QP_RD_ATOMIC);
}

static struct ib_qp *tulp_create_qp(struct ib_pd *pd, struct ib_cq *cq)
{
	struct ib_qp_init_attr init = {
		.qp_type = IB_QPT_RC,
		.send_cq = cq,
		.recv_cq = cq,
		.sq_sig_type = IB_SIGNAL_REQ_WR,
		.cap = {
			.max_send_wr = 16,
			.max_recv_wr = 16,
			.max_send_sge = 1,
			.max_recv_sge = 1,
		},
	};

	return ib_create_qp(pd, &init);
}

static int tulp_setup(struct tulp *t)
{
	struct ib_cq_init_attr ca = { .cqe = 64 };
	union ib_gid gid;
	void *p;
	int i, n, err;

	p = ib_alloc_pd(t->dev, 0);
	TULP_CHECK(t, !IS_ERR(p), PTR_ERR(p));
	t->pd_a = p;
	p = ib_alloc_pd(t->dev, 0);
	TULP_CHECK(t, !IS_ERR(p), PTR_ERR(p));
	t->pd_b = p;
	p = ib_create_cq(t->dev, NULL, NULL, NULL, &ca);
	TULP_CHECK(t, !IS_ERR(p), PTR_ERR(p));
	t->cq_a = p;
	p = ib_create_cq(t->dev, NULL, NULL, NULL, &ca);
	TULP_CHECK(t, !IS_ERR(p), PTR_ERR(p));
	t->cq_b = p;
	p = tulp_create_qp(t->pd_a, t->cq_a);
	TULP_CHECK(t, !IS_ERR(p), PTR_ERR(p));
	t->qp_a = p;
	p = tulp_create_qp(t->pd_b, t->cq_b);
	TULP_CHECK(t, !IS_ERR(p), PTR_ERR(p));
	t->qp_b = p;

	err = rdma_query_gid(t->dev, 1, TULP_GID_INDEX, &gid);
	TULP_CHECK(t, !err, err);
	err = tulp_connect(t->qp_a, t->qp_b->qp_num, &gid);
	TULP_CHECK(t, !err, err);
	err = tulp_connect(t->qp_b, t->qp_a->qp_num, &gid);
	TULP_CHECK(t, !err, err);

	t->abuf = kzalloc(TULP_BUF, GFP_KERNEL);
	t->bbuf = kzalloc(TULP_BUF, GFP_KERNEL);
	t->exp = kzalloc(TULP_BUF, GFP_KERNEL);
	t->got = kzalloc(TULP_BUF, GFP_KERNEL);
	TULP_CHECK(t, t->abuf && t->bbuf && t->exp && t->got, -ENOMEM);
	t->adma = ib_dma_map_single(t->dev, t->abuf, TULP_BUF,
				    DMA_BIDIRECTIONAL);
	TULP_CHECK(t, !ib_dma_mapping_error(t->dev, t->adma), -EIO);
	t->a_mapped = true;
	t->bdma = ib_dma_map_single(t->dev, t->bbuf, TULP_BUF,
				    DMA_BIDIRECTIONAL);
	TULP_CHECK(t, !ib_dma_mapping_error(t->dev, t->bdma), -EIO);
	t->b_mapped = true;

	/* the tail of one page, two whole pages, the head of another */
	for (i = 0; i < TULP_PAGES; i++) {
		t->pages[i] = alloc_page(GFP_KERNEL);
		TULP_CHECK(t, t->pages[i], -ENOMEM);
	}
	sg_init_table(t->sg, TULP_PAGES);
	sg_set_page(&t->sg[0], t->pages[0], PAGE_SIZE - 100, 100);
	sg_set_page(&t->sg[1], t->pages[1], PAGE_SIZE, 0);
	sg_set_page(&t->sg[2], t->pages[2], PAGE_SIZE, 0);
	sg_set_page(&t->sg[3], t->pages[3], 200, 0);
	t->len = (PAGE_SIZE - 100) + 2 * PAGE_SIZE + 200;
	n = ib_dma_map_sg(t->dev, t->sg, TULP_PAGES, DMA_BIDIRECTIONAL);
	TULP_CHECK(t, n == TULP_PAGES, n);
	t->sg_mapped = true;

	p = ib_alloc_mr(t->pd_a, IB_MR_TYPE_MEM_REG, TULP_PAGES);
	TULP_CHECK(t, !IS_ERR(p), PTR_ERR(p));
	t->mr = p;
	n = ib_map_mr_sg(t->mr, t->sg, TULP_PAGES, NULL, PAGE_SIZE);
	TULP_CHECK(t, n == TULP_PAGES, n);
	TULP_CHECK(t, t->mr->length == t->len, (int)t->mr->length);
	/* not registered yet: its key grants nothing */
	TULP_CHECK(t, !tulp_key_valid(t, t->mr->rkey), t->mr->rkey);
	return 0;
}

static void tulp_teardown(struct tulp *t)
{
	int i;

	if (t->qp_b)
		ib_destroy_qp(t->qp_b);
	if (t->qp_a)
		ib_destroy_qp(t->qp_a);
	if (t->cq_b)
		ib_destroy_cq(t->cq_b);
	if (t->cq_a)
		ib_destroy_cq(t->cq_a);
	if (t->mr2)
		ib_dereg_mr(t->mr2);
	if (t->gmr)
		ib_dereg_mr(t->gmr);
	if (t->gsg_mapped)
		ib_dma_unmap_sg(t->dev, t->gsg, TULP_GAPS, DMA_BIDIRECTIONAL);
	if (t->gpages)
		__free_pages(t->gpages, get_order(TULP_GAPS_SPAN));
	kfree(t->shadow);
	if (t->mr)
		ib_dereg_mr(t->mr);
	if (t->sg_mapped)
		ib_dma_unmap_sg(t->dev, t->sg, TULP_PAGES, DMA_BIDIRECTIONAL);
	for (i = 0; i < TULP_PAGES; i++)
		if (t->pages[i])
			__free_page(t->pages[i]);
	if (t->b_mapped)
		ib_dma_unmap_single(t->dev, t->bdma, TULP_BUF,
				    DMA_BIDIRECTIONAL);
	if (t->a_mapped)
		ib_dma_unmap_single(t->dev, t->adma, TULP_BUF,
				    DMA_BIDIRECTIONAL);
	kfree(t->got);
	kfree(t->exp);
	kfree(t->bbuf);
	kfree(t->abuf);
	if (t->pd_b)
		ib_dealloc_pd(t->pd_b);
	if (t->pd_a)
		ib_dealloc_pd(t->pd_a);
}

/* ---- work requests and completions ---- */

static int tulp_poll(struct ib_cq *cq, struct ib_wc *wc)
{
	unsigned long end = jiffies + msecs_to_jiffies(TULP_WAIT_MS);
	int n;

	for (;;) {
		n = ib_poll_cq(cq, 1, wc);
		if (n)
			return n < 0 ? n : 0;
		if (time_after(jiffies, end))
			return -ETIMEDOUT;
		usleep_range(100, 500);
	}
}

/* the next completion on @cq is @wr_id with @opcode and @status */
static int tulp_wc(struct tulp *t, struct ib_cq *cq, u64 wr_id, int opcode,
		   int status, struct ib_wc *out)
{
	struct ib_wc wc;
	int err = tulp_poll(cq, &wc);

	TULP_CHECK(t, !err, err);
	TULP_CHECK(t, wc.wr_id == wr_id, (int)wc.wr_id);
	TULP_CHECK(t, wc.status == status, wc.status);
	TULP_CHECK(t, wc.opcode == opcode, wc.opcode);
	if (out)
		*out = wc;
	return 0;
}

static int tulp_cq_empty(struct tulp *t)
{
	struct ib_wc wc;

	TULP_CHECK(t, ib_poll_cq(t->cq_a, 1, &wc) == 0, (int)wc.wr_id);
	TULP_CHECK(t, ib_poll_cq(t->cq_b, 1, &wc) == 0, (int)wc.wr_id);
	return 0;
}

static int tulp_wait_state(struct tulp *t, struct ib_qp *qp,
			   enum ib_qp_state want)
{
	unsigned long end = jiffies + msecs_to_jiffies(TULP_WAIT_MS);
	struct ib_qp_init_attr init;
	struct ib_qp_attr a;
	int err;

	for (;;) {
		err = ib_query_qp(qp, &a, IB_QP_STATE, &init);
		if (err || a.qp_state == want || time_after(jiffies, end))
			break;
		usleep_range(100, 500);
	}
	TULP_CHECK(t, !err, err);
	TULP_CHECK(t, a.qp_state == want, a.qp_state);
	return 0;
}

/* post IB_WR_REG_MR of @mr under its current key on A */
static int tulp_post_reg(struct tulp *t, struct ib_mr *mr, int access,
			 u64 wr_id)
{
	struct ib_reg_wr wr = {
		.wr = {
			.opcode = IB_WR_REG_MR,
			.send_flags = IB_SEND_SIGNALED,
			.wr_id = wr_id,
		},
		.mr = mr,
		.key = mr->rkey,
		.access = access,
	};

	return ib_post_send(t->qp_a, &wr.wr, NULL);
}

/* A: a new key tag (as ULPs do), REG_MR with @access, its completion */
static int tulp_register(struct tulp *t, struct ib_mr *mr, int access)
{
	u32 old = mr->rkey;
	int err;

	ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey) & 0xff);
	TULP_CHECK(t, mr->rkey != old && mr->lkey == mr->rkey, mr->rkey);
	err = tulp_post_reg(t, mr, access, TULP_ID_REG);
	TULP_CHECK(t, !err, err);
	TULP_TRY(tulp_wc(t, t->cq_a, TULP_ID_REG, IB_WC_REG_MR, IB_WC_SUCCESS,
			 NULL));
	TULP_CHECK(t, tulp_key_valid(t, mr->rkey), mr->rkey);
	return 0;
}

/* A: LOCAL_INV of @key, completing with @status */
static int tulp_local_inv(struct tulp *t, u32 key, int status)
{
	struct ib_send_wr wr = {
		.opcode = IB_WR_LOCAL_INV,
		.send_flags = IB_SEND_SIGNALED,
		.wr_id = TULP_ID_INV,
		.ex.invalidate_rkey = key,
	};
	int err = ib_post_send(t->qp_a, &wr, NULL);

	TULP_CHECK(t, !err, err);
	return tulp_wc(t, t->cq_a, TULP_ID_INV, IB_WC_LOCAL_INV, status, NULL);
}

/*
 * B: RDMA @op (WRITE or READ) of @len bytes between its buffer at @off
 * and A's memory at (@rkey, @iova); the completion has @status.
 */
static int tulp_rdma(struct tulp *t, enum ib_wr_opcode op, u32 rkey,
		     u64 iova, size_t off, u32 len, int status)
{
	struct ib_sge sge = {
		.addr = t->bdma + off,
		.length = len,
		.lkey = t->pd_b->local_dma_lkey,
	};
	struct ib_rdma_wr wr = {
		.wr = {
			.opcode = op,
			.send_flags = IB_SEND_SIGNALED,
			.wr_id = TULP_ID_RDMA,
			.sg_list = &sge,
			.num_sge = 1,
		},
		.remote_addr = iova,
		.rkey = rkey,
	};
	int err = ib_post_send(t->qp_b, &wr.wr, NULL);

	TULP_CHECK(t, !err, err);
	return tulp_wc(t, t->cq_b, TULP_ID_RDMA, op == IB_WR_RDMA_WRITE ?
		       IB_WC_RDMA_WRITE : IB_WC_RDMA_READ, status, NULL);
}

/*
 * B sends @len bytes of its buffer with SEND_WITH_INV of @key into a
 * receive A posted; A's completion must report the invalidation.
 */
static int tulp_send_inv(struct tulp *t, u32 key, u32 len)
{
	struct ib_sge rsge = {
		.addr = t->adma,
		.length = TULP_BUF,
		.lkey = t->pd_a->local_dma_lkey,
	};
	struct ib_recv_wr rwr = {
		.wr_id = TULP_ID_RECV,
		.sg_list = &rsge,
		.num_sge = 1,
	};
	struct ib_sge ssge = {
		.addr = t->bdma,
		.length = len,
		.lkey = t->pd_b->local_dma_lkey,
	};
	struct ib_send_wr swr = {
		.opcode = IB_WR_SEND_WITH_INV,
		.send_flags = IB_SEND_SIGNALED,
		.wr_id = TULP_ID_SEND,
		.sg_list = &ssge,
		.num_sge = 1,
		.ex.invalidate_rkey = key,
	};
	struct ib_wc wc;
	int err;

	memset(t->abuf, 0, TULP_BUF);
	err = ib_post_recv(t->qp_a, &rwr, NULL);
	TULP_CHECK(t, !err, err);
	err = ib_post_send(t->qp_b, &swr, NULL);
	TULP_CHECK(t, !err, err);
	TULP_TRY(tulp_wc(t, t->cq_b, TULP_ID_SEND, IB_WC_SEND, IB_WC_SUCCESS,
			 NULL));
	TULP_TRY(tulp_wc(t, t->cq_a, TULP_ID_RECV, IB_WC_RECV, IB_WC_SUCCESS,
			 &wc));
	TULP_CHECK(t, wc.wc_flags & IB_WC_WITH_INVALIDATE, wc.wc_flags);
	TULP_CHECK(t, wc.ex.invalidate_rkey == key, wc.ex.invalidate_rkey);
	TULP_CHECK(t, !(wc.wc_flags & IB_WC_WITH_IMM), wc.wc_flags);
	TULP_CHECK(t, wc.byte_len == len, wc.byte_len);
	TULP_CHECK(t, wc.qp == t->qp_a, 0);
	TULP_CHECK(t, !memcmp(t->abuf, t->bbuf, len), 0);
	/* the MR layer agrees: the key names nothing now */
	TULP_CHECK(t, !tulp_key_valid(t, key), key);
	return 0;
}

/* ---- the scenarios ---- */

/* (1) REG_MR, then B writes and reads A's pages through the new rkey */
static int tulp_reg_rw(struct tulp *t)
{
	struct ib_mr *mr = t->mr;
	u32 len = t->len;

	TULP_TRY(tulp_register(t, mr, TULP_RW));

	/* B writes all of it (13 packets); the pages hold exactly that */
	memset(t->got, 0, len);
	tulp_mr_write(t, t->got);
	tulp_fill(t->bbuf, len, 1);
	TULP_TRY(tulp_rdma(t, IB_WR_RDMA_WRITE, mr->rkey, mr->iova, 0, len,
			   IB_WC_SUCCESS));
	tulp_mr_read(t, t->got);
	TULP_CHECK(t, !memcmp(t->got, t->bbuf, len), 0);

	/* the pages change under the MR; B reads all of it back */
	tulp_fill(t->exp, len, 2);
	tulp_mr_write(t, t->exp);
	memset(t->bbuf, 0, TULP_BUF);
	TULP_TRY(tulp_rdma(t, IB_WR_RDMA_READ, mr->rkey, mr->iova, 0, len,
			   IB_WC_SUCCESS));
	TULP_CHECK(t, !memcmp(t->bbuf, t->exp, len), 0);

	/* unaligned, across two page boundaries, to an odd offset */
	memset(t->bbuf, 0, TULP_BUF);
	TULP_TRY(tulp_rdma(t, IB_WR_RDMA_READ, mr->rkey, mr->iova + 4000, 3,
			   5000, IB_WC_SUCCESS));
	TULP_CHECK(t, !memcmp(t->bbuf + 3, t->exp + 4000, 5000) &&
		   !t->bbuf[2] && !t->bbuf[5003], 0);

	/* the last 1000 bytes: only those change */
	tulp_fill(t->bbuf, 1000, 9);
	TULP_TRY(tulp_rdma(t, IB_WR_RDMA_WRITE, mr->rkey,
			   mr->iova + len - 1000, 0, 1000, IB_WC_SUCCESS));
	memcpy(t->exp + len - 1000, t->bbuf, 1000);
	tulp_mr_read(t, t->got);
	TULP_CHECK(t, !memcmp(t->got, t->exp, len), 0);
	return tulp_cq_empty(t);
}

/* (2) LOCAL_INV, then the old rkey gets a remote access error */
static int tulp_local_inv_scn(struct tulp *t)
{
	struct ib_mr *mr = t->mr;
	u32 key, len = t->len;

	TULP_TRY(tulp_register(t, mr, TULP_RW));
	key = mr->rkey;
	tulp_fill(t->bbuf, 512, 3);
	TULP_TRY(tulp_rdma(t, IB_WR_RDMA_WRITE, key, mr->iova, 0, 512,
			   IB_WC_SUCCESS));

	TULP_TRY(tulp_local_inv(t, key, IB_WC_SUCCESS));
	TULP_CHECK(t, !tulp_key_valid(t, key), key);

	tulp_mr_read(t, t->exp);
	tulp_fill(t->bbuf, len, 4);
	TULP_TRY(tulp_rdma(t, IB_WR_RDMA_WRITE, key, mr->iova, 0, len,
			   IB_WC_REM_ACCESS_ERR));
	tulp_mr_read(t, t->got);
	TULP_CHECK(t, !memcmp(t->got, t->exp, len), 0);
	/* B (requester) and A (responder) are both in ERR now */
	TULP_TRY(tulp_wait_state(t, t->qp_b, IB_QPS_ERR));
	TULP_TRY(tulp_wait_state(t, t->qp_a, IB_QPS_ERR));
	return tulp_cq_empty(t);
}

/* (3) B's SEND_WITH_INV invalidates A's MR; a READ with it then fails */
static int tulp_send_inv_scn(struct tulp *t)
{
	struct ib_mr *mr = t->mr;
	u32 key;

	TULP_TRY(tulp_register(t, mr, TULP_RW));
	key = mr->rkey;
	tulp_fill(t->bbuf, 3000, 5);	/* three packets */
	TULP_TRY(tulp_send_inv(t, key, 3000));

	TULP_TRY(tulp_rdma(t, IB_WR_RDMA_READ, key, mr->iova, 0, 256,
			   IB_WC_REM_ACCESS_ERR));
	TULP_TRY(tulp_wait_state(t, t->qp_b, IB_QPS_ERR));
	return tulp_cq_empty(t);
}

/*
 * (4) The life of a ULP's MR: register, invalidate (LOCAL_INV), map other
 * pages, register under the next key, invalidated by the peer (SEND_WITH_
 * INV), registered again; each new key works and each old one is dead.
 */
static int tulp_rereg(struct tulp *t)
{
	struct ib_mr *mr = t->mr;
	u32 k1, k2, k3, len2 = 2 * PAGE_SIZE;
	int n;

	TULP_TRY(tulp_register(t, mr, TULP_RW));
	k1 = mr->rkey;
	tulp_fill(t->bbuf, 100, 6);
	TULP_TRY(tulp_rdma(t, IB_WR_RDMA_WRITE, k1, mr->iova + 50, 0, 100,
			   IB_WC_SUCCESS));
	TULP_TRY(tulp_local_inv(t, k1, IB_WC_SUCCESS));

	/* now only the two whole pages */
	n = ib_map_mr_sg(mr, &t->sg[1], 2, NULL, PAGE_SIZE);
	TULP_CHECK(t, n == 2 && mr->length == len2, n);
	TULP_TRY(tulp_register(t, mr, TULP_RW));
	k2 = mr->rkey;
	TULP_CHECK(t, k2 != k1 && (k2 >> 8) == (k1 >> 8), k2);
	TULP_CHECK(t, !tulp_key_valid(t, k1), k1);
	tulp_fill(t->bbuf, len2, 7);
	TULP_TRY(tulp_rdma(t, IB_WR_RDMA_WRITE, k2, mr->iova, 0, len2,
			   IB_WC_SUCCESS));
	sg_copy_to_buffer(&t->sg[1], 2, t->got, len2);
	TULP_CHECK(t, !memcmp(t->got, t->bbuf, len2), 0);

	/* the peer invalidates it; registered again under a third key */
	tulp_fill(t->bbuf, 700, 8);
	TULP_TRY(tulp_send_inv(t, k2, 700));
	TULP_TRY(tulp_register(t, mr, TULP_RW));
	k3 = mr->rkey;
	TULP_CHECK(t, k3 != k2 && k3 != k1, k3);
	memset(t->bbuf, 0, TULP_BUF);
	TULP_TRY(tulp_rdma(t, IB_WR_RDMA_READ, k3, mr->iova, 0, len2,
			   IB_WC_SUCCESS));
	TULP_CHECK(t, !memcmp(t->bbuf, t->got, len2), 0);

	/* an old key still fails on the wire, and changes nothing */
	tulp_fill(t->bbuf, len2, 9);
	TULP_TRY(tulp_rdma(t, IB_WR_RDMA_WRITE, k2, mr->iova, 0, len2,
			   IB_WC_REM_ACCESS_ERR));
	sg_copy_to_buffer(&t->sg[1], 2, t->exp, len2);
	TULP_CHECK(t, !memcmp(t->exp, t->got, len2), 0);
	return tulp_cq_empty(t);
}

/*
 * (5a) REG_MR of an MR that is still valid: IB_WC_MW_BIND_ERR, the QP to
 * ERR, the WR behind it flushed, the registration in force untouched.
 */
static int tulp_reg_valid(struct tulp *t)
{
	struct ib_mr *mr = t->mr;
	struct ib_send_wr after = {
		.opcode = IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED,
		.wr_id = TULP_ID_AFTER,
	};
	struct ib_reg_wr wr = {
		.wr = {
			.opcode = IB_WR_REG_MR,
			.send_flags = IB_SEND_SIGNALED,
			.wr_id = TULP_ID_REG,
			.next = &after,
		},
		.mr = mr,
		.access = TULP_RW,
	};
	u32 key;
	int err;

	TULP_TRY(tulp_register(t, mr, TULP_RW));
	key = mr->rkey;
	ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey) & 0xff);
	wr.key = mr->rkey;
	err = ib_post_send(t->qp_a, &wr.wr, NULL);
	TULP_CHECK(t, !err, err);
	TULP_TRY(tulp_wc(t, t->cq_a, TULP_ID_REG, IB_WC_REG_MR,
			 IB_WC_MW_BIND_ERR, NULL));
	TULP_TRY(tulp_wc(t, t->cq_a, TULP_ID_AFTER, IB_WC_SEND,
			 IB_WC_WR_FLUSH_ERR, NULL));
	TULP_TRY(tulp_wait_state(t, t->qp_a, IB_QPS_ERR));
	TULP_CHECK(t, tulp_key_valid(t, key), key);
	TULP_CHECK(t, !tulp_key_valid(t, wr.key), wr.key);
	return tulp_cq_empty(t);
}

/* (5b) LOCAL_INV of a wrong key (another tag): error, MR stays valid */
static int tulp_inv_bad_key(struct tulp *t)
{
	u32 key;

	TULP_TRY(tulp_register(t, t->mr, TULP_RW));
	key = t->mr->rkey;
	TULP_TRY(tulp_local_inv(t, key ^ 0x01, IB_WC_MW_BIND_ERR));
	TULP_TRY(tulp_wait_state(t, t->qp_a, IB_QPS_ERR));
	TULP_CHECK(t, tulp_key_valid(t, key), key);
	return tulp_cq_empty(t);
}

/* (5c) registered for remote reads only: READ works, WRITE fails */
static int tulp_rights(struct tulp *t)
{
	struct ib_mr *mr = t->mr;
	u32 len = t->len;

	TULP_TRY(tulp_register(t, mr, IB_ACCESS_LOCAL_WRITE |
			       IB_ACCESS_REMOTE_READ));
	tulp_fill(t->exp, len, 10);
	tulp_mr_write(t, t->exp);
	memset(t->bbuf, 0, TULP_BUF);
	TULP_TRY(tulp_rdma(t, IB_WR_RDMA_READ, mr->rkey, mr->iova, 0, len,
			   IB_WC_SUCCESS));
	TULP_CHECK(t, !memcmp(t->bbuf, t->exp, len), 0);

	tulp_fill(t->bbuf, 100, 11);
	TULP_TRY(tulp_rdma(t, IB_WR_RDMA_WRITE, mr->rkey, mr->iova, 0, 100,
			   IB_WC_REM_ACCESS_ERR));
	tulp_mr_read(t, t->got);
	TULP_CHECK(t, !memcmp(t->got, t->exp, len), 0);
	TULP_TRY(tulp_wait_state(t, t->qp_a, IB_QPS_ERR));
	return tulp_cq_empty(t);
}

/* (5d) REMOTE_WRITE without LOCAL_WRITE is no valid registration */
static int tulp_bad_access(struct tulp *t)
{
	struct ib_mr *mr = t->mr;
	int err;

	ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey) & 0xff);
	err = tulp_post_reg(t, mr, IB_ACCESS_REMOTE_WRITE, TULP_ID_REG);
	TULP_CHECK(t, !err, err);
	TULP_TRY(tulp_wc(t, t->cq_a, TULP_ID_REG, IB_WC_REG_MR,
			 IB_WC_MW_BIND_ERR, NULL));
	TULP_TRY(tulp_wait_state(t, t->qp_a, IB_QPS_ERR));
	TULP_CHECK(t, !tulp_key_valid(t, mr->rkey), mr->rkey);
	return tulp_cq_empty(t);
}

/*
 * (5e) Errors at post time (no MR, a DMA MR), then REG_MR of an MR of
 * B's PD on A's QP: IB_WC_MW_BIND_ERR, nothing registered.
 */
static int tulp_other_pd(struct tulp *t)
{
	const struct ib_send_wr *bad = NULL;
	struct ib_reg_wr wr = {
		.wr = {
			.opcode = IB_WR_REG_MR,
			.send_flags = IB_SEND_SIGNALED,
			.wr_id = TULP_ID_REG,
		},
		.access = TULP_RW,
	};
	struct ib_mr *dma_mr;
	void *p;
	int err, n;

	err = ib_post_send(t->qp_a, &wr.wr, &bad);
	TULP_CHECK(t, err == -EINVAL && bad == &wr.wr, err);
	dma_mr = t->pd_a->__internal_mr;
	TULP_CHECK(t, dma_mr, 0);
	wr.mr = dma_mr;
	wr.key = dma_mr->rkey;
	bad = NULL;
	err = ib_post_send(t->qp_a, &wr.wr, &bad);
	TULP_CHECK(t, err == -EINVAL && bad == &wr.wr, err);

	p = ib_alloc_mr(t->pd_b, IB_MR_TYPE_MEM_REG, TULP_PAGES);
	TULP_CHECK(t, !IS_ERR(p), PTR_ERR(p));
	t->mr2 = p;
	n = ib_map_mr_sg(t->mr2, t->sg, TULP_PAGES, NULL, PAGE_SIZE);
	TULP_CHECK(t, n == TULP_PAGES, n);
	ib_update_fast_reg_key(t->mr2, ib_inc_rkey(t->mr2->rkey) & 0xff);
	err = tulp_post_reg(t, t->mr2, TULP_RW, TULP_ID_REG);
	TULP_CHECK(t, !err, err);
	TULP_TRY(tulp_wc(t, t->cq_a, TULP_ID_REG, IB_WC_REG_MR,
			 IB_WC_MW_BIND_ERR, NULL));
	TULP_TRY(tulp_wait_state(t, t->qp_a, IB_QPS_ERR));
	TULP_CHECK(t, !tulp_key_valid(t, t->mr2->rkey), t->mr2->rkey);
	return tulp_cq_empty(t);
}

/*
 * The SG_GAPS buffer and its pieces as a mapped scatterlist, and an
 * IB_MR_TYPE_SG_GAPS MR of @max entries in A's PD.
 */
static int tulp_gaps_setup(struct tulp *t, u32 max)
{
	unsigned int i;
	void *p;
	int n;

	TULP_CHECK(t, t->dev->attrs.kernel_cap_flags & IBK_SG_GAPS_REG,
		   (int)t->dev->attrs.kernel_cap_flags);
	t->gpages = alloc_pages(GFP_KERNEL, get_order(TULP_GAPS_SPAN));
	t->shadow = kzalloc(TULP_GAPS_SPAN, GFP_KERNEL);
	TULP_CHECK(t, t->gpages && t->shadow, -ENOMEM);
	t->gbase = page_address(t->gpages);
	sg_init_table(t->gsg, TULP_GAPS);
	for (i = 0; i < TULP_GAPS; i++)
		sg_set_buf(&t->gsg[i], t->gbase + tulp_gaps[i].off,
			   tulp_gaps[i].len);
	n = ib_dma_map_sg(t->dev, t->gsg, TULP_GAPS, DMA_BIDIRECTIONAL);
	TULP_CHECK(t, n == TULP_GAPS, n);
	t->gsg_mapped = true;
	p = ib_alloc_mr(t->pd_a, IB_MR_TYPE_SG_GAPS, max);
	TULP_CHECK(t, !IS_ERR(p), PTR_ERR(p));
	t->gmr = p;
	return 0;
}

/* gbase is exactly its model */
static int tulp_gaps_intact(struct tulp *t)
{
	TULP_CHECK(t, !memcmp(t->gbase, t->shadow, TULP_GAPS_SPAN), 0);
	return 0;
}

/* new contents for gbase (and its model) */
static void tulp_gaps_fill(struct tulp *t, u8 seed)
{
	tulp_fill(t->gbase, TULP_GAPS_SPAN, seed);
	memcpy(t->shadow, t->gbase, TULP_GAPS_SPAN);
}

/* B READs @len bytes at key offset @koff into bbuf + @at: the model's */
static int tulp_gaps_read(struct tulp *t, const struct tulp_glayout *g,
			  u64 koff, size_t at, u32 len)
{
	struct ib_mr *mr = t->gmr;

	memset(t->bbuf, 0, TULP_BUF);
	TULP_TRY(tulp_rdma(t, IB_WR_RDMA_READ, mr->rkey, mr->iova + koff, at,
			   len, IB_WC_SUCCESS));
	tulp_gaps_move(g, t->shadow, t->exp, koff, len, false);
	TULP_CHECK(t, !memcmp(t->bbuf + at, t->exp, len), 0);
	TULP_CHECK(t, (!at || !t->bbuf[at - 1]) &&
		   (at + len >= TULP_BUF || !t->bbuf[at + len]), 0);
	return 0;
}

/* B WRITEs @len new bytes at key offset @koff; the model follows */
static int tulp_gaps_write(struct tulp *t, const struct tulp_glayout *g,
			   u64 koff, u32 len, u8 seed)
{
	struct ib_mr *mr = t->gmr;

	tulp_fill(t->bbuf, len, seed);
	TULP_TRY(tulp_rdma(t, IB_WR_RDMA_WRITE, mr->rkey, mr->iova + koff, 0,
			   len, IB_WC_SUCCESS));
	tulp_gaps_move(g, t->shadow, t->bbuf, koff, len, true);
	return tulp_gaps_intact(t);
}

/* @len bytes from (@sa, @skey) on @sqp into a receive (@ra, @rkey) on @rqp */
static int tulp_send(struct tulp *t, struct ib_qp *sqp, u64 sa, u32 skey,
		     struct ib_qp *rqp, u64 ra, u32 rkey, u32 len)
{
	struct ib_cq *scq = sqp == t->qp_a ? t->cq_a : t->cq_b;
	struct ib_cq *rcq = rqp == t->qp_a ? t->cq_a : t->cq_b;
	struct ib_sge rsge = { .addr = ra, .length = len, .lkey = rkey };
	struct ib_recv_wr rwr = {
		.wr_id = TULP_ID_RECV,
		.sg_list = &rsge,
		.num_sge = 1,
	};
	struct ib_sge ssge = { .addr = sa, .length = len, .lkey = skey };
	struct ib_send_wr swr = {
		.opcode = IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED,
		.wr_id = TULP_ID_SEND,
		.sg_list = &ssge,
		.num_sge = 1,
	};
	struct ib_wc wc;
	int err;

	err = ib_post_recv(rqp, &rwr, NULL);
	TULP_CHECK(t, !err, err);
	err = ib_post_send(sqp, &swr, NULL);
	TULP_CHECK(t, !err, err);
	TULP_TRY(tulp_wc(t, scq, TULP_ID_SEND, IB_WC_SEND, IB_WC_SUCCESS,
			 NULL));
	TULP_TRY(tulp_wc(t, rcq, TULP_ID_RECV, IB_WC_RECV, IB_WC_SUCCESS,
			 &wc));
	TULP_CHECK(t, wc.byte_len == len, wc.byte_len);
	return 0;
}

/*
 * (6) An SG_GAPS MR over six pieces: mapped whole, registered with
 * REG_MR; B WRITEs and READs all of it and pieces of it, A receives into
 * it and sends from it (lkey); mapped again from an offset into the
 * second piece; an access past its end fails and changes nothing.
 */
static int tulp_sg_gaps(struct tulp *t)
{
	struct tulp_glayout all = { .first = 0, .n = TULP_GAPS };
	struct tulp_glayout tail = { .first = 1, .n = TULP_GAPS - 1,
				     .skip = 1000 };
	unsigned int off;
	struct ib_mr *mr;
	int n;

	TULP_TRY(tulp_gaps_setup(t, TULP_GAPS));
	mr = t->gmr;
	n = ib_map_mr_sg(mr, t->gsg, TULP_GAPS, NULL, PAGE_SIZE);
	TULP_CHECK(t, n == TULP_GAPS, n);
	TULP_CHECK(t, mr->length == TULP_GAPS_LEN, (int)mr->length);
	TULP_CHECK(t, mr->iova == sg_dma_address(&t->gsg[0]), 0);
	TULP_CHECK(t, !tulp_key_valid(t, mr->rkey), mr->rkey);
	TULP_TRY(tulp_register(t, mr, TULP_RW));

	/* all of it, 16 packets: the pieces get it, the gaps keep theirs */
	tulp_gaps_fill(t, 20);
	TULP_TRY(tulp_gaps_write(t, &all, 0, TULP_GAPS_LEN, 21));
	tulp_gaps_fill(t, 22);
	TULP_TRY(tulp_gaps_read(t, &all, 0, 0, TULP_GAPS_LEN));
	/* across five pieces, to an odd offset; 3 bytes across three */
	TULP_TRY(tulp_gaps_read(t, &all, 8995, 3, 4890));
	TULP_TRY(tulp_gaps_write(t, &all, 13873, 3, 23));
	TULP_TRY(tulp_gaps_read(t, &all, 13800, 1, 200));

	/* as an lkey: A's receive scatters into it, A's SEND gathers */
	tulp_fill(t->bbuf, 6000, 24);
	TULP_TRY(tulp_send(t, t->qp_b, t->bdma, t->pd_b->local_dma_lkey,
			   t->qp_a, mr->iova + 500, mr->lkey, 6000));
	tulp_gaps_move(&all, t->shadow, t->bbuf, 500, 6000, true);
	TULP_TRY(tulp_gaps_intact(t));
	memset(t->bbuf, 0, TULP_BUF);
	TULP_TRY(tulp_send(t, t->qp_a, mr->iova + 7, mr->lkey,
			   t->qp_b, t->bdma, t->pd_b->local_dma_lkey, 9999));
	tulp_gaps_move(&all, t->shadow, t->exp, 7, 9999, false);
	TULP_CHECK(t, !memcmp(t->bbuf, t->exp, 9999), 0);

	/* invalidated, mapped from byte 1000 of the second piece on */
	TULP_TRY(tulp_local_inv(t, mr->rkey, IB_WC_SUCCESS));
	off = 1000;
	n = ib_map_mr_sg(mr, &t->gsg[1], TULP_GAPS - 1, &off, PAGE_SIZE);
	TULP_CHECK(t, n == TULP_GAPS - 1 && !off, n);
	TULP_CHECK(t, mr->iova == sg_dma_address(&t->gsg[1]) + 1000, 0);
	TULP_CHECK(t, mr->length == TULP_GAPS_LEN - 1 - 1000,
		   (int)mr->length);
	TULP_TRY(tulp_register(t, mr, TULP_RW));
	TULP_TRY(tulp_gaps_read(t, &tail, 0, 0, mr->length));
	TULP_TRY(tulp_gaps_write(t, &tail, 7999, 300, 25));

	/* one byte past the end: refused, nothing written */
	tulp_fill(t->bbuf, 2, 26);
	TULP_TRY(tulp_rdma(t, IB_WR_RDMA_WRITE, mr->rkey,
			   mr->iova + mr->length - 1, 0, 2,
			   IB_WC_REM_ACCESS_ERR));
	TULP_TRY(tulp_gaps_intact(t));
	TULP_TRY(tulp_wait_state(t, t->qp_b, IB_QPS_ERR));
	return tulp_cq_empty(t);
}

/*
 * (7) SG_GAPS misuse: no entries or more than the device takes; a
 * page-list MR maps only the prefix that has no gap; more pieces than
 * max_num_sg map the first max_num_sg (as mlx5); an offset past the first
 * piece is refused; a REG_MR longer than the mapping fails.
 */
static int tulp_sg_gaps_misuse(struct tulp *t)
{
	struct tulp_glayout four = { .first = 0, .n = 4 };
	u32 max = t->dev->attrs.max_fast_reg_page_list_len;
	unsigned int off;
	struct ib_mr *mr;
	void *p;
	int n, err;

	p = ib_alloc_mr(t->pd_a, IB_MR_TYPE_SG_GAPS, 0);
	TULP_CHECK(t, PTR_ERR(p) == -EINVAL, PTR_ERR(p));
	p = ib_alloc_mr(t->pd_a, IB_MR_TYPE_SG_GAPS, max + 1);
	TULP_CHECK(t, PTR_ERR(p) == -EINVAL, PTR_ERR(p));
	p = ib_alloc_mr(t->pd_a, IB_MR_TYPE_SG_GAPS, max);
	TULP_CHECK(t, !IS_ERR(p), PTR_ERR(p));
	ib_dereg_mr(p);

	TULP_TRY(tulp_gaps_setup(t, 4));
	mr = t->gmr;
	/* a page-list MR stops at the first gap: after the first piece */
	p = ib_alloc_mr(t->pd_a, IB_MR_TYPE_MEM_REG, TULP_GAPS);
	TULP_CHECK(t, !IS_ERR(p), PTR_ERR(p));
	t->mr2 = p;
	n = ib_map_mr_sg(t->mr2, t->gsg, TULP_GAPS, NULL, PAGE_SIZE);
	TULP_CHECK(t, n == 1, n);
	ib_dereg_mr(t->mr2);
	t->mr2 = NULL;

	/* six pieces into four entries: the first four */
	off = 0;
	n = ib_map_mr_sg(mr, t->gsg, TULP_GAPS, &off, PAGE_SIZE);
	TULP_CHECK(t, n == 4 && !off, n);
	TULP_CHECK(t, mr->length == 1 + 9000 + 777 + 4096, (int)mr->length);
	TULP_TRY(tulp_register(t, mr, TULP_RW));
	tulp_gaps_fill(t, 30);
	TULP_TRY(tulp_gaps_read(t, &four, 0, 0, mr->length));
	TULP_TRY(tulp_gaps_write(t, &four, 0, mr->length, 31));
	TULP_TRY(tulp_local_inv(t, mr->rkey, IB_WC_SUCCESS));

	/* an offset past the first piece (1 byte) */
	off = 2;
	n = ib_map_mr_sg(mr, t->gsg, TULP_GAPS, &off, PAGE_SIZE);
	TULP_CHECK(t, n == -EINVAL, n);

	/* a REG_MR one byte longer than the mapping: refused */
	n = ib_map_mr_sg(mr, &t->gsg[3], 2, NULL, PAGE_SIZE);
	TULP_CHECK(t, n == 2 && mr->length == 4096 + 1, n);
	mr->length++;
	ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey) & 0xff);
	err = tulp_post_reg(t, mr, TULP_RW, TULP_ID_REG);
	TULP_CHECK(t, !err, err);
	TULP_TRY(tulp_wc(t, t->cq_a, TULP_ID_REG, IB_WC_REG_MR,
			 IB_WC_MW_BIND_ERR, NULL));
	TULP_TRY(tulp_wait_state(t, t->qp_a, IB_QPS_ERR));
	TULP_CHECK(t, !tulp_key_valid(t, mr->rkey), mr->rkey);
	TULP_TRY(tulp_gaps_intact(t));
	return tulp_cq_empty(t);
}

static int (*const tulp_scenarios[])(struct tulp *t) = {
	[REMU_TMR_ULP_REG_RW] = tulp_reg_rw,
	[REMU_TMR_ULP_LOCAL_INV] = tulp_local_inv_scn,
	[REMU_TMR_ULP_SEND_INV] = tulp_send_inv_scn,
	[REMU_TMR_ULP_REREG] = tulp_rereg,
	[REMU_TMR_ULP_REG_VALID] = tulp_reg_valid,
	[REMU_TMR_ULP_INV_BAD_KEY] = tulp_inv_bad_key,
	[REMU_TMR_ULP_RIGHTS] = tulp_rights,
	[REMU_TMR_ULP_BAD_ACCESS] = tulp_bad_access,
	[REMU_TMR_ULP_OTHER_PD] = tulp_other_pd,
	[REMU_TMR_ULP_SG_GAPS] = tulp_sg_gaps,
	[REMU_TMR_ULP_SG_GAPS_MISUSE] = tulp_sg_gaps_misuse,
};

/**
 * tmr_ulp_run - run one kernel consumer scenario
 * @dev: the remu device (a reference held by the caller)
 * @rdev: the same, as remu's device
 * @res: in: the scenario; out: step (0: passed), err, line
 *
 * Context: process context, sleeps.
 */
void tmr_ulp_run(struct ib_device *dev, struct remu_dev *rdev,
		 struct remu_tmr_ulp *res)
{
	struct tulp *t;
	int err;

	res->step = 0;
	res->err = 0;
	res->line = 0;
	t = kzalloc(sizeof(*t), GFP_KERNEL);
	if (!t) {
		res->step = 1;
		res->err = -ENOMEM;
		return;
	}
	t->dev = dev;
	t->rdev = rdev;
	t->res = res;
	err = tulp_setup(t);
	if (!err)
		err = tulp_scenarios[res->scenario](t);
	tulp_teardown(t);
	kfree(t);
	if (!err)
		res->step = 0;
}
