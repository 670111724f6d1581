/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tour/tour.h - what every chapter of the tour shares, so that each
 * chapter's .c file holds only its lesson:
 *
 *  - the stage: two remu devices in one process, remu0 (t.a, "the peer",
 *    the requester, with a pinned buffer t.src it sends from and reads
 *    into) and remu1 (t.b, "the device whose memory we study", the
 *    responder), one RC connection between them over scripts/remu-up's
 *    veth pair (tour_start(), tour_reconnect(), tour_end());
 *  - the trace: remu's events switched on in a tracefs instance of the
 *    tour's own (selftests/remu_trace_lib.h), read after each step into
 *    t.ev/t.nev (read_events()), printed (show()) and counted (count(),
 *    find());
 *  - the checks: expect() prints "[seen]" or "[MISSING]" beside what the
 *    reader should see; one MISSING makes the chapter exit 1, which fails
 *    `make demo` and remu_tour_test.sh.  need() is for the steps that are
 *    not the lesson (a setup verb failing ends the chapter at once).
 *
 * Header-only, like the selftests' helpers it builds on; one chapter per
 * process, so the state is one global, t.
 */
#ifndef REMU_TOUR_H
#define REMU_TOUR_H

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "remu_verbs_lib.h"
#include "remu_trace_lib.h"

#define GID_INDEX	1		/* the IPv4-mapped RoCEv2 GID */
#define PG		4096

static struct {
	const char *chapter;
	struct remu_end a, b;		/* remu0 (the peer), remu1 */
	uint8_t *src;			/* a's pinned buffer ... */
	struct ibv_mr *src_mr;		/* ... and its MR */
	size_t src_len;
	struct rt_ev *ev;		/* the events read last */
	int nev;
	int failed;
} t;

/* a step that is not the lesson failed: say which, and end the chapter */
static inline void need(int ok, const char *what)
{
	if (ok)
		return;
	fprintf(stderr, "chapter %s: %s failed (%s)\n", t.chapter, what,
		errno ? strerror(errno) : "no errno");
	exit(1);
}

/* say what the reader should see, and whether it was there */
static inline void expect(int ok, const char *what)
{
	printf("   %s %s\n", ok ? "[seen]   " : "[MISSING]", what);
	if (!ok)
		t.failed = 1;
}

/*
 * A new lesson: its title on stdout, and in the kernel's main trace
 * buffer as a marker ("remu_tour CHAPTER: TITLE"), so that a recording
 * of the run (trace-cmd, scripts/timeline) shows where each lesson began.
 */
static inline void lesson(const char *title)
{
	char mark[200];
	int fd;

	printf("\n== %s\n", title);
	fd = open(RT_DIR "/trace_marker", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	snprintf(mark, sizeof(mark), "remu_tour %s: %s", t.chapter, title);
	if (write(fd, mark, strlen(mark)) < 0) {
		/* a marker is a nicety: if it cannot be written, none */
	}
	close(fd);
}

/* empty the trace buffer: what happens next is what read_events() gets */
static inline void trace_mark(void)
{
	need(rt_clear() == 0, "emptying the trace buffer");
}

/* the remu events recorded since trace_mark(), into t.ev and t.nev */
static inline void read_events(void)
{
	free(t.ev);
	t.ev = NULL;
	t.nev = rt_read(&t.ev);
	need(t.nev >= 0, "reading the trace buffer");
}

/* print the events called @name (at most @max of them) */
static inline void show(const char *name, int max)
{
	int i, shown = 0;

	for (i = 0; i < t.nev; i++) {
		if (strcmp(t.ev[i].name, name))
			continue;
		if (shown++ < max)
			printf("     %s: %s\n", t.ev[i].name, t.ev[i].text);
	}
	if (shown > max)
		printf("     ... and %d more %s\n", shown - max, name);
}

/* how many events @name of device @dev (NULL: any) have @key == @val */
static inline int count(const char *name, const char *dev, const char *key,
			long long val)
{
	return rt_count(t.ev, t.nev, name, dev, key, val);
}

/* the @nth (0: first) such event, or NULL */
static inline const struct rt_ev *find(int nth, const char *name,
				       const char *dev, const char *key,
				       long long val)
{
	int i = rt_find(t.ev, t.nev, 0, nth, name, dev, key, val);

	return i < 0 ? NULL : &t.ev[i];
}

/* field @key of @ev as a number (@ev NULL or no such field: -1) */
static inline long long field(const struct rt_ev *ev, const char *key)
{
	return ev ? rt_num(ev, key, -1) : -1;
}

/* does field @key of @ev read @val? */
static inline int field_is(const struct rt_ev *ev, const char *key,
			   const char *val)
{
	return ev && rt_is(ev, key, val);
}

/* port 1's counter @name of @dev, once the core's cache has caught up */
static inline long long counter(const char *dev, const char *name)
{
	return remu_hw_counter(dev, name, true);
}

/*
 * The peer (remu0) runs one RDMA WRITE or READ (@op) of @len bytes
 * between t.src + @off and remu1's @raddr under @rkey, and waits for it:
 * the completion's status (IBV_WC_SUCCESS is 0), or -1.
 */
static inline int peer_rdma(enum ibv_wr_opcode op, size_t off, uint32_t len,
			    uint64_t raddr, uint32_t rkey)
{
	return remu_rdma1(t.a.qp, t.a.cq, op, (uintptr_t)t.src + off,
			  t.src_mr->lkey, len, raddr, rkey, 20);
}

/*
 * Connect remu0's QP and remu1's to each other (INIT, RTR, RTS), through
 * RESET first with @reset: after a remote access error both QPs are in
 * the error state, as on a real NIC, and a chapter that goes on needs a
 * fresh connection (tour_reconnect()).
 */
static inline void tour_connect(bool reset)
{
	struct remu_conn_attr ra = REMU_RC_ATTR(0x100);

	ra.reset = reset;
	need(!remu_end_connect(&t.a, &t.b, &ra, GID_INDEX) &&
	     !remu_end_connect(&t.b, &t.a, &ra, GID_INDEX),
	     "connecting remu0 and remu1");
}

static inline void tour_reconnect(void)
{
	tour_connect(true);
}

/*
 * Set the stage for chapter @name: remu's events on (in the tracefs
 * instance remu_tour), remu0 and remu1 open and connected, @src_len
 * bytes of pinned memory on remu0 (filled with 0x5a).
 */
static inline void tour_start(const char *name, size_t src_len)
{
	static const struct ibv_qp_cap cap = {
		.max_send_wr = 16, .max_recv_wr = 16,
		.max_send_sge = 1, .max_recv_sge = 1,
	};
	int err;

	setvbuf(stdout, NULL, _IOLBF, 0);
	t.chapter = name;
	err = rt_setup("remu_tour", 4096, 1);
	if (err) {
		fprintf(stderr, "tracefs: %s (root? remu loaded?)\n",
			strerror(-err));
		exit(1);
	}
	need(!remu_end_open(&t.a, "remu0", GID_INDEX, 16, &cap) &&
	     !remu_end_open(&t.b, "remu1", GID_INDEX, 16, &cap),
	     "opening remu0 and remu1 (scripts/remu-up?)");
	tour_connect(false);
	t.src_len = src_len;
	t.src = aligned_alloc(PG, src_len);
	need(t.src != NULL, "allocating the peer's buffer");
	memset(t.src, 0x5a, src_len);
	t.src_mr = ibv_reg_mr(t.a.pd, t.src, src_len, IBV_ACCESS_LOCAL_WRITE);
	need(t.src_mr != NULL, "registering the peer's buffer");
}

/* take the stage down and say how the chapter went: main()'s status */
static inline int tour_end(void)
{
	ibv_dereg_mr(t.src_mr);
	free(t.src);
	remu_end_close(&t.a);
	remu_end_close(&t.b);
	rt_close();
	free(t.ev);
	printf("\nChapter %s: %s\n", t.chapter,
	       t.failed ? "FAILED (see [MISSING])" :
	       "everything it teaches was seen");
	return t.failed;
}

#endif /* REMU_TOUR_H */
