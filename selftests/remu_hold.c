// SPDX-License-Identifier: GPL-2.0
/*
 * remu_hold DEVICE - open DEVICE, allocate a PD, print "ready" and hold
 * them until SIGTERM/SIGINT; then check the PD still works and close.
 * Used by the shell tests to keep a live user on a device while they try
 * to unload the module or delete the link.
 *
 * Exit status: 0 if everything was held and released cleanly, 1 if the
 * device could not be opened, 2 if releasing failed.
 */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "remu_lib.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	stop = 1;
}

int main(int argc, char **argv)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DEVICE\n", argv[0]);
		return 1;
	}
	ctx = remu_open(argv[1]);
	if (!ctx) {
		fprintf(stderr, "remu_hold: cannot open %s\n", argv[1]);
		return 1;
	}
	pd = ibv_alloc_pd(ctx);
	if (!pd) {
		fprintf(stderr, "remu_hold: cannot allocate a PD\n");
		return 1;
	}
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	printf("ready\n");
	fflush(stdout);
	while (!stop)
		pause();
	if (ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		return 2;
	return 0;
}
