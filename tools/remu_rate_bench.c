// SPDX-License-Identifier: GPL-2.0
/*
 * remu_rate_bench - the rate a per-QP rate limit (ibv_modify_qp_rate_limit,
 * docs/rate-limits.md) achieves, asked against measured, on remu.
 * perftest cannot ask for it on a RoCE QP: its --rate_limit paces in
 * software there (type SW; HW wants an InfiniBand link, PP a raw packet
 * QP), on mlx5 as on remu and rxe; scripts/bench --rate runs both.
 *
 * One process opens both devices (CLIENT, default remu0, sends; SERVER,
 * default remu1, receives), connected over the IPv4-mapped RoCEv2 GIDs,
 * and streams 64 KiB RDMA WRITEs (RC, UC) or 4 KiB SENDs (UD) with 16 in
 * flight (selftests/lib/remu_rate_lib.h).  First a run with no limit (what
 * remu moves here unpaced), then one per rate: the rate set, a stream of
 * about SECS seconds at that rate, and the rate achieved from the
 * completion timestamps of its messages (the first tenth left out: the
 * burst), in bits of wire packets as remu's pacer counts them (the
 * Ethernet frame without FCS), and the payload in MiB/s as perftest
 * reports it; the port's paced_pkts counter shows the packets held.
 * Every run checks the data it moved, byte for byte.
 *
 * Output: one line per run,
 *   TYPE asked_Mbps achieved_Mbps achieved/asked payload_MiBps held_pkts data
 * Exits 1 on an error or a data mismatch, 0 otherwise; scripts/bench
 * --rate marks the rates outside 5 % of the one asked (the selftest
 * remu_rate_test checks only what holds on any machine).
 *
 * Usage: remu_rate_bench [-c CLIENT] [-s SERVER] [-t rc|uc|ud]
 *                        [-r MBPS[,MBPS...]] [-d SECS]
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remu_lib.h"
#include "remu_rate_lib.h"

#define MAX_MSGS	(1 << 16)
#define MAX_RATES	8

static void usage(void)
{
	fprintf(stderr, "usage: remu_rate_bench [-c CLIENT] [-s SERVER] "
		"[-t rc|uc|ud] [-r MBPS[,MBPS...]] [-d SECS]\n");
	exit(2);
}

/*
 * One run of @st from message *@at at @kbps (0: none) for about @secs (no
 * limit: @n messages): the line of results.  0, or -1.
 */
static int run(struct remu_stream *st, uint32_t *at, uint32_t kbps,
	       double secs, uint32_t n, uint32_t mtu, const char *tname)
{
	struct remu_rside *a = st->a;
	uint32_t from = *at, to, skip;
	long long held0, held;
	double got, payload, t;
	long bad;
	int err;

	if (kbps)
		n = remu_stream_msgs(st, kbps, secs, mtu);
	if (*at + n > MAX_MSGS) {
		fprintf(stderr, "remu_rate_bench: too many messages (%u)\n", n);
		return -1;
	}
	to = from + n;
	err = remu_set_rate(a->qp, kbps, 0, 0);
	if (err) {
		fprintf(stderr, "remu_rate_bench: ibv_modify_qp_rate_limit(%u "
			"kbps): %s\n", kbps, strerror(err));
		return -1;
	}
	held0 = remu_hw_counter(a->dev, "paced_pkts", true);
	if (remu_stream_run(st, from, to, NULL) || st->errors) {
		fprintf(stderr, "remu_rate_bench: the stream failed (%u errors)\n",
			st->errors);
		return -1;
	}
	held = remu_hw_counter(a->dev, "paced_pkts", true) - held0;
	bad = remu_stream_bad(st, to);
	skip = from + n / 10;
	got = remu_stream_kbps(st, skip, to - 1, mtu);
	t = (st->ts[to - 1] - st->ts[skip]) / 1e9;
	payload = t > 0 ? (double)(to - 1 - skip) * st->msg / t / (1 << 20) : 0;
	if (kbps)
		printf("%s %9.1f %9.1f %7.4f %8.2f %8lld %s\n", tname,
		       kbps / 1000.0, got / 1000, got / kbps, payload, held,
		       bad ? "FAIL" : "ok");
	else
		printf("%s %9s %9.1f %7s %8.2f %8lld %s\n", tname, "none",
		       got / 1000, "-", payload, held, bad ? "FAIL" : "ok");
	fflush(stdout);
	*at = to;
	return bad ? -1 : 0;
}

int main(int argc, char **argv)
{
	const char *cdev = "remu0", *sdev = "remu1", *tname = "rc";
	enum ibv_qp_type type = IBV_QPT_RC;
	double mbps[MAX_RATES] = { 10, 40, 80 }, secs = 2;
	struct remu_rside a = {}, b = {};
	struct remu_stream st = {};
	int nrates = 3, opt, k, ret = 1;
	uint32_t at = 0, mtu, msg, i;
	char *p, *tok;

	while ((opt = getopt(argc, argv, "c:s:t:r:d:h")) != -1) {
		switch (opt) {
		case 'c':
			cdev = optarg;
			break;
		case 's':
			sdev = optarg;
			break;
		case 't':
			tname = optarg;
			if (!strcmp(optarg, "rc"))
				type = IBV_QPT_RC;
			else if (!strcmp(optarg, "uc"))
				type = IBV_QPT_UC;
			else if (!strcmp(optarg, "ud"))
				type = IBV_QPT_UD;
			else
				usage();
			break;
		case 'r':
			nrates = 0;
			for (p = optarg; (tok = strtok(p, ",")); p = NULL) {
				if (nrates == MAX_RATES)
					usage();
				mbps[nrates] = atof(tok);
				if (mbps[nrates] <= 0)
					usage();
				nrates++;
			}
			break;
		case 'd':
			secs = atof(optarg);
			if (secs <= 0)
				usage();
			break;
		default:
			usage();
		}
	}
	msg = type == IBV_QPT_UD ? REMU_RATE_UD_MSG : REMU_RATE_RC_MSG;
	if (remu_rside_open(&a, cdev, type, msg) ||
	    remu_rside_open(&b, sdev, type, msg) ||
	    remu_rside_connect(&a, &b, false) ||
	    remu_rside_connect(&b, &a, false)) {
		fprintf(stderr, "remu_rate_bench: cannot set up %s -> %s\n",
			cdev, sdev);
		goto out;
	}
	st = (struct remu_stream){ .a = &a, .b = &b, .type = type, .msg = msg };
	st.ts = calloc(MAX_MSGS, sizeof(*st.ts));
	if (!st.ts)
		goto out;
	for (i = 0; type == IBV_QPT_UD && i < REMU_RATE_RQ_DEPTH; i++)
		if (remu_stream_post_recv(&st))
			goto out;
	mtu = remu_rside_mtu(&a, &b);
	printf("# %s -> %s, %s, %u-byte messages, path MTU %u, about %.1f s "
	       "per rate\n", cdev, sdev, tname, msg, mtu, secs);
	printf("# type asked_Mbps achieved_Mbps ratio payload_MiBps "
	       "held_pkts data\n");
	/* no limit first: what remu moves here (1 s worth at 400 Mb/s) */
	if (run(&st, &at, 0, 0,
		remu_stream_msgs(&st, 400000, 1.0, mtu), mtu, tname))
		goto out;
	for (k = 0; k < nrates; k++)
		if (run(&st, &at, (uint32_t)(mbps[k] * 1000), secs, 0, mtu,
			tname))
			goto out;
	ret = 0;
out:
	free(st.ts);
	remu_rside_close(&a);
	remu_rside_close(&b);
	return ret;
}
