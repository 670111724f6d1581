// SPDX-License-Identifier: GPL-2.0
/*
 * remu_odp_test - on-demand paging (explicit and implicit ODP MRs) end to
 * end.
 *
 * caps: ibv_query_device_ex reports explicit and implicit ODP and exactly
 * the per-transport bits the fixtures below prove.  huge_registration: an untouched
 * MAP_NORESERVE mapping 16 times the size of RAM registers with
 * IBV_ACCESS_ON_DEMAND, no page of it becomes resident (mincore) and the
 * device's num_page_faults does not move; its registration time is
 * printed.
 *
 * Fixture odp (remu0<->remu1 and loopback on remu0; each with an explicit
 * ODP MR over the buffer, and with one implicit ODP MR, ibv_reg_mr(pd,
 * NULL, SIZE_MAX, ON_DEMAND), per side): every buffer is an anonymous
 * mapping made for the test and registered with ON_DEMAND (or covered by
 * the implicit MR) before any page of it is touched, so every access by
 * the device meets a
 * missing translation and must fault it in.  SEND/RECV, RDMA WRITE, RDMA
 * READ (of written pages and of never touched ones, which read as zeros),
 * FETCH_ADD and CMP_SWP, byte for byte over several sizes; then the
 * invalidation cases: MADV_DONTNEED of the target and a new WRITE (data
 * lands in fresh pages, num_invalidations moves), munmap + mmap of new
 * content at the same address (a remote READ returns the new content),
 * and accesses to an unmapped hole in an ODP MR (remote READ, also one
 * that meets the hole after response packets went out, and WRITE:
 * REM_ACCESS_ERR; a READ of a kernel address: REM_ACCESS_ERR; local
 * gather: LOC_PROT_ERR).  ibv_advise_mr: PREFETCH_WRITE and PREFETCH
 * with IBV_ADVISE_MR_FLAG_FLUSH make the pages present before returning
 * (mincore) so that a WRITE then faults nothing (num_page_faults exact),
 * NO_FAULT maps only what the CPU already has, the asynchronous form
 * gets there soon after, and a bad lkey, advice, hole or range fails.
 *
 * Fixture xport: UC SEND and WRITE, UD SEND, RC SEND through an SRQ, with
 * explicit ODP MRs on both sides, remu0<->remu1 and loopback.  Object counts (MRs) are back at baseline after
 * each fixture's teardown.
 */
#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "remu_test.h"

#define ODP_SIZE	((1 << 20) + 8192)
#define GID_INDEX	1	/* the IPv4-mapped RoCEv2 GID */
#define ODP_ACCESS	(IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE | \
			 IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
			 IBV_ACCESS_REMOTE_ATOMIC)

/* a port counter of @dev from sysfs, or -1 */
static long long hw_counter(const char *dev, const char *name)
{
	char path[256];
	long long v = -1;
	FILE *f;

	usleep(20000);	/* past the core's hw_stats lifespan (10 ms) */
	snprintf(path, sizeof(path),
		 "/sys/class/infiniband/%s/ports/1/hw_counters/%s", dev, name);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/* resident pages among the first @len bytes at @p */
static long resident_pages(void *p, size_t len)
{
	size_t n = len / 4096, i;
	unsigned char *vec = malloc(n);
	long r = 0;

	if (!vec || mincore(p, len, vec)) {
		free(vec);
		return -1;
	}
	for (i = 0; i < n; i++)
		r += vec[i] & 1;
	free(vec);
	return r;
}

TEST(caps)
{
	struct ibv_device_attr_ex a = {};
	struct ibv_context *ctx = remu_open("remu0");
	uint32_t rc = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
		      IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
		      IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
	uint32_t uc = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
		      IBV_ODP_SUPPORT_WRITE;
	uint32_t ud = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV;

	ASSERT_NE(NULL, ctx);
	ASSERT_EQ(0, ibv_query_device_ex(ctx, NULL, &a));
	EXPECT_EQ(IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT,
		  a.odp_caps.general_caps);
	/* exactly what this test proves, nothing more */
	EXPECT_EQ(rc, a.odp_caps.per_transport_caps.rc_odp_caps);
	EXPECT_EQ(uc, a.odp_caps.per_transport_caps.uc_odp_caps);
	EXPECT_EQ(ud, a.odp_caps.per_transport_caps.ud_odp_caps);
	ibv_close_device(ctx);
}

TEST(huge_registration)
{
	struct ibv_context *ctx = remu_open("remu0");
	struct timespec t0, t1;
	struct sysinfo si;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	long long faults;
	size_t len;
	void *p;

	ASSERT_NE(NULL, ctx);
	ASSERT_EQ(0, sysinfo(&si));
	len = (size_t)si.totalram * si.mem_unit * 16;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	ASSERT_NE(MAP_FAILED, p);
	pd = ibv_alloc_pd(ctx);
	ASSERT_NE(NULL, pd);
	faults = hw_counter("remu0", "num_page_faults");
	ASSERT_LE(0, faults);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	mr = ibv_reg_mr(pd, p, len, ODP_ACCESS);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ASSERT_NE(NULL, mr) TH_LOG("reg_mr of %zu MiB: %s", len >> 20,
				   strerror(errno));
	TH_LOG("ODP registration of %zu MiB (16 x RAM): %.1f ms", len >> 20,
	       (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
	EXPECT_EQ(0, resident_pages(p, 64 << 20));
	EXPECT_EQ(0, resident_pages((char *)p + len - (64 << 20), 64 << 20));
	EXPECT_EQ(faults, hw_counter("remu0", "num_page_faults"));
	EXPECT_EQ(len / 4096, hw_counter("remu0", "num_odp_mr_pages"));
	EXPECT_EQ(0, ibv_dereg_mr(mr));
	EXPECT_EQ(0, hw_counter("remu0", "num_odp_mr_pages"));
	EXPECT_EQ(0, ibv_dealloc_pd(pd));
	munmap(p, len);
	ibv_close_device(ctx);
}

/*
 * What remu refuses plainly: ODP over hugetlb pages (not implemented) and
 * an advice it does not know.
 */
TEST(refused_requests)
{
	struct ibv_context *ctx = remu_open("remu0");
	struct ibv_sge sge;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	void *p;

	ASSERT_NE(NULL, ctx);
	pd = ibv_alloc_pd(ctx);
	ASSERT_NE(NULL, pd);
	p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, p);
	errno = 0;
	mr = ibv_reg_mr(pd, p, 1 << 20, ODP_ACCESS | IBV_ACCESS_HUGETLB);
	EXPECT_EQ(NULL, mr);
	EXPECT_EQ(EOPNOTSUPP, errno);
	if (mr)
		ibv_dereg_mr(mr);
	mr = ibv_reg_mr(pd, p, 1 << 20, ODP_ACCESS);
	ASSERT_NE(NULL, mr);
	sge = (struct ibv_sge){ (uintptr_t)p, 4096, mr->lkey };
	EXPECT_EQ(EOPNOTSUPP, ibv_advise_mr(pd, (enum ibv_advise_mr_advice)99,
					   0, &sge, 1));
	EXPECT_EQ(0, ibv_dereg_mr(mr));
	EXPECT_EQ(0, ibv_dealloc_pd(pd));
	munmap(p, 1 << 20);
	ibv_close_device(ctx);
}

struct side {
	const char *dev;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;		/* ODP_SIZE bytes, fresh anonymous pages */
	union ibv_gid gid;
	enum ibv_mtu mtu;
};

static uint8_t *fresh_map(void *at)
{
	void *p = mmap(at, ODP_SIZE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED : 0),
		       -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* @implicit: one implicit ODP MR (whole address space) instead */
static int side_open(struct side *s, const char *dev, int implicit)
{
	struct ibv_qp_init_attr ia = {};
	struct ibv_port_attr pa;

	s->dev = dev;
	s->ctx = remu_open(dev);
	if (!s->ctx)
		return -1;
	if (ibv_query_port(s->ctx, 1, &pa) ||
	    ibv_query_gid(s->ctx, 1, GID_INDEX, &s->gid))
		return -1;
	s->mtu = pa.active_mtu;
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = s->pd ? ibv_create_cq(s->ctx, 64, NULL, NULL, 0) : NULL;
	s->buf = fresh_map(NULL);
	if (!s->cq || !s->buf)
		return -1;
	if (implicit)
		s->mr = ibv_reg_mr(s->pd, NULL, SIZE_MAX, ODP_ACCESS);
	else
		s->mr = ibv_reg_mr(s->pd, s->buf, ODP_SIZE, ODP_ACCESS);
	ia.send_cq = s->cq;
	ia.recv_cq = s->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 16;
	ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = 4;
	ia.cap.max_recv_sge = 4;
	s->qp = s->mr ? ibv_create_qp(s->pd, &ia) : NULL;
	return s->qp ? 0 : -1;
}

static int side_connect(struct side *s, struct side *peer)
{
	struct ibv_qp_attr a = {};

	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			    IBV_ACCESS_REMOTE_ATOMIC;
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = s->mtu < peer->mtu ? s->mtu : peer->mtu;
	a.dest_qp_num = peer->qp->qp_num;
	a.rq_psn = 0x321;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = peer->gid;
	a.ah_attr.grh.sgid_index = GID_INDEX;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_AV |
			  IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0x321;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	return ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN |
			     IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			     IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

static void side_close(struct side *s)
{
	if (s->qp)
		ibv_destroy_qp(s->qp);
	if (s->mr)
		ibv_dereg_mr(s->mr);
	if (s->cq)
		ibv_destroy_cq(s->cq);
	if (s->pd)
		ibv_dealloc_pd(s->pd);
	if (s->ctx)
		ibv_close_device(s->ctx);
	if (s->buf)
		munmap(s->buf, ODP_SIZE);
}

static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n < 0)
			return -1;
		if (n == 1)
			return wc->status;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 20)
			return -1;
	}
}

static void fill(uint8_t *p, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 29 + seed + (i >> 9));
}

/* byte-for-byte; returns the first differing offset or -1 */
static long cmp(const uint8_t *a, const uint8_t *b, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (a[i] != b[i])
			return i;
	return -1;
}

static long zeros(const uint8_t *a, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (a[i])
			return i;
	return -1;
}

/* one signalled WR from @s, one SGE; returns the completion status */
static int rdma1(struct side *s, enum ibv_wr_opcode op, uint64_t laddr,
		 uint32_t len, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { laddr, len, s->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = op, .sg_list = &sge, .num_sge = 1,
				  .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (ibv_post_send(s->qp, &wr, &bad))
		return -1;
	return poll_one(s->cq, &wc);
}

static int atomic1(struct side *s, enum ibv_wr_opcode op, uint64_t laddr,
		   uint64_t raddr, uint32_t rkey, uint64_t a, uint64_t b)
{
	struct ibv_sge sge = { laddr, 8, s->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = op, .sg_list = &sge, .num_sge = 1,
				  .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;

	wr.wr.atomic.remote_addr = raddr;
	wr.wr.atomic.rkey = rkey;
	wr.wr.atomic.compare_add = a;
	wr.wr.atomic.swap = b;
	if (ibv_post_send(s->qp, &wr, &bad))
		return -1;
	return poll_one(s->cq, &wc);
}

static const uint32_t lens[] = { 1, 4095, 4097, 65537, 1 << 20 };

FIXTURE(odp) {
	struct side a, b;
	int mrs;
};

FIXTURE_VARIANT(odp) {
	const char *dev_a, *dev_b;
	int implicit;
};

FIXTURE_VARIANT_ADD(odp, remu0_remu1) { .dev_a = "remu0", .dev_b = "remu1" };
FIXTURE_VARIANT_ADD(odp, loopback) { .dev_a = "remu0", .dev_b = "remu0" };
FIXTURE_VARIANT_ADD(odp, implicit_remu0_remu1) {
	.dev_a = "remu0", .dev_b = "remu1", .implicit = 1 };
FIXTURE_VARIANT_ADD(odp, implicit_loopback) {
	.dev_a = "remu0", .dev_b = "remu0", .implicit = 1 };

FIXTURE_SETUP(odp)
{
	memset(&self->a, 0, sizeof(self->a));
	memset(&self->b, 0, sizeof(self->b));
	self->mrs = remu_obj_count("mr");
	ASSERT_LE(0, self->mrs);
	ASSERT_EQ(0, side_open(&self->a, variant->dev_a, variant->implicit));
	ASSERT_EQ(0, side_open(&self->b, variant->dev_b, variant->implicit));
	ASSERT_EQ(0, side_connect(&self->a, &self->b));
	ASSERT_EQ(0, side_connect(&self->b, &self->a));
	/* registration faulted nothing in */
	ASSERT_EQ(0, resident_pages(self->a.buf, ODP_SIZE));
	ASSERT_EQ(0, resident_pages(self->b.buf, ODP_SIZE));
}

FIXTURE_TEARDOWN(odp)
{
	side_close(&self->a);
	side_close(&self->b);
	EXPECT_EQ(self->mrs, remu_obj_count("mr"));
}

/* receive buffers in never touched pages; data byte for byte */
TEST_F(odp, send_recv)
{
	long long f0 = hw_counter(self->b.dev, "num_page_faults");
	unsigned int i;
	size_t at = 0;

	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		uint8_t *src = self->a.buf + 3, *dst = self->b.buf + 5 + at;
		struct ibv_sge ss = { (uintptr_t)src, lens[i], self->a.mr->lkey };
		struct ibv_sge rs = { (uintptr_t)dst, lens[i], self->b.mr->lkey };
		struct ibv_recv_wr rwr = { .wr_id = i, .sg_list = &rs,
					   .num_sge = 1 }, *bad_r;
		struct ibv_send_wr swr = { .wr_id = i, .sg_list = &ss,
					   .num_sge = 1, .opcode = IBV_WR_SEND,
					   .send_flags = IBV_SEND_SIGNALED },
				   *bad_s;
		struct ibv_wc wc;

		/* a later receive lands in the untouched pages after the last */
		if (5 + at + lens[i] > ODP_SIZE)
			at = 0, dst = self->b.buf + 5;
		rs.addr = (uintptr_t)dst;
		fill(src, lens[i], i);
		ASSERT_EQ(0, ibv_post_recv(self->b.qp, &rwr, &bad_r));
		ASSERT_EQ(0, ibv_post_send(self->a.qp, &swr, &bad_s));
		ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
		ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->b.cq, &wc));
		EXPECT_EQ(lens[i], wc.byte_len);
		EXPECT_EQ(-1, cmp(src, dst, lens[i])) TH_LOG("len %u", lens[i]);
		at += (lens[i] + 8191) & ~4095u;
	}
	EXPECT_LT(f0, hw_counter(self->b.dev, "num_page_faults"));
}

/* WRITE into never touched pages of the target */
TEST_F(odp, rdma_write)
{
	unsigned int i;

	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		uint8_t *src = self->a.buf + 1;
		uint8_t *dst = self->b.buf + 7;

		fill(src, lens[i], 40 + i);
		ASSERT_EQ(IBV_WC_SUCCESS,
			  rdma1(&self->a, IBV_WR_RDMA_WRITE, (uintptr_t)src,
				lens[i], (uintptr_t)dst, self->b.mr->rkey));
		EXPECT_EQ(-1, cmp(src, dst, lens[i])) TH_LOG("len %u", lens[i]);
		EXPECT_EQ(0, dst[-1]);
		EXPECT_EQ(0, dst[lens[i]]);
	}
}

/* READ into never touched local pages: of written data, then of zeros */
TEST_F(odp, rdma_read)
{
	unsigned int i;

	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		uint8_t *dst = self->a.buf + 11;
		uint8_t *src = self->b.buf + 2;

		fill(src, lens[i], 80 + i);
		ASSERT_EQ(IBV_WC_SUCCESS,
			  rdma1(&self->a, IBV_WR_RDMA_READ, (uintptr_t)dst,
				lens[i], (uintptr_t)src, self->b.mr->rkey));
		EXPECT_EQ(-1, cmp(src, dst, lens[i])) TH_LOG("len %u", lens[i]);
	}
	/* the remote's last page was never touched by anyone: zeros */
	memset(self->a.buf, 0xee, 8192);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma1(&self->a, IBV_WR_RDMA_READ, (uintptr_t)self->a.buf,
			4096, (uintptr_t)self->b.buf + ODP_SIZE - 4096,
			self->b.mr->rkey));
	EXPECT_EQ(-1, zeros(self->a.buf, 4096));
	EXPECT_EQ(0xee, self->a.buf[4096]);
}

/* FETCH_ADD and CMP_SWP on a never touched remote page */
TEST_F(odp, atomics)
{
	uint64_t *res = (uint64_t *)(self->a.buf + 3 * 4096);
	uint64_t *tgt = (uint64_t *)(self->b.buf + 5 * 4096 + 8);

	ASSERT_EQ(IBV_WC_SUCCESS,
		  atomic1(&self->a, IBV_WR_ATOMIC_FETCH_AND_ADD,
			  (uintptr_t)res, (uintptr_t)tgt, self->b.mr->rkey,
			  0x1234, 0));
	EXPECT_EQ(0, *res);
	EXPECT_EQ(0x1234, *tgt);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  atomic1(&self->a, IBV_WR_ATOMIC_CMP_AND_SWP,
			  (uintptr_t)res + 4096, (uintptr_t)tgt,
			  self->b.mr->rkey, 0x1234, 0xfeedface));
	EXPECT_EQ(0x1234, res[512]);
	EXPECT_EQ(0xfeedface, *tgt);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  atomic1(&self->a, IBV_WR_ATOMIC_CMP_AND_SWP,
			  (uintptr_t)res, (uintptr_t)tgt, self->b.mr->rkey,
			  1, 2));
	EXPECT_EQ(0xfeedface, *res);
	EXPECT_EQ(0xfeedface, *tgt);
}

/* MADV_DONTNEED takes the pages away; a new WRITE lands in fresh ones */
TEST_F(odp, madv_dontneed)
{
	uint8_t *src = self->a.buf, *dst = self->b.buf;
	const size_t len = 65536;
	long long inv;

	fill(src, len, 1);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma1(&self->a, IBV_WR_RDMA_WRITE, (uintptr_t)src, len,
			(uintptr_t)dst, self->b.mr->rkey));
	ASSERT_EQ(-1, cmp(src, dst, len));
	inv = hw_counter(self->b.dev, "num_invalidations");
	ASSERT_EQ(0, madvise(dst, len, MADV_DONTNEED));
	EXPECT_LT(inv, hw_counter(self->b.dev, "num_invalidations"));
	EXPECT_EQ(-1, zeros(dst, len));
	/* the zero page reads above are read-only: the WRITE must upgrade */
	fill(src, len, 2);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma1(&self->a, IBV_WR_RDMA_WRITE, (uintptr_t)src, len,
			(uintptr_t)dst, self->b.mr->rkey));
	EXPECT_EQ(-1, cmp(src, dst, len));
	/* and the local side too: DONTNEED the source, READ back into it */
	ASSERT_EQ(0, madvise(src, len, MADV_DONTNEED));
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma1(&self->a, IBV_WR_RDMA_READ, (uintptr_t)src, len,
			(uintptr_t)dst, self->b.mr->rkey));
	fill(self->a.buf + len, len, 2);
	EXPECT_EQ(-1, cmp(self->a.buf + len, src, len));
}

/* munmap + mmap of new content at the same address: READ sees it */
TEST_F(odp, remap)
{
	uint8_t *src = self->b.buf, *dst = self->a.buf;
	const size_t len = 3 * 4096 + 100;

	fill(src, len, 5);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma1(&self->a, IBV_WR_RDMA_READ, (uintptr_t)dst, len,
			(uintptr_t)src, self->b.mr->rkey));
	ASSERT_EQ(-1, cmp(src, dst, len));
	ASSERT_EQ(0, munmap(src, ODP_SIZE));
	ASSERT_EQ(src, fresh_map(src));
	fill(src, len, 6);
	memset(dst, 0, len);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma1(&self->a, IBV_WR_RDMA_READ, (uintptr_t)dst, len,
			(uintptr_t)src, self->b.mr->rkey));
	EXPECT_EQ(-1, cmp(src, dst, len));
	/* and a WRITE into the new pages */
	fill(dst, len, 7);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma1(&self->a, IBV_WR_RDMA_WRITE, (uintptr_t)dst, len,
			(uintptr_t)src + 4096, self->b.mr->rkey));
	EXPECT_EQ(-1, cmp(dst, src + 4096, len));
}

/* a hole in the remote MR: READ and WRITE fail with REM_ACCESS_ERR */
TEST_F(odp, remote_hole)
{
	uint8_t *hole = self->b.buf + 8 * 4096;
	long long failed = hw_counter(self->b.dev, "num_failed_resolutions");

	/* the pages around the hole work */
	fill(hole - 4096, 4096, 9);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma1(&self->a, IBV_WR_RDMA_READ, (uintptr_t)self->a.buf,
			4096, (uintptr_t)hole - 4096, self->b.mr->rkey));
	EXPECT_EQ(-1, cmp(hole - 4096, self->a.buf, 4096));
	ASSERT_EQ(0, munmap(hole, 4096));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  rdma1(&self->a, IBV_WR_RDMA_READ, (uintptr_t)self->a.buf,
			100, (uintptr_t)hole + 8, self->b.mr->rkey));
	EXPECT_LT(failed, hw_counter(self->b.dev, "num_failed_resolutions"));
}

/* a READ that runs into the hole after some response packets went out */
TEST_F(odp, remote_hole_read_midway)
{
	uint8_t *hole = self->b.buf + 8 * 4096;

	fill(hole - 4096, 4096, 4);
	ASSERT_EQ(0, munmap(hole, 4096));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  rdma1(&self->a, IBV_WR_RDMA_READ, (uintptr_t)self->a.buf,
			8192, (uintptr_t)hole - 4096, self->b.mr->rkey));
}

TEST_F(odp, remote_hole_write)
{
	uint8_t *hole = self->b.buf + 8 * 4096;

	ASSERT_EQ(0, munmap(hole, 4096));
	fill(self->a.buf, 8192, 3);
	/* a WRITE that starts in mapped memory and runs into the hole */
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  rdma1(&self->a, IBV_WR_RDMA_WRITE, (uintptr_t)self->a.buf,
			8192, (uintptr_t)hole - 4096, self->b.mr->rkey));
}

/* an address no process can map (implicit: no VMA; explicit: bounds) */
TEST_F(odp, remote_wild_address)
{
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  rdma1(&self->a, IBV_WR_RDMA_READ, (uintptr_t)self->a.buf,
			64, 0xffff880000001000ULL, self->b.mr->rkey));
}

/* a hole in the local MR: the SEND's gather fails with LOC_PROT_ERR */
TEST_F(odp, local_hole)
{
	uint8_t *hole = self->a.buf + 4 * 4096;
	struct ibv_sge ss = { (uintptr_t)hole, 64, self->a.mr->lkey };
	struct ibv_send_wr swr = { .wr_id = 1, .sg_list = &ss, .num_sge = 1,
				   .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;

	ASSERT_EQ(0, munmap(hole, 4096));
	ASSERT_EQ(0, ibv_post_send(self->a.qp, &swr, &bad));
	EXPECT_EQ(IBV_WC_LOC_PROT_ERR, poll_one(self->a.cq, &wc));
}

static int advise(struct side *s, enum ibv_advise_mr_advice advice,
		  uint32_t flags, void *addr, uint32_t len, uint32_t lkey)
{
	struct ibv_sge sge = { (uintptr_t)addr, len, lkey };

	return ibv_advise_mr(s->pd, advice, flags, &sge, 1);
}

/*
 * Synchronous prefetch: the pages are present when the call returns, and
 * a WRITE into them then faults nothing (num_page_faults exact).
 */
TEST_F(odp, prefetch_sync)
{
	struct side *b = &self->b;
	uint8_t *p = b->buf + 4096;
	const uint32_t len = 16 * 4096;
	long long faults, pf;

	pf = hw_counter(b->dev, "num_prefetches_handled");
	ASSERT_EQ(0, advise(b, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
			    IBV_ADVISE_MR_FLAG_FLUSH, p, len, b->mr->lkey));
	EXPECT_EQ(16, resident_pages(p, len));
	EXPECT_EQ(0, resident_pages(b->buf, 4096));
	EXPECT_EQ(pf + 1, hw_counter(b->dev, "num_prefetches_handled"));
	faults = hw_counter(b->dev, "num_page_faults");
	fill(self->a.buf, len, 8);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma1(&self->a, IBV_WR_RDMA_WRITE, (uintptr_t)self->a.buf,
			len, (uintptr_t)p, b->mr->rkey));
	EXPECT_EQ(-1, cmp(self->a.buf, p, len));
	/* loopback: the requester's gather may fault on remu0, not here */
	if (strcmp(self->a.dev, b->dev))
		EXPECT_EQ(faults, hw_counter(b->dev, "num_page_faults"));

	/* read prefetch of untouched pages maps them (the zero page) */
	ASSERT_EQ(0, advise(b, IBV_ADVISE_MR_ADVICE_PREFETCH,
			    IBV_ADVISE_MR_FLAG_FLUSH, p + len, 8192,
			    b->mr->lkey));
	EXPECT_EQ(2, resident_pages(p + len, 8192));
}

/* NO_FAULT maps only what the CPU already has; nothing becomes present */
TEST_F(odp, prefetch_no_fault)
{
	struct side *b = &self->b;
	uint8_t *p = b->buf + 32 * 4096;
	long long faults;

	ASSERT_EQ(0, advise(b, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT,
			    IBV_ADVISE_MR_FLAG_FLUSH, p, 8 * 4096,
			    b->mr->lkey));
	EXPECT_EQ(0, resident_pages(p, 8 * 4096));
	fill(p, 8 * 4096, 12);	/* now the CPU has them */
	ASSERT_EQ(0, advise(b, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT,
			    IBV_ADVISE_MR_FLAG_FLUSH, p, 8 * 4096,
			    b->mr->lkey));
	faults = hw_counter(b->dev, "num_page_faults");
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma1(&self->a, IBV_WR_RDMA_READ, (uintptr_t)self->a.buf,
			8 * 4096, (uintptr_t)p, b->mr->rkey));
	EXPECT_EQ(-1, cmp(p, self->a.buf, 8 * 4096));
	if (strcmp(self->a.dev, b->dev))
		EXPECT_EQ(faults, hw_counter(b->dev, "num_page_faults"));
}

/* asynchronous prefetch: returns at once, the pages arrive soon after */
TEST_F(odp, prefetch_async)
{
	struct side *b = &self->b;
	uint8_t *p = b->buf + 64 * 4096;
	int i;

	ASSERT_EQ(0, advise(b, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 0, p,
			    32 * 4096, b->mr->lkey));
	for (i = 0; i < 500 && resident_pages(p, 32 * 4096) != 32; i++)
		usleep(10000);
	EXPECT_EQ(32, resident_pages(p, 32 * 4096));
}

/* bad requests fail before anything is done */
TEST_F(odp, prefetch_errors)
{
	struct side *b = &self->b;
	uint8_t *hole = b->buf + 8 * 4096;

	EXPECT_NE(0, advise(b, IBV_ADVISE_MR_ADVICE_PREFETCH,
			    IBV_ADVISE_MR_FLAG_FLUSH, b->buf, 4096,
			    b->mr->lkey + 1));
	EXPECT_NE(0, advise(b, 17, IBV_ADVISE_MR_FLAG_FLUSH, b->buf, 4096,
			    b->mr->lkey));
	EXPECT_EQ(0, resident_pages(b->buf, 4096));
	ASSERT_EQ(0, munmap(hole, 4096));
	EXPECT_NE(0, advise(b, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
			    IBV_ADVISE_MR_FLAG_FLUSH, hole, 4096,
			    b->mr->lkey));
}

/* explicit MRs only: a range past the MR's end */
TEST_F(odp, prefetch_out_of_bounds)
{
	struct side *b = &self->b;

	if (variant->implicit)
		SKIP(return, "an implicit MR has no end");
	EXPECT_NE(0, advise(b, IBV_ADVISE_MR_ADVICE_PREFETCH,
			    IBV_ADVISE_MR_FLAG_FLUSH, b->buf + ODP_SIZE - 4096,
			    8192, b->mr->lkey));
}

/*
 * Fixture xport: the other transports and the SRQ, into and out of
 * explicit ODP MRs on never touched pages: UC SEND and RDMA WRITE, UD
 * SEND (the 40-byte GRH area before the data), RC SEND received through
 * an SRQ.  remu0<->remu1 and loopback.
 */
struct xside {
	const char *dev;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	struct ibv_ah *ah;
	struct ibv_mr *mr;
	uint8_t *buf;
	union ibv_gid gid;
	enum ibv_mtu mtu;
};

FIXTURE(xport) {
	struct xside a, b;
	int mrs;
};

FIXTURE_VARIANT(xport) {
	const char *dev_a, *dev_b;
	enum ibv_qp_type type;
	int srq;
};

FIXTURE_VARIANT_ADD(xport, uc_remu0_remu1) {
	.dev_a = "remu0", .dev_b = "remu1", .type = IBV_QPT_UC };
FIXTURE_VARIANT_ADD(xport, uc_loopback) {
	.dev_a = "remu0", .dev_b = "remu0", .type = IBV_QPT_UC };
FIXTURE_VARIANT_ADD(xport, ud_remu0_remu1) {
	.dev_a = "remu0", .dev_b = "remu1", .type = IBV_QPT_UD };
FIXTURE_VARIANT_ADD(xport, ud_loopback) {
	.dev_a = "remu0", .dev_b = "remu0", .type = IBV_QPT_UD };
FIXTURE_VARIANT_ADD(xport, rc_srq_remu0_remu1) {
	.dev_a = "remu0", .dev_b = "remu1", .type = IBV_QPT_RC, .srq = 1 };
FIXTURE_VARIANT_ADD(xport, rc_srq_loopback) {
	.dev_a = "remu0", .dev_b = "remu0", .type = IBV_QPT_RC, .srq = 1 };

#define QKEY	0x11111111

static int xside_open(struct xside *s, const char *dev, enum ibv_qp_type type,
		      int use_srq)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16,
						  .max_sge = 1 } };
	struct ibv_qp_init_attr ia = {};
	struct ibv_port_attr pa;

	s->dev = dev;
	s->ctx = remu_open(dev);
	if (!s->ctx || ibv_query_port(s->ctx, 1, &pa) ||
	    ibv_query_gid(s->ctx, 1, GID_INDEX, &s->gid))
		return -1;
	s->mtu = pa.active_mtu;
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = s->pd ? ibv_create_cq(s->ctx, 64, NULL, NULL, 0) : NULL;
	s->buf = fresh_map(NULL);
	if (!s->cq || !s->buf)
		return -1;
	s->mr = ibv_reg_mr(s->pd, s->buf, ODP_SIZE, ODP_ACCESS);
	if (!s->mr)
		return -1;
	if (use_srq) {
		s->srq = ibv_create_srq(s->pd, &sa);
		if (!s->srq)
			return -1;
	}
	ia.send_cq = s->cq;
	ia.recv_cq = s->cq;
	ia.srq = s->srq;
	ia.qp_type = type;
	ia.cap.max_send_wr = 16;
	ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	s->qp = ibv_create_qp(s->pd, &ia);
	return s->qp ? 0 : -1;
}

static int xside_connect(struct xside *s, struct xside *peer,
			 enum ibv_qp_type type)
{
	struct ibv_ah_attr ah = { .is_global = 1, .port_num = 1 };
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	ah.grh.dgid = peer->gid;
	ah.grh.sgid_index = GID_INDEX;
	ah.grh.hop_limit = 64;
	if (type == IBV_QPT_UD) {
		a.qkey = QKEY;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	if (ibv_modify_qp(s->qp, &a, mask))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	mask = IBV_QP_STATE;
	if (type != IBV_QPT_UD) {
		a.path_mtu = s->mtu < peer->mtu ? s->mtu : peer->mtu;
		a.dest_qp_num = peer->qp->qp_num;
		a.rq_psn = 0x42;
		a.ah_attr = ah;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			IBV_QP_RQ_PSN;
		if (type == IBV_QPT_RC) {
			a.max_dest_rd_atomic = 1;
			a.min_rnr_timer = 1;
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC |
				IBV_QP_MIN_RNR_TIMER;
		}
	}
	if (ibv_modify_qp(s->qp, &a, mask))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0x42;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (type == IBV_QPT_RC) {
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.max_rd_atomic = 1;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC;
	}
	if (ibv_modify_qp(s->qp, &a, mask))
		return -1;
	if (type == IBV_QPT_UD) {
		s->ah = ibv_create_ah(s->pd, &ah);
		if (!s->ah)
			return -1;
	}
	return 0;
}

static void xside_close(struct xside *s)
{
	if (s->ah)
		ibv_destroy_ah(s->ah);
	if (s->qp)
		ibv_destroy_qp(s->qp);
	if (s->srq)
		ibv_destroy_srq(s->srq);
	if (s->mr)
		ibv_dereg_mr(s->mr);
	if (s->cq)
		ibv_destroy_cq(s->cq);
	if (s->pd)
		ibv_dealloc_pd(s->pd);
	if (s->ctx)
		ibv_close_device(s->ctx);
	if (s->buf)
		munmap(s->buf, ODP_SIZE);
}

FIXTURE_SETUP(xport)
{
	memset(&self->a, 0, sizeof(self->a));
	memset(&self->b, 0, sizeof(self->b));
	self->mrs = remu_obj_count("mr");
	ASSERT_LE(0, self->mrs);
	ASSERT_EQ(0, xside_open(&self->a, variant->dev_a, variant->type,
				variant->srq));
	ASSERT_EQ(0, xside_open(&self->b, variant->dev_b, variant->type,
				variant->srq));
	ASSERT_EQ(0, xside_connect(&self->a, &self->b, variant->type));
	ASSERT_EQ(0, xside_connect(&self->b, &self->a, variant->type));
}

FIXTURE_TEARDOWN(xport)
{
	xside_close(&self->a);
	xside_close(&self->b);
	EXPECT_EQ(self->mrs, remu_obj_count("mr"));
}

/* post a receive of @len bytes at @dst on b (its SRQ or QP) */
static int xrecv(struct xside *b, uint8_t *dst, uint32_t len)
{
	struct ibv_sge sge = { (uintptr_t)dst, len, b->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 7, .sg_list = &sge,
				  .num_sge = 1 }, *bad;

	if (b->srq)
		return ibv_post_srq_recv(b->srq, &wr, &bad);
	return ibv_post_recv(b->qp, &wr, &bad);
}

static int xsend(struct xside *a, struct xside *b, enum ibv_wr_opcode op,
		 uint8_t *src, uint32_t len, uint8_t *raddr)
{
	struct ibv_sge sge = { (uintptr_t)src, len, a->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 9, .sg_list = &sge, .num_sge = 1,
				  .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;

	if (a->ah) {
		wr.wr.ud.ah = a->ah;
		wr.wr.ud.remote_qpn = b->qp->qp_num;
		wr.wr.ud.remote_qkey = QKEY;
	} else {
		wr.wr.rdma.remote_addr = (uintptr_t)raddr;
		wr.wr.rdma.rkey = b->mr->rkey;
	}
	if (ibv_post_send(a->qp, &wr, &bad))
		return -1;
	return poll_one(a->cq, &wc);
}

TEST_F(xport, send_recv)
{
	static const uint32_t xlens[] = { 1, 1000, 4096, 4097, 65537 };
	uint32_t grh = variant->type == IBV_QPT_UD ? 40 : 0;
	uint32_t max = variant->type == IBV_QPT_UD ? 4096 : 1 << 20;
	size_t at = 0;
	unsigned int i;

	for (i = 0; i < sizeof(xlens) / sizeof(xlens[0]); i++) {
		uint8_t *src = self->a.buf + 5 + at;
		uint8_t *dst = self->b.buf + 3 + at;
		struct ibv_wc wc;

		if (xlens[i] > max)
			continue;
		fill(src, xlens[i], 60 + i);
		ASSERT_EQ(0, xrecv(&self->b, dst, xlens[i] + grh));
		ASSERT_EQ(IBV_WC_SUCCESS,
			  xsend(&self->a, &self->b, IBV_WR_SEND, src, xlens[i],
				NULL));
		ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->b.cq, &wc));
		EXPECT_EQ(xlens[i] + grh, wc.byte_len);
		EXPECT_EQ(-1, cmp(src, dst + grh, xlens[i]))
			TH_LOG("len %u", xlens[i]);
		at += (xlens[i] + grh + 8191) & ~4095u;
	}
}

/* UC and RC: a WRITE into never touched pages, then a SEND fences it */
TEST_F(xport, write)
{
	uint8_t *src = self->a.buf + 4096 + 9, *dst = self->b.buf + 4096 + 1;
	const uint32_t len = 65537;
	struct ibv_wc wc;

	if (variant->type == IBV_QPT_UD)
		SKIP(return, "no RDMA on UD");
	fill(src, len, 99);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  xsend(&self->a, &self->b, IBV_WR_RDMA_WRITE, src, len, dst));
	ASSERT_EQ(0, xrecv(&self->b, self->b.buf, 16));
	ASSERT_EQ(IBV_WC_SUCCESS,
		  xsend(&self->a, &self->b, IBV_WR_SEND, self->a.buf, 16,
			NULL));
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->b.cq, &wc));
	EXPECT_EQ(-1, cmp(src, dst, len));
}

TEST_HARNESS_MAIN
