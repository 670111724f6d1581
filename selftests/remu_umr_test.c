// SPDX-License-Identifier: GPL-2.0
/*
 * remu_umr_test - indirect memory keys (remudv.h, docs/indirect-keys.md)
 * end to end: side b (remu1, in the peer namespace) owns a buffer cut into
 * three pinned MRs and builds indirect keys over pieces of them with
 * remudv_wr_mr_list() / remudv_wr_mr_interleaved() on its extended RC QP;
 * side a (remu0) reaches them through the wire.  Every byte is checked
 * against a model: a map from each offset of the key to the byte of b's
 * buffer it names, built from the layout the test asked for, so a WRITE
 * must change exactly the mapped bytes (the rest of b's megabyte keeps its
 * guard pattern) and a READ must return them in key order.
 *
 * Cases: support and refusals at creation; a list of unaligned pieces of
 * three MRs (out of order, one MR twice) written and read in several
 * packets at several offsets; an interleaved layout (two strided entries,
 * many rows); a key whose entries are another indirect key and an MR;
 * local use (b's SEND gathering through the key, a's SEND scattered into
 * b's receive through it, b's RDMA WRITE from it); FETCH_ADD and
 * CMP_SWP through the key, and an atomic across an entry boundary
 * refused; misuse: more entries than the key takes, no IBV_SEND_INLINE,
 * rights outside the four, an entry past its MR, a right the key or an
 * entry's MR lacks, configuring a key that is still valid; LOCAL_INV and
 * SEND_WITH_INV (with and without REMOTE_INVALIDATE) then
 * reconfiguration; an underlying MR deregistered under the key; entries
 * over an ODP MR (faulted in through the key) and a device-memory MR;
 * entries over a dma-buf MR and an implicit ODP MR, list and interleaved;
 * a peer's WRITEs and READs racing LOCAL_INV + UMR of the key, and
 * racing the key's destruction; the UMR counters and trace events
 * counted exactly; the
 * object counts coming back; and EOPNOTSUPP on an rxe device's objects.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "kselftest_harness.h"
#include "remu_dmabuf_exp_lib.h"
#include "remu_lib.h"
#include "remu_trace_lib.h"
#include "remudv.h"

#define BUF_SIZE	(1 << 20)
#define MR_SPAN		(256 << 10)	/* b's three MRs: [0, 3 * MR_SPAN) */
#define GID_INDEX	1
#define GUARD		0xa5
#define RIGHTS		(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | \
			 IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)
#define MAX_KEY		(256 << 10)	/* largest key the model maps */
#define MKEY_MAX	16		/* entries per key (docs/indirect-keys.md) */

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr[3];	/* a: mr[0] over all of buf */
	uint8_t *buf;
	union ibv_gid gid;
	enum ibv_mtu mtu;
};

static int side_open(struct side *s, const char *dev, bool owner)
{
	struct ibv_qp_cap cap = {
		.max_send_wr = 32, .max_recv_wr = 32,
		.max_send_sge = 4, .max_recv_sge = 4,
		.max_inline_data = 256,
	};
	int i;

	s->ctx = remu_open_port(dev, GID_INDEX, &s->gid, &s->mtu);
	s->pd = s->ctx ? ibv_alloc_pd(s->ctx) : NULL;
	s->cq = s->pd ? ibv_create_cq(s->ctx, 64, NULL, NULL, 0) : NULL;
	s->buf = aligned_alloc(4096, BUF_SIZE);
	if (!s->cq || !s->buf)
		return -1;
	memset(s->buf, GUARD, BUF_SIZE);
	for (i = 0; i < (owner ? 3 : 1); i++) {
		s->mr[i] = ibv_reg_mr(s->pd, s->buf + (owner ? i * MR_SPAN : 0),
				      owner ? MR_SPAN : BUF_SIZE, RIGHTS);
		if (!s->mr[i])
			return -1;
	}
	/* b's QP is extended: the UMR builders need an ibv_qp_ex */
	s->qp = owner ? remu_create_qp_ex(s->pd, s->cq, IBV_QPT_RC, &cap) :
			remu_create_qp(s->pd, s->cq, IBV_QPT_RC, &cap);
	return s->qp ? 0 : -1;
}

static void side_close(struct side *s)
{
	int i;

	for (i = 1; i < 3; i++)
		if (s->mr[i])
			ibv_dereg_mr(s->mr[i]);
	remu_close_objs(s->qp, NULL, s->mr[0], s->cq, s->pd, s->ctx);
	free(s->buf);
}

static int qp_connect(struct side *s, struct side *peer)
{
	struct remu_conn_attr ra = REMU_RC_ATTR(0x55);
	struct remu_conn_dest d = { .qpn = peer->qp->qp_num, .gid = peer->gid,
				    .mtu = remu_min_mtu(s->mtu, peer->mtu) };

	ra.reset = true;
	return remu_qp_connect(s->qp, &ra, GID_INDEX, &d);
}

static void drain(struct ibv_cq *cq)
{
	struct ibv_wc wc;

	while (ibv_poll_cq(cq, 1, &wc) > 0)
		;
}

/* both QPs back to RTS after an error completion */
static int reconnect(struct side *a, struct side *b)
{
	if (qp_connect(a, b) || qp_connect(b, a))
		return -1;
	drain(a->cq);
	drain(b->cq);
	return 0;
}

/*
 * A UMR on b's QP: a list (@il NULL) of @n SGEs or @n interleaved entries
 * repeated @repeat times, with wr_flags @flags.  The completion's status,
 * or minus the errno ibv_wr_complete() returned.
 */
static int umr(struct side *b, struct remudv_mkey *mk, uint32_t access,
	       int n, struct ibv_sge *sge, struct remudv_mr_interleaved *il,
	       uint32_t repeat, unsigned int flags)
{
	struct ibv_qp_ex *qpx = ibv_qp_to_qp_ex(b->qp);
	struct remudv_qp_ex *dv = remudv_qp_ex_from_ibv_qp_ex(qpx);
	struct ibv_wc wc;
	int err, st;

	if (!dv)
		return -1000;
	ibv_wr_start(qpx);
	qpx->wr_id = 0x5a;
	qpx->wr_flags = flags;
	if (il)
		remudv_wr_mr_interleaved(dv, mk, access, repeat, n, il);
	else
		remudv_wr_mr_list(dv, mk, access, n, sge);
	err = ibv_wr_complete(qpx);
	if (err)
		return -err;
	st = remu_poll_one(b->cq, &wc, 20);
	if (st == IBV_WC_SUCCESS &&
	    (wc.opcode != (enum ibv_wc_opcode)REMUDV_WC_UMR ||
	     wc.wr_id != 0x5a))
		return -1001;
	return st;
}

#define UMR_FLAGS	(IBV_SEND_SIGNALED | IBV_SEND_INLINE)

static int umr_list(struct side *b, struct remudv_mkey *mk, uint32_t access,
		    int n, struct ibv_sge *sge)
{
	return umr(b, mk, access, n, sge, NULL, 0, UMR_FLAGS);
}

/* a's @op of @len bytes (a's buffer at @loff) at b's @raddr under @rkey */
static int rdma(struct side *a, int op, uint32_t rkey, uint64_t raddr,
		uint32_t len, uint32_t loff)
{
	return remu_rdma1(a->qp, a->cq, op, (uintptr_t)a->buf + loff,
			  a->mr[0]->lkey, len, raddr, rkey, 20);
}

/* a's atomic at @raddr under @rkey; the old value lands at a->buf */
static int atomic(struct side *a, int op, uint32_t rkey, uint64_t raddr,
		  uint64_t cmp_add, uint64_t swap)
{
	struct ibv_sge sge = { (uintptr_t)a->buf, 8, a->mr[0]->lkey };
	struct ibv_send_wr wr = { .wr_id = 0xa7, .sg_list = &sge,
				  .num_sge = 1, .opcode = op };

	wr.wr.atomic.remote_addr = raddr;
	wr.wr.atomic.rkey = rkey;
	wr.wr.atomic.compare_add = cmp_add;
	wr.wr.atomic.swap = swap;
	return remu_run_wr(a->qp, a->cq, &wr, 20);
}

static void pattern(uint8_t *p, size_t len, uint32_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(seed + i * 7 + (i >> 8));
}

/* ---- the model: key offset -> offset in b's buffer ---- */

struct model {
	uint32_t len;
	uint32_t map[MAX_KEY];
	uint8_t img[BUF_SIZE];	/* what b's buffer must hold */
};

static void model_list(struct model *m, struct side *b,
		       const struct ibv_sge *sge, int n)
{
	uint32_t i;
	int e;

	m->len = 0;
	for (e = 0; e < n; e++)
		for (i = 0; i < sge[e].length; i++)
			m->map[m->len++] = sge[e].addr + i -
					   (uintptr_t)b->buf;
}

static void model_interleaved(struct model *m, struct side *b,
			      const struct remudv_mr_interleaved *il, int n,
			      uint32_t repeat)
{
	uint32_t r, i;
	int e;

	m->len = 0;
	for (r = 0; r < repeat; r++)
		for (e = 0; e < n; e++)
			for (i = 0; i < il[e].bytes_count; i++)
				m->map[m->len++] = il[e].addr - (uintptr_t)b->buf +
					r * (il[e].bytes_count +
					     il[e].bytes_skip) + i;
}

/*
 * a WRITEs @len pattern bytes at key offset @off through @rkey, then
 * READs the same range back: b's buffer is the model's image byte for
 * byte (only the mapped bytes changed) and the READ returns them.
 */
static void write_read(struct __test_metadata *_metadata, struct side *a,
		       struct side *b, struct model *m, uint32_t rkey,
		       uint32_t off, uint32_t len, uint32_t seed)
{
	uint32_t i;

	pattern(a->buf, len, seed);
	ASSERT_EQ(IBV_WC_SUCCESS, rdma(a, IBV_WR_RDMA_WRITE, rkey, off, len, 0));
	for (i = 0; i < len; i++)
		m->img[m->map[off + i]] = a->buf[i];
	ASSERT_EQ(-1, remu_cmp(b->buf, m->img, BUF_SIZE));
	memset(a->buf + len, 0, len);
	ASSERT_EQ(IBV_WC_SUCCESS, rdma(a, IBV_WR_RDMA_READ, rkey, off, len,
				       len));
	ASSERT_EQ(-1, remu_cmp(a->buf + len, a->buf, len));
}

FIXTURE(umr) {
	struct side a, b;
	struct model *m;
	int mkeys0, mrs0;
};

FIXTURE_VARIANT(umr) {
	const char *dev_a, *dev_b;
};

FIXTURE_VARIANT_ADD(umr, remu0_remu1) { .dev_a = "remu0", .dev_b = "remu1" };

FIXTURE_SETUP(umr)
{
	memset(&self->a, 0, sizeof(self->a));
	memset(&self->b, 0, sizeof(self->b));
	self->mkeys0 = remu_obj_count("mkey");
	self->mrs0 = remu_obj_count("mr");
	ASSERT_EQ(0, side_open(&self->a, variant->dev_a, false));
	ASSERT_EQ(0, side_open(&self->b, variant->dev_b, true));
	ASSERT_EQ(0, qp_connect(&self->a, &self->b));
	ASSERT_EQ(0, qp_connect(&self->b, &self->a));
	self->m = malloc(sizeof(*self->m));
	ASSERT_NE(NULL, self->m);
	memset(self->m->img, GUARD, BUF_SIZE);
}

FIXTURE_TEARDOWN(umr)
{
	free(self->m);
	side_close(&self->a);
	side_close(&self->b);
	/* every key and MR of the test is gone */
	EXPECT_EQ(self->mkeys0, remu_obj_count("mkey"));
	EXPECT_EQ(self->mrs0, remu_obj_count("mr"));
}

static struct remudv_mkey *mkey_new(struct side *b, uint16_t max,
				    uint32_t flags)
{
	struct remudv_mkey_init_attr ia = {
		.pd = b->pd, .create_flags = flags, .max_entries = max,
	};

	return remudv_create_mkey(&ia);
}

/* b's address @off of its buffer, in MR @i */
#define B(off)	((uintptr_t)self->b.buf + (off))

/* four unaligned pieces of the three MRs, out of order, MR 1 twice */
static int four_pieces(struct side *b, struct ibv_sge *sge)
{
	const struct { int mr; uint32_t off, len; } p[4] = {
		{ 1, 4096 + 3, 5000 }, { 0, 17, 3 }, { 2, 100, 20011 },
		{ 1, 77, 1500 },
	};
	int i;

	for (i = 0; i < 4; i++) {
		sge[i].addr = (uintptr_t)b->buf + p[i].mr * MR_SPAN + p[i].off;
		sge[i].length = p[i].len;
		sge[i].lkey = b->mr[p[i].mr]->lkey;
	}
	return 4;
}

TEST_F(umr, create_and_refusals)
{
	struct remudv_mkey_init_attr ia = { .pd = self->b.pd,
		.create_flags = REMUDV_MKEY_INIT_ATTR_FLAGS_INDIRECT,
		.max_entries = 3 };
	struct ibv_device **list;
	struct remudv_mkey *mk;
	struct ibv_mw *mw;
	int n, i, found = 0;

	list = ibv_get_device_list(&n);
	ASSERT_NE(NULL, list);
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), variant->dev_b))
			found = remudv_is_supported(list[i]);
	ibv_free_device_list(list);
	EXPECT_TRUE(found);

	mk = remudv_create_mkey(&ia);
	ASSERT_NE(NULL, mk);
	EXPECT_EQ(3, ia.max_entries);
	EXPECT_EQ(mk->lkey, mk->rkey);
	EXPECT_EQ(self->mkeys0 + 1, remu_obj_count("mkey"));
	EXPECT_EQ(0, remudv_destroy_mkey(mk));
	EXPECT_EQ(self->mkeys0, remu_obj_count("mkey"));

	/* mlx5: the indirect flag is required, unknown flags refused */
	EXPECT_EQ(NULL, mkey_new(&self->b, 3, 0));
	EXPECT_EQ(EOPNOTSUPP, errno);
	EXPECT_EQ(NULL, mkey_new(&self->b, 3,
				 REMUDV_MKEY_INIT_ATTR_FLAGS_INDIRECT | 1 << 2));
	EXPECT_EQ(EOPNOTSUPP, errno);
	EXPECT_EQ(NULL, mkey_new(&self->b, 0,
				 REMUDV_MKEY_INIT_ATTR_FLAGS_INDIRECT));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(NULL, mkey_new(&self->b, MKEY_MAX + 1,
				 REMUDV_MKEY_INIT_ATTR_FLAGS_INDIRECT));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(self->mkeys0, remu_obj_count("mkey"));

	/* a plain ibv_alloc_mw still makes a window */
	mw = ibv_alloc_mw(self->b.pd, IBV_MW_TYPE_2);
	ASSERT_NE(NULL, mw);
	EXPECT_EQ(self->mkeys0, remu_obj_count("mkey"));
	EXPECT_EQ(0, ibv_dealloc_mw(mw));
	/* an unconfigured key grants nothing */
	mk = mkey_new(&self->b, 4, REMUDV_MKEY_INIT_ATTR_FLAGS_INDIRECT);
	ASSERT_NE(NULL, mk);
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  rdma(&self->a, IBV_WR_RDMA_WRITE, mk->rkey, 0, 1, 0));
	EXPECT_EQ(0, remudv_destroy_mkey(mk));
	EXPECT_EQ(-1, remu_cmp(self->b.buf, self->m->img, BUF_SIZE));
}

TEST_F(umr, list_write_read)
{
	struct ibv_sge sge[4];
	struct remudv_mkey *mk;
	int n;

	mk = mkey_new(&self->b, 4, REMUDV_MKEY_INIT_ATTR_FLAGS_INDIRECT);
	ASSERT_NE(NULL, mk);
	n = four_pieces(&self->b, sge);
	ASSERT_EQ(IBV_WC_SUCCESS, umr_list(&self->b, mk, RIGHTS, n, sge));
	model_list(self->m, &self->b, sge, n);
	ASSERT_EQ(26514, self->m->len);
	/* the whole key, then ranges starting and ending inside pieces */
	write_read(_metadata, &self->a, &self->b, self->m, mk->rkey, 0,
		   self->m->len, 1);
	write_read(_metadata, &self->a, &self->b, self->m, mk->rkey, 4999, 5,
		   2);
	write_read(_metadata, &self->a, &self->b, self->m, mk->rkey, 5001,
		   20100, 3);
	write_read(_metadata, &self->a, &self->b, self->m, mk->rkey,
		   self->m->len - 1, 1, 4);
	/* one byte past the key */
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  rdma(&self->a, IBV_WR_RDMA_WRITE, mk->rkey, self->m->len - 1,
		       2, 0));
	ASSERT_EQ(-1, remu_cmp(self->b.buf, self->m->img, BUF_SIZE));
	ASSERT_EQ(0, reconnect(&self->a, &self->b));
	EXPECT_EQ(0, remudv_destroy_mkey(mk));
}

TEST_F(umr, interleaved_write_read)
{
	struct remudv_mr_interleaved il[2] = {
		{ B(MR_SPAN + 5), 100, 28, self->b.mr[1]->lkey },
		{ B(2 * MR_SPAN + 4096), 16, 0, self->b.mr[2]->lkey },
	};
	struct remudv_mkey *mk;

	mk = mkey_new(&self->b, 2, REMUDV_MKEY_INIT_ATTR_FLAGS_INDIRECT);
	ASSERT_NE(NULL, mk);
	ASSERT_EQ(IBV_WC_SUCCESS, umr(&self->b, mk, RIGHTS, 2, NULL, il, 150,
				      UMR_FLAGS));
	model_interleaved(self->m, &self->b, il, 2, 150);
	ASSERT_EQ(150 * 116, self->m->len);
	write_read(_metadata, &self->a, &self->b, self->m, mk->rkey, 0,
		   self->m->len, 9);
	write_read(_metadata, &self->a, &self->b, self->m, mk->rkey, 99, 3000,
		   10);
	EXPECT_EQ(0, remudv_destroy_mkey(mk));
}

TEST_F(umr, nested)
{
	struct ibv_sge sge[4], outer[2];
	struct remudv_mkey *in, *out;
	uint32_t inner_map[26514];
	int n;

	in = mkey_new(&self->b, 4, REMUDV_MKEY_INIT_ATTR_FLAGS_INDIRECT);
	out = mkey_new(&self->b, 2, REMUDV_MKEY_INIT_ATTR_FLAGS_INDIRECT);
	ASSERT_NE(NULL, in);
	ASSERT_NE(NULL, out);
	n = four_pieces(&self->b, sge);
	ASSERT_EQ(IBV_WC_SUCCESS, umr_list(&self->b, in, RIGHTS, n, sge));
	model_list(self->m, &self->b, sge, n);
	memcpy(inner_map, self->m->map, sizeof(inner_map));
	/* outer = in[4990, 5010) then 300 bytes of MR 0 */
	outer[0] = (struct ibv_sge){ 4990, 20, in->lkey };
	outer[1] = (struct ibv_sge){ B(9000), 300, self->b.mr[0]->lkey };
	ASSERT_EQ(IBV_WC_SUCCESS, umr_list(&self->b, out, RIGHTS, 2, outer));
	self->m->len = 320;
	memcpy(self->m->map, inner_map + 4990, 20 * sizeof(uint32_t));
	for (n = 0; n < 300; n++)
		self->m->map[20 + n] = 9000 + n;
	write_read(_metadata, &self->a, &self->b, self->m, out->rkey, 0, 320,
		   21);
	EXPECT_EQ(0, remudv_destroy_mkey(out));
	EXPECT_EQ(0, remudv_destroy_mkey(in));
}

TEST_F(umr, local_use)
{
	struct ibv_sge sge[4], s;
	struct ibv_send_wr wr = { .num_sge = 1, .sg_list = &s };
	struct remudv_mkey *mk;
	struct ibv_wc wc;
	uint32_t i, len;
	int n;

	mk = mkey_new(&self->b, 4, REMUDV_MKEY_INIT_ATTR_FLAGS_INDIRECT);
	ASSERT_NE(NULL, mk);
	n = four_pieces(&self->b, sge);
	ASSERT_EQ(IBV_WC_SUCCESS, umr_list(&self->b, mk, RIGHTS, n, sge));
	model_list(self->m, &self->b, sge, n);
	len = self->m->len;
	/* fill b's pieces through the model, as a's WRITE would */
	for (i = 0; i < len; i++)
		self->b.buf[self->m->map[i]] = self->m->img[self->m->map[i]] =
			(uint8_t)(i * 13 + 5);

	/* b SENDs the key's bytes 3..len-3: gathered from the pieces */
	s = (struct ibv_sge){ (uintptr_t)self->a.buf, len, self->a.mr[0]->lkey };
	ASSERT_EQ(0, remu_post_recv(self->a.qp, 1, &s, 1));
	s = (struct ibv_sge){ 3, len - 6, mk->lkey };
	wr.opcode = IBV_WR_SEND;
	ASSERT_EQ(IBV_WC_SUCCESS, remu_run_wr(self->b.qp, self->b.cq, &wr, 20));
	ASSERT_EQ(IBV_WC_SUCCESS, remu_poll_one(self->a.cq, &wc, 20));
	ASSERT_EQ(len - 6, wc.byte_len);
	for (i = 0; i < len - 6; i++)
		ASSERT_EQ(self->b.buf[self->m->map[3 + i]], self->a.buf[i]);

	/* a SENDs into b's receive whose SGE is the key: scattered */
	s = (struct ibv_sge){ 10, len - 10, mk->lkey };
	ASSERT_EQ(0, remu_post_recv(self->b.qp, 2, &s, 1));
	pattern(self->a.buf, len - 10, 77);
	s = (struct ibv_sge){ (uintptr_t)self->a.buf, len - 10,
			      self->a.mr[0]->lkey };
	ASSERT_EQ(IBV_WC_SUCCESS, remu_run_wr(self->a.qp, self->a.cq, &wr, 20));
	ASSERT_EQ(IBV_WC_SUCCESS, remu_poll_one(self->b.cq, &wc, 20));
	ASSERT_EQ(2, wc.wr_id);
	for (i = 0; i < len - 10; i++)
		self->m->img[self->m->map[10 + i]] = self->a.buf[i];
	ASSERT_EQ(-1, remu_cmp(self->b.buf, self->m->img, BUF_SIZE));

	/* b's RDMA WRITE from the key into a's buffer */
	memset(self->a.buf, 0, len);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  remu_rdma1(self->b.qp, self->b.cq, IBV_WR_RDMA_WRITE, 0,
			     mk->lkey, len, (uintptr_t)self->a.buf,
			     self->a.mr[0]->rkey, 20));
	for (i = 0; i < len; i++)
		ASSERT_EQ(self->b.buf[self->m->map[i]], self->a.buf[i]);

	/* a local SGE past the key: local protection error */
	EXPECT_EQ(IBV_WC_LOC_PROT_ERR,
		  remu_rdma1(self->b.qp, self->b.cq, IBV_WR_RDMA_WRITE, len - 1,
			     mk->lkey, 2, (uintptr_t)self->a.buf,
			     self->a.mr[0]->rkey, 20));
	ASSERT_EQ(0, reconnect(&self->a, &self->b));
	EXPECT_EQ(0, remudv_destroy_mkey(mk));
}

TEST_F(umr, atomics)
{
	/*
	 * entry 0: 12 bytes, so key bytes 8..15 cross into entry 1, which
	 * starts 4 bytes before an aligned address: key offset 24 is MR 1's
	 * aligned 144
	 */
	struct ibv_sge sge[2] = {
		{ B(64), 12, self->b.mr[0]->lkey },
		{ B(MR_SPAN + 132), 64, self->b.mr[1]->lkey },
	};
	struct remudv_mkey *mk;
	uint64_t v, old;

	mk = mkey_new(&self->b, 2, REMUDV_MKEY_INIT_ATTR_FLAGS_INDIRECT);
	ASSERT_NE(NULL, mk);
	ASSERT_EQ(IBV_WC_SUCCESS, umr_list(&self->b, mk, RIGHTS, 2, sge));
	/* key offset 0 is b's byte 64 */
	v = 1000;
	memcpy(self->b.buf + 64, &v, 8);
	ASSERT_EQ(IBV_WC_SUCCESS, atomic(&self->a, IBV_WR_ATOMIC_FETCH_AND_ADD,
					 mk->rkey, 0, 5, 0));
	memcpy(&old, self->a.buf, 8);
	EXPECT_EQ(1000, old);
	memcpy(&v, self->b.buf + 64, 8);
	EXPECT_EQ(1005, v);
	v = 42;
	memcpy(self->b.buf + MR_SPAN + 144, &v, 8);
	ASSERT_EQ(IBV_WC_SUCCESS, atomic(&self->a, IBV_WR_ATOMIC_CMP_AND_SWP,
					 mk->rkey, 24, 42, 4242));
	memcpy(&old, self->a.buf, 8);
	EXPECT_EQ(42, old);
	memcpy(&v, self->b.buf + MR_SPAN + 144, 8);
	EXPECT_EQ(4242, v);
	/* an 8-byte operand across the entry boundary is refused */
	memcpy(self->m->img, self->b.buf, BUF_SIZE);
	EXPECT_EQ(IBV_WC_REM_INV_REQ_ERR,
		  atomic(&self->a, IBV_WR_ATOMIC_FETCH_AND_ADD, mk->rkey, 8, 1,
			 0));
	ASSERT_EQ(-1, remu_cmp(self->b.buf, self->m->img, BUF_SIZE));
	ASSERT_EQ(0, reconnect(&self->a, &self->b));
	EXPECT_EQ(0, remudv_destroy_mkey(mk));
}

TEST_F(umr, misuse)
{
	struct ibv_sge sge[4], past;
	struct remudv_mkey *mk;
	int n;

	mk = mkey_new(&self->b, 3, REMUDV_MKEY_INIT_ATTR_FLAGS_INDIRECT);
	ASSERT_NE(NULL, mk);
	n = four_pieces(&self->b, sge);
	/* at post, as mlx5: too many entries, no inline flag, bad rights */
	EXPECT_EQ(-ENOMEM, umr_list(&self->b, mk, RIGHTS, n, sge));
	EXPECT_EQ(-EOPNOTSUPP, umr(&self->b, mk, RIGHTS, 3, sge, NULL, 0,
				   IBV_SEND_SIGNALED));
	EXPECT_EQ(-EINVAL, umr_list(&self->b, mk,
				    RIGHTS | IBV_ACCESS_MW_BIND, 3, sge));
	/* nothing was posted: the key is still unconfigured */
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  rdma(&self->a, IBV_WR_RDMA_WRITE, mk->rkey, 0, 1, 0));
	ASSERT_EQ(0, reconnect(&self->a, &self->b));

	/* an entry past its MR: configured, and every access to it fails */
	past = (struct ibv_sge){ B(MR_SPAN - 100), 200, self->b.mr[0]->lkey };
	ASSERT_EQ(IBV_WC_SUCCESS, umr_list(&self->b, mk, RIGHTS, 1, &past));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  rdma(&self->a, IBV_WR_RDMA_WRITE, mk->rkey, 0, 200, 0));
	ASSERT_EQ(-1, remu_cmp(self->b.buf, self->m->img, BUF_SIZE));
	ASSERT_EQ(0, reconnect(&self->a, &self->b));

	/* configuring a key that is still valid: MW_BIND_ERR (QP in ERR) */
	EXPECT_EQ(IBV_WC_MW_BIND_ERR, umr_list(&self->b, mk, RIGHTS, 3, sge));
	ASSERT_EQ(0, reconnect(&self->a, &self->b));
	EXPECT_EQ(0, remudv_destroy_mkey(mk));

	/* the key's rights: READ only refuses a WRITE */
	mk = mkey_new(&self->b, 3, REMUDV_MKEY_INIT_ATTR_FLAGS_INDIRECT);
	ASSERT_NE(NULL, mk);
	ASSERT_EQ(IBV_WC_SUCCESS, umr_list(&self->b, mk,
					   IBV_ACCESS_REMOTE_READ, 3, sge));
	EXPECT_EQ(IBV_WC_SUCCESS,
		  rdma(&self->a, IBV_WR_RDMA_READ, mk->rkey, 0, 100, 0));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  rdma(&self->a, IBV_WR_RDMA_WRITE, mk->rkey, 0, 100, 0));
	ASSERT_EQ(-1, remu_cmp(self->b.buf, self->m->img, BUF_SIZE));
	ASSERT_EQ(0, reconnect(&self->a, &self->b));
	EXPECT_EQ(0, remudv_destroy_mkey(mk));
}

TEST_F(umr, entry_rights_intersect)
{
	struct ibv_mr *ro;
	struct ibv_sge sge[2];
	struct remudv_mkey *mk;

	/* a second MR over MR 1's range with remote read only */
	ro = ibv_reg_mr(self->b.pd, self->b.buf + MR_SPAN, MR_SPAN,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	ASSERT_NE(NULL, ro);
	sge[0] = (struct ibv_sge){ B(1000), 100, self->b.mr[0]->lkey };
	sge[1] = (struct ibv_sge){ B(MR_SPAN + 1000), 100, ro->lkey };
	mk = mkey_new(&self->b, 2, REMUDV_MKEY_INIT_ATTR_FLAGS_INDIRECT);
	ASSERT_NE(NULL, mk);
	ASSERT_EQ(IBV_WC_SUCCESS, umr_list(&self->b, mk, RIGHTS, 2, sge));
	model_list(self->m, &self->b, sge, 2);
	/* the first entry takes a WRITE, the read-only one does not */
	write_read(_metadata, &self->a, &self->b, self->m, mk->rkey, 0, 100,
		   31);
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  rdma(&self->a, IBV_WR_RDMA_WRITE, mk->rkey, 50, 100, 0));
	ASSERT_EQ(-1, remu_cmp(self->b.buf, self->m->img, BUF_SIZE));
	ASSERT_EQ(0, reconnect(&self->a, &self->b));
	EXPECT_EQ(IBV_WC_SUCCESS,
		  rdma(&self->a, IBV_WR_RDMA_READ, mk->rkey, 50, 100, 0));
	EXPECT_EQ(0, remudv_destroy_mkey(mk));
	EXPECT_EQ(0, ibv_dereg_mr(ro));
}

TEST_F(umr, invalidate_and_reconfigure)
{
	struct ibv_send_wr inv = { .wr_id = 0x1f, .opcode = IBV_WR_LOCAL_INV };
	struct ibv_sge sge[4], s;
	struct ibv_send_wr wr = { .num_sge = 1, .sg_list = &s,
				  .opcode = IBV_WR_SEND_WITH_INV };
	struct remudv_mkey *mk, *noinv;
	struct ibv_wc wc;
	int n;

	mk = mkey_new(&self->b, 4, REMUDV_MKEY_INIT_ATTR_FLAGS_INDIRECT |
			       REMUDV_MKEY_INIT_ATTR_FLAGS_REMOTE_INVALIDATE);
	ASSERT_NE(NULL, mk);
	n = four_pieces(&self->b, sge);
	ASSERT_EQ(IBV_WC_SUCCESS, umr_list(&self->b, mk, RIGHTS, n, sge));
	model_list(self->m, &self->b, sge, n);
	write_read(_metadata, &self->a, &self->b, self->m, mk->rkey, 0, 6000,
		   41);

	/* LOCAL_INV: the key stops working */
	inv.invalidate_rkey = mk->lkey;
	ASSERT_EQ(IBV_WC_SUCCESS, remu_run_wr(self->b.qp, self->b.cq, &inv, 20));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  rdma(&self->a, IBV_WR_RDMA_WRITE, mk->rkey, 0, 10, 0));
	ASSERT_EQ(-1, remu_cmp(self->b.buf, self->m->img, BUF_SIZE));
	ASSERT_EQ(0, reconnect(&self->a, &self->b));

	/* configured again, in another order: the new layout is used */
	s = sge[0];
	sge[0] = sge[3];
	sge[3] = s;
	ASSERT_EQ(IBV_WC_SUCCESS, umr_list(&self->b, mk, RIGHTS, n, sge));
	model_list(self->m, &self->b, sge, n);
	write_read(_metadata, &self->a, &self->b, self->m, mk->rkey, 0,
		   self->m->len, 42);

	/* a's SEND_WITH_INV: b's receive completes WITH_INV, key dead */
	ASSERT_EQ(0, remu_post_recv(self->b.qp, 3, NULL, 0));
	s = (struct ibv_sge){ (uintptr_t)self->a.buf, 0, self->a.mr[0]->lkey };
	wr.invalidate_rkey = mk->rkey;
	wr.num_sge = 0;
	ASSERT_EQ(IBV_WC_SUCCESS, remu_run_wr(self->a.qp, self->a.cq, &wr, 20));
	ASSERT_EQ(IBV_WC_SUCCESS, remu_poll_one(self->b.cq, &wc, 20));
	EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_INV);
	EXPECT_EQ(mk->rkey, wc.invalidated_rkey);
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  rdma(&self->a, IBV_WR_RDMA_READ, mk->rkey, 0, 10, 0));
	ASSERT_EQ(0, reconnect(&self->a, &self->b));

	/* without REMOTE_INVALIDATE, SEND_WITH_INV is refused */
	noinv = mkey_new(&self->b, 4, REMUDV_MKEY_INIT_ATTR_FLAGS_INDIRECT);
	ASSERT_NE(NULL, noinv);
	ASSERT_EQ(IBV_WC_SUCCESS, umr_list(&self->b, noinv, RIGHTS, n, sge));
	ASSERT_EQ(0, remu_post_recv(self->b.qp, 4, NULL, 0));
	wr.invalidate_rkey = noinv->rkey;
	EXPECT_EQ(IBV_WC_REM_OP_ERR,
		  remu_run_wr(self->a.qp, self->a.cq, &wr, 20));
	ASSERT_EQ(0, reconnect(&self->a, &self->b));
	write_read(_metadata, &self->a, &self->b, self->m, noinv->rkey, 0, 100,
		   43);
	EXPECT_EQ(0, remudv_destroy_mkey(noinv));
	EXPECT_EQ(0, remudv_destroy_mkey(mk));
}

TEST_F(umr, dereg_underlying_mr)
{
	struct ibv_sge sge[2] = {
		{ B(500), 1000, self->b.mr[0]->lkey },
		{ B(2 * MR_SPAN + 500), 1000, self->b.mr[2]->lkey },
	};
	struct remudv_mkey *mk;

	mk = mkey_new(&self->b, 2, REMUDV_MKEY_INIT_ATTR_FLAGS_INDIRECT);
	ASSERT_NE(NULL, mk);
	ASSERT_EQ(IBV_WC_SUCCESS, umr_list(&self->b, mk, RIGHTS, 2, sge));
	model_list(self->m, &self->b, sge, 2);
	write_read(_metadata, &self->a, &self->b, self->m, mk->rkey, 0, 2000,
		   51);
	/* MR 2 goes away: its entry fails, the other still works */
	ASSERT_EQ(0, ibv_dereg_mr(self->b.mr[2]));
	self->b.mr[2] = NULL;
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  rdma(&self->a, IBV_WR_RDMA_WRITE, mk->rkey, 900, 200, 0));
	ASSERT_EQ(0, reconnect(&self->a, &self->b));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  rdma(&self->a, IBV_WR_RDMA_READ, mk->rkey, 1000, 10, 0));
	ASSERT_EQ(-1, remu_cmp(self->b.buf, self->m->img, BUF_SIZE));
	ASSERT_EQ(0, reconnect(&self->a, &self->b));
	write_read(_metadata, &self->a, &self->b, self->m, mk->rkey, 0, 1000,
		   52);
	/* and locally */
	EXPECT_EQ(IBV_WC_LOC_PROT_ERR,
		  remu_rdma1(self->b.qp, self->b.cq, IBV_WR_RDMA_WRITE, 999,
			     mk->lkey, 2, (uintptr_t)self->a.buf,
			     self->a.mr[0]->rkey, 20));
	ASSERT_EQ(0, reconnect(&self->a, &self->b));
	EXPECT_EQ(0, remudv_destroy_mkey(mk));
}

/*
 * Entries over other backings: an explicit ODP MR (never touched: the
 * WRITE faults its pages in through the key), a device-memory MR (zero
 * based) and a pinned MR, in one list.
 */
TEST_F(umr, odp_and_dm_entries)
{
	struct ibv_alloc_dm_attr da = { .length = 8192 };
	uint8_t dmbytes[3000];
	struct ibv_mr *odp, *dmr;
	struct remudv_mkey *mk;
	struct ibv_sge sge[3];
	struct ibv_dm *dm;
	uint8_t *obuf;

	/* a fresh mapping: no page of it is present before the WRITE */
	obuf = mmap(NULL, MR_SPAN, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, obuf);
	odp = ibv_reg_mr(self->b.pd, obuf, MR_SPAN,
			 RIGHTS | IBV_ACCESS_ON_DEMAND);
	ASSERT_NE(NULL, odp);
	dm = ibv_alloc_dm(self->b.ctx, &da);
	ASSERT_NE(NULL, dm);
	dmr = ibv_reg_dm_mr(self->b.pd, dm, 0, 8192,
			    RIGHTS | IBV_ACCESS_ZERO_BASED);
	ASSERT_NE(NULL, dmr);
	sge[0] = (struct ibv_sge){ (uintptr_t)obuf + 333, 5000, odp->lkey };
	sge[1] = (struct ibv_sge){ 100, 3000, dmr->lkey };
	sge[2] = (struct ibv_sge){ B(10), 50, self->b.mr[0]->lkey };
	mk = mkey_new(&self->b, 3, REMUDV_MKEY_INIT_ATTR_FLAGS_INDIRECT);
	ASSERT_NE(NULL, mk);
	ASSERT_EQ(IBV_WC_SUCCESS, umr_list(&self->b, mk, RIGHTS, 3, sge));

	pattern(self->a.buf, 8050, 61);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma(&self->a, IBV_WR_RDMA_WRITE, mk->rkey, 0, 8050, 0));
	EXPECT_EQ(0, memcmp(obuf + 333, self->a.buf, 5000));
	ASSERT_EQ(0, ibv_memcpy_from_dm(dmbytes, dm, 100, sizeof(dmbytes)));
	EXPECT_EQ(0, memcmp(dmbytes, self->a.buf + 5000, 3000));
	memcpy(self->m->img + 10, self->a.buf + 8000, 50);
	EXPECT_EQ(-1, remu_cmp(self->b.buf, self->m->img, BUF_SIZE));
	memset(self->a.buf + 8050, 0, 8050);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma(&self->a, IBV_WR_RDMA_READ, mk->rkey, 0, 8050, 8050));
	EXPECT_EQ(0, memcmp(self->a.buf + 8050, self->a.buf, 8050));

	EXPECT_EQ(0, remudv_destroy_mkey(mk));
	EXPECT_EQ(0, ibv_dereg_mr(dmr));
	EXPECT_EQ(0, ibv_free_dm(dm));
	EXPECT_EQ(0, ibv_dereg_mr(odp));
	munmap(obuf, MR_SPAN);
}

#define DB_SIZE		(64 << 10)	/* the dma-buf */
#define DB_OFF		4096		/* its byte at the MR's iova */
#define DB_IOVA		0x5d0000001000ULL

/*
 * Entries over a dma-buf MR (udmabuf, not zero based) and an implicit ODP
 * MR (iova = address; a fresh mapping, faulted in through the key) beside
 * a pinned MR: a list of four pieces (the dma-buf twice) and an
 * interleaved key (a dma-buf and an implicit-ODP entry, 50 rows); the
 * peer WRITEs all of each and READs it back, and each backing holds
 * exactly the bytes its pieces got (the dma-buf through the memfd's view).
 */
TEST_F(umr, dmabuf_and_implicit_odp_entries)
{
	uint8_t *obuf, *want_db, *want_o, *a = self->a.buf;
	struct remudv_mr_interleaved il[2];
	struct ibv_mr *dbmr, *imp;
	struct remudv_mkey *mk;
	struct ibv_sge sge[4];
	uint32_t len, r, o;
	struct dbuf d;

	if (dbuf_exporter_missing(EXP_UDMABUF))
		SKIP(return, "%s", dbuf_exporter_missing(EXP_UDMABUF));
	ASSERT_EQ(0, dbuf_create(&d, EXP_UDMABUF, DB_SIZE));
	memset(d.view, GUARD, DB_SIZE);
	dbmr = ibv_reg_dmabuf_mr(self->b.pd, DB_OFF, DB_SIZE - DB_OFF,
				 DB_IOVA, d.fd, RIGHTS);
	ASSERT_NE(NULL, dbmr);
	imp = ibv_reg_mr(self->b.pd, NULL, SIZE_MAX,
			 RIGHTS | IBV_ACCESS_ON_DEMAND);
	ASSERT_NE(NULL, imp);
	obuf = mmap(NULL, MR_SPAN, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, obuf);
	want_db = malloc(DB_SIZE);
	want_o = calloc(1, MR_SPAN);
	ASSERT_NE(NULL, want_db);
	ASSERT_NE(NULL, want_o);
	memset(want_db, GUARD, DB_SIZE);

	/* a list: dma-buf, implicit ODP (across a page), pinned, dma-buf */
	sge[0] = (struct ibv_sge){ DB_IOVA + 777, 5000, dbmr->lkey };
	sge[1] = (struct ibv_sge){ (uintptr_t)obuf + 4095, 7000, imp->lkey };
	sge[2] = (struct ibv_sge){ B(10), 50, self->b.mr[0]->lkey };
	sge[3] = (struct ibv_sge){ DB_IOVA + 30000, 1234, dbmr->lkey };
	len = 5000 + 7000 + 50 + 1234;
	mk = mkey_new(&self->b, 4, REMUDV_MKEY_INIT_ATTR_FLAGS_INDIRECT);
	ASSERT_NE(NULL, mk);
	ASSERT_EQ(IBV_WC_SUCCESS, umr_list(&self->b, mk, RIGHTS, 4, sge));
	pattern(a, len, 71);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma(&self->a, IBV_WR_RDMA_WRITE, mk->rkey, 0, len, 0));
	memcpy(want_db + DB_OFF + 777, a, 5000);
	memcpy(want_o + 4095, a + 5000, 7000);
	memcpy(self->m->img + 10, a + 12000, 50);
	memcpy(want_db + DB_OFF + 30000, a + 12050, 1234);
	dbuf_sync(&d, 0);
	EXPECT_EQ(-1, remu_cmp(d.view, want_db, DB_SIZE));
	dbuf_sync(&d, 1);
	EXPECT_EQ(-1, remu_cmp(obuf, want_o, MR_SPAN));
	EXPECT_EQ(-1, remu_cmp(self->b.buf, self->m->img, BUF_SIZE));
	memset(a + len, 0, len);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma(&self->a, IBV_WR_RDMA_READ, mk->rkey, 0, len, len));
	EXPECT_EQ(-1, remu_cmp(a + len, a, len));
	EXPECT_EQ(0, remudv_destroy_mkey(mk));

	/* interleaved: 64 B of the dma-buf (36 skipped), 40 B of ODP memory */
	il[0] = (struct remudv_mr_interleaved){ DB_IOVA + 40000, 64, 36,
						dbmr->lkey };
	il[1] = (struct remudv_mr_interleaved){ (uintptr_t)obuf + 100000 + 3,
						40, 0, imp->lkey };
	len = 50 * (64 + 40);
	mk = mkey_new(&self->b, 2, REMUDV_MKEY_INIT_ATTR_FLAGS_INDIRECT);
	ASSERT_NE(NULL, mk);
	ASSERT_EQ(IBV_WC_SUCCESS, umr(&self->b, mk, RIGHTS, 2, NULL, il, 50,
				      UMR_FLAGS));
	pattern(a, len, 72);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma(&self->a, IBV_WR_RDMA_WRITE, mk->rkey, 0, len, 0));
	for (r = 0, o = 0; r < 50; r++) {
		memcpy(want_db + DB_OFF + 40000 + r * 100, a + o, 64);
		o += 64;
		memcpy(want_o + 100003 + r * 40, a + o, 40);
		o += 40;
	}
	dbuf_sync(&d, 0);
	EXPECT_EQ(-1, remu_cmp(d.view, want_db, DB_SIZE));
	dbuf_sync(&d, 1);
	EXPECT_EQ(-1, remu_cmp(obuf, want_o, MR_SPAN));
	memset(a + len, 0, len);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma(&self->a, IBV_WR_RDMA_READ, mk->rkey, 0, len, len));
	EXPECT_EQ(-1, remu_cmp(a + len, a, len));
	/* the pinned MRs of b were not touched by the interleaved key */
	EXPECT_EQ(-1, remu_cmp(self->b.buf, self->m->img, BUF_SIZE));
	EXPECT_EQ(0, remudv_destroy_mkey(mk));

	free(want_o);
	free(want_db);
	EXPECT_EQ(0, ibv_dereg_mr(imp));
	munmap(obuf, MR_SPAN);
	EXPECT_EQ(0, ibv_dereg_mr(dbmr));
	dbuf_destroy(&d);
}

/* ---- a peer's accesses racing re-configuration ---- */

#define RACE_ROUNDS	100
#define RACE_SHIFT	40000	/* layout B: layout A's pieces moved */

/* the byte a WRITE at key offset @k carries in the race */
static uint8_t race_byte(uint32_t k)
{
	return (uint8_t)(k * 7 + 3);
}

struct racer {
	struct side *b;
	struct ibv_qp *qp;	/* b's second QP: its UMRs and LOCAL_INVs */
	struct ibv_cq *cq;
	struct remudv_mkey *mk;
	struct ibv_sge lay[2][4];
	int err;
};

static int run_local(struct ibv_qp *qp, struct ibv_cq *cq,
		     struct ibv_send_wr *wr)
{
	return remu_run_wr(qp, cq, wr, 20);
}

static void *reconfigure(void *arg)
{
	struct racer *r = arg;
	struct ibv_send_wr inv = { .opcode = IBV_WR_LOCAL_INV };
	struct side ctl = *r->b;
	int i;

	ctl.qp = r->qp;
	ctl.cq = r->cq;
	inv.invalidate_rkey = r->mk->lkey;
	for (i = 0; i < RACE_ROUNDS && !r->err; i++) {
		if (run_local(r->qp, r->cq, &inv) != IBV_WC_SUCCESS ||
		    umr_list(&ctl, r->mk, RIGHTS, 4, r->lay[(i + 1) & 1]) !=
		    IBV_WC_SUCCESS)
			r->err = i + 1;
	}
	return NULL;
}

/*
 * a loops WRITEs and READs of 6 KiB at varying offsets through the key
 * while b (on another QP) invalidates it and configures it again with
 * layout A or B, 100 times.  Each access succeeds or fails with
 * REM_ACCESS_ERR; every byte of b's buffer outside the two layouts keeps
 * its guard, every byte inside holds the guard or the byte a WRITE at its
 * key offset carries, and every byte a READ returns is one of those two.
 */
TEST_F(umr, race_reconfigure)
{
	static const struct ibv_qp_cap cap = {
		.max_send_wr = 8, .max_recv_wr = 1, .max_send_sge = 1,
		.max_recv_sge = 1, .max_inline_data = 256,
	};
	struct side a2 = self->a, b2 = self->b;
	struct racer r = { .b = &self->b };
	uint8_t *want[2];
	pthread_t t;
	uint32_t i, k, len = 6144, ok = 0, refused = 0;
	int l, st, n;

	/* a second RC pair: b's control QP must stay usable */
	a2.cq = ibv_create_cq(self->a.ctx, 16, NULL, NULL, 0);
	b2.cq = ibv_create_cq(self->b.ctx, 16, NULL, NULL, 0);
	ASSERT_NE(NULL, a2.cq);
	ASSERT_NE(NULL, b2.cq);
	a2.qp = remu_create_qp(a2.pd, a2.cq, IBV_QPT_RC, &cap);
	b2.qp = remu_create_qp_ex(b2.pd, b2.cq, IBV_QPT_RC, &cap);
	ASSERT_NE(NULL, a2.qp);
	ASSERT_NE(NULL, b2.qp);
	ASSERT_EQ(0, qp_connect(&a2, &b2));
	ASSERT_EQ(0, qp_connect(&b2, &a2));

	r.qp = b2.qp;
	r.cq = b2.cq;
	r.mk = mkey_new(&self->b, 4, REMUDV_MKEY_INIT_ATTR_FLAGS_INDIRECT);
	ASSERT_NE(NULL, r.mk);
	n = four_pieces(&self->b, r.lay[0]);
	for (i = 0; i < 4; i++) {
		r.lay[1][i] = r.lay[0][3 - i];
		r.lay[1][i].addr += RACE_SHIFT;
	}
	/* the value each byte of b's buffer may hold, per layout */
	for (l = 0; l < 2; l++) {
		want[l] = malloc(BUF_SIZE);
		ASSERT_NE(NULL, want[l]);
		memset(want[l], GUARD, BUF_SIZE);
		model_list(self->m, &self->b, r.lay[l], n);
		for (k = 0; k < self->m->len; k++)
			want[l][self->m->map[k]] = race_byte(k);
	}
	ASSERT_EQ(IBV_WC_SUCCESS, umr_list(&self->b, r.mk, RIGHTS, n,
					   r.lay[0]));

	ASSERT_EQ(0, pthread_create(&t, NULL, reconfigure, &r));
	for (i = 0; i < 800 && !r.err; i++) {
		k = (i * 3119) % (self->m->len - len);
		if (i & 1) {
			for (n = 0; n < (int)len; n++)
				self->a.buf[n] = race_byte(k + n);
			st = rdma(&self->a, IBV_WR_RDMA_WRITE, r.mk->rkey, k,
				  len, 0);
		} else {
			st = rdma(&self->a, IBV_WR_RDMA_READ, r.mk->rkey, k,
				  len, len);
			for (n = 0; st == IBV_WC_SUCCESS && n < (int)len; n++)
				if (self->a.buf[len + n] != GUARD &&
				    self->a.buf[len + n] != race_byte(k + n))
					st = -2;
		}
		if (st == IBV_WC_SUCCESS) {
			ok++;
			continue;
		}
		ASSERT_EQ(IBV_WC_REM_ACCESS_ERR, st);
		refused++;
		ASSERT_EQ(0, reconnect(&self->a, &self->b));
	}
	pthread_join(t, NULL);
	EXPECT_EQ(0, r.err);
	for (i = 0; i < BUF_SIZE; i++) {
		uint8_t v = self->b.buf[i];

		if (v != GUARD && v != want[0][i] && v != want[1][i]) {
			EXPECT_EQ(want[0][i], v);
			TH_LOG("byte %u of b's buffer", i);
			break;
		}
	}
	TH_LOG("%u accesses done, %u refused", ok, refused);
	EXPECT_LT(0, ok);
	free(want[0]);
	free(want[1]);
	EXPECT_EQ(0, remudv_destroy_mkey(r.mk));
	ibv_destroy_qp(a2.qp);
	ibv_destroy_qp(b2.qp);
	ibv_destroy_cq(a2.cq);
	ibv_destroy_cq(b2.cq);
}

#define DESTROY_ROUNDS	40

/*
 * Destruction racing the peer: in each round b configures a new key
 * (layout of four_pieces()), a posts two WRITEs and two READs of 6 KiB
 * through it, and b destroys the key after 0 to 1 ms, while they run.
 * Every access succeeds or fails cleanly: REM_ACCESS_ERR, then the rest
 * flushed; an access after the destruction is refused.  b's buffer holds
 * only the guard or the byte of its key offset (race_byte()), every byte
 * a READ returns likewise, and no key is left.
 */
TEST_F(umr, race_destroy)
{
	uint32_t round, j, x, k[4], len = 6144, ok = 0, failed = 0;
	struct ibv_send_wr wr[4];
	struct ibv_sge sg[4], lay[4];
	struct remudv_mkey *mk;
	struct ibv_wc wc;
	uint8_t *want, *p;
	uint32_t rkey;
	int n, st, seen;

	n = four_pieces(&self->b, lay);
	model_list(self->m, &self->b, lay, n);
	want = malloc(BUF_SIZE);
	ASSERT_NE(NULL, want);
	memset(want, GUARD, BUF_SIZE);
	for (x = 0; x < self->m->len; x++)
		want[self->m->map[x]] = race_byte(x);

	for (round = 0; round < DESTROY_ROUNDS; round++) {
		mk = mkey_new(&self->b, 4, REMUDV_MKEY_INIT_ATTR_FLAGS_INDIRECT);
		ASSERT_NE(NULL, mk);
		ASSERT_EQ(IBV_WC_SUCCESS, umr_list(&self->b, mk, RIGHTS, n,
						   lay));
		rkey = mk->rkey;
		for (j = 0; j < 4; j++) {
			k[j] = ((round * 4 + j) * 3119) % (self->m->len - len);
			p = self->a.buf + j * len;
			for (x = 0; x < len; x++)
				p[x] = j & 1 ? 0 : race_byte(k[j] + x);
			sg[j] = (struct ibv_sge){ (uintptr_t)p, len,
						  self->a.mr[0]->lkey };
			wr[j] = (struct ibv_send_wr){
				.wr_id = j, .sg_list = &sg[j], .num_sge = 1,
				.opcode = j & 1 ? IBV_WR_RDMA_READ :
						  IBV_WR_RDMA_WRITE,
				.send_flags = IBV_SEND_SIGNALED,
				.next = j < 3 ? &wr[j + 1] : NULL };
			wr[j].wr.rdma.remote_addr = k[j];
			wr[j].wr.rdma.rkey = rkey;
		}
		ASSERT_EQ(0, remu_post_send(self->a.qp, wr));
		usleep((round % 8) * 150);
		ASSERT_EQ(0, remudv_destroy_mkey(mk));

		for (j = 0, seen = 0; j < 4; j++) {
			st = remu_poll_one(self->a.cq, &wc, 20);
			ASSERT_EQ(j, wc.wr_id);
			if (st == IBV_WC_SUCCESS) {
				/* nothing completes after a failure */
				ASSERT_EQ(0, seen);
				ok++;
				p = self->a.buf + j * len;
				for (x = 0; (j & 1) && x < len; x++)
					if (p[x] != GUARD &&
					    p[x] != race_byte(k[j] + x))
						ASSERT_EQ(race_byte(k[j] + x),
							  p[x]);
				continue;
			}
			ASSERT_EQ(seen ? IBV_WC_WR_FLUSH_ERR :
					 IBV_WC_REM_ACCESS_ERR, st);
			failed += !seen;
			seen = 1;
		}
		if (seen)
			ASSERT_EQ(0, reconnect(&self->a, &self->b));
		/* the key is gone */
		EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
			  rdma(&self->a, IBV_WR_RDMA_WRITE, rkey, 0, 64, 0));
		ASSERT_EQ(0, reconnect(&self->a, &self->b));
		ASSERT_EQ(self->mkeys0, remu_obj_count("mkey"));
	}
	for (x = 0; x < BUF_SIZE; x++) {
		if (self->b.buf[x] != GUARD && self->b.buf[x] != want[x]) {
			EXPECT_EQ(want[x], self->b.buf[x]);
			TH_LOG("byte %u of b's buffer", x);
			break;
		}
	}
	TH_LOG("%u accesses done, %u rounds cut by the destruction", ok,
	       failed);
	EXPECT_LT(0, ok);
	free(want);
}

/* ---- counters and trace events ---- */

static const char *const umr_cnt[] = {
	"umr_configs", "umr_errors", "mkey_segments", "mkey_entry_errors",
	"mkeys",
};

#define UMR_NCNT	(sizeof(umr_cnt) / sizeof(umr_cnt[0]))

static void umr_cnt_read(const char *dev, long long *v)
{
	unsigned int i;

	for (i = 0; i < UMR_NCNT; i++)
		v[i] = remu_hw_counter(dev, umr_cnt[i], !i);
}

/*
 * The first counter of @dev that is not its value in @base plus the one
 * in @d (its value in *@got), or -1.
 */
static int umr_cnt_off(const char *dev, const long long *base,
		       const long long *d, long long *got)
{
	long long now[UMR_NCNT];
	unsigned int i;

	umr_cnt_read(dev, now);
	for (i = 0; i < UMR_NCNT; i++) {
		*got = now[i];
		if (now[i] != base[i] + d[i])
			return i;
	}
	return -1;
}

#define UMR_CNT_EXPECT(dev, base, ...)					\
	do {								\
		const long long d_[UMR_NCNT] = { __VA_ARGS__ };		\
		long long got_;						\
		int i_ = umr_cnt_off(dev, base, d_, &got_);		\
		const char *nm_ = i_ < 0 ? "-" : umr_cnt[i_];		\
									\
		EXPECT_EQ(-1, i_) TH_LOG("counter %s is %lld", nm_ ? nm_ : "-", \
					 got_);				\
	} while (0)

/*
 * The counters of b's device, exactly: a key of four 8-byte pieces in
 * four pages (a 32-byte WRITE and READ map 4 segments each, 6 bytes
 * across two pieces 2 each), a key over two of its pieces (each piece
 * maps a segment at both levels), a UMR of a valid key (umr_errors), an
 * entry past its MR (one refused WRITE, mkey_entry_errors; a READ of its
 * part inside the MR works), the mkeys gauge up by three, then back.
 * The trace events say the same, and remu_mr_reg names an indirect key's
 * kind.
 */
TEST_F(umr, counters_and_trace)
{
	struct ibv_sge sge[4] = {
		{ B(100), 8, self->b.mr[0]->lkey },
		{ B(3 * 4096 + 5), 8, self->b.mr[0]->lkey },
		{ B(MR_SPAN + 8192 + 1), 8, self->b.mr[1]->lkey },
		{ B(2 * MR_SPAN + 77), 8, self->b.mr[2]->lkey },
	};
	struct ibv_sge outer = { 8, 16, 0 }, past = { B(MR_SPAN - 4), 8,
						      self->b.mr[0]->lkey };
	const char *dev = variant->dev_b;
	struct remudv_mkey *mk, *mk2, *mk3;
	long long base[UMR_NCNT];
	struct rt_ev *ev = NULL;
	int n, i;

	ASSERT_EQ(0, rt_setup("remu_umr_test", 1024, 1));
	umr_cnt_read(dev, base);
	/* a counter this module lacks reads -1 */
	for (i = 0; i < (int)UMR_NCNT; i++)
		ASSERT_LE(0, base[i]);

	mk = mkey_new(&self->b, 4, REMUDV_MKEY_INIT_ATTR_FLAGS_INDIRECT);
	ASSERT_NE(NULL, mk);
	ASSERT_EQ(IBV_WC_SUCCESS, umr_list(&self->b, mk, RIGHTS, 4, sge));
	model_list(self->m, &self->b, sge, 4);
	write_read(_metadata, &self->a, &self->b, self->m, mk->rkey, 0, 32,
		   81);
	write_read(_metadata, &self->a, &self->b, self->m, mk->rkey, 13, 6,
		   82);
	UMR_CNT_EXPECT(dev, base, 1, 0, 12, 0, 1);

	/* a key of a key: bytes 8..23 of mk, two pieces, two levels */
	mk2 = mkey_new(&self->b, 1, REMUDV_MKEY_INIT_ATTR_FLAGS_INDIRECT);
	ASSERT_NE(NULL, mk2);
	outer.lkey = mk->lkey;
	ASSERT_EQ(IBV_WC_SUCCESS, umr_list(&self->b, mk2, RIGHTS, 1, &outer));
	memset(self->a.buf, 0, 16);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma(&self->a, IBV_WR_RDMA_READ, mk2->rkey, 0, 16, 0));
	for (i = 0; i < 16; i++)
		ASSERT_EQ(self->b.buf[self->m->map[8 + i]], self->a.buf[i]);
	UMR_CNT_EXPECT(dev, base, 2, 0, 16, 0, 2);

	/* a UMR of a key that is still valid: refused when executed */
	ASSERT_EQ(IBV_WC_MW_BIND_ERR, umr_list(&self->b, mk, RIGHTS, 4, sge));
	ASSERT_EQ(0, reconnect(&self->a, &self->b));

	/* an entry 4 bytes past its MR: a WRITE of it refused, a READ in */
	mk3 = mkey_new(&self->b, 1, REMUDV_MKEY_INIT_ATTR_FLAGS_INDIRECT);
	ASSERT_NE(NULL, mk3);
	ASSERT_EQ(IBV_WC_SUCCESS, umr_list(&self->b, mk3, RIGHTS, 1, &past));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  rdma(&self->a, IBV_WR_RDMA_WRITE, mk3->rkey, 0, 8, 0));
	ASSERT_EQ(0, reconnect(&self->a, &self->b));
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma(&self->a, IBV_WR_RDMA_READ, mk3->rkey, 0, 4, 0));
	EXPECT_EQ(0, memcmp(self->a.buf, self->b.buf + MR_SPAN - 4, 4));
	EXPECT_EQ(-1, remu_cmp(self->b.buf, self->m->img, BUF_SIZE));
	UMR_CNT_EXPECT(dev, base, 3, 1, 17, 1, 3);

	n = rt_read(&ev);
	ASSERT_LT(0, n);
	EXPECT_EQ(3, rt_count(ev, n, "remu_umr", dev, "err", 0));
	i = rt_find(ev, n, 0, 0, "remu_umr", dev, "err", -EBUSY);
	ASSERT_LE(0, i);
	EXPECT_EQ(mk->lkey, rt_num(&ev[i], "key", 0));
	EXPECT_TRUE(rt_is(&ev[i], "mode", "list"));
	EXPECT_EQ(1, rt_count(ev, n, "remu_umr", dev, "key", mk3->lkey));
	i = rt_find(ev, n, 0, 0, "remu_umr", dev, "key", mk2->lkey);
	ASSERT_LE(0, i);
	EXPECT_EQ(16, rt_num(&ev[i], "length", 0));
	EXPECT_EQ(1, rt_count(ev, n, "remu_mkey_err", dev, NULL, 0));
	i = rt_find(ev, n, 0, 0, "remu_mkey_err", dev, "key", mk3->lkey);
	ASSERT_LE(0, i);
	EXPECT_EQ(8, rt_num(&ev[i], "length", 0));
	i = rt_find(ev, n, 0, 0, "remu_mr_reg", dev, "key", mk->lkey);
	ASSERT_LE(0, i);
	EXPECT_TRUE(rt_is(&ev[i], "kind", "indirect")) TH_LOG("%s",
							     ev[i].text);
	free(ev);
	rt_close();

	EXPECT_EQ(0, remudv_destroy_mkey(mk2));
	EXPECT_EQ(0, remudv_destroy_mkey(mk3));
	EXPECT_EQ(0, remudv_destroy_mkey(mk));
	UMR_CNT_EXPECT(dev, base, 3, 1, 17, 1, 0);
}

/*
 * Objects of another provider (upstream rxe, on a veth of its own made
 * for this test only; v0 has remu0):
 * remudv_is_supported() says no, the calls fail with EOPNOTSUPP.
 */
/*
 * rxe binds UDP 4791 in the initial namespace, where remu0 holds it: remu0
 * steps aside for the test (as remu_rxe_in/remu_rxe_out in remu_lib.sh)
 * and comes back, active, at the end.
 */
#define RXE_GONE	"rdma link delete umrrxe0 2>/dev/null; " \
			"ip link del umrv0 2>/dev/null; modprobe -r rdma_rxe; " \
			"rdma link show remu0/1 >/dev/null 2>&1 || " \
			"rdma link add remu0 type remu netdev v0; " \
			"for i in $(seq 50); do ibv_devinfo -d remu0 | " \
			"grep -q PORT_ACTIVE && exit 0; sleep 0.1; done; exit 1"

TEST(not_remu)
{
	struct ibv_qp_cap cap = { .max_send_wr = 4, .max_recv_wr = 4,
				  .max_send_sge = 1, .max_recv_sge = 1 };
	struct remudv_mkey_init_attr ia = {
		.create_flags = REMUDV_MKEY_INIT_ATTR_FLAGS_INDIRECT,
		.max_entries = 2,
	};
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	int n, i, rxe = -1;

	if (remu_sh("rdma link delete remu0 && "
		    "for i in $(seq 50); do rdma link show remu0/1 "
		    ">/dev/null 2>&1 || break; sleep 0.1; done && "
		    "modprobe rdma_rxe 2>/dev/null && "
		    "ip link add umrv0 type veth peer name umrv1 && "
		    "ip link set umrv0 up && ip link set umrv1 up && "
		    "rdma link add umrrxe0 type rxe netdev umrv0")) {
		remu_sh(RXE_GONE);
		SKIP(return, "no rxe device can be made here");
	}
	list = ibv_get_device_list(&n);
	ASSERT_NE(NULL, list);
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "umrrxe0"))
			rxe = i;
	ctx = rxe >= 0 ? ibv_open_device(list[rxe]) : NULL;
	if (rxe >= 0)
		EXPECT_FALSE(remudv_is_supported(list[rxe]));
	ibv_free_device_list(list);
	if (!ctx) {
		remu_sh(RXE_GONE);
		SKIP(return, "rxe's provider is not loaded in this run");
	}
	ia.pd = ibv_alloc_pd(ctx);
	ASSERT_NE(NULL, ia.pd);
	errno = 0;
	EXPECT_EQ(NULL, remudv_create_mkey(&ia));
	EXPECT_EQ(EOPNOTSUPP, errno);
	cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	ASSERT_NE(NULL, cq);
	qp = remu_create_qp_ex(ia.pd, cq, IBV_QPT_RC, &cap);
	ASSERT_NE(NULL, qp);
	errno = 0;
	EXPECT_EQ(NULL, remudv_qp_ex_from_ibv_qp_ex(ibv_qp_to_qp_ex(qp)));
	EXPECT_EQ(EOPNOTSUPP, errno);
	remu_close_objs(qp, NULL, NULL, cq, ia.pd, ctx);
	EXPECT_EQ(0, remu_sh(RXE_GONE));
}

TEST_HARNESS_MAIN
