// SPDX-License-Identifier: GPL-2.0
/*
 * remu_odp_bench - what on-demand paging costs: registration time of a
 * large MR pinned against ODP, the device page fault cost per 4 KiB page
 * seen by a remote WRITE, and steady-state WRITE bandwidth into an ODP MR
 * against a pinned one.
 *
 * One process opens both devices: the client QP on CLIENT (default remu0)
 * and the server QP on SERVER (default remu1), connected RC over the
 * IPv4-mapped RoCEv2 GIDs (as remu_dm_bench).  Every target MR is on the
 * server, in an anonymous mapping made for it; the device counters read
 * are the server's port counters (sysfs hw_counters).  Three parts, each
 * RUNS times; every figure is the median over the runs:
 *
 * reg    ibv_reg_mr and ibv_dereg_mr time of a REG_MIB mapping (default
 *        1024): "pinned-cold" (untouched, so registration allocates and
 *        pins every page), "pinned-warm" (every page written first, not
 *        timed) and "odp" (IBV_ACCESS_ON_DEMAND, untouched).  The order
 *        rotates every run.  Checked: the ODP registration faults nothing
 *        (num_page_faults does not move).
 *
 * fault  FAULT_PAGES pages (default 4096) mapped with MADV_NOHUGEPAGE and
 *        registered ON_DEMAND, untouched.  "cold": WRITEs of WSIZE bytes
 *        (4096, then 65536) cover the range, each one post-and-poll, so
 *        every WRITE takes the device faults of its pages; "warm": the
 *        same WRITEs again, every page now mapped.  The fault cost per
 *        page is (cold - warm) / FAULT_PAGES.  Checked every run: the cold
 *        pass raised num_page_fault_pages by exactly FAULT_PAGES, the warm
 *        pass faulted nothing, and after each pass the range holds that
 *        pass's pattern byte for byte.
 *
 * bw     streaming 65536-byte WRITEs, DEPTH (16) in flight, LAPS laps of a
 *        BW_MIB range (default 16 MiB, 8 laps) into a pinned MR and into an
 *        ODP MR, each warmed by one untimed lap; the order flips every run.
 *        MB/s is MiB/s; the ratio is odp / pinned.  Checked every run: the
 *        target holds the run's pattern byte for byte; the faults of the
 *        timed laps are printed (steady state: 0).
 *
 * Exits 1 on any error, mismatch or failed check, 0 otherwise; timings
 * are never judged.
 *
 * Usage: remu_odp_bench [-c CLIENT] [-s SERVER] [-r RUNS] [-g REG_MIB]
 *                       [-p FAULT_PAGES] [-b BW_MIB] [-l LAPS]
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "remu_lib.h"

#define GID_INDEX	1	/* the IPv4-mapped RoCEv2 GID */
#define PAGE		4096UL
#define MIB		(1024UL * 1024)
#define BW_WSIZE	65536UL
#define DEPTH		16
#define REMOTE_ACCESS	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
			 IBV_ACCESS_REMOTE_READ)

static const char *sdev = "remu1";

/* @dev with one RC QP (a remu_end of remu_verbs_lib.h): 0 or -1 */
static int end_open(struct remu_end *e, const char *dev)
{
	static const struct ibv_qp_cap cap = {
		.max_send_wr = DEPTH, .max_recv_wr = 1,
		.max_send_sge = 1, .max_recv_sge = 1,
	};

	if (!remu_end_open(e, dev, GID_INDEX, 2 * DEPTH, &cap))
		return 0;
	if (!e->ctx)
		fprintf(stderr, "cannot open %s\n", dev);
	return -1;
}

static int end_connect(struct remu_end *e, struct remu_end *peer)
{
	struct remu_conn_attr ra = REMU_RC_ATTR(1);

	ra.access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	ra.rd_atomic = 1;
	return remu_end_connect(e, peer, &ra, GID_INDEX);
}

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
	double s[n];

	memcpy(s, v, sizeof(s));
	qsort(s, n, sizeof(*s), cmp_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* a server port counter from sysfs, or -1 */
static long long counter(const char *name)
{
	return remu_hw_counter(sdev, name, false);
}

struct faults {
	long long faults, pages;
};

/*
 * The core caches hw counters for their lifespan (10 ms by default): wait
 * that out so that a read never returns a value older than the last event.
 */
static void faults_read(struct faults *f)
{
	usleep(REMU_HW_STATS_SETTLE_US);
	f->faults = counter("num_page_faults");
	f->pages = counter("num_page_fault_pages");
}

/* @b minus @a, into @b */
static void faults_delta(const struct faults *a, struct faults *b)
{
	b->faults -= a->faults;
	b->pages -= a->pages;
}

static void *map_anon(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		fprintf(stderr, "mmap of %zu bytes: %s\n", len, strerror(errno));
		return NULL;
	}
	return p;
}

/* fill @len bytes at @p with the pattern of @seed (differs at every byte
 * offset of a page and from page to page) */
static void pattern(uint8_t *p, size_t len, unsigned int seed)
{
	uint64_t *w = (uint64_t *)p;
	size_t i;

	for (i = 0; i < len / 8; i++)
		w[i] = (i * 0x9e3779b97f4a7c15ULL) ^ ((uint64_t)seed << 40) ^
		       (seed * 0x5bd1e995ULL);
}

/* wait for @n completions on @e's CQ: 0, or -1 */
static int reap(struct remu_end *e, int n)
{
	struct ibv_wc wc[DEPTH];
	double t0 = now_us();
	int got, i;

	while (n > 0) {
		got = ibv_poll_cq(e->cq, n < DEPTH ? n : DEPTH, wc);
		if (got < 0) {
			fprintf(stderr, "ibv_poll_cq failed\n");
			return -1;
		}
		for (i = 0; i < got; i++)
			if (wc[i].status != IBV_WC_SUCCESS) {
				fprintf(stderr, "completion: %s\n",
					ibv_wc_status_str(wc[i].status));
				return -1;
			}
		n -= got;
		if (got)
			t0 = now_us();
		else if (now_us() - t0 > 30e6) {
			fprintf(stderr, "no completion in 30 s\n");
			return -1;
		}
	}
	return 0;
}

struct bench {
	struct remu_end c, s;
	uint8_t *src;		/* the client's source buffer */
	struct ibv_mr *smr;
	size_t srclen;
	int runs;
};

/*
 * WRITE the first @len bytes of the source to @mr (at @dst) in WRITEs of
 * @wsize, @depth of them in flight, @laps times; the time in *@us.
 */
static int stream(struct bench *b, struct ibv_mr *mr, uint8_t *dst,
		  size_t len, size_t wsize, int depth, int laps, double *us)
{
	struct ibv_sge sge = { 0, wsize, b->smr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad;
	size_t total = len / wsize * laps, posted = 0, done = 0;
	double t0 = now_us();

	wr.wr.rdma.rkey = mr->rkey;
	while (done < total) {
		while (posted < total && posted - done < (size_t)depth) {
			size_t off = posted % (len / wsize) * wsize;

			sge.addr = (uintptr_t)b->src + off;
			wr.wr.rdma.remote_addr = (uintptr_t)dst + off;
			if (ibv_post_send(b->c.qp, &wr, &bad)) {
				perror("ibv_post_send");
				return -1;
			}
			posted++;
		}
		if (reap(&b->c, 1))
			return -1;
		done++;
	}
	*us = now_us() - t0;
	return 0;
}

static int check(const char *what, const uint8_t *dst, const uint8_t *src,
		 size_t len)
{
	size_t i;

	if (!memcmp(dst, src, len))
		return 0;
	for (i = 0; i < len && dst[i] == src[i]; i++)
		;
	fprintf(stderr, "%s: the target differs from the source at byte %zu (page %zu)\n",
		what, i, i / PAGE);
	return -1;
}

/* ---- reg ---------------------------------------------------------------- */

enum { REG_PINNED_COLD, REG_PINNED_WARM, REG_ODP, REG_KINDS };
static const char *const reg_name[] = { "pinned-cold", "pinned-warm", "odp" };

static int reg_one(struct bench *b, int kind, size_t len, double *reg,
		   double *dereg)
{
	int access = REMOTE_ACCESS | (kind == REG_ODP ? IBV_ACCESS_ON_DEMAND : 0);
	struct faults f0, f1;
	struct ibv_mr *mr;
	uint8_t *p;
	double t0, t1;
	int ret = -1;

	p = map_anon(len);
	if (!p)
		return -1;
	if (kind == REG_PINNED_WARM)
		memset(p, 0x5a, len);
	faults_read(&f0);
	t0 = now_us();
	mr = ibv_reg_mr(b->s.pd, p, len, access);
	t1 = now_us();
	if (!mr) {
		fprintf(stderr, "ibv_reg_mr %s of %zu MiB: %s\n",
			reg_name[kind], len / MIB, strerror(errno));
		goto out;
	}
	faults_read(&f1);
	*reg = t1 - t0;
	t0 = now_us();
	if (ibv_dereg_mr(mr)) {
		fprintf(stderr, "ibv_dereg_mr %s: %s\n", reg_name[kind],
			strerror(errno));
		goto out;
	}
	*dereg = now_us() - t0;
	faults_delta(&f0, &f1);
	if (kind == REG_ODP && f1.faults) {
		fprintf(stderr, "ODP registration took %lld device faults\n",
			f1.faults);
		goto out;
	}
	ret = 0;
out:
	munmap(p, len);
	return ret;
}

static int part_reg(struct bench *b, size_t len)
{
	double reg[REG_KINDS][b->runs], dereg[REG_KINDS][b->runs];
	int r, k, kind;

	/* a warm-up of each, not counted (first-use costs in the kernel) */
	for (kind = 0; kind < REG_KINDS; kind++)
		if (reg_one(b, kind, 64 * MIB, &reg[kind][0], &dereg[kind][0]))
			return -1;
	for (r = 0; r < b->runs; r++)
		for (k = 0; k < REG_KINDS; k++) {
			kind = (k + r) % REG_KINDS;
			if (reg_one(b, kind, len, &reg[kind][r], &dereg[kind][r]))
				return -1;
		}
	printf("\n## reg: ibv_reg_mr / ibv_dereg_mr of a %zu MiB anonymous mapping (%d runs)\n",
	       len / MIB, b->runs);
	printf("%-12s %12s %12s %10s   %s\n", "kind", "reg ms", "dereg ms",
	       "reg/odp", "run reg ms");
	for (kind = 0; kind < REG_KINDS; kind++) {
		char line[512];
		int n = 0;

		for (r = 0; r < b->runs; r++)
			n += snprintf(line + n, sizeof(line) - n, "%s%.1f",
				      r ? " " : "", reg[kind][r] / 1e3);
		printf("%-12s %12.2f %12.2f %10.1f   %s\n", reg_name[kind],
		       median(reg[kind], b->runs) / 1e3,
		       median(dereg[kind], b->runs) / 1e3,
		       median(reg[kind], b->runs) / median(reg[REG_ODP], b->runs),
		       line);
	}
	return 0;
}

/* ---- fault -------------------------------------------------------------- */

static const size_t fault_wsize[] = { PAGE, BW_WSIZE };
#define FAULT_SIZES	(sizeof(fault_wsize) / sizeof(fault_wsize[0]))

static int fault_one(struct bench *b, size_t pages, size_t wsize,
		     unsigned int seed, double *cold, double *warm,
		     long long *nfaults)
{
	size_t len = pages * PAGE;
	struct faults f0, f1, f2;
	struct ibv_mr *mr = NULL;
	char what[64];
	uint8_t *p;
	int ret = -1;

	p = map_anon(len);
	if (!p)
		return -1;
	if (madvise(p, len, MADV_NOHUGEPAGE)) {
		perror("madvise(MADV_NOHUGEPAGE)");
		goto out;
	}
	mr = ibv_reg_mr(b->s.pd, p, len, REMOTE_ACCESS | IBV_ACCESS_ON_DEMAND);
	if (!mr) {
		fprintf(stderr, "ODP ibv_reg_mr: %s\n", strerror(errno));
		goto out;
	}
	pattern(b->src, len, seed);
	faults_read(&f0);
	if (stream(b, mr, p, len, wsize, 1, 1, cold))
		goto out;
	faults_read(&f1);
	snprintf(what, sizeof(what), "fault %zu-byte WRITEs, cold pass", wsize);
	if (check(what, p, b->src, len))
		goto out;
	pattern(b->src, len, seed + 1);
	if (stream(b, mr, p, len, wsize, 1, 1, warm))
		goto out;
	faults_read(&f2);
	snprintf(what, sizeof(what), "fault %zu-byte WRITEs, warm pass", wsize);
	if (check(what, p, b->src, len))
		goto out;
	faults_delta(&f1, &f2);
	faults_delta(&f0, &f1);
	if (f1.pages != (long long)pages || f2.faults || f2.pages) {
		fprintf(stderr, "fault %zu-byte WRITEs: the cold pass faulted %lld pages in %lld faults (want %zu), the warm pass %lld pages in %lld faults (want 0)\n",
			wsize, f1.pages, f1.faults, pages, f2.pages, f2.faults);
		goto out;
	}
	*nfaults = f1.faults;
	ret = 0;
out:
	if (mr)
		ibv_dereg_mr(mr);
	munmap(p, len);
	return ret;
}

static int part_fault(struct bench *b, size_t pages)
{
	double cold[FAULT_SIZES][b->runs], warm[FAULT_SIZES][b->runs];
	long long nfaults[FAULT_SIZES] = {};
	double cost[b->runs];
	unsigned int k;
	int r;

	/* warm-up, not counted */
	if (fault_one(b, pages < 256 ? pages : 256, PAGE, 1000, &cold[0][0],
		      &warm[0][0], &nfaults[0]))
		return -1;
	for (r = 0; r < b->runs; r++)
		for (k = 0; k < FAULT_SIZES; k++)
			if (fault_one(b, pages, fault_wsize[k], 2 * r + 1,
				      &cold[k][r], &warm[k][r], &nfaults[k]))
				return -1;
	printf("\n## fault: remote WRITEs into %zu untouched pages of an ODP MR (cold) and again (warm), post-and-poll (%d runs)\n",
	       pages, b->runs);
	printf("%8s %8s %8s %12s %12s %14s   %s\n", "wsize", "WRs", "faults",
	       "cold us/WR", "warm us/WR", "fault us/page",
	       "run fault us/page");
	for (k = 0; k < FAULT_SIZES; k++) {
		size_t n = pages * PAGE / fault_wsize[k];
		char line[512];
		int len = 0;

		for (r = 0; r < b->runs; r++) {
			cost[r] = (cold[k][r] - warm[k][r]) / pages;
			len += snprintf(line + len, sizeof(line) - len, "%s%.2f",
					r ? " " : "", cost[r]);
		}
		printf("%8zu %8zu %8lld %12.2f %12.2f %14.2f   %s\n",
		       fault_wsize[k], n, nfaults[k], median(cold[k], b->runs) / n,
		       median(warm[k], b->runs) / n, median(cost, b->runs),
		       line);
	}
	printf("# faults: num_page_faults of the last cold pass; checked every run: the cold\n"
	       "# pass faulted exactly %zu pages (num_page_fault_pages), the warm pass none\n",
	       pages);
	return 0;
}

/* ---- bw ----------------------------------------------------------------- */

static int part_bw(struct bench *b, size_t len, int laps)
{
	double mbs[2][b->runs], us;
	long long tfaults[2] = {};
	struct ibv_mr *mr[2] = {};
	uint8_t *p[2] = {};
	struct faults f0, f1;
	int r, k, kind, ret = -1;
	char what[64];

	for (kind = 0; kind < 2; kind++) {
		p[kind] = map_anon(len);
		if (!p[kind])
			goto out;
		mr[kind] = ibv_reg_mr(b->s.pd, p[kind], len, REMOTE_ACCESS |
				      (kind ? IBV_ACCESS_ON_DEMAND : 0));
		if (!mr[kind]) {
			fprintf(stderr, "bw ibv_reg_mr: %s\n", strerror(errno));
			goto out;
		}
		/* the untimed warm-up lap: the ODP MR takes its faults */
		if (stream(b, mr[kind], p[kind], len, BW_WSIZE, DEPTH, 1, &us))
			goto out;
	}
	for (r = 0; r < b->runs; r++)
		for (k = 0; k < 2; k++) {
			kind = (k + r) % 2;
			pattern(b->src, len, 100 + 2 * r + kind);
			faults_read(&f0);
			if (stream(b, mr[kind], p[kind], len, BW_WSIZE, DEPTH,
				   laps, &us))
				goto out;
			faults_read(&f1);
			tfaults[kind] += f1.faults - f0.faults;
			mbs[kind][r] = (double)len * laps / MIB / (us / 1e6);
			snprintf(what, sizeof(what), "bw %s run %d",
				 kind ? "odp" : "pinned", r);
			if (check(what, p[kind], b->src, len))
				goto out;
		}
	printf("\n## bw: streaming %lu-byte WRITEs, %d in flight, %d laps of %zu MiB (%d runs)\n",
	       BW_WSIZE, DEPTH, laps, len / MIB, b->runs);
	printf("%-8s %10s %14s   %s\n", "target", "MB/s", "timed faults",
	       "run MB/s");
	for (kind = 0; kind < 2; kind++) {
		char line[512];
		int n = 0;

		for (r = 0; r < b->runs; r++)
			n += snprintf(line + n, sizeof(line) - n, "%s%.1f",
				      r ? " " : "", mbs[kind][r]);
		printf("%-8s %10.1f %14lld   %s\n", kind ? "odp" : "pinned",
		       median(mbs[kind], b->runs), tfaults[kind], line);
	}
	printf("odp/pinned %.3f\n",
	       median(mbs[1], b->runs) / median(mbs[0], b->runs));
	ret = 0;
out:
	for (kind = 0; kind < 2; kind++) {
		if (mr[kind])
			ibv_dereg_mr(mr[kind]);
		if (p[kind])
			munmap(p[kind], len);
	}
	return ret;
}

static void usage(void)
{
	fprintf(stderr, "usage: remu_odp_bench [-c CLIENT] [-s SERVER] [-r RUNS] [-g REG_MIB] [-p FAULT_PAGES] [-b BW_MIB] [-l LAPS]\n");
}

int main(int argc, char **argv)
{
	const char *cdev = "remu0";
	long reg_mib = 1024, pages = 4096, bw_mib = 16, laps = 8;
	struct bench b = { .runs = 5 };
	int opt, status = 1;
	char thp[128] = "?";
	FILE *f;

	while ((opt = getopt(argc, argv, "c:s:r:g:p:b:l:h")) != -1) {
		switch (opt) {
		case 'c': cdev = optarg; break;
		case 's': sdev = optarg; break;
		case 'r': b.runs = atoi(optarg); break;
		case 'g': reg_mib = atol(optarg); break;
		case 'p': pages = atol(optarg); break;
		case 'b': bw_mib = atol(optarg); break;
		case 'l': laps = atol(optarg); break;
		default: usage(); return 2;
		}
	}
	if (b.runs < 1 || b.runs > 50 || reg_mib < 1 || pages < 16 ||
	    pages % 16 || bw_mib < 1 || laps < 1 || optind != argc) {
		usage();
		return 2;
	}

	if (end_open(&b.c, cdev) || end_open(&b.s, sdev) ||
	    end_connect(&b.c, &b.s) || end_connect(&b.s, &b.c)) {
		fprintf(stderr, "cannot set up the connection %s -> %s: %s\n",
			cdev, sdev, strerror(errno));
		goto out;
	}
	if (counter("num_page_faults") < 0 ||
	    counter("num_page_fault_pages") < 0) {
		fprintf(stderr, "no ODP port counters for %s in sysfs\n", sdev);
		goto out;
	}
	b.srclen = (size_t)pages * PAGE;
	if (b.srclen < (size_t)bw_mib * MIB)
		b.srclen = (size_t)bw_mib * MIB;
	b.src = map_anon(b.srclen);
	if (!b.src)
		goto out;
	memset(b.src, 0, b.srclen);
	b.smr = ibv_reg_mr(b.c.pd, b.src, b.srclen, IBV_ACCESS_LOCAL_WRITE);
	if (!b.smr) {
		fprintf(stderr, "source MR on %s: %s\n", cdev, strerror(errno));
		goto out;
	}
	f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
	if (f) {
		if (!fgets(thp, sizeof(thp), f))
			strcpy(thp, "?");
		thp[strcspn(thp, "\n")] = 0;
		fclose(f);
	}
	printf("# remu_odp_bench: client %s -> server %s, %d runs; THP: %s\n",
	       cdev, sdev, b.runs, thp);
	fflush(stdout);

	if (part_reg(&b, (size_t)reg_mib * MIB))
		goto out;
	fflush(stdout);
	if (part_fault(&b, pages))
		goto out;
	fflush(stdout);
	if (part_bw(&b, (size_t)bw_mib * MIB, laps))
		goto out;
	printf("# every run's data checked: ok\n");
	status = 0;
out:
	if (b.smr)
		ibv_dereg_mr(b.smr);
	if (b.src)
		munmap(b.src, b.srclen);
	remu_end_close(&b.c);
	remu_end_close(&b.s);
	return status;
}
