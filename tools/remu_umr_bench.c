// SPDX-License-Identifier: GPL-2.0
/*
 * remu_umr_bench - scatter through an indirect memory key against
 * scattering with one WRITE per MR: for N pieces of S bytes on the
 * server, the round trip of one RDMA WRITE of N * S bytes into an
 * indirect key (remudv_wr_mr_list over the N pieces) against that of N
 * RDMA WRITEs of S bytes into N MRs (one MR per piece), posted as one
 * chain whose last WR is signaled.
 *
 * One process opens both devices: the client QP on CLIENT (default remu0)
 * and the server QP on SERVER (default remu1, an ibv_qp_ex: the UMR is
 * posted on it), connected RC over the IPv4-mapped RoCEv2 GIDs.  Piece i
 * is PIECE_OFF bytes into the i-th 64 KiB block of the server's buffer
 * (unaligned, one MR per block).  A run is ITERS round trips of one kind
 * and yields their median (CLOCK_MONOTONIC, post to completion); runs
 * alternate the kinds; the figure is the median of the run medians, and
 * the ratio key / MRs (below 1: the key is faster).
 *
 * Every run checks its data: each iteration writes its own pattern, and
 * after the run every piece holds its part of the last one byte for byte
 * (and the bytes around the pieces are untouched).  Exits 1 on any error
 * or mismatch, 0 otherwise; timings are never judged.
 *
 * Usage: remu_umr_bench [-c CLIENT] [-s SERVER] [-n ITERS] [-r RUNS]
 *                       [-S PIECE_BYTES] [-N PIECES[,PIECES...]]
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "remu_lib.h"
#include "remudv.h"

#define GID_INDEX	1	/* the IPv4-mapped RoCEv2 GID */
#define MAX_PIECES	16	/* entries of an indirect key */
#define BLOCK		(64 << 10)
#define PIECE_OFF	100
#define MAX_PIECE	(BLOCK - 2 * PIECE_OFF)
#define GUARD		0x5a
#define ACCESS		(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)

struct bench {
	struct remu_end c, s;
	struct ibv_mr *lmr, *smr[MAX_PIECES];
	struct remudv_mkey *mk;
	uint8_t *local, *sbuf;
	uint32_t piece;
	int iters;
	double *lat;
};

enum kind { K_MKEY, K_MRS };
static const char *const kind_name[] = { "mkey", "mrs" };

static int end_open(struct remu_end *e, const char *dev, bool server)
{
	static const struct ibv_qp_cap cap = {
		.max_send_wr = 2 * MAX_PIECES, .max_recv_wr = 1,
		.max_send_sge = 1, .max_recv_sge = 1,
		.max_inline_data = 256,	/* 16 list entries of a UMR */
	};

	e->ctx = remu_open_port(dev, GID_INDEX, &e->gid, &e->mtu);
	e->pd = e->ctx ? ibv_alloc_pd(e->ctx) : NULL;
	e->cq = e->pd ? remu_create_cq(e->ctx, 4 * MAX_PIECES) : NULL;
	if (e->cq)
		e->qp = server ? remu_create_qp_ex(e->pd, e->cq, IBV_QPT_RC,
						   &cap) :
				 remu_create_qp(e->pd, e->cq, IBV_QPT_RC, &cap);
	if (e->qp)
		return 0;
	fprintf(stderr, "cannot open %s: %s\n", dev, strerror(errno));
	return -1;
}

static int end_connect(struct remu_end *e, struct remu_end *peer)
{
	struct remu_conn_attr ra = REMU_RC_ATTR(1);

	return remu_end_connect(e, peer, &ra, GID_INDEX);
}

static uint64_t piece_addr(struct bench *b, int i)
{
	return (uintptr_t)b->sbuf + (uint64_t)i * BLOCK + PIECE_OFF;
}

/* the server's key over pieces 0..@n-1, configured by a UMR: 0 or -1 */
static int mkey_setup(struct bench *b, int n)
{
	struct ibv_qp_ex *qpx = ibv_qp_to_qp_ex(b->s.qp);
	struct remudv_qp_ex *dv = remudv_qp_ex_from_ibv_qp_ex(qpx);
	struct remudv_mkey_init_attr ia = {
		.pd = b->s.pd, .max_entries = n,
		.create_flags = REMUDV_MKEY_INIT_ATTR_FLAGS_INDIRECT,
	};
	struct ibv_sge sge[MAX_PIECES];
	struct ibv_wc wc;
	int i;

	if (b->mk && remudv_destroy_mkey(b->mk))
		return -1;
	b->mk = dv ? remudv_create_mkey(&ia) : NULL;
	if (!b->mk) {
		fprintf(stderr, "remudv_create_mkey: %s\n", strerror(errno));
		return -1;
	}
	for (i = 0; i < n; i++)
		sge[i] = (struct ibv_sge){ piece_addr(b, i), b->piece,
					   b->smr[i]->lkey };
	ibv_wr_start(qpx);
	qpx->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	remudv_wr_mr_list(dv, b->mk, ACCESS, n, sge);
	if (ibv_wr_complete(qpx) ||
	    remu_poll_one(b->s.cq, &wc, 10) != IBV_WC_SUCCESS) {
		fprintf(stderr, "UMR of %d pieces failed\n", n);
		return -1;
	}
	return 0;
}

/*
 * One run: @iters round trips of @k with @n pieces; the median latency
 * in *@med (usec).  Checks the data (see the file comment).  0, or -1.
 */
static int run(struct bench *b, enum kind k, int n, double *med)
{
	struct ibv_send_wr wr[MAX_PIECES], *bad;
	struct ibv_sge sge[MAX_PIECES];
	uint32_t total = n * b->piece, j;
	struct ibv_wc wc;
	int i, w, nwr = k == K_MKEY ? 1 : n;

	for (w = 0; w < nwr; w++) {
		uint32_t len = k == K_MKEY ? total : b->piece;

		sge[w] = (struct ibv_sge){ (uintptr_t)b->local + w * b->piece,
					   len, b->lmr->lkey };
		wr[w] = (struct ibv_send_wr){
			.wr_id = w, .sg_list = &sge[w], .num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE,
			.send_flags = w == nwr - 1 ? IBV_SEND_SIGNALED : 0,
			.next = w < nwr - 1 ? &wr[w + 1] : NULL };
		wr[w].wr.rdma.remote_addr = k == K_MKEY ? 0 : piece_addr(b, w);
		wr[w].wr.rdma.rkey = k == K_MKEY ? b->mk->rkey :
						   b->smr[w]->rkey;
	}
	for (i = 0; i < b->iters; i++) {
		double t0;

		for (j = 0; j < total; j++)
			b->local[j] = (uint8_t)(i * 31 + j * 7 + k + 1);
		t0 = remu_now();
		if (ibv_post_send(b->c.qp, wr, &bad)) {
			perror("ibv_post_send");
			return -1;
		}
		if (remu_poll_one(b->c.cq, &wc, 10) != IBV_WC_SUCCESS ||
		    wc.wr_id != (uint64_t)nwr - 1) {
			fprintf(stderr, "%s, %d pieces: completion %s\n",
				kind_name[k], n,
				ibv_wc_status_str(wc.status));
			return -1;
		}
		b->lat[i] = (remu_now() - t0) * 1e6;
	}
	for (w = 0; w < n; w++) {
		uint8_t *p = (uint8_t *)(uintptr_t)piece_addr(b, w);

		if (memcmp(p, b->local + w * b->piece, b->piece) ||
		    p[-1] != GUARD || p[b->piece] != GUARD) {
			fprintf(stderr, "%s, %d pieces: piece %d does not hold the last write\n",
				kind_name[k], n, w);
			return -1;
		}
	}
	*med = remu_median(b->lat, b->iters);
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: remu_umr_bench [-c CLIENT] [-s SERVER] [-n ITERS] [-r RUNS] [-S PIECE_BYTES] [-N PIECES[,PIECES...]]\n");
}

int main(int argc, char **argv)
{
	const char *cdev = "remu0", *sdev = "remu1", *nlist = "1,4,16";
	int runs = 5, opt, r, k, i, status = 1, ns[MAX_PIECES], nn = 0;
	struct bench b = { .piece = 1024, .iters = 500 };
	double *runmed[2] = {};
	char *end, *p;

	while ((opt = getopt(argc, argv, "c:s:n:r:S:N:h")) != -1) {
		switch (opt) {
		case 'c': cdev = optarg; break;
		case 's': sdev = optarg; break;
		case 'n': b.iters = atoi(optarg); break;
		case 'r': runs = atoi(optarg); break;
		case 'S': b.piece = strtoul(optarg, NULL, 0); break;
		case 'N': nlist = optarg; break;
		default: usage(); return 2;
		}
	}
	for (p = (char *)nlist; *p && nn < MAX_PIECES; p = end + (*end == ',')) {
		ns[nn] = strtol(p, &end, 10);
		if (end == p || ns[nn] < 1 || ns[nn] > MAX_PIECES)
			break;
		nn++;
	}
	if (b.iters < 1 || runs < 1 || b.piece < 1 || b.piece > MAX_PIECE ||
	    !nn || *p || optind != argc) {
		usage();
		return 2;
	}

	b.local = aligned_alloc(4096, MAX_PIECES * MAX_PIECE);
	b.sbuf = aligned_alloc(4096, MAX_PIECES * BLOCK);
	b.lat = calloc(b.iters, sizeof(*b.lat));
	runmed[0] = calloc(runs, sizeof(double));
	runmed[1] = calloc(runs, sizeof(double));
	if (!b.local || !b.sbuf || !b.lat || !runmed[0] || !runmed[1])
		goto out;
	memset(b.sbuf, GUARD, MAX_PIECES * BLOCK);
	if (end_open(&b.c, cdev, false) || end_open(&b.s, sdev, true) ||
	    end_connect(&b.c, &b.s) || end_connect(&b.s, &b.c)) {
		fprintf(stderr, "cannot set up the connection %s -> %s: %s\n",
			cdev, sdev, strerror(errno));
		goto out;
	}
	b.lmr = ibv_reg_mr(b.c.pd, b.local, MAX_PIECES * MAX_PIECE,
			   IBV_ACCESS_LOCAL_WRITE);
	for (i = 0; b.lmr && i < MAX_PIECES; i++) {
		b.smr[i] = ibv_reg_mr(b.s.pd, b.sbuf + i * BLOCK, BLOCK,
				      ACCESS);
		if (!b.smr[i])
			break;
	}
	if (!b.lmr || i < MAX_PIECES) {
		fprintf(stderr, "MRs: %s\n", strerror(errno));
		goto out;
	}

	printf("# remu_umr_bench: client %s -> server %s, %d runs x %d round trips, pieces of %u bytes\n",
	       cdev, sdev, runs, b.iters, b.piece);
	printf("%7s %9s %12s %12s %9s   %s\n", "pieces", "bytes", "mkey usec",
	       "mrs usec", "mkey/mrs", "run medians mkey | mrs (usec)");
	for (i = 0; i < nn; i++) {
		int n = ns[i], it = b.iters;
		char line[1024];
		double m[2], w;
		int len = 0;

		if (mkey_setup(&b, n))
			goto out;
		/* a warm-up run of each, not counted */
		b.iters = it < 50 ? it : 50;
		if (run(&b, K_MKEY, n, &w) || run(&b, K_MRS, n, &w))
			goto out;
		b.iters = it;
		for (r = 0; r < runs; r++)
			for (k = 0; k < 2; k++)
				if (run(&b, (k + r) % 2, n,
					&runmed[(k + r) % 2][r]))
					goto out;
		for (k = 0; k < 2; k++) {
			for (r = 0; r < runs; r++)
				len += snprintf(line + len, sizeof(line) - len,
						"%s%.1f", r ? " " : "",
						runmed[k][r]);
			if (!k)
				len += snprintf(line + len, sizeof(line) - len,
						" | ");
			m[k] = remu_median(runmed[k], runs);
		}
		printf("%7d %9u %12.2f %12.2f %9.3f   %s\n", n, n * b.piece,
		       m[0], m[1], m[0] / m[1], line);
	}
	printf("# every run's data checked: ok\n");
	status = 0;
out:
	if (b.mk)
		remudv_destroy_mkey(b.mk);
	for (i = 0; i < MAX_PIECES; i++)
		if (b.smr[i])
			ibv_dereg_mr(b.smr[i]);
	if (b.lmr)
		ibv_dereg_mr(b.lmr);
	remu_end_close(&b.c);
	remu_end_close(&b.s);
	free(runmed[0]);
	free(runmed[1]);
	free(b.local);
	free(b.sbuf);
	free(b.lat);
	return status;
}
