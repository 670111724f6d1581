// SPDX-License-Identifier: GPL-2.0
/*
 * remu_scale_bench - what many QPs cost: their life cycle rate, the RDMA CM
 * connection rate and the memory per QP, for any verbs device (remu and
 * rxe alike; run by scripts/bench --scale).
 *
 *   remu_scale_bench qp -d DEV [-n N] [-r RUNS] [-w WRS] [-g SGES]
 *	One process, one PD and one CQ shared by every QP.  Each run creates
 *	N RC QPs (WRS send and receive WRs, SGES SGEs each; default 256, 128,
 *	4), takes each through INIT, RTR and RTS connected to itself (its own
 *	QPN and GID: port 1's IPv4-mapped RoCEv2 GID), then destroys them;
 *	each of the three passes is timed.  Prints each run, then the medians:
 *	"qp DEV n N create/s C to_rts/s R destroy/s D" (to_rts: one QP taken
 *	from RESET to RTS, three ibv_modify_qp calls).
 *   remu_scale_bench mem -d DEV [-n N] [-w WRS] [-g SGES]
 *	The same QPs, N of them in RTS, against the moment before they were
 *	created (device, PD and CQ already open): the kernel's memory from
 *	/proc/meminfo (MemFree, Slab, VmallocUsed, PageTables) and from
 *	/proc/slabinfo (bytes of active objects per cache, root only), and
 *	this process's (VmRSS, VmPin, and the mappings of the uverbs device
 *	file in /proc/self/smaps: the queues the provider mmaps), each as
 *	bytes per QP; then the same after they are destroyed, which must be
 *	back near zero.  Lines "mem DEV n N WHAT BYTES_PER_QP".
 *   remu_scale_bench cm -a ADDR [-N NETNS] [-n N] [-r RUNS]
 *	RDMA CM connection rate: RUNS runs of N connections, one after the
 *	other, from a client here to a server listening on ADDR (in network
 *	namespace NETNS if given), each connection made from scratch, one
 *	SEND each way checked, disconnected and destroyed (remu_cm_lib.h).
 *	Prints each run, then the medians: "cm ADDR n N conn/s C ep_ms E
 *	connect_ms K xfer_ms X down_ms D" (the mean time of each step of one
 *	connection on the client: rdma_create_ep, rdma_connect, the two
 *	SENDs, disconnect and destroy).
 *
 * Exits 1 when any verb, connection or check fails (the failing call is
 * named on stderr), 2 on bad usage, 0 otherwise; the figures are never
 * judged.
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "remu_lib.h"
#include "remu_cm_lib.h"

#define MAX_RUNS	64

struct opts {
	const char *dev, *addr, *netns;
	long n, runs, wrs, sges;
};

/* the device, its PD and the CQ every QP shares, with port 1's GID */
struct dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp **qp;
	union ibv_gid gid;
	int gid_index;
	enum ibv_mtu mtu;
};

static int dev_open(struct dev *d, const struct opts *o)
{
	struct ibv_port_attr pa;

	d->ctx = remu_open(o->dev);
	if (!d->ctx) {
		fprintf(stderr, "cannot open %s\n", o->dev);
		return -1;
	}
	d->gid_index = remu_ipv4_gid(d->ctx, &d->gid);
	if (d->gid_index < 0 || ibv_query_port(d->ctx, 1, &pa)) {
		fprintf(stderr, "%s: no IPv4 RoCEv2 GID on port 1\n", o->dev);
		return -1;
	}
	d->mtu = pa.active_mtu;
	d->pd = ibv_alloc_pd(d->ctx);
	d->cq = d->pd ? ibv_create_cq(d->ctx, 256, NULL, NULL, 0) : NULL;
	d->qp = calloc(o->n, sizeof(*d->qp));
	if (!d->cq || !d->qp) {
		fprintf(stderr, "%s: ibv_alloc_pd/ibv_create_cq: %s\n", o->dev,
			strerror(errno));
		return -1;
	}
	return 0;
}

static void dev_close(struct dev *d, const struct opts *o)
{
	long i;

	if (d->qp)
		for (i = 0; i < o->n; i++)
			if (d->qp[i])
				ibv_destroy_qp(d->qp[i]);
	free(d->qp);
	remu_close_objs(NULL, NULL, NULL, d->cq, d->pd, d->ctx);
	memset(d, 0, sizeof(*d));
}

static int create_all(struct dev *d, const struct opts *o)
{
	struct ibv_qp_cap cap = { .max_send_wr = o->wrs, .max_recv_wr = o->wrs,
				  .max_send_sge = o->sges,
				  .max_recv_sge = o->sges };
	long i;

	for (i = 0; i < o->n; i++) {
		d->qp[i] = remu_create_qp(d->pd, d->cq, IBV_QPT_RC, &cap);
		if (!d->qp[i]) {
			fprintf(stderr, "%s: ibv_create_qp %ld of %ld: %s\n",
				o->dev, i + 1, o->n, strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* every QP from RESET to RTS, connected to itself */
static int rts_all(struct dev *d, const struct opts *o)
{
	struct remu_conn_attr ra = REMU_RC_ATTR(0x100);
	struct remu_conn_dest dest = { .gid = d->gid, .mtu = d->mtu };
	long i;
	int err;

	for (i = 0; i < o->n; i++) {
		dest.qpn = d->qp[i]->qp_num;
		err = remu_qp_connect(d->qp[i], &ra, d->gid_index, &dest);
		if (err) {
			fprintf(stderr, "%s: ibv_modify_qp to RTS, QP %ld: %s\n",
				o->dev, i + 1, strerror(err));
			return -1;
		}
	}
	return 0;
}

static int destroy_all(struct dev *d, const struct opts *o)
{
	long i;
	int err;

	for (i = 0; i < o->n; i++) {
		err = ibv_destroy_qp(d->qp[i]);
		if (err) {
			fprintf(stderr, "%s: ibv_destroy_qp %ld: %s\n", o->dev,
				i + 1, strerror(err));
			return -1;
		}
		d->qp[i] = NULL;
	}
	return 0;
}

static int qp_main(const struct opts *o)
{
	double cr[MAX_RUNS], rts[MAX_RUNS], de[MAX_RUNS], t0, t1, t2, t3;
	struct dev d = {};
	long r;
	int ret = 1;

	if (dev_open(&d, o))
		goto out;
	printf("# qp: %s, %ld RC QPs of %ld send/recv WRs and %ld SGEs, one CQ, %ld runs\n",
	       o->dev, o->n, o->wrs, o->sges, o->runs);
	for (r = 0; r < o->runs; r++) {
		t0 = remu_now();
		if (create_all(&d, o))
			goto out;
		t1 = remu_now();
		if (rts_all(&d, o))
			goto out;
		t2 = remu_now();
		if (destroy_all(&d, o))
			goto out;
		t3 = remu_now();
		cr[r] = o->n / (t1 - t0);
		rts[r] = o->n / (t2 - t1);
		de[r] = o->n / (t3 - t2);
		printf("# run %ld: create %.3f s, to RTS %.3f s, destroy %.3f s\n",
		       r + 1, t1 - t0, t2 - t1, t3 - t2);
	}
	printf("qp %s n %ld create/s %.1f to_rts/s %.1f destroy/s %.1f\n",
	       o->dev, o->n, remu_median(cr, o->runs),
	       remu_median(rts, o->runs), remu_median(de, o->runs));
	ret = 0;
out:
	dev_close(&d, o);
	return ret;
}

/* ---- memory ------------------------------------------------------------ */

#define MAX_CACHES	512

struct mem_snap {
	long long meminfo[4];		/* kB, in meminfo_keys' order */
	long long rss, pin, pte;	/* kB, /proc/self/status */
	long long map_size, map_rss;	/* kB, uverbs mappings in smaps */
	long maps;			/* number of uverbs mappings */
	int ncache;
	char cache[MAX_CACHES][64];
	long long cache_bytes[MAX_CACHES];
};

static const char *const meminfo_keys[] = { "MemFree", "Slab", "VmallocUsed",
					    "PageTables" };
#define NMEMINFO	(sizeof(meminfo_keys) / sizeof(meminfo_keys[0]))

/* "KEY:   N kB" lines of @path: the N of each of @keys into @v */
static void read_kb(const char *path, const char *const *keys, int nkeys,
		    long long *v)
{
	char line[256];
	FILE *f = fopen(path, "r");
	int i;

	for (i = 0; i < nkeys; i++)
		v[i] = -1;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		for (i = 0; i < nkeys; i++) {
			size_t l = strlen(keys[i]);

			if (!strncmp(line, keys[i], l) && line[l] == ':')
				v[i] = strtoll(line + l + 1, NULL, 10);
		}
	fclose(f);
}

static void read_smaps(struct mem_snap *s)
{
	char line[512];
	FILE *f = fopen("/proc/self/smaps", "r");
	bool in = false;

	s->maps = 0;
	s->map_size = s->map_rss = 0;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long from, to;

		if (sscanf(line, "%lx-%lx ", &from, &to) == 2) {
			/* a mapping's first line: is it the uverbs file? */
			in = strstr(line, "/dev/infiniband/uverbs") != NULL;
			s->maps += in;
		} else if (in && !strncmp(line, "Size:", 5)) {
			s->map_size += strtoll(line + 5, NULL, 10);
		} else if (in && !strncmp(line, "Rss:", 4)) {
			s->map_rss += strtoll(line + 4, NULL, 10);
		}
	}
	fclose(f);
}

/* bytes of active objects per cache (/proc/slabinfo, readable by root) */
static void read_slabinfo(struct mem_snap *s)
{
	char line[512], name[64];
	long long active, total, size;
	FILE *f = fopen("/proc/slabinfo", "r");

	s->ncache = 0;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f) && s->ncache < MAX_CACHES) {
		if (sscanf(line, "%63s %lld %lld %lld", name, &active, &total,
			   &size) != 4)
			continue;	/* the two header lines */
		snprintf(s->cache[s->ncache], sizeof(s->cache[0]), "%s", name);
		s->cache_bytes[s->ncache++] = active * size;
	}
	fclose(f);
}

static void snap(struct mem_snap *s)
{
	static const char *const status_keys[] = { "VmRSS", "VmPin", "VmPTE" };
	long long st[3];

	read_kb("/proc/meminfo", meminfo_keys, NMEMINFO, s->meminfo);
	read_kb("/proc/self/status", status_keys, 3, st);
	s->rss = st[0];
	s->pin = st[1];
	s->pte = st[2];
	read_smaps(s);
	read_slabinfo(s);
}

static long long cache_bytes(const struct mem_snap *s, const char *name)
{
	int i;

	for (i = 0; i < s->ncache; i++)
		if (!strcmp(s->cache[i], name))
			return s->cache_bytes[i];
	return 0;
}

/* the deltas of @b against @a, as bytes per QP (@b's slab figures are used up) */
static void mem_report(const struct opts *o, const char *when,
		       const struct mem_snap *a, struct mem_snap *b)
{
	double n = o->n;
	long long slab_sum = 0, d;
	unsigned int i;
	int c, shown = 0;

#define MEM_LINE(what, kb) \
	printf("mem %s n %ld %s %s %.0f\n", o->dev, o->n, when, what, \
	       (kb) * 1024.0 / n)
	/* MemFree falls as memory is taken: show what was taken */
	MEM_LINE("memfree_drop", (double)(a->meminfo[0] - b->meminfo[0]));
	for (i = 1; i < NMEMINFO; i++)
		MEM_LINE(meminfo_keys[i], (double)(b->meminfo[i] - a->meminfo[i]));
	MEM_LINE("VmRSS", (double)(b->rss - a->rss));
	MEM_LINE("VmPin", (double)(b->pin - a->pin));
	MEM_LINE("VmPTE", (double)(b->pte - a->pte));
	MEM_LINE("uverbs_map_size", (double)(b->map_size - a->map_size));
	MEM_LINE("uverbs_map_rss", (double)(b->map_rss - a->map_rss));
	printf("mem %s n %ld %s uverbs_maps %.2f\n", o->dev, o->n, when,
	       (b->maps - a->maps) / n);
	for (c = 0; c < b->ncache; c++)
		slab_sum += b->cache_bytes[c] - cache_bytes(a, b->cache[c]);
	printf("mem %s n %ld %s slabinfo_active %.0f\n", o->dev, o->n, when,
	       slab_sum / n);
	/* the caches that grew by at least 16 bytes per QP, largest first */
	for (;;) {
		long long best = 16 * o->n;
		int bi = -1;

		for (c = 0; c < b->ncache; c++) {
			d = b->cache_bytes[c] - cache_bytes(a, b->cache[c]);
			if (d >= best) {
				best = d;
				bi = c;
			}
		}
		if (bi < 0 || shown++ == 8)
			break;
		printf("mem %s n %ld %s slab:%s %.0f\n", o->dev, o->n, when,
		       b->cache[bi], best / n);
		/* shown: not again */
		b->cache_bytes[bi] = cache_bytes(a, b->cache[bi]);
	}
#undef MEM_LINE
}

static int mem_main(const struct opts *o)
{
	struct mem_snap *s = calloc(3, sizeof(*s));
	struct dev d = {};
	int ret = 1;

	if (!s || dev_open(&d, o))
		goto out;
	printf("# mem: %s, %ld RC QPs of %ld send/recv WRs and %ld SGEs, one CQ, in RTS\n",
	       o->dev, o->n, o->wrs, o->sges);
	/* the first QP of a context can set things up once: not per QP */
	if (create_all(&d, &(struct opts){ .dev = o->dev, .n = 1,
					   .wrs = o->wrs, .sges = o->sges }) ||
	    destroy_all(&d, &(struct opts){ .dev = o->dev, .n = 1 }))
		goto out;
	snap(&s[0]);
	if (create_all(&d, o) || rts_all(&d, o))
		goto out;
	snap(&s[1]);
	if (destroy_all(&d, o))
		goto out;
	snap(&s[2]);
	mem_report(o, "live", &s[0], &s[1]);
	mem_report(o, "after_destroy", &s[0], &s[2]);
	ret = 0;
out:
	dev_close(&d, o);
	free(s);
	return ret;
}

/* ---- the RDMA CM ------------------------------------------------------- */

static int cm_main(const struct opts *o)
{
	double rate[MAX_RUNS], ep[MAX_RUNS], conn[MAX_RUNS], xfer[MAX_RUNS],
	       down[MAX_RUNS];
	struct remu_cm_stats st;
	long r;
	int err;

	printf("# cm: %ld connections to %s%s%s, %ld runs\n", o->n, o->addr,
	       o->netns ? " in namespace " : "", o->netns ? o->netns : "",
	       o->runs);
	for (r = 0; r < o->runs; r++) {
		err = remu_cm_cycles(o->netns, o->addr, o->n, &st);
		if (err || st.done != o->n || st.secs <= 0) {
			fprintf(stderr, "cm: run %ld: connection %ld failed, step %d (remu_cm_lib.h)\n",
				r + 1, st.done + 1, err);
			return 1;
		}
		rate[r] = st.done / st.secs;
		ep[r] = st.ep * 1e3 / st.done;
		conn[r] = st.conn * 1e3 / st.done;
		xfer[r] = st.xfer * 1e3 / st.done;
		down[r] = st.down * 1e3 / st.done;
		printf("# run %ld: %ld connections in %.2f s\n", r + 1,
		       st.done, st.secs);
	}
	printf("cm %s n %ld conn/s %.1f ep_ms %.2f connect_ms %.2f xfer_ms %.2f down_ms %.2f\n",
	       o->addr, o->n, remu_median(rate, o->runs),
	       remu_median(ep, o->runs), remu_median(conn, o->runs),
	       remu_median(xfer, o->runs), remu_median(down, o->runs));
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: remu_scale_bench qp -d DEV [-n N] [-r RUNS] [-w WRS] [-g SGES]\n"
		"       remu_scale_bench mem -d DEV [-n N] [-w WRS] [-g SGES]\n"
		"       remu_scale_bench cm -a ADDR [-N NETNS] [-n N] [-r RUNS]\n");
}

static bool num(const char *s, long min, long max, long *v)
{
	char *end;

	errno = 0;
	*v = strtol(s, &end, 10);
	return !errno && *s && !*end && *v >= min && *v <= max;
}

int main(int argc, char **argv)
{
	struct opts o = { .n = 256, .runs = 3, .wrs = 128, .sges = 4 };
	const char *mode;
	bool ok = true;
	int opt;

	if (argc < 2) {
		usage();
		return 2;
	}
	mode = argv[1];
	optind = 2;
	while ((opt = getopt(argc, argv, "d:a:N:n:r:w:g:h")) != -1) {
		switch (opt) {
		case 'd': o.dev = optarg; break;
		case 'a': o.addr = optarg; break;
		case 'N': o.netns = optarg; break;
		case 'n': ok &= num(optarg, 1, 1 << 20, &o.n); break;
		case 'r': ok &= num(optarg, 1, MAX_RUNS, &o.runs); break;
		case 'w': ok &= num(optarg, 1, 1 << 16, &o.wrs); break;
		case 'g': ok &= num(optarg, 1, 64, &o.sges); break;
		default: ok = false; break;
		}
	}
	if (!ok || optind != argc) {
		usage();
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(mode, "qp") && o.dev)
		return qp_main(&o);
	if (!strcmp(mode, "mem") && o.dev)
		return mem_main(&o);
	if (!strcmp(mode, "cm") && o.addr)
		return cm_main(&o);
	usage();
	return 2;
}
