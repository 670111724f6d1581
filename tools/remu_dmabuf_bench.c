// SPDX-License-Identifier: GPL-2.0
/*
 * remu_dmabuf_bench - dma-buf registration time and re-map latency
 * (run in the test VM by `scripts/bench --dmabuf`; not a test: it judges
 * nothing but that every operation succeeds).
 *
 * Registration: ibv_reg_dmabuf_mr + ibv_dereg_mr of a whole dma-buf on
 * remu0, from udmabuf, the dma-heap system heap and the test exporter, at
 * 64 KiB, 1 MiB and 16 MiB, against ibv_reg_mr of as much touched
 * anonymous memory; medians of REPS runs, in microseconds.
 *
 * Re-map: remu0 READs 8 bytes from a test-exporter dma-buf MR on remu1,
 * once with the mapping in place and once right after the exporter moved
 * the buffer (the responder re-maps: fence wait, dma_buf_vmap of the whole
 * buffer); medians of REPS pairs at 1 MiB and 16 MiB.
 *
 * Usage: remu_dmabuf_bench [REPS]   (default 21; needs remu0, remu1 and
 * remu_test_dmabuf.ko)
 */
#include "remu_dmabuf_lib.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return v[n / 2];
}

static const char *const exp_name[] = { "udmabuf", "heap", "test" };

/* a whole-buffer dma-buf of @size from exporter @e (2: the test one) */
static int make_buf(int e, size_t size, int ctl, struct dbuf *d)
{
	if (e < 2)
		return dbuf_create(d, e, size);
	memset(d, 0, sizeof(*d));
	d->memfd = d->card = -1;
	d->fd = tdb_create(ctl, size, 0);
	return d->fd < 0 ? -1 : 0;
}

static int bench_reg(struct ibv_pd *pd, int ctl, int reps)
{
	static const size_t sizes[] = { 64 << 10, 1 << 20, 16 << 20 };
	double *reg = calloc(reps, sizeof(double));
	double *dereg = calloc(reps, sizeof(double));
	unsigned int s;
	int e, i;

	if (!reg || !dereg)
		return -1;
	for (s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t size = sizes[s];
		uint8_t *mem = aligned_alloc(4096, size);

		if (!mem)
			return -1;
		memset(mem, 1, size);
		for (i = 0; i < reps; i++) {
			double t0 = now_ms(), t1;
			struct ibv_mr *mr = ibv_reg_mr(pd, mem, size,
						       ACCESS_ALL);

			t1 = now_ms();
			if (!mr || ibv_dereg_mr(mr))
				return -1;
			reg[i] = (t1 - t0) * 1e3;
			dereg[i] = (now_ms() - t1) * 1e3;
		}
		printf("register %-8s %8zu KiB  reg %9.1f us  dereg %9.1f us\n",
		       "user", size >> 10, median(reg, reps),
		       median(dereg, reps));
		free(mem);
		for (e = 0; e < 3; e++) {
			struct dbuf d;

			if (make_buf(e, size, ctl, &d)) {
				printf("register %-8s %8zu KiB  exporter unavailable\n",
				       exp_name[e], size >> 10);
				return -1;
			}
			for (i = 0; i < reps; i++) {
				double t0 = now_ms(), t1;
				struct ibv_mr *mr;

				mr = ibv_reg_dmabuf_mr(pd, 0, size, 0, d.fd,
						       ACCESS_ALL);
				t1 = now_ms();
				if (!mr || ibv_dereg_mr(mr))
					return -1;
				reg[i] = (t1 - t0) * 1e3;
				dereg[i] = (now_ms() - t1) * 1e3;
			}
			printf("register %-8s %8zu KiB  reg %9.1f us  dereg %9.1f us\n",
			       exp_name[e], size >> 10, median(reg, reps),
			       median(dereg, reps));
			dbuf_destroy(&d);
		}
	}
	free(reg);
	free(dereg);
	return 0;
}

static int bench_remap(int ctl, int reps)
{
	static const size_t sizes[] = { 1 << 20, 16 << 20 };
	double *warm = calloc(reps, sizeof(double));
	double *moved = calloc(reps, sizeof(double));
	struct side a = {}, b = {};
	unsigned int s;
	int i, ret = -1;

	if (!warm || !moved || side_open(&a, "remu0") ||
	    side_open(&b, "remu1") || side_connect(&a, &b) ||
	    side_connect(&b, &a))
		goto out;
	for (s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		int fd = tdb_create(ctl, sizes[s], 0);

		if (fd < 0)
			goto out;
		b.dmr = ibv_reg_dmabuf_mr(b.pd, 0, sizes[s], MR_IOVA & ~4095ULL,
					  fd, ACCESS_ALL);
		if (!b.dmr)
			goto out;
		for (i = 0; i < reps; i++) {
			double t0;

			t0 = now_ms();
			if (post1(&a, IBV_WR_RDMA_READ, HOST(&a, 0),
				  a.host_mr->lkey, 8, MR_IOVA & ~4095ULL,
				  b.dmr->rkey) != IBV_WC_SUCCESS)
				goto out;
			warm[i] = (now_ms() - t0) * 1e3;
			if (tdb_move(ctl, fd, 0))
				goto out;
			t0 = now_ms();
			if (post1(&a, IBV_WR_RDMA_READ, HOST(&a, 0),
				  a.host_mr->lkey, 8, MR_IOVA & ~4095ULL,
				  b.dmr->rkey) != IBV_WC_SUCCESS)
				goto out;
			moved[i] = (now_ms() - t0) * 1e3;
		}
		printf("remap    %-8s %8zu KiB  READ 8 B %9.1f us  after a move %9.1f us  (re-map ~%.1f us)\n",
		       "test", sizes[s] >> 10, median(warm, reps),
		       median(moved, reps),
		       median(moved, reps) - median(warm, reps));
		ibv_dereg_mr(b.dmr);
		b.dmr = NULL;
		close(fd);
	}
	ret = 0;
out:
	side_close(&a);
	side_close(&b);
	free(warm);
	free(moved);
	return ret;
}

int main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 21;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	int ctl, err;

	if (reps < 1)
		reps = 1;
	ctl = open(TDB_PATH, O_RDWR | O_CLOEXEC);
	ctx = remu_open("remu0");
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	if (ctl < 0 || !pd) {
		fprintf(stderr, "remu_dmabuf_bench: need remu0 and %s\n",
			TDB_PATH);
		return 1;
	}
	printf("medians of %d runs\n", reps);
	err = bench_reg(pd, ctl, reps);
	if (!err)
		err = bench_remap(ctl, reps);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	close(ctl);
	if (err)
		fprintf(stderr, "remu_dmabuf_bench: an operation failed\n");
	return err ? 1 : 0;
}
