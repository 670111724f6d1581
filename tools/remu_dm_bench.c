// SPDX-License-Identifier: GPL-2.0
/*
 * remu_dm_bench - latency of RDMA WRITE, FETCH_ADD and CMP_SWP into device
 * memory against host memory (perftest has no device memory option).
 *
 * One process opens both devices: the client QP on CLIENT (default remu0)
 * and the server QP on SERVER (default remu1), connected RC over the
 * IPv4-mapped RoCEv2 GIDs.  The server owns two targets in one PD: a DM
 * MR (ibv_alloc_dm + ibv_reg_dm_mr, zero based) and a host MR (page-aligned
 * malloc).  Each measurement is a post-and-poll round trip: one signaled
 * WR posted, the client CQ busy-polled until its completion (a WRITE
 * completes on the responder's ACK, an atomic on its response), timed with
 * CLOCK_MONOTONIC.  A run is ITERS round trips to one target and yields
 * their median; runs alternate DM and host so drift hits both alike; the
 * figure per target is the median of the run medians, and the ratio is
 * DM / host (below 1: DM is faster).
 *
 * Every run checks its data, so a figure is never of a broken transfer:
 * WRITE: each iteration writes its own pattern, and after the run the
 * target holds the last one byte for byte; FETCH_ADD: every old value is
 * the iteration number and the word ends at ITERS; CMP_SWP: iteration i
 * swaps i for i + 1, every old value is i and the word ends at ITERS.
 * Exits 1 on any error or mismatch, 0 otherwise; timings are never judged.
 *
 * Usage: remu_dm_bench [-c CLIENT] [-s SERVER] [-n ITERS] [-r RUNS]
 *                      [-S WRITE_BYTES]
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

#include "remu_lib.h"

#define GID_INDEX	1	/* the IPv4-mapped RoCEv2 GID */
#define TARGET_LEN	4096
#define MAX_WRITE	TARGET_LEN

struct target {
	const char *name;
	struct ibv_mr *mr;
	struct ibv_dm *dm;	/* NULL for host memory */
	uint8_t *host;
	uint64_t base;		/* remote address of byte 0: 0 for the DM MR
				 * (zero based), the address for host memory */
};

/* @dev with one RC QP (a remu_end of remu_verbs_lib.h): 0 or -1 */
static int end_open(struct remu_end *e, const char *dev)
{
	static const struct ibv_qp_cap cap = {
		.max_send_wr = 16, .max_recv_wr = 1,
		.max_send_sge = 1, .max_recv_sge = 1,
	};

	if (!remu_end_open(e, dev, GID_INDEX, 16, &cap))
		return 0;
	if (!e->ctx)
		fprintf(stderr, "cannot open %s\n", dev);
	return -1;
}

static int end_connect(struct remu_end *e, struct remu_end *peer)
{
	struct remu_conn_attr ra = REMU_RC_ATTR(1);

	ra.rd_atomic = 1;
	return remu_end_connect(e, peer, &ra, GID_INDEX);
}

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* post @wr signaled and busy-poll its completion: 0, or -1 */
static int round_trip(struct remu_end *c, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;
	struct ibv_wc wc;
	double t0 = now_us();
	int n;

	wr->send_flags = IBV_SEND_SIGNALED;
	if (ibv_post_send(c->qp, wr, &bad)) {
		perror("ibv_post_send");
		return -1;
	}
	while (!(n = ibv_poll_cq(c->cq, 1, &wc)))
		if (now_us() - t0 > 10e6) {
			fprintf(stderr, "no completion in 10 s\n");
			return -1;
		}
	if (n < 0 || wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "completion: %s\n",
			n < 0 ? "poll error" : ibv_wc_status_str(wc.status));
		return -1;
	}
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/*
 * The target's bytes [0, @len) into @buf; from device memory whole 4-byte
 * words (what ibv_memcpy_from_dm takes), so @buf holds @len rounded up.
 */
static int target_read(struct target *t, void *buf, size_t len)
{
	if (t->dm)
		return ibv_memcpy_from_dm(buf, t->dm, 0, (len + 3) & ~(size_t)3);
	memcpy(buf, t->host, len);
	return 0;
}

static int target_write(struct target *t, const void *buf, size_t len)
{
	if (t->dm)
		return ibv_memcpy_to_dm(t->dm, 0, buf, len);
	memcpy(t->host, buf, len);
	return 0;
}

enum op { OP_WRITE, OP_FETCH_ADD, OP_CMP_SWP };
static const char *const op_name[] = { "write", "fetch_add", "cmp_swp" };

struct bench {
	struct remu_end c, s;
	struct ibv_mr *lmr;	/* the client's local buffer */
	uint8_t *local;
	size_t wsize;
	int iters;
	double *lat;
};

/*
 * One run: @iters round trips of @op into @t; its median latency in
 * *@med.  Checks the data (see the file comment).  0, or -1.
 */
static int run(struct bench *b, enum op op, struct target *t, double *med)
{
	struct ibv_sge sge = { (uintptr_t)b->local, 8, b->lmr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1 };
	uint8_t want[MAX_WRITE], got[MAX_WRITE];
	uint64_t zero = 0, v;
	size_t j;
	int i;

	if (target_write(t, &zero, 8))
		return -1;
	if (op == OP_WRITE) {
		wr.opcode = IBV_WR_RDMA_WRITE;
		sge.length = b->wsize;
		wr.wr.rdma.remote_addr = t->base;
		wr.wr.rdma.rkey = t->mr->rkey;
	} else {
		wr.opcode = op == OP_FETCH_ADD ? IBV_WR_ATOMIC_FETCH_AND_ADD :
						 IBV_WR_ATOMIC_CMP_AND_SWP;
		wr.wr.atomic.remote_addr = t->base;
		wr.wr.atomic.rkey = t->mr->rkey;
	}
	for (i = 0; i < b->iters; i++) {
		double t0;

		if (op == OP_WRITE) {
			for (j = 0; j < b->wsize; j++)
				b->local[j] = (uint8_t)(i * 31 + j * 7 + 1);
		} else {
			*(uint64_t *)b->local = UINT64_MAX;
			wr.wr.atomic.compare_add = op == OP_FETCH_ADD ? 1 : i;
			wr.wr.atomic.swap = i + 1;
		}
		t0 = now_us();
		if (round_trip(&b->c, &wr))
			return -1;
		b->lat[i] = now_us() - t0;
		if (op != OP_WRITE && *(uint64_t *)b->local != (uint64_t)i) {
			fprintf(stderr, "%s on %s: iteration %d got old value %llu\n",
				op_name[op], t->name, i,
				(unsigned long long)*(uint64_t *)b->local);
			return -1;
		}
	}
	if (op == OP_WRITE) {
		memcpy(want, b->local, b->wsize);
		if (target_read(t, got, b->wsize) ||
		    memcmp(want, got, b->wsize)) {
			fprintf(stderr, "write to %s: the target does not hold the last write\n",
				t->name);
			return -1;
		}
	} else if (target_read(t, &v, 8) || v != (uint64_t)b->iters) {
		fprintf(stderr, "%s on %s: the word is %llu after %d operations\n",
			op_name[op], t->name, (unsigned long long)v, b->iters);
		return -1;
	}
	*med = median(b->lat, b->iters);
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: remu_dm_bench [-c CLIENT] [-s SERVER] [-n ITERS] [-r RUNS] [-S WRITE_BYTES]\n");
}

int main(int argc, char **argv)
{
	const char *cdev = "remu0", *sdev = "remu1";
	struct ibv_alloc_dm_attr da = { .length = TARGET_LEN };
	struct target tg[2] = { { .name = "dm" }, { .name = "host" } };
	int runs = 5, opt, r, k, o, status = 1;
	struct bench b = { .wsize = 8, .iters = 1000 };
	double *runmed[3][2] = {};

	while ((opt = getopt(argc, argv, "c:s:n:r:S:h")) != -1) {
		switch (opt) {
		case 'c': cdev = optarg; break;
		case 's': sdev = optarg; break;
		case 'n': b.iters = atoi(optarg); break;
		case 'r': runs = atoi(optarg); break;
		case 'S': b.wsize = strtoul(optarg, NULL, 0); break;
		default: usage(); return 2;
		}
	}
	if (b.iters < 1 || runs < 1 || b.wsize < 1 || b.wsize > MAX_WRITE ||
	    optind != argc) {
		usage();
		return 2;
	}

	if (end_open(&b.c, cdev) || end_open(&b.s, sdev) ||
	    end_connect(&b.c, &b.s) || end_connect(&b.s, &b.c)) {
		fprintf(stderr, "cannot set up the connection %s -> %s: %s\n",
			cdev, sdev, strerror(errno));
		goto out;
	}
	b.local = aligned_alloc(4096, MAX_WRITE);
	tg[1].host = aligned_alloc(4096, TARGET_LEN);
	b.lat = calloc(b.iters, sizeof(*b.lat));
	if (!b.local || !tg[1].host || !b.lat)
		goto out;
	memset(tg[1].host, 0, TARGET_LEN);
	tg[1].base = (uintptr_t)tg[1].host;
	b.lmr = ibv_reg_mr(b.c.pd, b.local, MAX_WRITE, IBV_ACCESS_LOCAL_WRITE);
	tg[0].dm = ibv_alloc_dm(b.s.ctx, &da);
	if (!b.lmr || !tg[0].dm) {
		fprintf(stderr, "local MR or DM on %s: %s\n", sdev,
			strerror(errno));
		goto out;
	}
	tg[0].mr = ibv_reg_dm_mr(b.s.pd, tg[0].dm, 0, TARGET_LEN,
				 IBV_ACCESS_LOCAL_WRITE |
				 IBV_ACCESS_REMOTE_WRITE |
				 IBV_ACCESS_REMOTE_ATOMIC |
				 IBV_ACCESS_ZERO_BASED);
	tg[1].mr = ibv_reg_mr(b.s.pd, tg[1].host, TARGET_LEN,
			      IBV_ACCESS_LOCAL_WRITE |
			      IBV_ACCESS_REMOTE_WRITE |
			      IBV_ACCESS_REMOTE_ATOMIC);
	if (!tg[0].mr || !tg[1].mr) {
		fprintf(stderr, "target MRs on %s: %s\n", sdev, strerror(errno));
		goto out;
	}
	for (o = 0; o < 3; o++)
		for (k = 0; k < 2; k++) {
			runmed[o][k] = calloc(runs, sizeof(double));
			if (!runmed[o][k])
				goto out;
		}

	printf("# remu_dm_bench: client %s -> server %s, %d runs x %d round trips, write %zu bytes\n",
	       cdev, sdev, runs, b.iters, b.wsize);
	/* a warm-up run of each, not counted */
	for (o = 0; o < 3; o++)
		for (k = 0; k < 2; k++) {
			double m;
			int n = b.iters;

			b.iters = n < 100 ? n : 100;
			if (run(&b, o, &tg[k], &m))
				goto out;
			b.iters = n;
		}
	for (r = 0; r < runs; r++)
		for (o = 0; o < 3; o++)
			for (k = 0; k < 2; k++)
				if (run(&b, o, &tg[(k + r) % 2],
					&runmed[o][(k + r) % 2][r]))
					goto out;

	printf("%-10s %6s %12s %12s %9s   %s\n", "op", "bytes", "dm usec",
	       "host usec", "dm/host", "run medians dm | host (usec)");
	for (o = 0; o < 3; o++) {
		double m[2];
		char line[1024];
		int len = 0;

		for (k = 0; k < 2; k++) {
			for (r = 0; r < runs; r++)
				len += snprintf(line + len, sizeof(line) - len,
						"%s%.1f", r ? " " : "",
						runmed[o][k][r]);
			if (!k)
				len += snprintf(line + len, sizeof(line) - len,
						" | ");
			m[k] = median(runmed[o][k], runs);
		}
		printf("%-10s %6zu %12.2f %12.2f %9.3f   %s\n", op_name[o],
		       o == OP_WRITE ? b.wsize : (size_t)8, m[0], m[1],
		       m[0] / m[1], line);
	}
	printf("# every run's data checked: ok\n");
	status = 0;
out:
	for (o = 0; o < 3; o++)
		for (k = 0; k < 2; k++)
			free(runmed[o][k]);
	for (k = 0; k < 2; k++)
		if (tg[k].mr)
			ibv_dereg_mr(tg[k].mr);
	if (tg[0].dm)
		ibv_free_dm(tg[0].dm);
	if (b.lmr)
		ibv_dereg_mr(b.lmr);
	free(b.local);
	free(tg[1].host);
	free(b.lat);
	remu_end_close(&b.c);
	remu_end_close(&b.s);
	return status;
}
