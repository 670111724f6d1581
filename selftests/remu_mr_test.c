// SPDX-License-Identifier: GPL-2.0
/*
 * remu_mr_test - memory regions and the MR access layer.
 *
 * The verbs side (ibv_reg_mr and friends) is tested directly.  The access
 * layer (the device's software MMU that the data path will go through) is
 * driven through remu_test_mr.ko (/dev/remu_test_mr): the test registers
 * memory with ibv_reg_mr, the module reads, writes, does atomics and walks
 * SGE lists with the MR's key exactly as the engines will, and the test
 * compares memory byte for byte.  run_tests.sh loads the module around this
 * test; without it those tests SKIP.
 *
 * Runs in the test VM after scripts/remu-up, on remu0.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "remu_lib.h"
#include "remu_test_mr/remu_test_mr.h"

#define DEV		"remu0"
#define RW		(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | \
			 IBV_ACCESS_REMOTE_WRITE)
#define ALL_RIGHTS	(RW | IBV_ACCESS_REMOTE_ATOMIC)
/* IB_ACCESS_* as the kernel's remu_mr_check() takes them */
#define K_LOCAL_WRITE	1
#define K_REMOTE_WRITE	2
#define K_REMOTE_READ	4
#define K_REMOTE_ATOMIC	8

FIXTURE(mr) {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	int tmr;	/* /dev/remu_test_mr, or -1 */
};

FIXTURE_SETUP(mr)
{
	struct remu_tmr_dev d = { .name = DEV };

	self->ctx = remu_open(DEV);
	ASSERT_NE(NULL, self->ctx);
	self->pd = ibv_alloc_pd(self->ctx);
	ASSERT_NE(NULL, self->pd);
	self->tmr = open("/dev/" REMU_TMR_DEVNAME, O_RDWR);
	if (self->tmr >= 0)
		ASSERT_EQ(0, ioctl(self->tmr, REMU_TMR_SET_DEV, &d));
}

FIXTURE_TEARDOWN(mr)
{
	if (self->tmr >= 0)
		close(self->tmr);
	if (self->pd)
		ibv_dealloc_pd(self->pd);
	if (self->ctx)
		ibv_close_device(self->ctx);
}

#define NEED_TMR()							\
	do {								\
		if (self->tmr < 0)					\
			SKIP(return, "remu_test_mr.ko not loaded");	\
	} while (0)

static void fill(uint8_t *p, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 131 + seed + (i >> 12));
}

/* 0 or the errno of a REMU_TMR_COPY */
static int tcopy(int fd, uint32_t key, uint32_t pd_key, int dir,
		 unsigned int access, unsigned int flags, uint64_t iova,
		 uint64_t len, void *buf)
{
	struct remu_tmr_copy c = {
		.key = key, .pd_key = pd_key, .dir = dir, .access = access,
		.flags = flags, .iova = iova, .len = len,
		.buf = (uintptr_t)buf,
	};

	return ioctl(fd, REMU_TMR_COPY, &c) ? errno : 0;
}

static int tatomic(int fd, uint32_t key, int op, unsigned int access,
		   uint64_t iova, uint64_t a, uint64_t b, uint64_t *orig)
{
	struct remu_tmr_atomic x = {
		.key = key, .op = op, .access = access, .iova = iova,
		.a = a, .b = b,
	};

	if (ioctl(fd, REMU_TMR_ATOMIC, &x))
		return errno;
	*orig = x.orig;
	return 0;
}

static void *page_buf(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* The device reports the MR limits it implements. */
TEST_F(mr, device_attributes)
{
	struct ibv_device_attr a;

	ASSERT_EQ(0, ibv_query_device(self->ctx, &a));
	EXPECT_EQ(0x100000, a.max_mr);
	EXPECT_EQ(1ULL << 39, a.max_mr_size);
	EXPECT_EQ(4096, a.page_size_cap);
	EXPECT_TRUE(a.device_cap_flags & IBV_DEVICE_MEM_MGT_EXTENSIONS);
}

/* Registration of many sizes and alignments; counted and released. */
TEST_F(mr, reg_dereg_sizes)
{
	static const size_t sizes[] = { 1, 7, 4095, 4096, 4097, 65549,
					1 << 20, (8 << 20) + 5 };
	static const size_t offs[] = { 0, 1, 4093 };
	int base = remu_obj_count("mr");
	size_t i, j;

	ASSERT_LE(0, base);
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		for (j = 0; j < sizeof(offs) / sizeof(offs[0]); j++) {
			uint8_t *buf = page_buf(sizes[i] + 8192);
			struct ibv_mr *mr;

			ASSERT_NE(NULL, buf);
			mr = ibv_reg_mr(self->pd, buf + offs[j], sizes[i], RW);
			ASSERT_NE(NULL, mr) TH_LOG("size %zu off %zu: %s",
						   sizes[i], offs[j],
						   strerror(errno));
			EXPECT_EQ(mr->lkey, mr->rkey);
			EXPECT_NE(0, mr->lkey >> 8);
			EXPECT_EQ(base + 1, remu_obj_count("mr"));
			ASSERT_EQ(0, ibv_dereg_mr(mr));
			EXPECT_EQ(base, remu_obj_count("mr"));
			munmap(buf, sizes[i] + 8192);
		}
	}
}

/* Access flags are validated as the verbs spec says. */
TEST_F(mr, access_flag_validation)
{
	static const int ok[] = { 0, IBV_ACCESS_LOCAL_WRITE,
				  IBV_ACCESS_REMOTE_READ, RW, ALL_RIGHTS };
	uint8_t *buf = page_buf(8192);
	struct ibv_mr *mr;
	size_t i;

	ASSERT_NE(NULL, buf);
	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		mr = ibv_reg_mr(self->pd, buf, 8192, ok[i]);
		ASSERT_NE(NULL, mr) TH_LOG("access %#x refused", ok[i]);
		ibv_dereg_mr(mr);
	}
	errno = 0;
	EXPECT_EQ(NULL, ibv_reg_mr(self->pd, buf, 8192,
				   IBV_ACCESS_REMOTE_WRITE));
	EXPECT_EQ(EINVAL, errno);
	errno = 0;
	EXPECT_EQ(NULL, ibv_reg_mr(self->pd, buf, 8192,
				   IBV_ACCESS_REMOTE_ATOMIC |
				   IBV_ACCESS_REMOTE_READ));
	EXPECT_EQ(EINVAL, errno);
	/* on-demand paging (remu_odp_test does the rest), same rules */
	mr = ibv_reg_mr(self->pd, buf, 8192, IBV_ACCESS_ON_DEMAND | RW);
	EXPECT_NE(NULL, mr);
	if (mr)
		EXPECT_EQ(0, ibv_dereg_mr(mr));
	errno = 0;
	EXPECT_EQ(NULL, ibv_reg_mr(self->pd, buf, 8192, IBV_ACCESS_ON_DEMAND |
				   IBV_ACCESS_REMOTE_WRITE));
	EXPECT_EQ(EINVAL, errno);
	munmap(buf, 8192);
}

/*
 * iova may differ from the address, but (a rule of the RDMA core) not in
 * its offset within the page.
 */
TEST_F(mr, iova_differs_from_address)
{
	uint8_t *buf = page_buf(2 * 4096);
	struct ibv_mr *mr;

	ASSERT_NE(NULL, buf);
	mr = ibv_reg_mr_iova(self->pd, buf + 100, 5000, 0x5000000064ULL, RW);
	ASSERT_NE(NULL, mr);
	ibv_dereg_mr(mr);
	errno = 0;
	EXPECT_EQ(NULL, ibv_reg_mr_iova(self->pd, buf + 100, 5000,
					0x5000000000ULL, RW));
	EXPECT_EQ(EINVAL, errno);
	munmap(buf, 2 * 4096);
}

/* Unmapped memory cannot be pinned; oversized requests are refused. */
TEST_F(mr, unmapped_and_oversized)
{
	size_t huge = 16ULL << 30;
	uint8_t *p;

	p = mmap(NULL, huge, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	ASSERT_NE(MAP_FAILED, p);
	ASSERT_EQ(0, munmap(p, huge));
	errno = 0;
	EXPECT_EQ(NULL, ibv_reg_mr(self->pd, p, huge, RW));
	EXPECT_EQ(EFAULT, errno);

	/* one mapped page followed by an unmapped one */
	p = page_buf(8192);
	ASSERT_NE(NULL, p);
	ASSERT_EQ(0, munmap(p + 4096, 4096));
	errno = 0;
	EXPECT_EQ(NULL, ibv_reg_mr(self->pd, p, 8192, RW));
	EXPECT_EQ(EFAULT, errno);
	munmap(p, 4096);

	/* beyond max_mr_size */
	errno = 0;
	EXPECT_EQ(NULL, ibv_reg_mr(self->pd, (void *)0x10000, 1ULL << 40, RW));
	EXPECT_EQ(EINVAL, errno);
}

/* Keys: lkey == rkey, unique, and a re-registration gets a new tag. */
TEST_F(mr, keys_unique)
{
	uint8_t *buf = page_buf(4096);
	struct ibv_mr *mrs[200], *a, *b;
	uint32_t old;
	int i, j;

	ASSERT_NE(NULL, buf);
	for (i = 0; i < 200; i++) {
		mrs[i] = ibv_reg_mr(self->pd, buf, 4096, RW);
		ASSERT_NE(NULL, mrs[i]);
		ASSERT_EQ(mrs[i]->lkey, mrs[i]->rkey);
		for (j = 0; j < i; j++)
			ASSERT_NE(mrs[j]->lkey, mrs[i]->lkey);
	}
	for (i = 0; i < 200; i++)
		ibv_dereg_mr(mrs[i]);

	a = ibv_reg_mr(self->pd, buf, 4096, RW);
	ASSERT_NE(NULL, a);
	old = a->lkey;
	ibv_dereg_mr(a);
	b = ibv_reg_mr(self->pd, buf, 4096, RW);
	ASSERT_NE(NULL, b);
	EXPECT_NE(old, b->lkey);
	EXPECT_NE(old & 0xff, b->lkey & 0xff);
	ibv_dereg_mr(b);
	munmap(buf, 4096);
}

/* A process that dies with MRs registered leaves nothing pinned or counted. */
TEST_F(mr, cleanup_on_process_exit)
{
	int base = remu_obj_count("mr");
	int status;
	pid_t pid;

	ASSERT_LE(0, base);
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct ibv_context *c = remu_open(DEV);
		struct ibv_pd *pd = c ? ibv_alloc_pd(c) : NULL;
		int i, n = 0;

		for (i = 0; pd && i < 16; i++) {
			uint8_t *b = page_buf(512 << 10);

			if (b && ibv_reg_mr(pd, b, 512 << 10, RW))
				n++;
		}
		_exit(n == 16 && remu_obj_count("mr") == base + 16 ? 0 : 1);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_EQ(0, WEXITSTATUS(status));
	EXPECT_EQ(base, remu_obj_count("mr"));
}

/* Byte-for-byte copies in and out, every alignment, up to 8 MiB. */
static void copy_cases(struct __test_metadata *_metadata, int fd,
		       struct ibv_pd *pd, unsigned int flags, uint64_t maxlen)
{
	static const struct { uint64_t off, len; } cases[] = {
		{ 0, 1 }, { 1, 4095 }, { 4090, 12 }, { 4095, 8193 },
		{ 12345, 60000 }, { 3, 1 << 20 }, { 0, (8 << 20) + 1 },
	};
	size_t total = (8 << 20) + 1, map = total + 3 + 8192;
	uint8_t *mem = page_buf(map), *buf = malloc(total), *ref = malloc(map);
	uint8_t *region;
	uint64_t iova = 0x7f0000000000ULL + 3;	/* != address */
	struct ibv_mr *mr;
	size_t i;

	ASSERT_TRUE(mem && buf && ref && pd);
	region = mem + 4096 + 3;	/* unaligned start, guards around */
	mr = ibv_reg_mr_iova(pd, region, total, iova, RW);
	ASSERT_NE(NULL, mr);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t off = cases[i].off, len = cases[i].len;

		if (len > maxlen)
			continue;
		fill(mem, map, i);
		memcpy(ref, mem, map);
		fill(buf, len, 100 + i);
		ASSERT_EQ(0, tcopy(fd, mr->lkey, 0, REMU_TMR_TO_MR,
				   K_LOCAL_WRITE, flags, iova + off, len, buf));
		memcpy(ref + 4096 + 3 + off, buf, len);
		ASSERT_EQ(0, memcmp(ref, mem, map))
			TH_LOG("write off %llu len %llu differs",
			       (unsigned long long)off,
			       (unsigned long long)len);

		fill(region + off, len, 200 + i);
		memset(buf, 0, len);
		ASSERT_EQ(0, tcopy(fd, mr->rkey, 0, REMU_TMR_FROM_MR,
				   K_REMOTE_READ, flags | REMU_TMR_RKEY,
				   iova + off, len, buf));
		ASSERT_EQ(0, memcmp(buf, region + off, len))
			TH_LOG("read off %llu len %llu differs",
			       (unsigned long long)off,
			       (unsigned long long)len);
	}
	ibv_dereg_mr(mr);
	munmap(mem, map);
	free(buf);
	free(ref);
}

TEST_F(mr, copy_byte_for_byte)
{
	NEED_TMR();
	copy_cases(_metadata, self->tmr, self->pd, 0, UINT64_MAX);
}

/* The same through an skb (linear part + page frags), no bounce buffer. */
TEST_F(mr, copy_skb_byte_for_byte)
{
	NEED_TMR();
	copy_cases(_metadata, self->tmr, self->pd, REMU_TMR_SKB, 64000);
}

/* Bounds: every edge, overflow included. */
TEST_F(mr, bounds)
{
	uint8_t *buf = page_buf(3 * 4096), tmp[16];
	uint64_t iova = 0x100005, len = 2 * 4096 + 10;
	struct ibv_mr *mr;
	int fd = self->tmr;

	NEED_TMR();
	ASSERT_NE(NULL, buf);
	mr = ibv_reg_mr_iova(self->pd, buf + 5, len, iova, RW);
	ASSERT_NE(NULL, mr);
	EXPECT_EQ(0, tcopy(fd, mr->lkey, 0, 0, 0, 0, iova + len - 1, 1, tmp));
	EXPECT_EQ(0, tcopy(fd, mr->lkey, 0, 0, 0, 0, iova, len, page_buf(len)));
	EXPECT_EQ(ERANGE, tcopy(fd, mr->lkey, 0, 0, 0, 0, iova + len, 1, tmp));
	EXPECT_EQ(ERANGE, tcopy(fd, mr->lkey, 0, 0, 0, 0, iova + len - 1, 2,
				tmp));
	EXPECT_EQ(ERANGE, tcopy(fd, mr->lkey, 0, 0, 0, 0, iova - 1, 1, tmp));
	EXPECT_EQ(ERANGE, tcopy(fd, mr->lkey, 0, 1, 0, 0, iova, len + 1,
				page_buf(len + 1)));
	/* the same edges without remu_mr_check: the copy loop refuses too */
	EXPECT_EQ(ERANGE, tcopy(fd, mr->lkey, 0, 0, 0, REMU_TMR_NO_CHECK,
				iova + len, 1, tmp));
	EXPECT_EQ(ERANGE, tcopy(fd, mr->lkey, 0, 0, 0, REMU_TMR_NO_CHECK,
				iova - 8, 9, tmp));
	/* zero length is always in bounds */
	EXPECT_EQ(0, tcopy(fd, mr->lkey, 0, 0, 0, 0, iova + len, 0, tmp));
	ibv_dereg_mr(mr);
}

/* 64-bit overflow of iova + len is a bounds error, never a wrap. */
TEST_F(mr, bounds_overflow)
{
	struct remu_tmr_copy c = {};
	uint8_t *buf = page_buf(4096);
	struct ibv_mr *mr;

	NEED_TMR();
	ASSERT_NE(NULL, buf);
	mr = ibv_reg_mr_iova(self->pd, buf, 4096, UINT64_MAX - 4095, RW);
	ASSERT_NE(NULL, mr);
	c.key = mr->lkey;
	c.iova = UINT64_MAX - 4095;
	c.len = 1;
	c.buf = (uintptr_t)buf;
	EXPECT_EQ(0, ioctl(self->tmr, REMU_TMR_COPY, &c));
	c.iova = UINT64_MAX - 8;
	c.len = 64;	/* wraps past 2^64 */
	EXPECT_EQ(-1, ioctl(self->tmr, REMU_TMR_COPY, &c));
	EXPECT_EQ(ERANGE, errno);
	ibv_dereg_mr(mr);
}

/* Rights: each missing right is -EACCES; read-only pages stay unwritten. */
TEST_F(mr, rights)
{
	uint8_t *buf = page_buf(8192), tmp[64];
	struct ibv_mr *ro, *lw;
	int fd = self->tmr;

	NEED_TMR();
	ASSERT_NE(NULL, buf);
	ro = ibv_reg_mr(self->pd, buf, 4096, 0);
	lw = ibv_reg_mr(self->pd, buf + 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_TRUE(ro && lw);
	EXPECT_EQ(0, tcopy(fd, ro->lkey, 0, REMU_TMR_FROM_MR, 0, 0,
			   (uintptr_t)buf, 64, tmp));
	memset(tmp, 0x5a, sizeof(tmp));
	EXPECT_EQ(EACCES, tcopy(fd, ro->lkey, 0, REMU_TMR_TO_MR, K_LOCAL_WRITE,
				0, (uintptr_t)buf, 64, tmp));
	EXPECT_EQ(EACCES, tcopy(fd, ro->rkey, 0, REMU_TMR_FROM_MR,
				K_REMOTE_READ, REMU_TMR_RKEY, (uintptr_t)buf,
				64, tmp));
	EXPECT_EQ(EACCES, tcopy(fd, lw->rkey, 0, REMU_TMR_TO_MR,
				K_REMOTE_WRITE, REMU_TMR_RKEY,
				(uintptr_t)buf + 4096, 64, tmp));
	EXPECT_EQ(0, tcopy(fd, lw->lkey, 0, REMU_TMR_TO_MR, K_LOCAL_WRITE, 0,
			   (uintptr_t)buf + 4096, 64, tmp));
	/* even unchecked, pages pinned read-only are never written */
	EXPECT_EQ(EFAULT, tcopy(fd, ro->lkey, 0, REMU_TMR_TO_MR, 0,
				REMU_TMR_NO_CHECK, (uintptr_t)buf, 64, tmp));
	EXPECT_EQ(0, buf[0]);
	EXPECT_EQ(0x5a, buf[4096]);
	ibv_dereg_mr(ro);
	ibv_dereg_mr(lw);
}

/* An MR of another PD: -EPERM. */
TEST_F(mr, wrong_pd)
{
	struct ibv_pd *pd2 = ibv_alloc_pd(self->ctx);
	uint8_t *buf = page_buf(8192), tmp[8];
	struct ibv_mr *m1, *m2;

	NEED_TMR();
	ASSERT_TRUE(pd2 && buf);
	m1 = ibv_reg_mr(self->pd, buf, 4096, RW);
	m2 = ibv_reg_mr(pd2, buf + 4096, 4096, RW);
	ASSERT_TRUE(m1 && m2);
	EXPECT_EQ(EPERM, tcopy(self->tmr, m1->lkey, m2->lkey, 1, 0, 0,
			       (uintptr_t)buf, 8, tmp));
	EXPECT_EQ(0, tcopy(self->tmr, m1->lkey, m1->lkey, 1, 0, 0,
			   (uintptr_t)buf, 8, tmp));
	ibv_dereg_mr(m1);
	ibv_dereg_mr(m2);
	ibv_dealloc_pd(pd2);
}

/* Stale and forged keys miss. */
TEST_F(mr, stale_and_forged_keys)
{
	uint8_t *buf = page_buf(4096), tmp[8];
	struct ibv_mr *mr;
	uint32_t key;

	NEED_TMR();
	ASSERT_NE(NULL, buf);
	mr = ibv_reg_mr(self->pd, buf, 4096, RW);
	ASSERT_NE(NULL, mr);
	key = mr->lkey;
	EXPECT_EQ(0, tcopy(self->tmr, key, 0, 1, 0, 0, (uintptr_t)buf, 8,
			   tmp));
	EXPECT_EQ(ENOENT, tcopy(self->tmr, key ^ 0x01, 0, 1, 0, 0,
				(uintptr_t)buf, 8, tmp));
	EXPECT_EQ(ENOENT, tcopy(self->tmr, key & 0xff, 0, 1, 0, 0,
				(uintptr_t)buf, 8, tmp));
	ASSERT_EQ(0, ibv_dereg_mr(mr));
	EXPECT_EQ(ENOENT, tcopy(self->tmr, key, 0, 1, 0, 0, (uintptr_t)buf, 8,
				tmp));
}

/* CMP_SWP and FETCH_ADD: old value returned, memory updated, errors. */
TEST_F(mr, atomics)
{
	uint64_t *buf = page_buf(4096), orig = 0;
	struct ibv_mr *mr, *noat;
	uint64_t base = (uintptr_t)buf;
	int fd = self->tmr;

	NEED_TMR();
	ASSERT_NE(NULL, buf);
	mr = ibv_reg_mr(self->pd, buf, 2048, ALL_RIGHTS);
	noat = ibv_reg_mr(self->pd, (uint8_t *)buf + 2048, 2048, RW);
	ASSERT_TRUE(mr && noat);
	buf[1] = 5;
	EXPECT_EQ(0, tatomic(fd, mr->rkey, 0, K_REMOTE_ATOMIC, base + 8, 5, 9,
			     &orig));
	EXPECT_EQ(5, orig);
	EXPECT_EQ(9, buf[1]);
	EXPECT_EQ(0, tatomic(fd, mr->rkey, 0, K_REMOTE_ATOMIC, base + 8, 5, 1,
			     &orig));
	EXPECT_EQ(9, orig);
	EXPECT_EQ(9, buf[1]);
	EXPECT_EQ(0, tatomic(fd, mr->rkey, 1, K_REMOTE_ATOMIC, base + 8, 3, 0,
			     &orig));
	EXPECT_EQ(9, orig);
	EXPECT_EQ(12, buf[1]);
	EXPECT_EQ(0, tatomic(fd, mr->rkey, 1, K_REMOTE_ATOMIC, base + 8,
			     UINT64_MAX, 0, &orig));
	EXPECT_EQ(11, buf[1]);
	EXPECT_EQ(0, tatomic(fd, mr->rkey, 1, K_REMOTE_ATOMIC, base + 2040, 1,
			     0, &orig));
	EXPECT_EQ(1, buf[255]);
	EXPECT_EQ(EINVAL, tatomic(fd, mr->rkey, 1, K_REMOTE_ATOMIC, base + 12,
				  1, 0, &orig));
	EXPECT_EQ(ERANGE, tatomic(fd, mr->rkey, 1, K_REMOTE_ATOMIC,
				  base + 2048, 1, 0, &orig));
	EXPECT_EQ(EACCES, tatomic(fd, noat->rkey, 1, K_REMOTE_ATOMIC,
				  base + 2048, 1, 0, &orig));
	EXPECT_EQ(0, buf[256]);
	ibv_dereg_mr(mr);
	ibv_dereg_mr(noat);
}

struct adder {
	int fd;
	uint32_t key;
	uint64_t iova;
	uint64_t *origs;
	int n;
	int err;
};

static void *adder_run(void *arg)
{
	struct adder *a = arg;
	int i;

	for (i = 0; i < a->n && !a->err; i++)
		a->err = tatomic(a->fd, a->key, 1, K_REMOTE_ATOMIC, a->iova, 1,
				 0, &a->origs[i]);
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Four threads fetch-and-add the same word: the total is exact and every
 * old value is seen exactly once.
 */
TEST_F(mr, atomics_concurrent)
{
	enum { THREADS = 4, N = 3000 };
	uint64_t *word = page_buf(4096), *all;
	struct adder ad[THREADS];
	pthread_t th[THREADS];
	struct ibv_mr *mr;
	int i;

	NEED_TMR();
	ASSERT_NE(NULL, word);
	mr = ibv_reg_mr(self->pd, word, 4096, ALL_RIGHTS);
	ASSERT_NE(NULL, mr);
	all = calloc(THREADS * N, sizeof(*all));
	ASSERT_NE(NULL, all);
	for (i = 0; i < THREADS; i++) {
		ad[i] = (struct adder){ .fd = self->tmr, .key = mr->rkey,
			.iova = (uintptr_t)word + 64, .origs = all + i * N,
			.n = N };
		ASSERT_EQ(0, pthread_create(&th[i], NULL, adder_run, &ad[i]));
	}
	for (i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		EXPECT_EQ(0, ad[i].err);
	}
	EXPECT_EQ(THREADS * N, word[8]);
	qsort(all, THREADS * N, sizeof(*all), cmp_u64);
	for (i = 0; i < THREADS * N; i++)
		if (all[i] != (uint64_t)i)
			break;
	EXPECT_EQ(THREADS * N, i);
	free(all);
	ibv_dereg_mr(mr);
}

/* SGE lists: gather, scatter, offsets, zero-length SGEs, every error. */
TEST_F(mr, sge_list)
{
	uint8_t *a = page_buf(3 * 4096), *b = page_buf(4 * 4096);
	uint8_t *out = malloc(8192), *exp = malloc(8192);
	struct remu_tmr_sges s = {};
	struct ibv_mr *ma, *mb, *ro;
	struct ibv_pd *pd2;
	struct ibv_mr *other;
	uint32_t total;

	NEED_TMR();
	ASSERT_TRUE(a && b && out && exp);
	ma = ibv_reg_mr(self->pd, a, 3 * 4096, RW);
	mb = ibv_reg_mr_iova(self->pd, b, 4 * 4096, 0x40000000, RW);
	ro = ibv_reg_mr(self->pd, b, 4096, 0);
	pd2 = ibv_alloc_pd(self->ctx);
	ASSERT_TRUE(ma && mb && ro && pd2);
	other = ibv_reg_mr(pd2, a, 4096, RW);
	ASSERT_NE(NULL, other);
	fill(a, 3 * 4096, 1);
	fill(b, 4 * 4096, 2);

	s.pd_key = ma->lkey;
	s.n = 4;
	s.sge[0] = (struct remu_tmr_sge){ (uintptr_t)a + 1, 100, ma->lkey };
	s.sge[1] = (struct remu_tmr_sge){ 0x40000000 + 4000, 5000, mb->lkey };
	s.sge[2] = (struct remu_tmr_sge){ 0xdead, 0, 0x12345678 };
	s.sge[3] = (struct remu_tmr_sge){ (uintptr_t)a + 7000, 3, ma->lkey };
	total = 100 + 5000 + 3;
	memcpy(exp, a + 1, 100);
	memcpy(exp + 100, b + 4000, 5000);
	memcpy(exp + 5100, a + 7000, 3);

	/* gather all, then a slice from an offset */
	s.dir = REMU_TMR_FROM_MR;
	s.len = total;
	s.buf = (uintptr_t)out;
	ASSERT_EQ(0, ioctl(self->tmr, REMU_TMR_SGE_COPY, &s));
	EXPECT_EQ(0, memcmp(out, exp, total));
	s.offset = 50;
	s.len = 5052;
	memset(out, 0, 8192);
	ASSERT_EQ(0, ioctl(self->tmr, REMU_TMR_SGE_COPY, &s));
	EXPECT_EQ(0, memcmp(out, exp + 50, 5052));

	/* scatter */
	fill(exp, total, 9);
	s.offset = 0;
	s.len = total;
	s.buf = (uintptr_t)exp;
	s.dir = REMU_TMR_TO_MR;
	s.access = K_LOCAL_WRITE;
	ASSERT_EQ(0, ioctl(self->tmr, REMU_TMR_SGE_COPY, &s));
	EXPECT_EQ(0, memcmp(a + 1, exp, 100));
	EXPECT_EQ(0, memcmp(b + 4000, exp + 100, 5000));
	EXPECT_EQ(0, memcmp(a + 7000, exp + 5100, 3));

	/* a list too short for the message */
	s.len = total + 1;
	EXPECT_EQ(-1, ioctl(self->tmr, REMU_TMR_SGE_COPY, &s));
	EXPECT_EQ(EMSGSIZE, errno);
	s.len = total;
	/* a bad lkey */
	s.sge[1].lkey ^= 0x1;
	EXPECT_EQ(-1, ioctl(self->tmr, REMU_TMR_SGE_COPY, &s));
	EXPECT_EQ(ENOENT, errno);
	s.sge[1].lkey ^= 0x1;
	/* the QP's PD is another one */
	s.pd_key = other->lkey;
	EXPECT_EQ(-1, ioctl(self->tmr, REMU_TMR_SGE_COPY, &s));
	EXPECT_EQ(EPERM, errno);
	s.pd_key = ma->lkey;
	/* beyond an SGE's MR */
	s.sge[3].addr = (uintptr_t)a + 3 * 4096 - 2;
	EXPECT_EQ(-1, ioctl(self->tmr, REMU_TMR_SGE_COPY, &s));
	EXPECT_EQ(ERANGE, errno);
	s.sge[3].addr = (uintptr_t)a + 7000;
	/* scatter into a read-only MR */
	s.sge[1] = (struct remu_tmr_sge){ (uintptr_t)b, 5000, ro->lkey };
	s.sge[1].length = 4000;
	s.len = 100 + 4000 + 3;
	EXPECT_EQ(-1, ioctl(self->tmr, REMU_TMR_SGE_COPY, &s));
	EXPECT_EQ(EACCES, errno);

	ibv_dereg_mr(other);
	ibv_dealloc_pd(pd2);
	ibv_dereg_mr(ma);
	ibv_dereg_mr(mb);
	ibv_dereg_mr(ro);
	free(out);
	free(exp);
}

/*
 * What only kernel consumers do, run inside the test module: a DMA MR
 * (get_dma_mr behind ib_alloc_pd), alloc_mr + map_mr_sg + fast
 * registration with new tags and another iova, invalidation and its
 * errors, and deregistration waiting for an access in flight.
 */
TEST_F(mr, kernel_fast_reg_and_invalidate)
{
	struct remu_tmr_kernel r = {};
	int base = remu_obj_count("mr");

	NEED_TMR();
	ASSERT_EQ(0, ioctl(self->tmr, REMU_TMR_KERNEL, &r));
	EXPECT_EQ(0, r.step) TH_LOG("kernel scenario failed at step %u, err %d",
				    r.step, r.err);
	EXPECT_EQ(base, remu_obj_count("mr"));
}

/*
 * Kernel consumers (ULPs): each scenario of remu_test_ulp.c builds a
 * kernel PD/CQ/RC QP pair in loopback on remu0 and a fast-reg MR over
 * scattered kernel pages, drives IB_WR_REG_MR, LOCAL_INV, SEND_WITH_INV
 * and the peer's RDMA WRITE/READ through the kernel verbs, compares the
 * data with the pages byte for byte, and frees everything: the object
 * counts must be back where they were.
 */
FIXTURE(kulp) {
	int tmr;
};

FIXTURE_SETUP(kulp)
{
	struct remu_tmr_dev d = { .name = DEV };

	self->tmr = open("/dev/" REMU_TMR_DEVNAME, O_RDWR);
	if (self->tmr >= 0)
		ASSERT_EQ(0, ioctl(self->tmr, REMU_TMR_SET_DEV, &d));
}

FIXTURE_TEARDOWN(kulp)
{
	if (self->tmr >= 0)
		close(self->tmr);
}

static const char *const kulp_objs[] = { "pd", "mr", "cq", "qp", "ring" };
#define KULP_NOBJ (sizeof(kulp_objs) / sizeof(kulp_objs[0]))

static void kulp_counts(int *n)
{
	unsigned int i;

	for (i = 0; i < KULP_NOBJ; i++)
		n[i] = remu_obj_count(kulp_objs[i]);
}

/* the first object type whose count moved since @base, or "none" */
static const char *kulp_moved(const int *base)
{
	int now[KULP_NOBJ];
	unsigned int i;

	kulp_counts(now);
	for (i = 0; i < KULP_NOBJ; i++)
		if (now[i] != base[i])
			return kulp_objs[i];
	return "none";
}

#define RUN_ULP(scn)							\
	do {								\
		struct remu_tmr_ulp r = { .scenario = (scn) };		\
		int base[KULP_NOBJ];					\
									\
		if (self->tmr < 0)					\
			SKIP(return, "remu_test_mr.ko not loaded");	\
		kulp_counts(base);					\
		ASSERT_EQ(0, ioctl(self->tmr, REMU_TMR_ULP, &r));	\
		EXPECT_EQ(0, r.step)					\
			TH_LOG("scenario %d: check %u failed (line %u of "\
			       "remu_test_ulp.c), saw %d", (scn), r.step,\
			       r.line, r.err);				\
		EXPECT_STREQ("none", kulp_moved(base));		\
	} while (0)

/* REG_MR of a 4-page scatterlist; the peer WRITEs and READs through it */
TEST_F(kulp, reg_mr_write_read)
{
	RUN_ULP(REMU_TMR_ULP_REG_RW);
}

/* LOCAL_INV; the old rkey then gets IB_WC_REM_ACCESS_ERR, memory intact */
TEST_F(kulp, local_inv)
{
	RUN_ULP(REMU_TMR_ULP_LOCAL_INV);
}

/* SEND_WITH_INV: IB_WC_WITH_INVALIDATE + rkey reported, the MR is dead */
TEST_F(kulp, send_with_inv)
{
	RUN_ULP(REMU_TMR_ULP_SEND_INV);
}

/* invalidate, re-map, re-register with ib_inc_rkey'd keys, several times */
TEST_F(kulp, reregister)
{
	RUN_ULP(REMU_TMR_ULP_REREG);
}

/* REG_MR of a valid MR: IB_WC_MW_BIND_ERR, QP to ERR, the rest flushed */
TEST_F(kulp, reg_mr_of_valid_mr)
{
	RUN_ULP(REMU_TMR_ULP_REG_VALID);
}

/* LOCAL_INV of a wrong key: IB_WC_MW_BIND_ERR, the MR stays valid */
TEST_F(kulp, local_inv_wrong_key)
{
	RUN_ULP(REMU_TMR_ULP_INV_BAD_KEY);
}

/* a REMOTE_READ-only registration: READ works, WRITE gets an error */
TEST_F(kulp, access_rights)
{
	RUN_ULP(REMU_TMR_ULP_RIGHTS);
}

/* REMOTE_WRITE without LOCAL_WRITE is refused */
TEST_F(kulp, bad_access_flags)
{
	RUN_ULP(REMU_TMR_ULP_BAD_ACCESS);
}

/* no MR / a DMA MR: -EINVAL at post; an MR of another PD: MW_BIND_ERR */
TEST_F(kulp, other_pd_and_post_errors)
{
	RUN_ULP(REMU_TMR_ULP_OTHER_PD);
}

/*
 * IB_MR_TYPE_SG_GAPS: an MR over six pieces of any offset and length
 * (ib_map_mr_sg ignores page boundaries), REG_MR, the peer's WRITEs and
 * READs and A's SEND/receive through it, every byte of the buffer behind
 * it checked (pieces and gaps); mapped from an offset; past its end.
 */
TEST_F(kulp, sg_gaps_write_read)
{
	RUN_ULP(REMU_TMR_ULP_SG_GAPS);
}

/* SG_GAPS misuse: max_num_sg 0 or too big, more pieces than entries... */
TEST_F(kulp, sg_gaps_misuse)
{
	RUN_ULP(REMU_TMR_ULP_SG_GAPS_MISUSE);
}

TEST_HARNESS_MAIN
