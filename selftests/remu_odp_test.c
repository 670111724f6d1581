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
 * mr_statistics: the per-MR counters of `rdma -j statistic show mr`
 * (page_faults, page_invalidations, page_prefetch), exact;
 * mrs_not_found: one bad rkey counts one num_mrs_not_found.
 *
 * Fixture mm (remu0 -> remu1; explicit ODP MR over the region, or the
 * implicit MR): fork + COW (a remote READ sees the parent's write after
 * fork), mremap (old address REM_ACCESS_ERR, new one works through the
 * implicit MR), a MAP_SHARED memfd (remote WRITE seen by read()), THP,
 * a 2 s munmap/remap stress (never wrong data; the contention counter
 * bounded), move_pages to node 1 (skips without a second node:
 * scripts/check runs it in a --numa boot) and MADV_PAGEOUT to a zram swap
 * device the test sets up.
 *
 * Fixture huge (remu0 -> remu1, vm.nr_hugepages raised and restored):
 * MAP_HUGETLB memory behind an explicit ODP MR with IBV_ACCESS_HUGETLB,
 * an implicit MR, or a pinned HUGETLB MR; remote WRITE and READ byte for
 * byte, munmap and re-fault (ODP), per-MR counters in 4 KiB pages, and
 * HUGETLB over ordinary pages failing at access.  refused_requests: an
 * implicit MR with HUGETLB (EINVAL, as mlx5) and an unknown advice.
 *
 * Fixture xport: UC SEND and WRITE, UD SEND, RC SEND through an SRQ, with
 * explicit ODP MRs on both sides, remu0<->remu1 and loopback.  Object counts (MRs) are back at baseline after
 * each fixture's teardown.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "remu_lib.h"

#define ODP_SIZE	((1 << 20) + 8192)
#define GID_INDEX	1	/* the IPv4-mapped RoCEv2 GID */
#define ODP_ACCESS	(IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE | \
			 IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
			 IBV_ACCESS_REMOTE_ATOMIC)

/* a port counter of @dev from sysfs, past the hw_stats cache, or -1 */
static long long hw_counter(const char *dev, const char *name)
{
	return remu_hw_counter(dev, name, true);
}

/* the output of `rdma -j @args`, malloc'ed, or NULL */
static char *rdma_json(const char *args)
{
	size_t cap = 1 << 16, n = 0;
	char cmd[128], *buf = malloc(cap);
	FILE *f;

	snprintf(cmd, sizeof(cmd), "rdma -j %s 2>&1", args);
	f = buf ? popen(cmd, "r") : NULL;
	if (!f) {
		free(buf);
		return NULL;
	}
	while (!feof(f) && n < cap - 1)
		n += fread(buf + n, 1, cap - 1 - n, f);
	buf[n] = 0;
	pclose(f);
	return buf;
}

/*
 * The number after "@key": in [@p, @end) (quoted or not; in @base), or -1.
 * The rdma tool prints keys as quoted hex without 0x.
 */
static long long json_num(const char *p, const char *end, const char *key,
			  int base)
{
	char pat[64];
	const char *q;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	q = strstr(p, pat);
	if (!q || (end && q >= end))
		return -1;
	q += strlen(pat);
	while (*q == ' ' || *q == '"')
		q++;
	return strtoll(q, NULL, base);
}

/* the next object of @dev at or after @p in rdma -j output; *@end its end */
static char *json_dev_obj(char *p, const char *dev, char **end)
{
	char tag[64];

	snprintf(tag, sizeof(tag), "\"ifname\":\"%s\"", dev);
	p = p ? strstr(p, tag) : NULL;
	if (p)
		*end = strstr(p + 1, "\"ifname\":");
	return p;
}

/*
 * The per-MR ODP counter @name (page_faults, page_invalidations,
 * page_prefetch) of the MR of @dev with @rkey, as `rdma statistic show
 * mr` prints it: `rdma -j resource show mr` gives the MR's number (mrn)
 * for its rkey, `rdma -j statistic show mr` its counters.  -1 if absent.
 */
static long long mr_stat(const char *dev, uint32_t rkey, const char *name)
{
	char *res, *st, *p, *end = NULL;
	long long mrn = -1, v = -1;

	res = rdma_json("resource show mr");
	for (p = json_dev_obj(res, dev, &end); p;
	     p = end ? json_dev_obj(end, dev, &end) : NULL)
		if (json_num(p, end, "rkey", 16) == rkey) {
			mrn = json_num(p, end, "mrn", 10);
			break;
		}
	st = mrn >= 0 ? rdma_json("statistic show mr") : NULL;
	for (p = json_dev_obj(st, dev, &end); p;
	     p = end ? json_dev_obj(end, dev, &end) : NULL)
		if (json_num(p, end, "mrn", 10) == mrn) {
			v = json_num(p, end, name, 10);
			break;
		}
	free(res);
	free(st);
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
 * What remu refuses plainly, as mlx5: an implicit ODP MR with
 * IBV_ACCESS_HUGETLB (EINVAL, the core's rule; explicit ones work: fixture
 * huge) and an advice it does not know.
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
	mr = ibv_reg_mr(pd, NULL, SIZE_MAX, ODP_ACCESS | IBV_ACCESS_HUGETLB);
	EXPECT_EQ(NULL, mr);
	EXPECT_EQ(EINVAL, errno);
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
static int side_qp(struct side *s);

static int side_open(struct side *s, const char *dev, int implicit)
{
	s->dev = dev;
	s->ctx = remu_open_port(dev, GID_INDEX, &s->gid, &s->mtu);
	s->pd = s->ctx ? ibv_alloc_pd(s->ctx) : NULL;
	s->cq = s->pd ? ibv_create_cq(s->ctx, 64, NULL, NULL, 0) : NULL;
	s->buf = fresh_map(NULL);
	if (!s->cq || !s->buf)
		return -1;
	if (implicit)
		s->mr = ibv_reg_mr(s->pd, NULL, SIZE_MAX, ODP_ACCESS);
	else
		s->mr = ibv_reg_mr(s->pd, s->buf, ODP_SIZE, ODP_ACCESS);
	return s->mr ? side_qp(s) : -1;
}

/* a new RC QP for @s (s->qp) */
static int side_qp(struct side *s)
{
	struct ibv_qp_cap cap = { .max_send_wr = 16, .max_recv_wr = 16,
				  .max_send_sge = 4, .max_recv_sge = 4 };

	s->qp = remu_create_qp(s->pd, s->cq, IBV_QPT_RC, &cap);
	return s->qp ? 0 : -1;
}

/*
 * The responder serves a page fault while the request waits, and the
 * requester's timer runs meanwhile.  With the usual timeout 14 and 7
 * retries it gives up after 8 x 67 ms, which a fault on the debug kernel
 * (KASAN, lockdep, under TCG) has once exceeded (a READ of an untouched
 * implicit-MR page ended in RETRY_EXC_ERR).  ODP QPs here get timeout 17
 * (537 ms; 4.3 s in all), as real ODP deployments use long timeouts.
 * Nothing here waits for the timer: every error tested is a NAK.
 */
#define ODP_QP_TIMEOUT	17

static int side_connect(struct side *s, struct side *peer)
{
	struct remu_conn_attr ra = REMU_RC_ATTR(0x321);
	struct remu_conn_dest d = { .qpn = peer->qp->qp_num, .gid = peer->gid,
				    .mtu = remu_min_mtu(s->mtu, peer->mtu) };

	ra.timeout = ODP_QP_TIMEOUT;
	return remu_qp_connect(s->qp, &ra, GID_INDEX, &d);
}

static void side_close(struct side *s)
{
	remu_close_objs(s->qp, NULL, s->mr, s->cq, s->pd, s->ctx);
	if (s->buf)
		munmap(s->buf, ODP_SIZE);
}

static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	return remu_poll_one(cq, wc, 20);
}

static void fill(uint8_t *p, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 29 + seed + (i >> 9));
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
	return remu_rdma1(s->qp, s->cq, op, laddr, s->mr->lkey, len, raddr,
			  rkey, 20);
}

static int atomic1(struct side *s, enum ibv_wr_opcode op, uint64_t laddr,
		   uint64_t raddr, uint32_t rkey, uint64_t a, uint64_t b)
{
	struct ibv_sge sge = { laddr, 8, s->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = op, .sg_list = &sge, .num_sge = 1,
				  .opcode = op };

	wr.wr.atomic.remote_addr = raddr;
	wr.wr.atomic.rkey = rkey;
	wr.wr.atomic.compare_add = a;
	wr.wr.atomic.swap = b;
	return remu_run_wr(s->qp, s->cq, &wr, 20);
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
		EXPECT_EQ(-1, remu_cmp(src, dst, lens[i])) TH_LOG("len %u", lens[i]);
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
		EXPECT_EQ(-1, remu_cmp(src, dst, lens[i])) TH_LOG("len %u", lens[i]);
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
		EXPECT_EQ(-1, remu_cmp(src, dst, lens[i])) TH_LOG("len %u", lens[i]);
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
	ASSERT_EQ(-1, remu_cmp(src, dst, len));
	inv = hw_counter(self->b.dev, "num_invalidations");
	ASSERT_EQ(0, madvise(dst, len, MADV_DONTNEED));
	EXPECT_LT(inv, hw_counter(self->b.dev, "num_invalidations"));
	EXPECT_EQ(-1, zeros(dst, len));
	/* the zero page reads above are read-only: the WRITE must upgrade */
	fill(src, len, 2);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma1(&self->a, IBV_WR_RDMA_WRITE, (uintptr_t)src, len,
			(uintptr_t)dst, self->b.mr->rkey));
	EXPECT_EQ(-1, remu_cmp(src, dst, len));
	/* and the local side too: DONTNEED the source, READ back into it */
	ASSERT_EQ(0, madvise(src, len, MADV_DONTNEED));
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma1(&self->a, IBV_WR_RDMA_READ, (uintptr_t)src, len,
			(uintptr_t)dst, self->b.mr->rkey));
	fill(self->a.buf + len, len, 2);
	EXPECT_EQ(-1, remu_cmp(self->a.buf + len, src, len));
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
	ASSERT_EQ(-1, remu_cmp(src, dst, len));
	ASSERT_EQ(0, munmap(src, ODP_SIZE));
	ASSERT_EQ(src, fresh_map(src));
	fill(src, len, 6);
	memset(dst, 0, len);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma1(&self->a, IBV_WR_RDMA_READ, (uintptr_t)dst, len,
			(uintptr_t)src, self->b.mr->rkey));
	EXPECT_EQ(-1, remu_cmp(src, dst, len));
	/* and a WRITE into the new pages */
	fill(dst, len, 7);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma1(&self->a, IBV_WR_RDMA_WRITE, (uintptr_t)dst, len,
			(uintptr_t)src + 4096, self->b.mr->rkey));
	EXPECT_EQ(-1, remu_cmp(dst, src + 4096, len));
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
	EXPECT_EQ(-1, remu_cmp(hole - 4096, self->a.buf, 4096));
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
	EXPECT_EQ(-1, remu_cmp(self->a.buf, p, len));
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
	EXPECT_EQ(-1, remu_cmp(p, self->a.buf, 8 * 4096));
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
 * Per-MR statistics (`rdma statistic show mr`), exact, on an 8-page ODP
 * MR of its own: a remote WRITE of all of it faults each page in once
 * (page_faults 8), MADV_DONTNEED of 3 takes 3 translations away
 * (page_invalidations 3), a PREFETCH_WRITE of the 8 pages maps 8
 * (page_prefetch 8) and faults nothing.  A pinned MR has no such counters.
 */
TEST_F(odp, mr_statistics)
{
	const size_t n = 8, len = n * 4096;
	struct side *a = &self->a, *b = &self->b;
	struct ibv_mr *mr, *pinned;
	uint8_t *p;

	p = mmap(NULL, 2 * len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, p);
	mr = ibv_reg_mr(b->pd, p, len, ODP_ACCESS);
	ASSERT_NE(NULL, mr);
	EXPECT_EQ(0, mr_stat(b->dev, mr->rkey, "page_faults"));
	EXPECT_EQ(0, mr_stat(b->dev, mr->rkey, "page_invalidations"));
	EXPECT_EQ(0, mr_stat(b->dev, mr->rkey, "page_prefetch"));

	fill(a->buf, len, 21);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma1(a, IBV_WR_RDMA_WRITE, (uintptr_t)a->buf, len,
			(uintptr_t)p, mr->rkey));
	EXPECT_EQ(-1, remu_cmp(a->buf, p, len));
	EXPECT_EQ(n, mr_stat(b->dev, mr->rkey, "page_faults"));
	EXPECT_EQ(0, mr_stat(b->dev, mr->rkey, "page_invalidations"));

	ASSERT_EQ(0, madvise(p + 4096, 3 * 4096, MADV_DONTNEED));
	EXPECT_EQ(3, mr_stat(b->dev, mr->rkey, "page_invalidations"));

	ASSERT_EQ(0, advise(b, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
			    IBV_ADVISE_MR_FLAG_FLUSH, p, len, mr->lkey));
	EXPECT_EQ(n, mr_stat(b->dev, mr->rkey, "page_prefetch"));
	EXPECT_EQ(n, mr_stat(b->dev, mr->rkey, "page_faults"));
	EXPECT_EQ(3, mr_stat(b->dev, mr->rkey, "page_invalidations"));

	pinned = ibv_reg_mr(b->pd, p + len, len, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(NULL, pinned);
	EXPECT_EQ(-1, mr_stat(b->dev, pinned->rkey, "page_faults"));
	EXPECT_EQ(0, ibv_dereg_mr(pinned));
	EXPECT_EQ(0, ibv_dereg_mr(mr));
	munmap(p, 2 * len);
}

/*
 * num_mrs_not_found: a request whose rkey names no MR, at a responder
 * with ODP MRs, counts exactly once (and fails with REM_ACCESS_ERR).
 */
TEST_F(odp, mrs_not_found)
{
	const char *dev = self->b.dev;
	long long nf = hw_counter(dev, "num_mrs_not_found");

	ASSERT_LE(0, nf);
	ASSERT_LT(0, hw_counter(dev, "num_odp_mrs"));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  rdma1(&self->a, IBV_WR_RDMA_READ, (uintptr_t)self->a.buf,
			64, (uintptr_t)self->b.buf,
			self->b.mr->rkey + 0x10000));
	EXPECT_EQ(nf + 1, hw_counter(dev, "num_mrs_not_found"));
}

/*
 * Fixture mm: what the process does to its address space, with remote
 * access through an explicit ODP MR registered over the region the test
 * makes (variant explicit) or through the side's implicit MR (variant
 * implicit); remu0 -> remu1.  fork + copy-on-write, mremap, a MAP_SHARED
 * memfd, transparent huge pages, a munmap/remap stress, move_pages to the
 * second NUMA node (scripts/vm --numa) and MADV_PAGEOUT to zram swap.
 */
FIXTURE(mm) {
	struct side a, b;
	int mrs;
};

FIXTURE_VARIANT(mm) {
	int implicit;
};

FIXTURE_VARIANT_ADD(mm, explicit) { .implicit = 0 };
FIXTURE_VARIANT_ADD(mm, implicit) { .implicit = 1 };

FIXTURE_SETUP(mm)
{
	memset(&self->a, 0, sizeof(self->a));
	memset(&self->b, 0, sizeof(self->b));
	self->mrs = remu_obj_count("mr");
	ASSERT_LE(0, self->mrs);
	ASSERT_EQ(0, side_open(&self->a, "remu0", variant->implicit));
	ASSERT_EQ(0, side_open(&self->b, "remu1", variant->implicit));
	ASSERT_EQ(0, side_connect(&self->a, &self->b));
	ASSERT_EQ(0, side_connect(&self->b, &self->a));
}

FIXTURE_TEARDOWN(mm)
{
	side_close(&self->a);
	side_close(&self->b);
	EXPECT_EQ(self->mrs, remu_obj_count("mr"));
}

/*
 * The key for [p, p + len) of @s: the implicit MR's, or that of a new
 * explicit ODP MR over the range (in *@mr, to deregister).
 */
static uint32_t region_key(struct side *s, int implicit, void *p,
			   size_t len, struct ibv_mr **mr, int remote)
{
	*mr = NULL;
	if (implicit)
		return remote ? s->mr->rkey : s->mr->lkey;
	*mr = ibv_reg_mr(s->pd, p, len, ODP_ACCESS);
	if (!*mr)
		return 0;
	return remote ? (*mr)->rkey : (*mr)->lkey;
}

/*
 * New QPs on both sides, connected (after an error completion): nothing
 * still in flight for the old ones can reach them.  Return: completions
 * found left over in @a's CQ after the old QP was destroyed (there
 * should be none), or -1.
 */
static int renew_qps(struct side *a, struct side *b)
{
	struct ibv_wc wc;
	int n = 0;

	if (ibv_destroy_qp(a->qp) || ibv_destroy_qp(b->qp))
		return -1;
	a->qp = b->qp = NULL;
	while (ibv_poll_cq(a->cq, 1, &wc) == 1)
		n++;
	if (side_qp(a) || side_qp(b) || side_connect(a, b) ||
	    side_connect(b, a))
		return -1;
	return n;
}

/*
 * fork(): the child shares the pages copy-on-write; the parent writes
 * after the fork, gets new pages (the notifier takes the old ones away)
 * and a remote READ returns the parent's new data; the child still sees
 * the old.
 */
TEST_F(mm, fork_cow)
{
	const size_t len = 16 * 4096;
	uint8_t *p = self->b.buf, ref[len];
	int fds[2], st;
	pid_t pid;
	char c;

	fill(p, len, 31);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma1(&self->a, IBV_WR_RDMA_READ, (uintptr_t)self->a.buf,
			len, (uintptr_t)p, self->b.mr->rkey));
	ASSERT_EQ(-1, remu_cmp(p, self->a.buf, len));
	ASSERT_EQ(0, pipe(fds));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		close(fds[1]);
		if (read(fds[0], &c, 1) < 0)
			_exit(2);
		fill(ref, len, 31);
		_exit(remu_cmp(p, ref, len) == -1 ? 0 : 1);
	}
	close(fds[0]);
	fill(p, len, 32);
	memset(self->a.buf, 0, len);
	EXPECT_EQ(IBV_WC_SUCCESS,
		  rdma1(&self->a, IBV_WR_RDMA_READ, (uintptr_t)self->a.buf,
			len, (uintptr_t)p, self->b.mr->rkey));
	EXPECT_EQ(-1, remu_cmp(p, self->a.buf, len));
	close(fds[1]);
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
		TH_LOG("the child saw the parent's write: status %#x", st);
}

/*
 * mremap moves a range: the pages now live at the new address.  Through
 * the implicit MR the new address reads the data; the old one is
 * unmapped, so a READ there fails with REM_ACCESS_ERR.  An explicit MR
 * keeps naming the old addresses (it follows addresses, not pages): the
 * same READ through it fails the same way.
 */
TEST_F(mm, mremap_moves)
{
	const size_t len = 8 * 4096;
	uint8_t *old, *nw, ref[len];
	struct ibv_mr *mr;
	uint32_t rkey;

	old = mmap(NULL, len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	nw = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, old);
	ASSERT_NE(MAP_FAILED, nw);
	rkey = region_key(&self->b, variant->implicit, old, len, &mr, 1);
	ASSERT_NE(0, rkey);
	fill(old, len, 41);
	fill(ref, len, 41);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma1(&self->a, IBV_WR_RDMA_READ, (uintptr_t)self->a.buf,
			len, (uintptr_t)old, rkey));
	ASSERT_EQ(-1, remu_cmp(ref, self->a.buf, len));
	ASSERT_EQ(nw, mremap(old, len, len, MREMAP_MAYMOVE | MREMAP_FIXED,
			     nw));
	ASSERT_EQ(-1, remu_cmp(ref, nw, len));
	if (variant->implicit) {
		memset(self->a.buf, 0, len);
		EXPECT_EQ(IBV_WC_SUCCESS,
			  rdma1(&self->a, IBV_WR_RDMA_READ,
				(uintptr_t)self->a.buf, len, (uintptr_t)nw,
				rkey));
		EXPECT_EQ(-1, remu_cmp(ref, self->a.buf, len));
	}
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  rdma1(&self->a, IBV_WR_RDMA_READ, (uintptr_t)self->a.buf,
			64, (uintptr_t)old + 4096, rkey));
	if (mr)
		EXPECT_EQ(0, ibv_dereg_mr(mr));
	munmap(nw, len);
}

/*
 * A MAP_SHARED memfd (tmpfs): a remote WRITE into never touched pages is
 * what read() of the file returns, and what pwrite() put in the file is
 * what a remote READ returns.
 */
TEST_F(mm, shared_memfd)
{
	const size_t len = 16 * 4096;
	uint8_t *p, back[len];
	struct ibv_mr *mr;
	uint32_t rkey;
	int fd;

	fd = memfd_create("remu-odp", 0);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, ftruncate(fd, len));
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ASSERT_NE(MAP_FAILED, p);
	rkey = region_key(&self->b, variant->implicit, p, len, &mr, 1);
	ASSERT_NE(0, rkey);

	fill(self->a.buf, len, 51);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma1(&self->a, IBV_WR_RDMA_WRITE, (uintptr_t)self->a.buf,
			len, (uintptr_t)p, rkey));
	ASSERT_EQ(len, pread(fd, back, len, 0));
	EXPECT_EQ(-1, remu_cmp(self->a.buf, back, len));

	fill(back, 3 * 4096, 52);
	ASSERT_EQ(3 * 4096, pwrite(fd, back, 3 * 4096, 4096));
	memset(self->a.buf, 0, len);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma1(&self->a, IBV_WR_RDMA_READ, (uintptr_t)self->a.buf,
			3 * 4096, (uintptr_t)p + 4096, rkey));
	EXPECT_EQ(-1, remu_cmp(back, self->a.buf, 3 * 4096));
	if (mr)
		EXPECT_EQ(0, ibv_dereg_mr(mr));
	munmap(p, len);
	close(fd);
}

/* AnonHugePages (kB) of the VMA holding @p in /proc/self/smaps, or -1 */
static long anon_huge_kb(void *p)
{
	unsigned long lo, hi, at = (uintptr_t)p;
	char line[256];
	long kb = -1;
	int in = 0;
	FILE *f = fopen("/proc/self/smaps", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 &&
		    strchr(line, '-') < strchr(line, ' '))
			in = lo <= at && at < hi;
		else if (in && sscanf(line, "AnonHugePages: %ld", &kb) == 1)
			break;
	}
	fclose(f);
	return kb;
}

/* a 2 MiB-aligned MADV_HUGEPAGE region of 2 MiB (munmap 4 MiB at *@raw) */
static uint8_t *thp_region(void **raw)
{
	const size_t huge = 2UL << 20;
	uint8_t *p;

	*raw = mmap(NULL, 2 * huge, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (*raw == MAP_FAILED)
		return NULL;
	p = (uint8_t *)(((uintptr_t)*raw + huge - 1) & ~(huge - 1));
	if (madvise(p, huge, MADV_HUGEPAGE))
		return NULL;
	return p;
}

/*
 * Transparent huge pages: a region the CPU made one 2 MiB THP
 * (AnonHugePages in smaps) is read remotely and written remotely byte
 * for byte, and stays huge; a never touched MADV_HUGEPAGE region that a
 * remote WRITE faults in becomes a THP too.
 */
TEST_F(mm, thp)
{
	const size_t huge = 2UL << 20;
	struct ibv_send_wr wr = { .num_sge = 1, .opcode = IBV_WR_RDMA_READ,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_mr *mr, *lmr, *mr2;
	void *raw, *lraw, *raw2;
	struct ibv_sge sge;
	struct ibv_wc wc;
	uint8_t *p, *l, *q;
	uint32_t rkey, lkey, rkey2;
	char mode[128] = "";
	FILE *f;

	f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
	if (f) {
		if (!fgets(mode, sizeof(mode), f))
			mode[0] = 0;
		fclose(f);
	}
	if (!mode[0] || strstr(mode, "[never]"))
		SKIP(return, "transparent huge pages are off: '%s'", mode);
	p = thp_region(&raw);
	l = thp_region(&lraw);
	q = thp_region(&raw2);
	ASSERT_NE(NULL, p);
	ASSERT_NE(NULL, l);
	ASSERT_NE(NULL, q);
	fill(p, huge, 61);
	ASSERT_EQ(2048, anon_huge_kb(p));
	rkey = region_key(&self->b, variant->implicit, p, huge, &mr, 1);
	lkey = region_key(&self->a, variant->implicit, l, huge, &lmr, 0);
	rkey2 = region_key(&self->b, variant->implicit, q, huge, &mr2, 1);
	ASSERT_NE(0, rkey);
	ASSERT_NE(0, lkey);
	ASSERT_NE(0, rkey2);

	sge = (struct ibv_sge){ (uintptr_t)l, huge, lkey };
	wr.sg_list = &sge;
	wr.wr.rdma.remote_addr = (uintptr_t)p;
	wr.wr.rdma.rkey = rkey;
	ASSERT_EQ(0, ibv_post_send(self->a.qp, &wr, &bad));
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
	EXPECT_EQ(-1, remu_cmp(p, l, huge));

	fill(l, huge, 62);
	wr.opcode = IBV_WR_RDMA_WRITE;
	ASSERT_EQ(0, ibv_post_send(self->a.qp, &wr, &bad));
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
	EXPECT_EQ(-1, remu_cmp(l, p, huge));
	EXPECT_EQ(2048, anon_huge_kb(p));

	/* the device's write fault makes the THP */
	wr.wr.rdma.remote_addr = (uintptr_t)q;
	wr.wr.rdma.rkey = rkey2;
	ASSERT_EQ(0, ibv_post_send(self->a.qp, &wr, &bad));
	ASSERT_EQ(IBV_WC_SUCCESS, poll_one(self->a.cq, &wc));
	EXPECT_EQ(-1, remu_cmp(l, q, huge));
	EXPECT_EQ(2048, anon_huge_kb(q));
	if (mr)
		EXPECT_EQ(0, ibv_dereg_mr(mr));
	if (lmr)
		EXPECT_EQ(0, ibv_dereg_mr(lmr));
	if (mr2)
		EXPECT_EQ(0, ibv_dereg_mr(mr2));
	munmap(raw, 2 * huge);
	munmap(lraw, 2 * huge);
	munmap(raw2, 2 * huge);
}

#define STRESS_LEN	(4 * 4096)
#define STRESS_WORDS	(STRESS_LEN / 8)

struct stress {
	uint8_t *r;		/* the range, STRESS_LEN bytes */
	volatile int stop;
	volatile uint32_t gen;	/* generations moved in so far */
	int err;
};

/*
 * Move a new generation of content into the range, in a loop: fill a
 * staging mapping (made while the range is mapped, so it cannot land
 * there) with word k = gen << 32 | k, munmap the range every other round,
 * then mremap the staging mapping over it.  So the range holds one whole
 * generation per page at any time, or nothing.
 */
static void *stress_remapper(void *arg)
{
	struct stress *st = arg;
	uint32_t g;

	for (g = 2; !st->stop; g++) {
		uint64_t *w = mmap(NULL, STRESS_LEN, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		uint32_t k;

		if (w == MAP_FAILED) {
			st->err = errno;
			break;
		}
		for (k = 0; k < STRESS_WORDS; k++)
			w[k] = (uint64_t)g << 32 | k;
		if (g & 1) {
			if (munmap(st->r, STRESS_LEN)) {
				st->err = errno;
				break;
			}
			usleep(300);
		}
		__atomic_store_n(&st->gen, g, __ATOMIC_RELEASE);
		if (mremap(w, STRESS_LEN, STRESS_LEN,
			   MREMAP_MAYMOVE | MREMAP_FIXED, st->r) != st->r) {
			st->err = errno;
			break;
		}
		usleep(1000);
	}
	return NULL;
}

/*
 * munmap/remap stress: a thread replaces or unmaps the range in a loop
 * (stress_remapper) while remote READs of it run back to back for about
 * 2 s.  Every READ either completes with a whole generation in each word
 * (one that was in the range at some point: index right, generation not
 * newer than the last moved in) or fails with REM_ACCESS_ERR (then both
 * sides get new QPs); never wrong data, never a splat.
 * invalidations_faults_contentions never decreases and counts at most one
 * per fault.
 */
TEST_F(mm, munmap_stress)
{
	long long c0, f0, c1, f1;
	struct stress st = {};
	struct timespec t0, t;
	unsigned int ok = 0, errs = 0, bad = 0;
	struct ibv_mr *mr;
	pthread_t th;
	uint32_t rkey;

	st.r = mmap(NULL, STRESS_LEN, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, st.r);
	for (uint32_t k = 0; k < STRESS_WORDS; k++)
		((uint64_t *)st.r)[k] = 1ULL << 32 | k;
	st.gen = 1;
	rkey = region_key(&self->b, variant->implicit, st.r, STRESS_LEN,
			  &mr, 1);
	ASSERT_NE(0, rkey);
	c0 = hw_counter("remu1", "invalidations_faults_contentions");
	f0 = hw_counter("remu1", "num_page_faults");
	ASSERT_LE(0, c0);
	ASSERT_EQ(0, pthread_create(&th, NULL, stress_remapper, &st));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		const uint64_t *w = (const uint64_t *)self->a.buf;
		int s;

		memset(self->a.buf, 0, STRESS_LEN);
		s = rdma1(&self->a, IBV_WR_RDMA_READ, (uintptr_t)self->a.buf,
			  STRESS_LEN, (uintptr_t)st.r, rkey);
		if (s == IBV_WC_SUCCESS) {
			uint32_t g = __atomic_load_n(&st.gen, __ATOMIC_ACQUIRE);

			for (uint32_t k = 0; k < STRESS_WORDS; k++)
				if ((uint32_t)w[k] != k || !(w[k] >> 32) ||
				    (w[k] >> 32) > g) {
					if (!bad++)
						TH_LOG("word %u: %#llx (gen %u)",
						       k,
						       (unsigned long long)w[k],
						       g);
					break;
				}
			ok++;
		} else if (s == IBV_WC_REM_ACCESS_ERR) {
			errs++;
			s = renew_qps(&self->a, &self->b);
			if (s) {
				TH_LOG("renew_qps: %d", s);
				bad++;
				break;
			}
		} else {
			TH_LOG("READ completed with status %d", s);
			bad++;
			break;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000000000L +
		 (t.tv_nsec - t0.tv_nsec) < 2000000000L);
	st.stop = 1;
	pthread_join(th, NULL);
	c1 = hw_counter("remu1", "invalidations_faults_contentions");
	f1 = hw_counter("remu1", "num_page_faults");
	TH_LOG("%u READs correct, %u REM_ACCESS_ERR, %u generations, "
	       "%lld faults, %lld contentions", ok, errs, st.gen, f1 - f0,
	       c1 - c0);
	EXPECT_EQ(0, st.err);
	EXPECT_EQ(0, bad);
	EXPECT_LT(0, ok);
	EXPECT_LE(c0, c1);
	EXPECT_LE(c1 - c0, f1 - f0);
	if (mr)
		EXPECT_EQ(0, ibv_dereg_mr(mr));
	munmap(st.r, STRESS_LEN);
}

#ifndef MPOL_MF_MOVE
#define MPOL_MF_MOVE	(1 << 1)
#endif

/* move_pages(2) of @n pages at @p to @node (or query with node < 0) */
static long move_to(uint8_t *p, int n, int node, int *status)
{
	void *pages[64];
	int nodes[64], i;

	for (i = 0; i < n; i++) {
		pages[i] = p + i * 4096;
		nodes[i] = node;
	}
	return syscall(SYS_move_pages, 0, n, pages, node < 0 ? NULL : nodes,
		       status, MPOL_MF_MOVE);
}

/*
 * Pages migrated to the other NUMA node (move_pages) after the device
 * mapped them: migration invalidates, a remote READ returns the same
 * data from the new pages and a remote WRITE lands in them.  Needs two
 * nodes: run_tests.sh runs it in a `scripts/vm --numa` boot.
 */
TEST_F(mm, move_pages)
{
	const int n = 16;
	const size_t len = n * 4096;
	uint8_t *p = self->b.buf + 8192, ref[len];
	int status[64], i, to;
	long long inv;

	if (access("/sys/devices/system/node/node1", F_OK))
		SKIP(return, "one NUMA node (scripts/vm --numa has two)");
	fill(p, len, 71);
	fill(ref, len, 71);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma1(&self->a, IBV_WR_RDMA_READ, (uintptr_t)self->a.buf,
			len, (uintptr_t)p, self->b.mr->rkey));
	ASSERT_EQ(-1, remu_cmp(ref, self->a.buf, len));
	ASSERT_EQ(0, move_to(p, n, -1, status));
	ASSERT_LE(0, status[0]);
	to = !status[0];
	inv = hw_counter("remu1", "num_invalidation_pages");
	ASSERT_EQ(0, move_to(p, n, to, status));
	ASSERT_EQ(0, move_to(p, n, -1, status));
	for (i = 0; i < n; i++) {
		ASSERT_EQ(to, status[i]) TH_LOG("page %d", i);
	}
	EXPECT_LE(inv + n, hw_counter("remu1", "num_invalidation_pages"));
	memset(self->a.buf, 0, len);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma1(&self->a, IBV_WR_RDMA_READ, (uintptr_t)self->a.buf,
			len, (uintptr_t)p, self->b.mr->rkey));
	EXPECT_EQ(-1, remu_cmp(ref, self->a.buf, len));
	fill(self->a.buf, len, 72);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma1(&self->a, IBV_WR_RDMA_WRITE, (uintptr_t)self->a.buf,
			len, (uintptr_t)p, self->b.mr->rkey));
	EXPECT_EQ(-1, remu_cmp(self->a.buf, p, len));
	ASSERT_EQ(0, move_to(p, n, -1, status));
	EXPECT_EQ(to, status[0]);
}

/* pages of [p, p + n pages) that pagemap shows swapped out */
static int swapped_pages(uint8_t *p, int n)
{
	int fd = open("/proc/self/pagemap", O_RDONLY), i, r = 0;
	uint64_t e;

	if (fd < 0)
		return -1;
	for (i = 0; i < n; i++) {
		off_t at = ((uintptr_t)p / 4096 + i) * sizeof(e);

		if (pread(fd, &e, sizeof(e), at) != sizeof(e)) {
			r = -1;
			break;
		}
		r += !!(e & (1ULL << 62));
	}
	close(fd);
	return r;
}

/* a zram swap device of our own unless swap is on already; 1 if ours */
static int zram_swap_on(void)
{
	FILE *f = fopen("/proc/swaps", "r");
	char line[256];
	int n = 0;

	if (f) {
		while (fgets(line, sizeof(line), f))
			n++;
		fclose(f);
	}
	if (n > 1)
		return 0;
	return remu_sh("modprobe zram num_devices=1 && "
		       "echo 64M > /sys/block/zram0/disksize && "
		       "mkswap /dev/zram0 >/dev/null && swapon /dev/zram0") ?
		-1 : 1;
}

static void zram_swap_off(void)
{
	remu_sh("swapoff /dev/zram0; echo 1 > /sys/block/zram0/reset; "
		"rmmod zram");
}

/*
 * Pages the device mapped, swapped out to zram with MADV_PAGEOUT
 * (pagemap's swapped bit on every one; the notifier took them away),
 * are read remotely: the device faults them back in and the data is the
 * same.
 */
TEST_F(mm, swap_out)
{
	const int n = 16;
	const size_t len = n * 4096;
	uint8_t *p, ref[len];
	struct ibv_mr *mr;
	int ours, i, out = 0;
	cpu_set_t cpus;
	long long inv;
	uint32_t rkey;

	ours = zram_swap_on();
	if (ours < 0)
		SKIP(return, "no swap and no zram swap device could be made");
	/*
	 * MADV_PAGEOUT drains only this CPU's LRU batch: touch and page
	 * out on one CPU, or new pages may not be on the LRU yet.
	 */
	CPU_ZERO(&cpus);
	CPU_SET(sched_getcpu(), &cpus);
	ASSERT_EQ(0, sched_setaffinity(0, sizeof(cpus), &cpus));
	p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, p);
	rkey = region_key(&self->b, variant->implicit, p, len, &mr, 1);
	ASSERT_NE(0, rkey);
	fill(p, len, 81);
	fill(ref, len, 81);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma1(&self->a, IBV_WR_RDMA_READ, (uintptr_t)self->a.buf,
			len, (uintptr_t)p, rkey));
	ASSERT_EQ(-1, remu_cmp(ref, self->a.buf, len));
	inv = hw_counter("remu1", "num_invalidation_pages");
	for (i = 0; i < 5 && out < n; i++) {
		ASSERT_EQ(0, madvise(p, len, MADV_PAGEOUT));
		out = swapped_pages(p, n);
	}
	EXPECT_EQ(n, out);
	EXPECT_LE(inv + n, hw_counter("remu1", "num_invalidation_pages"));
	memset(self->a.buf, 0, len);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma1(&self->a, IBV_WR_RDMA_READ, (uintptr_t)self->a.buf,
			len, (uintptr_t)p, rkey));
	EXPECT_EQ(-1, remu_cmp(ref, self->a.buf, len));
	EXPECT_EQ(0, swapped_pages(p, n));
	if (mr)
		EXPECT_EQ(0, ibv_dereg_mr(mr));
	munmap(p, len);
	if (ours)
		zram_swap_off();
}

/*
 * hugetlbfs pages (MAP_HUGETLB, 2 MiB).  The fixture raises
 * vm.nr_hugepages by HUGE_RESERVE and its teardown (in the parent, so it
 * runs whatever the test did) puts the old value back.  Side b's target
 * is two huge pages at @r, side a's local buffer its ODP MR, remu0 ->
 * remu1; variant by b's MR over the huge pages:
 *  odp:      an explicit ODP MR with IBV_ACCESS_HUGETLB (mlx5 accepts it:
 *            the core's umem then faults and invalidates whole 2 MiB
 *            pages);
 *  implicit: b's implicit ODP MR (4 KiB pages over the huge ones);
 *  pinned:   a plain registration with IBV_ACCESS_HUGETLB.
 * A remote WRITE across the two huge pages and a READ back, byte for
 * byte; with ODP, munmap takes the pages away (a READ then gets
 * REM_ACCESS_ERR), and after a new mmap at the same address with new
 * content a READ faults the new pages in.  The explicit MR's per-MR
 * counters are in 4 KiB pages, as on mlx5: two huge pages are 1024.
 * Also (odp): an ODP MR with HUGETLB over ordinary pages registers, and
 * the device's access fails (REM_ACCESS_ERR), as on mlx5.
 */
#define HUGE_SZ		(2UL << 20)
#define HUGE_RESERVE	4
#define HUGE_NR		"/proc/sys/vm/nr_hugepages"
#define HUGE_FREE	"/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages"

FIXTURE(huge) {
	long long nr0;		/* vm.nr_hugepages before */
};

FIXTURE_VARIANT(huge) {
	int kind;		/* 0 pinned, 1 explicit ODP, 2 implicit ODP */
};

FIXTURE_VARIANT_ADD(huge, pinned) { .kind = 0 };
FIXTURE_VARIANT_ADD(huge, odp) { .kind = 1 };
FIXTURE_VARIANT_ADD(huge, implicit) { .kind = 2 };

static int huge_set(long long n)
{
	char cmd[96];

	snprintf(cmd, sizeof(cmd), "echo %lld > " HUGE_NR, n);
	return remu_sh(cmd);
}

FIXTURE_SETUP(huge)
{
	self->nr0 = remu_read_num(HUGE_NR);
	ASSERT_LE(0, self->nr0);
	ASSERT_EQ(0, huge_set(self->nr0 + HUGE_RESERVE));
}

FIXTURE_TEARDOWN_PARENT(huge)
{
	EXPECT_EQ(0, huge_set(self->nr0));
	EXPECT_EQ(self->nr0, remu_read_num(HUGE_NR));
}

/* two huge pages at @at (MAP_FIXED) or anywhere: the mapping, or NULL */
static uint8_t *huge_map(void *at)
{
	void *p = mmap(at, 2 * HUGE_SZ, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB |
		       (at ? MAP_FIXED : 0), -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

TEST_F(huge, remote)
{
	const size_t woff = HUGE_SZ - 300000 + 3, wlen = 1 << 20;
	const size_t roff = HUGE_SZ - 500000, rlen = (1 << 20) + 1;
	const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		       IBV_ACCESS_REMOTE_READ;
	struct side a = {}, b = {};
	struct ibv_mr *mr = NULL, *bad;
	uint32_t rkey;
	uint8_t *r;

	if (remu_read_num(HUGE_FREE) < 2)
		SKIP(return, "the kernel gave no 2 MiB pages (free %lld)",
		     remu_read_num(HUGE_FREE));
	ASSERT_EQ(0, side_open(&a, "remu0", 0));
	ASSERT_EQ(0, side_open(&b, "remu1", variant->kind == 2));
	ASSERT_EQ(0, side_connect(&a, &b));
	ASSERT_EQ(0, side_connect(&b, &a));
	r = huge_map(NULL);
	ASSERT_NE(NULL, r) TH_LOG("MAP_HUGETLB: %s", strerror(errno));
	if (variant->kind == 2) {
		rkey = b.mr->rkey;
	} else {
		/* not huge-page aligned: the umem is aligned for it */
		mr = ibv_reg_mr(b.pd, r + 4096, 2 * HUGE_SZ - 8192,
				rw | IBV_ACCESS_HUGETLB |
				(variant->kind ? IBV_ACCESS_ON_DEMAND : 0));
		ASSERT_NE(NULL, mr) TH_LOG("reg_mr HUGETLB: %s",
					   strerror(errno));
		rkey = mr->rkey;
	}

	/* a WRITE across the two huge pages, then a READ of another range */
	fill(a.buf, wlen, 71);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma1(&a, IBV_WR_RDMA_WRITE, (uintptr_t)a.buf, wlen,
			(uintptr_t)r + woff, rkey));
	EXPECT_EQ(-1, remu_cmp(a.buf, r + woff, wlen));
	if (variant->kind == 1)
		EXPECT_EQ(2 * HUGE_SZ / 4096,
			  mr_stat("remu1", rkey, "page_faults"));
	fill(r + roff, rlen, 72);
	memset(a.buf, 0, rlen);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma1(&a, IBV_WR_RDMA_READ, (uintptr_t)a.buf, rlen,
			(uintptr_t)r + roff, rkey));
	EXPECT_EQ(-1, remu_cmp(r + roff, a.buf, rlen));

	if (variant->kind) {
		/* munmap takes the huge pages away from the device */
		ASSERT_EQ(0, munmap(r, 2 * HUGE_SZ));
		if (variant->kind == 1)
			EXPECT_EQ(2 * HUGE_SZ / 4096,
				  mr_stat("remu1", rkey,
					  "page_invalidations"));
		EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
			  rdma1(&a, IBV_WR_RDMA_READ, (uintptr_t)a.buf, 4096,
				(uintptr_t)r + roff, rkey));
		ASSERT_EQ(0, renew_qps(&a, &b));
		/* new huge pages, new content: a READ faults them in */
		ASSERT_EQ(r, huge_map(r));
		fill(r + roff, rlen, 73);
		memset(a.buf, 0, rlen);
		ASSERT_EQ(IBV_WC_SUCCESS,
			  rdma1(&a, IBV_WR_RDMA_READ, (uintptr_t)a.buf, rlen,
				(uintptr_t)r + roff, rkey));
		EXPECT_EQ(-1, remu_cmp(r + roff, a.buf, rlen));
		if (variant->kind == 1)
			EXPECT_EQ(4 * HUGE_SZ / 4096,
				  mr_stat("remu1", rkey, "page_faults"));
	}

	if (variant->kind == 1) {
		/* HUGETLB over ordinary pages: registers, access fails */
		bad = ibv_reg_mr(b.pd, b.buf, ODP_SIZE,
				 ODP_ACCESS | IBV_ACCESS_HUGETLB);
		ASSERT_NE(NULL, bad);
		EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
			  rdma1(&a, IBV_WR_RDMA_WRITE, (uintptr_t)a.buf, 64,
				(uintptr_t)b.buf, bad->rkey));
		EXPECT_EQ(0, ibv_dereg_mr(bad));
	}
	if (mr)
		EXPECT_EQ(0, ibv_dereg_mr(mr));
	munmap(r, 2 * HUGE_SZ);
	side_close(&a);
	side_close(&b);
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

	s->dev = dev;
	s->ctx = remu_open_port(dev, GID_INDEX, &s->gid, &s->mtu);
	s->pd = s->ctx ? ibv_alloc_pd(s->ctx) : NULL;
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
	static const struct remu_conn_attr ra = {
		.access = IBV_ACCESS_REMOTE_WRITE, .psn = 0x42, .rd_atomic = 1,
		.min_rnr_timer = 1, .timeout = ODP_QP_TIMEOUT, .retry_cnt = 7,
		.rnr_retry = 7,
	};
	struct remu_conn_dest d = { .qpn = peer->qp->qp_num, .gid = peer->gid,
				    .mtu = remu_min_mtu(s->mtu, peer->mtu) };
	struct ibv_ah_attr ah;

	if (type != IBV_QPT_UD)
		return remu_qp_connect(s->qp, &ra, GID_INDEX, &d) ? -1 : 0;
	if (remu_ud_ready(s->qp, QKEY, 0x42))
		return -1;
	remu_set_av(&ah, &peer->gid, GID_INDEX, 0);
	s->ah = ibv_create_ah(s->pd, &ah);
	return s->ah ? 0 : -1;
}

static void xside_close(struct xside *s)
{
	if (s->ah)
		ibv_destroy_ah(s->ah);
	remu_close_objs(s->qp, s->srq, s->mr, s->cq, s->pd, s->ctx);
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
		EXPECT_EQ(-1, remu_cmp(src, dst + grh, xlens[i]))
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
	EXPECT_EQ(-1, remu_cmp(src, dst, len));
}

TEST_HARNESS_MAIN
