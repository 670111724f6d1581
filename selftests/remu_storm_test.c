// SPDX-License-Identifier: GPL-2.0
/*
 * remu_storm_test - lifecycle storms (docs/security.md, "Lifecycle
 * storms").  After each storm remu's object counts (debugfs remu/objects)
 * are back to their baseline and a fresh RC connection moves data byte
 * for byte (remu_pair_check()); the kernel log scan of scripts/vm
 * catches warnings, and on the debug kernel (make check-debug) KASAN,
 * lockdep and kmemleak too.
 *
 * cm_cycles: REMU_STORM_CM connections (default 2000, on the debug
 *   kernel 2000 / REMU_TIMEOUT_SCALE, i.e. 500; the long run on the
 *   debug kernel, docs/security.md, asks for 10000) through the
 *   kernel's RDMA CM with librdmacm's synchronous calls, one after the
 *   other: a server in namespace peer (10.77.0.2, remu1) takes each
 *   request (rdma_get_request, which makes its QP), the client in the
 *   initial namespace makes its endpoint and QP (rdma_create_ep),
 *   connects, sends "cycle N" and gets "reply N" back (checked), both
 *   disconnect and destroy everything.  The rate is printed.
 * kill_traffic: a process streaming RC WRITE/READ/SEND between remu0 and
 *   remu1 (each checked) is killed with SIGKILL at a random moment,
 *   REMU_STORM_ROUNDS times (default 8).
 * kill_odp_fault: a process whose RC QP on remu1 exposes an untouched
 *   128 MiB ODP MR, which the test's QP on remu0 reads and writes at
 *   random pages (every first touch a page fault in the kernel), is
 *   killed in the middle; and the other way round, a process reading
 *   into an untouched ODP MR of its own (the faults at the requester, as
 *   the responses land) is killed.  REMU_STORM_ROUNDS rounds of each.
 * kill_dmabuf_move: a process with a dma-buf MR of the test exporter
 *   (remu_test_dmabuf.ko), whose thread moves and evicts the buffer's
 *   pages without pause while the test's QP writes and reads it, is
 *   killed in the middle.  REMU_STORM_ROUNDS rounds.
 * rmmod_busy: while a process moves data between remu0 and remu1 (each
 *   transfer checked), `rmmod remu` is tried again and again: it fails
 *   (EBUSY), the module and both devices stay, and the transfers go on
 *   byte for byte.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>

#include "kselftest_harness.h"
#include "remu_dmabuf_lib.h"
#include "remu_cm_lib.h"

#define PAGE		4096
#define ODP_LEN		(128 << 20)
#define XFER		(64 << 10)

static const char *const objtypes[] = { "ucontext", "pd", "mr", "cq", "qp",
					"srq", "ah", "ring" };
#define NOBJ (sizeof(objtypes) / sizeof(objtypes[0]))

static void counts(int *c)
{
	unsigned int i;

	for (i = 0; i < NOBJ; i++)
		c[i] = remu_obj_count(objtypes[i]);
}

/* every count back at @base within 10 s: -1, or the first that is not */
static int counts_back(const int *base)
{
	return remu_obj_counts_back(objtypes, NOBJ, base, 10);
}

#define EXPECT_COUNTS_BACK(base) do {					\
	int _bad = counts_back(base);					\
									\
	EXPECT_EQ(-1, _bad) {						\
		TH_LOG("%s: %d objects, %d before",			\
		       objtypes[_bad < 0 ? 0 : _bad],			\
		       remu_obj_count(objtypes[_bad < 0 ? 0 : _bad]),	\
		       (base)[_bad < 0 ? 0 : _bad]);			\
	}								\
} while (0)

FIXTURE(storm)
{
	int base[NOBJ];
	long rounds;
};

FIXTURE_SETUP(storm)
{
	counts(self->base);
	ASSERT_LE(0, self->base[0]);
	self->rounds = remu_env_long("REMU_STORM_ROUNDS", 8);
}

FIXTURE_TEARDOWN(storm)
{
}

/* ---- the RDMA CM ------------------------------------------------------ */

TEST_F_TIMEOUT(storm, cm_cycles, 3600)
{
	long n = remu_env_long("REMU_STORM_CM", 2000 / remu_timeout_scale());
	struct remu_cm_stats st;
	int err;

	/* the server in namespace peer on remu1, the client here on remu0 */
	err = remu_cm_cycles("peer", "10.77.0.2", n, &st);
	printf("# storm: %ld RDMA CM connections (connect, SEND each way, disconnect, destroy) in %.1f s: %.1f per second\n",
	       st.done, st.secs, st.secs > 0 ? st.done / st.secs : 0);
	EXPECT_EQ(0, err) {
		TH_LOG("connection %ld failed: step %d (remu_cm_cycles())",
		       st.done, err);
	}
	EXPECT_EQ(n, st.done);
	EXPECT_COUNTS_BACK(self->base);
	EXPECT_EQ(0, remu_pair_check("remu0", "remu1", XFER));
}

/* ---- SIGKILL in the middle of traffic ---------------------------------- */

/* the RC ends of a process on remu0 and remu1, connected */
struct pair {
	struct remu_end a, b;
	struct ibv_mr *ma, *mb;
	uint8_t *ba, *bb;
};

static int pair_open(struct pair *p, size_t len)
{
	static const struct ibv_qp_cap cap = { .max_send_wr = 16,
		.max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 };
	struct remu_conn_attr ra = REMU_RC_ATTR(0x42);
	int gi;

	p->ba = aligned_alloc(PAGE, 3 * len);
	p->bb = aligned_alloc(PAGE, len);
	if (!p->ba || !p->bb || remu_end_open(&p->a, "remu0", 0, 64, &cap) ||
	    remu_end_open(&p->b, "remu1", 0, 64, &cap))
		return -1;
	gi = remu_ipv4_gid(p->a.ctx, &p->a.gid);
	if (gi < 0 || remu_ipv4_gid(p->b.ctx, &p->b.gid) != gi ||
	    remu_end_connect(&p->a, &p->b, &ra, gi) ||
	    remu_end_connect(&p->b, &p->a, &ra, gi))
		return -1;
	p->ma = ibv_reg_mr(p->a.pd, p->ba, 3 * len, IBV_ACCESS_LOCAL_WRITE);
	p->mb = ibv_reg_mr(p->b.pd, p->bb, len, IBV_ACCESS_LOCAL_WRITE |
			   REMU_ACCESS_REMOTE_ALL);
	return p->ma && p->mb ? 0 : -1;
}

/*
 * Transfer @n of @len bytes over @p: WRITE into remu1, READ back, SEND
 * to remu1; each checked.  0 or the step that failed.
 */
static int pair_xfer(struct pair *p, size_t len, long n)
{
	uint8_t *src = p->ba, *chk = p->ba + len;
	struct ibv_sge sge = { (uintptr_t)p->bb, len, p->mb->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND };
	struct ibv_wc wc;
	size_t i;

	for (i = 0; i < len; i++)
		src[i] = (uint8_t)(i * 13 + n);
	if (remu_rdma1(p->a.qp, p->a.cq, IBV_WR_RDMA_WRITE, (uintptr_t)src,
		       p->ma->lkey, len, (uintptr_t)p->bb, p->mb->rkey, 20))
		return 1;
	if (memcmp(src, p->bb, len))
		return 2;
	if (remu_rdma1(p->a.qp, p->a.cq, IBV_WR_RDMA_READ, (uintptr_t)chk,
		       p->ma->lkey, len, (uintptr_t)p->bb, p->mb->rkey, 20))
		return 3;
	if (memcmp(src, chk, len))
		return 4;
	/* and back to remu0 by SEND */
	sge = (struct ibv_sge){ (uintptr_t)p->ba + 2 * len, len, p->ma->lkey };
	if (remu_post_recv(p->a.qp, 9, &sge, 1))
		return 5;
	sge = (struct ibv_sge){ (uintptr_t)p->bb, len, p->mb->lkey };
	if (remu_run_wr(p->b.qp, p->b.cq, &wr, 20) ||
	    remu_poll_one(p->a.cq, &wc, 20) || wc.byte_len != len)
		return 6;
	return memcmp(src, p->ba + 2 * len, len) ? 7 : 0;
}

/*
 * a process transferring until killed, or (@stop >= 0) until something
 * arrives on @stop, then exit 0
 */
static int traffic(int stop)
{
	struct pollfd pfd = { .fd = stop, .events = POLLIN };
	struct pair p = {};
	long n = 0;
	int err;

	if (pair_open(&p, XFER))
		return 100;
	while (stop < 0 || poll(&pfd, 1, 0) == 0)
		if ((err = pair_xfer(&p, XFER, n++)))
			return err;
	return 0;
}

static int traffic_child(double secs)
{
	return traffic(-1);
}

/* fork @fn's process, SIGKILL it after @ms milliseconds; its wait status */
static int kill_after(int (*fn)(double), unsigned int ms)
{
	int st;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (!pid)
		_exit(fn(3600));
	usleep(ms * 1000);
	kill(pid, SIGKILL);
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return st;
}

TEST_F_TIMEOUT(storm, kill_traffic, 1200)
{
	long r;

	srand(getpid());
	for (r = 0; r < self->rounds; r++) {
		int st = kill_after(traffic_child, 300 + rand() % 1500);

		/* it was still going (no transfer failed) when it was killed */
		EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) {
			TH_LOG("round %ld: exit %d", r, WEXITSTATUS(st));
		}
		EXPECT_COUNTS_BACK(self->base);
	}
	EXPECT_EQ(0, remu_pair_check("remu0", "remu1", XFER));
}

/* ---- SIGKILL in the middle of ODP page faults ------------------------- */

/* what a victim process tells the test about its end */
struct hello {
	uint32_t qpn;
	uint32_t rkey;
	uint64_t addr;
	union ibv_gid gid;
	int ok;
};

static bool have_odp(void)
{
	struct ibv_context *ctx = remu_open("remu1");
	struct ibv_device_attr_ex a = {};
	bool ok;

	if (!ctx)
		return false;
	ok = !ibv_query_device_ex(ctx, NULL, &a) &&
	     (a.odp_caps.per_transport_caps.rc_odp_caps & IBV_ODP_SUPPORT_READ);
	ibv_close_device(ctx);
	return ok;
}

/* a fast-failing RC connection of @e towards @h's QP */
static int connect_to(struct remu_end *e, int gi, const struct hello *h)
{
	struct remu_conn_attr ra = REMU_RC_ATTR(0x77);
	struct remu_conn_dest d = { .qpn = h->qpn, .gid = h->gid,
				    .mtu = IBV_MTU_4096 };

	ra.timeout = 12;	/* 16.8 ms */
	ra.retry_cnt = 2;
	ra.rd_atomic = 8;
	return remu_qp_connect(e->qp, &ra, gi, &d);
}

static int send_hello(int fd, struct remu_end *e, int gi, struct ibv_mr *mr,
		      void *addr)
{
	struct hello h = { .qpn = e->qp->qp_num, .rkey = mr ? mr->rkey : 0,
			   .addr = (uintptr_t)addr, .ok = 1 };

	if (remu_ipv4_gid(e->ctx, &h.gid) != gi)
		return -1;
	return write(fd, &h, sizeof(h)) == sizeof(h) ? 0 : -1;
}

static const struct ibv_qp_cap victim_cap = { .max_send_wr = 64,
	.max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 };

/*
 * The victim of kill_odp_fault: @dev's end with an untouched ODP MR,
 * exposed to the test (@reader false) or read into by its own READs
 * from the test's MR (@reader true); runs until killed.
 */
static int odp_victim(const char *dev, bool reader, int up, int down)
{
	struct remu_end e = {};
	struct hello peer;
	struct ibv_mr *mr;
	uint8_t *buf;
	int gi;
	long k;

	buf = mmap(NULL, ODP_LEN, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (buf == MAP_FAILED || remu_end_open(&e, dev, 0, 256, &victim_cap))
		return 100;
	gi = remu_ipv4_gid(e.ctx, &e.gid);
	mr = ibv_reg_mr(e.pd, buf, ODP_LEN, IBV_ACCESS_ON_DEMAND |
			IBV_ACCESS_LOCAL_WRITE | REMU_ACCESS_REMOTE_ALL);
	if (!mr || send_hello(up, &e, gi, mr, buf) ||
	    read(down, &peer, sizeof(peer)) != sizeof(peer) ||
	    connect_to(&e, gi, &peer))
		return 101;
	if (!reader)
		pause();
	/* READs of 64 KiB into fresh pages, 16 in flight, until killed */
	for (k = 0;; k++) {
		struct ibv_sge sge = { (uintptr_t)buf + (k * XFER) % ODP_LEN,
				       XFER, mr->lkey };
		struct ibv_send_wr wr = { .wr_id = k, .sg_list = &sge,
					  .num_sge = 1,
					  .opcode = IBV_WR_RDMA_READ,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;
		struct ibv_wc wc;

		wr.wr.rdma.remote_addr = peer.addr + (k % 16) * XFER;
		wr.wr.rdma.rkey = peer.rkey;
		if (k >= 16 && remu_poll_one(e.cq, &wc, 20))
			return 102;
		if (ibv_post_send(e.qp, &wr, &bad))
			return 103;
	}
	return 0;
}

/*
 * post_windowed - post @wr on @e's QP with at most 16 WRs in flight: when
 * the window is full, one successful completion is reaped first.
 * Return: 0, or -1 (a failed or missing completion, or a refused post).
 */
static int post_windowed(struct remu_end *e, struct ibv_send_wr *wr,
			 long *inflight)
{
	struct ibv_send_wr *bad;
	struct ibv_wc wc;

	if (*inflight == 16) {
		if (remu_poll_one(e->cq, &wc, 5) || wc.status)
			return -1;
		(*inflight)--;
	}
	if (ibv_post_send(e->qp, wr, &bad))
		return -1;
	(*inflight)++;
	return 0;
}

/*
 * round_end - the end of a round with a victim process: the victim @pid
 * (if it was forked) killed and reaped, the pipes, @mr, @e and @buf
 * closed.  Return: the victim's wait status, or -1 if there was none.
 */
static int round_end(pid_t pid, int *up, int *down, struct ibv_mr *mr,
		     struct remu_end *e, void *buf)
{
	int st = -1;

	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
	}
	close(up[0]);
	close(up[1]);
	close(down[0]);
	close(down[1]);
	if (mr)
		ibv_dereg_mr(mr);
	remu_end_close(e);
	free(buf);
	return st;
}

/*
 * round_connect - the test's end of a round with a victim: @e opened on
 * @dev, @buf (16 * XFER bytes) registered with @access into *@mr, the
 * victim's hello read from @from into *@h, @e connected to it and this
 * end's hello written to @to.  Return: 0, or -1 (what was made is left
 * in @e and *@mr for round_end()).
 */
static int round_connect(struct remu_end *e, const char *dev, void *buf,
			 int access, int from, int to, struct ibv_mr **mr,
			 struct hello *h)
{
	int gi;

	if (remu_end_open(e, dev, 0, 256, &victim_cap))
		return -1;
	gi = remu_ipv4_gid(e->ctx, &e->gid);
	*mr = ibv_reg_mr(e->pd, buf, 16 * XFER, access);
	if (!*mr || read(from, h, sizeof(*h)) != sizeof(*h) ||
	    connect_to(e, gi, h) || send_hello(to, e, gi, *mr, buf))
		return -1;
	return 0;
}

/* the test's end of one kill_odp_fault round; the victim's wait status */
static int odp_round(bool victim_reads, unsigned int ms)
{
	int up[2], down[2];
	struct remu_end e = {};
	struct ibv_mr *mr = NULL;
	uint8_t *buf = aligned_alloc(PAGE, 16 * XFER);
	struct hello h;
	double end;
	long k = 0, inflight = 0;
	pid_t pid;

	if (!buf || pipe(up) || pipe(down))
		return -1;
	memset(buf, 0x3c, 16 * XFER);
	pid = fork();
	if (!pid)
		_exit(odp_victim(victim_reads ? "remu0" : "remu1", victim_reads,
				 up[1], down[0]));
	if (round_connect(&e, victim_reads ? "remu1" : "remu0", buf,
			  IBV_ACCESS_LOCAL_WRITE | REMU_ACCESS_REMOTE_ALL,
			  up[0], down[1], &mr, &h))
		goto out;
	end = remu_now() + ms / 1000.0;
	while (remu_now() < end) {
		struct ibv_sge sge = { (uintptr_t)buf + (k % 16) * XFER, XFER,
				       mr->lkey };
		struct ibv_send_wr wr = { .wr_id = k, .sg_list = &sge,
					  .num_sge = 1,
					  .send_flags = IBV_SEND_SIGNALED };

		if (victim_reads) {
			usleep(10000);
			continue;
		}
		/* random pages of the victim's ODP MR: fault after fault */
		wr.opcode = k % 3 ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
		wr.wr.rdma.remote_addr = h.addr + (uint64_t)(rand() %
						   (ODP_LEN / XFER)) * XFER;
		wr.wr.rdma.rkey = h.rkey;
		if (post_windowed(&e, &wr, &inflight))
			break;
		k++;
	}
out:
	return round_end(pid, up, down, mr, &e, buf);
}

TEST_F_TIMEOUT(storm, kill_odp_fault, 1800)
{
	long r;

	if (!have_odp())
		SKIP(return, "no ODP");
	srand(getpid());
	for (r = 0; r < 2 * self->rounds; r++) {
		int st = odp_round(r % 2, 300 + rand() % 1200);

		EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) {
			TH_LOG("round %ld: the victim ended on its own: %d",
			       r, st);
		}
		EXPECT_COUNTS_BACK(self->base);
	}
	EXPECT_EQ(0, remu_pair_check("remu0", "remu1", XFER));
}

/* ---- SIGKILL in the middle of dma-buf moves --------------------------- */

struct mover {
	int ctl, fd;
};

static void *mover_main(void *arg)
{
	struct mover *m = arg;
	unsigned int k;

	for (k = 0;; k++) {
		if (k % 5 == 4)
			tdb_evict(m->ctl, m->fd);
		else
			tdb_move(m->ctl, m->fd, k % 3 ? 0 : 2);
	}
	return NULL;
}

/* the victim of kill_dmabuf_move: a dma-buf MR on remu1, moved all along */
static int dmabuf_victim(int up, int down)
{
	struct remu_end e = {};
	struct mover m = {};
	struct hello peer;
	struct ibv_mr *mr;
	pthread_t t;
	int gi;

	m.ctl = open(TDB_PATH, O_RDWR);
	if (m.ctl < 0)
		return 100;
	m.fd = tdb_create(m.ctl, 4 << 20, 0);
	if (m.fd < 0 || remu_end_open(&e, "remu1", 0, 16, &victim_cap))
		return 101;
	gi = remu_ipv4_gid(e.ctx, &e.gid);
	mr = ibv_reg_dmabuf_mr(e.pd, 0, 4 << 20, 0, m.fd,
			       IBV_ACCESS_LOCAL_WRITE | REMU_ACCESS_REMOTE_ALL);
	if (!mr || send_hello(up, &e, gi, mr, NULL) ||
	    read(down, &peer, sizeof(peer)) != sizeof(peer) ||
	    connect_to(&e, gi, &peer))
		return 102;
	if (pthread_create(&t, NULL, mover_main, &m))
		return 103;
	pause();
	return 0;
}

static int dmabuf_round(unsigned int ms)
{
	int up[2], down[2];
	struct remu_end e = {};
	struct ibv_mr *mr = NULL;
	uint8_t *buf = aligned_alloc(PAGE, 16 * XFER);
	struct hello h;
	double end;
	long k = 0, inflight = 0;
	pid_t pid;

	if (!buf || pipe(up) || pipe(down))
		return -1;
	pid = fork();
	if (!pid)
		_exit(dmabuf_victim(up[1], down[0]));
	if (round_connect(&e, "remu0", buf, IBV_ACCESS_LOCAL_WRITE, up[0],
			  down[1], &mr, &h))
		goto out;
	end = remu_now() + ms / 1000.0;
	while (remu_now() < end) {
		struct ibv_sge sge = { (uintptr_t)buf + (k % 16) * XFER, XFER,
				       mr->lkey };
		struct ibv_send_wr wr = { .wr_id = k, .sg_list = &sge,
					  .num_sge = 1,
					  .send_flags = IBV_SEND_SIGNALED };

		wr.opcode = k % 2 ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
		wr.wr.rdma.remote_addr = (uint64_t)(k % 64) * XFER;
		wr.wr.rdma.rkey = h.rkey;
		if (post_windowed(&e, &wr, &inflight))
			break;
		k++;
	}
out:
	return round_end(pid, up, down, mr, &e, buf);
}

TEST_F_TIMEOUT(storm, kill_dmabuf_move, 1800)
{
	long r;

	if (access(TDB_PATH, F_OK))
		SKIP(return, "remu_test_dmabuf.ko not loaded");
	srand(getpid());
	for (r = 0; r < self->rounds; r++) {
		int st = dmabuf_round(300 + rand() % 1200);

		EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) {
			TH_LOG("round %ld: the victim ended on its own: %d",
			       r, st);
		}
		EXPECT_COUNTS_BACK(self->base);
	}
	EXPECT_EQ(0, remu_pair_check("remu0", "remu1", XFER));
}

/* ---- rmmod while devices are in use ----------------------------------- */

TEST_F_TIMEOUT(storm, rmmod_busy, 600)
{
	long tries = 10 * self->rounds, i, refused = 0;
	struct ibv_context *hold;
	int st, p[2];
	pid_t pid;

	ASSERT_EQ(0, pipe(p));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		close(p[1]);
		_exit(traffic(p[0]));
	}
	close(p[0]);
	/* a context of our own too: remu must not go while the suite runs */
	hold = remu_open("remu0");
	ASSERT_NE(NULL, hold);
	usleep(500000);
	for (i = 0; i < tries; i++) {
		/* rmmod fails: the module stays with both devices */
		if (remu_sh("rmmod remu 2>/dev/null") != 0 &&
		    !access("/sys/module/remu", F_OK) &&
		    remu_device_listed("remu0") && remu_device_listed("remu1"))
			refused++;
		usleep(20000);
	}
	/* the transfers went on all the while, each checked byte for byte */
	ASSERT_EQ(1, write(p[1], "s", 1));
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	close(p[1]);
	EXPECT_EQ(0, ibv_close_device(hold));
	EXPECT_EQ(tries, refused);
	EXPECT_TRUE(WIFEXITED(st));
	EXPECT_EQ(0, WEXITSTATUS(st));
	EXPECT_COUNTS_BACK(self->base);
	EXPECT_EQ(0, remu_pair_check("remu0", "remu1", XFER));
}

TEST_HARNESS_MAIN
