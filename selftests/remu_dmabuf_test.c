// SPDX-License-Identifier: GPL-2.0
/*
 * remu_dmabuf_test - ibv_reg_dmabuf_mr end to end, remu0 <-> remu1 over RC.
 *
 * Fixture real (variants udmabuf, heap, vgem): each side has a dma-buf from
 * a stock exporter (udmabuf over a memfd, the dma-heap system heap, a vgem
 * dumb buffer exported with PRIME) registered with an offset and an iova
 * of its own, and a host buffer with an ordinary MR.  RDMA WRITE and READ
 * into and out of the dma-buf MRs, SEND/RECV between two of them and a
 * FETCH_ADD are compared byte for byte with the exporter's own view of the
 * buffer (the memfd for udmabuf, an mmap of the dma-buf otherwise), at the
 * byte the offset/iova arithmetic says.
 *
 * Fixture mover: remu1's dma-buf comes from remu_test_dmabuf.ko, the
 * project's exporter that moves or evicts its backing on command (Debian
 * builds without CONFIG_DMABUF_MOVE_NOTIFY, so no stock exporter moves a
 * mapped buffer).  Every move checks that remu dropped its mapping in
 * move_notify (the move fails with EBUSY otherwise).  Cases: write, move,
 * read back and write again (checked through the exporter's direct read;
 * counters dmabuf_moves/invalidations/remaps); a move whose copy runs
 * behind a fence (a READ right after it must wait and see the data, not
 * the zeroed new pages); eviction then access (the exporter re-populates,
 * data intact); moves and evictions from a thread during continuous
 * WRITE+READ traffic (no corruption, no lost write); the dma-buf fd closed
 * while the MR lives; registration and deregistration in a loop during
 * moves.
 *
 * Fixture kinds (variants p2p, iomem, novmap): the test exporter's other
 * kinds of buffer on remu1.  p2p behaves as VFIO's BAR export (peer2peer
 * importers only, no vmap, no pin, DMA addresses with no struct page):
 * remu reaches it peer to peer; novmap is ordinary pages without vmap,
 * also reached peer to peer (through the table's DMA addresses); iomem
 * hands its pages out from vmap as I/O memory, which remu copies with the
 * io accessors.  Cases: WRITE/READ/atomics and local SGEs both ways,
 * checked against the exporter's backing store; a move (data follows, a
 * new table or mapping is taken); revoke and re-enable of the buffers
 * without vmap, as VFIO does when memory decode goes off and on (the
 * dma-buf core WARNs when a vmap fails, so an exporter that offers one
 * does not revoke): while revoked a remote access completes
 * with IBV_WC_REM_ACCESS_ERR and a local one with IBV_WC_LOC_PROT_ERR, the
 * MR stays, and once re-enabled the same MR works again with the bytes
 * the exporter kept; a P2P buffer refuses an importer without peer2peer.
 *
 * bad_input: not a dma-buf fd (EINVAL), a closed fd (EBADF), a range
 * beyond the buffer or empty (EINVAL), offset and iova disagreeing within
 * a page (EINVAL), write rights on a read-only dma-buf (EACCES; the
 * test exporter's and a dma-heap buffer allocated O_RDONLY), a P2P
 * exporter whose addresses are no memory or that has no path to remu
 * (EOPNOTSUPP), a revoked one (ENODEV); none leaves an attachment behind.
 *
 * remu_test_dmabuf.ko is loaded by run_tests.sh around this test.
 */
#include "kselftest_harness.h"
#include "remu_dmabuf_lib.h"

/* ---- fixture real: stock exporters ---- */

FIXTURE(real) {
	struct side a, b;
	struct dbuf da, db;
	int mrs;
};

FIXTURE_VARIANT(real) {
	enum exporter exp;
};

FIXTURE_VARIANT_ADD(real, udmabuf) { .exp = EXP_UDMABUF };
FIXTURE_VARIANT_ADD(real, heap) { .exp = EXP_HEAP };
FIXTURE_VARIANT_ADD(real, vgem) { .exp = EXP_VGEM };

FIXTURE_SETUP(real)
{
	const char *why = dbuf_exporter_missing(variant->exp);

	memset(&self->a, 0, sizeof(self->a));
	memset(&self->b, 0, sizeof(self->b));
	self->da.fd = self->db.fd = -1;
	self->da.memfd = self->db.memfd = -1;
	self->da.card = self->db.card = -1;
	/* a kernel without this stock exporter (6.1): vgem and the test
	 * exporter still cover dma-buf import there */
	if (why)
		SKIP(return, "%s", why);
	self->mrs = remu_obj_count("mr");
	ASSERT_LE(0, self->mrs);
	ASSERT_EQ(0, side_open(&self->a, "remu0"));
	ASSERT_EQ(0, side_open(&self->b, "remu1"));
	ASSERT_EQ(0, side_connect(&self->a, &self->b));
	ASSERT_EQ(0, side_connect(&self->b, &self->a));
	ASSERT_EQ(0, dbuf_create(&self->da, variant->exp, BUF_SIZE))
		TH_LOG("exporter unavailable: %s", strerror(errno));
	ASSERT_EQ(0, dbuf_create(&self->db, variant->exp, BUF_SIZE));
	self->a.dmr = ibv_reg_dmabuf_mr(self->a.pd, MR_OFF, MR_LEN, MR_IOVA,
					self->da.fd, ACCESS_ALL);
	ASSERT_NE(NULL, self->a.dmr) TH_LOG("reg_dmabuf_mr: %s",
					    strerror(errno));
	self->b.dmr = ibv_reg_dmabuf_mr(self->b.pd, MR_OFF, MR_LEN, MR_IOVA,
					self->db.fd, ACCESS_ALL);
	ASSERT_NE(NULL, self->b.dmr);
	EXPECT_EQ(1, hw_counter("remu0", "dmabuf_mrs"));
}

FIXTURE_TEARDOWN(real)
{
	side_close(&self->a);
	side_close(&self->b);
	dbuf_destroy(&self->da);
	dbuf_destroy(&self->db);
	EXPECT_EQ(self->mrs, remu_obj_count("mr"));
	EXPECT_EQ(0, hw_counter("remu0", "dmabuf_mrs"));
	EXPECT_EQ(0, hw_counter("remu1", "dmabuf_mrs"));
}

static const uint32_t lens[] = { 1, 4095, 4097, 65537, MR_LEN - 100 };

/* into and out of dma-buf MRs with RDMA WRITE and READ */
TEST_F(real, write_read)
{
	struct side *a = &self->a, *b = &self->b;
	unsigned int i;

	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		uint32_t len = lens[i];

		/* WRITE host -> remote dma-buf MR */
		fill(a->host, len, i);
		ASSERT_EQ(IBV_WC_SUCCESS,
			  post1(a, IBV_WR_RDMA_WRITE, HOST(a, 0),
				a->host_mr->lkey, len, MR_IOVA + 100,
				b->dmr->rkey));
		dbuf_sync(&self->db, 0);
		EXPECT_EQ(-1, cmp(self->db.view + MR_OFF + 100, a->host, len))
			TH_LOG("WRITE of %u", len);
		/* the exporter's bytes around the range are untouched */
		EXPECT_EQ(0, self->db.view[MR_OFF + 99]);
		if (MR_OFF + 100 + len < BUF_SIZE)
			EXPECT_EQ(0, self->db.view[MR_OFF + 100 + len]);

		/* READ remote dma-buf MR -> host: the exporter writes first */
		fill(self->db.view + MR_OFF + 100, len, i + 50);
		dbuf_sync(&self->db, 1);
		ASSERT_EQ(IBV_WC_SUCCESS,
			  post1(a, IBV_WR_RDMA_READ, HOST(a, 0),
				a->host_mr->lkey, len, MR_IOVA + 100,
				b->dmr->rkey));
		EXPECT_EQ(-1, cmp(a->host, self->db.view + MR_OFF + 100, len))
			TH_LOG("READ of %u", len);
		memset(self->db.view, 0, BUF_SIZE);

		/* WRITE out of a local dma-buf MR -> remote host */
		fill(self->da.view + MR_OFF + 3, len, i + 100);
		dbuf_sync(&self->da, 1);
		ASSERT_EQ(IBV_WC_SUCCESS,
			  post1(a, IBV_WR_RDMA_WRITE, MR_IOVA + 3,
				a->dmr->lkey, len, HOST(b, 0),
				b->host_mr->rkey));
		EXPECT_EQ(-1, cmp(b->host, self->da.view + MR_OFF + 3, len));

		/* READ remote host -> local dma-buf MR */
		fill(b->host, len, i + 150);
		ASSERT_EQ(IBV_WC_SUCCESS,
			  post1(a, IBV_WR_RDMA_READ, MR_IOVA + 5, a->dmr->lkey,
				len, HOST(b, 0), b->host_mr->rkey));
		dbuf_sync(&self->da, 0);
		EXPECT_EQ(-1, cmp(self->da.view + MR_OFF + 5, b->host, len));
		memset(self->da.view, 0, BUF_SIZE);
		memset(b->host, 0, BUF_SIZE);
	}
	/* beyond the MR's end: the responder refuses */
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  post1(a, IBV_WR_RDMA_WRITE, HOST(a, 0), a->host_mr->lkey,
			16, MR_IOVA + MR_LEN - 8, b->dmr->rkey));
}

/* SEND from a dma-buf MR into a RECV in a dma-buf MR; FETCH_ADD */
TEST_F(real, send_recv_atomic)
{
	struct side *a = &self->a, *b = &self->b;
	uint64_t *op = (uint64_t *)(self->db.view + MR_OFF + 64);
	struct ibv_wc wc;
	unsigned int i;

	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		uint32_t len = lens[i];

		memset(self->db.view, 0, BUF_SIZE);
		fill(self->da.view + MR_OFF + 7, len, i + 200);
		dbuf_sync(&self->da, 1);
		ASSERT_EQ(0, post_recv1(b, MR_IOVA + 11, b->dmr->lkey, len));
		ASSERT_EQ(IBV_WC_SUCCESS,
			  post1(a, IBV_WR_SEND, MR_IOVA + 7, a->dmr->lkey, len,
				0, 0));
		ASSERT_EQ(IBV_WC_SUCCESS, poll_one(b->cq, &wc));
		EXPECT_EQ(len, wc.byte_len);
		dbuf_sync(&self->db, 0);
		EXPECT_EQ(-1, cmp(self->db.view + MR_OFF + 11,
				  self->da.view + MR_OFF + 7, len))
			TH_LOG("SEND of %u", len);
	}

	/* FETCH_ADD on an operand in the dma-buf */
	*op = 1000;
	dbuf_sync(&self->db, 1);
	{
		struct ibv_sge sge = { HOST(a, 0), 8, a->host_mr->lkey };
		struct ibv_send_wr wr = {
			.sg_list = &sge, .num_sge = 1,
			.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
			.send_flags = IBV_SEND_SIGNALED }, *bad;

		wr.wr.atomic.remote_addr = MR_IOVA + 64;
		wr.wr.atomic.rkey = b->dmr->rkey;
		wr.wr.atomic.compare_add = 234;
		ASSERT_EQ(0, ibv_post_send(a->qp, &wr, &bad));
		ASSERT_EQ(IBV_WC_SUCCESS, poll_one(a->cq, &wc));
	}
	dbuf_sync(&self->db, 0);
	EXPECT_EQ(1000, *(uint64_t *)a->host);
	EXPECT_EQ(1234, *op);
}

/* ---- fixture mover: the test exporter ---- */

FIXTURE(mover) {
	struct side a, b;
	int ctl, fd;
	int mrs;
	uint8_t *want;
	uint8_t *got;
};

FIXTURE_SETUP(mover)
{
	memset(&self->a, 0, sizeof(self->a));
	memset(&self->b, 0, sizeof(self->b));
	self->fd = -1;
	self->want = malloc(BUF_SIZE);
	self->got = malloc(BUF_SIZE);
	ASSERT_TRUE(self->want && self->got);
	self->mrs = remu_obj_count("mr");
	ASSERT_LE(0, self->mrs);
	self->ctl = open(TDB_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->ctl) TH_LOG("%s: %s (remu_test_dmabuf.ko loaded?)",
				       TDB_PATH, strerror(errno));
	self->fd = tdb_create(self->ctl, BUF_SIZE, 0);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, side_open(&self->a, "remu0"));
	ASSERT_EQ(0, side_open(&self->b, "remu1"));
	ASSERT_EQ(0, side_connect(&self->a, &self->b));
	ASSERT_EQ(0, side_connect(&self->b, &self->a));
	self->b.dmr = ibv_reg_dmabuf_mr(self->b.pd, MR_OFF, MR_LEN, MR_IOVA,
					self->fd, ACCESS_ALL);
	ASSERT_NE(NULL, self->b.dmr) TH_LOG("reg_dmabuf_mr: %s",
					    strerror(errno));
	/* remu attached and mapped; nothing pinned the buffer */
	struct remu_tdb_info i = tdb_info(self->ctl, self->fd);

	EXPECT_EQ(1, i.attachments);
	EXPECT_EQ(1, i.vmapped);
	EXPECT_EQ(0, i.pins);
}

FIXTURE_TEARDOWN(mover)
{
	side_close(&self->a);
	side_close(&self->b);
	if (self->fd >= 0)
		close(self->fd);
	if (self->ctl >= 0)
		close(self->ctl);
	free(self->want);
	free(self->got);
	EXPECT_EQ(self->mrs, remu_obj_count("mr"));
	EXPECT_EQ(0, hw_counter("remu1", "dmabuf_mrs"));
}

/* a WRITE of @len bytes of seed @seed to MR byte @off; 0 or status */
static int mv_write(struct side *a, struct side *b, uint64_t off,
		    uint32_t len, unsigned int seed, size_t host_off)
{
	fill(a->host + host_off, len, seed);
	return post1(a, IBV_WR_RDMA_WRITE, HOST(a, host_off),
		     a->host_mr->lkey, len, MR_IOVA + off, b->dmr->rkey);
}

static int mv_read(struct side *a, struct side *b, uint64_t off,
		   uint32_t len, size_t host_off)
{
	return post1(a, IBV_WR_RDMA_READ, HOST(a, host_off), a->host_mr->lkey,
		     len, MR_IOVA + off, b->dmr->rkey);
}

/* write, move, read back; new writes land in the new pages */
TEST_F(mover, write_move_read)
{
	struct side *a = &self->a, *b = &self->b;
	long long moves, inval, remaps;
	struct remu_tdb_info i;

	moves = hw_counter("remu1", "dmabuf_moves");
	inval = hw_counter("remu1", "dmabuf_invalidations");
	remaps = hw_counter("remu1", "dmabuf_remaps");

	ASSERT_EQ(IBV_WC_SUCCESS, mv_write(a, b, 0, MR_LEN, 1, 0));
	ASSERT_EQ(0, tdb_rw(self->ctl, self->fd, 0, MR_OFF, self->got,
			    MR_LEN));
	EXPECT_EQ(-1, cmp(self->got, a->host, MR_LEN));

	ASSERT_EQ(0, tdb_move(self->ctl, self->fd, 0));
	i = tdb_info(self->ctl, self->fd);
	EXPECT_EQ(1, i.moves);
	EXPECT_EQ(0, i.vmapped);	/* remu dropped its mapping */
	EXPECT_EQ(moves + 1, hw_counter("remu1", "dmabuf_moves"));
	EXPECT_EQ(inval + 1, hw_counter("remu1", "dmabuf_invalidations"));
	EXPECT_EQ(remaps, hw_counter("remu1", "dmabuf_remaps"));

	/* the data followed the move */
	memset(a->host, 0, BUF_SIZE);
	ASSERT_EQ(IBV_WC_SUCCESS, mv_read(a, b, 0, MR_LEN, 0));
	ASSERT_EQ(0, tdb_rw(self->ctl, self->fd, 0, MR_OFF, self->want,
			    MR_LEN));
	EXPECT_EQ(-1, cmp(a->host, self->want, MR_LEN));
	EXPECT_EQ(remaps + 1, hw_counter("remu1", "dmabuf_remaps"));
	EXPECT_EQ(1, tdb_info(self->ctl, self->fd).vmapped);

	/* a new WRITE lands in the new pages */
	ASSERT_EQ(IBV_WC_SUCCESS, mv_write(a, b, 4000, 9000, 77, 0));
	ASSERT_EQ(0, tdb_rw(self->ctl, self->fd, 0, MR_OFF + 4000, self->got,
			    9000));
	EXPECT_EQ(-1, cmp(self->got, a->host, 9000));

	/* a second move, then a write first: also re-maps */
	ASSERT_EQ(0, tdb_move(self->ctl, self->fd, 0));
	ASSERT_EQ(IBV_WC_SUCCESS, mv_write(a, b, 1, 5000, 78, 0));
	ASSERT_EQ(0, tdb_rw(self->ctl, self->fd, 0, MR_OFF + 1, self->got,
			    5000));
	EXPECT_EQ(-1, cmp(self->got, a->host, 5000));
	EXPECT_EQ(remaps + 2, hw_counter("remu1", "dmabuf_remaps"));
	EXPECT_EQ(2, tdb_info(self->ctl, self->fd).moves);
}

/* the move's copy runs behind a fence: remu waits for it on re-map */
TEST_F(mover, move_behind_fence)
{
	struct side *a = &self->a, *b = &self->b;
	double t0, dt;

	fill(self->want, MR_LEN, 9);
	ASSERT_EQ(0, tdb_rw(self->ctl, self->fd, 1, MR_OFF, self->want,
			    MR_LEN));
	ASSERT_EQ(0, tdb_move(self->ctl, self->fd, 300));
	t0 = now_ms();
	ASSERT_EQ(IBV_WC_SUCCESS, mv_read(a, b, 0, MR_LEN, 0));
	dt = now_ms() - t0;
	/* not the zeroed new pages: the copy was waited for */
	EXPECT_EQ(-1, cmp(a->host, self->want, MR_LEN));
	EXPECT_LE(200, dt) TH_LOG("READ after a fenced move took %.0f ms", dt);
}

/* evict, then access: the exporter re-populates, the data is intact */
TEST_F(mover, evict_then_access)
{
	struct side *a = &self->a, *b = &self->b;
	long long remaps = hw_counter("remu1", "dmabuf_remaps");
	struct remu_tdb_info i;

	ASSERT_EQ(IBV_WC_SUCCESS, mv_write(a, b, 10, 70000, 3, 0));
	memcpy(self->want, a->host, 70000);
	ASSERT_EQ(0, tdb_evict(self->ctl, self->fd));
	i = tdb_info(self->ctl, self->fd);
	EXPECT_EQ(1, i.evicted);
	EXPECT_EQ(0, i.vmapped);

	memset(a->host, 0, BUF_SIZE);
	ASSERT_EQ(IBV_WC_SUCCESS, mv_read(a, b, 10, 70000, 0));
	EXPECT_EQ(-1, cmp(a->host, self->want, 70000));
	i = tdb_info(self->ctl, self->fd);
	EXPECT_EQ(0, i.evicted);
	EXPECT_EQ(1, i.vmapped);
	EXPECT_EQ(remaps + 1, hw_counter("remu1", "dmabuf_remaps"));

	/* evict again and WRITE first */
	ASSERT_EQ(0, tdb_evict(self->ctl, self->fd));
	ASSERT_EQ(IBV_WC_SUCCESS, mv_write(a, b, 20000, 3000, 4, 0));
	ASSERT_EQ(0, tdb_rw(self->ctl, self->fd, 0, MR_OFF + 20000, self->got,
			    3000));
	EXPECT_EQ(-1, cmp(self->got, a->host, 3000));
	EXPECT_EQ(2, tdb_info(self->ctl, self->fd).evictions);
}

struct mover_thread {
	int ctl, fd;
	volatile int stop;
	int dereg_loop;
	int moves, evictions, idle, errors, last_err;
};

/* moves (some behind a fence) and evictions until told to stop */
static void *mover_fn(void *arg)
{
	struct mover_thread *m = arg;
	unsigned int n = 0;

	while (!m->stop) {
		int err;

		if (n % 5 == 4)
			err = tdb_evict(m->ctl, m->fd);
		else
			err = tdb_move(m->ctl, m->fd, n % 3 == 1 ? 2 : 0);
		if (err == -ENODATA) {
			/* still evicted: remu has not touched it since */
			m->idle++;
		} else if (err) {
			m->errors++;
			m->last_err = err;
		} else if (n % 5 == 4) {
			m->evictions++;
		} else {
			m->moves++;
		}
		n++;
		usleep(1000);
	}
	return NULL;
}

#define SLOTS		16
#define SLOT_STRIDE	12288
#define SLOT_LEN	6000
#define SLOT_OFF	3000	/* every slot spans a page boundary */

/* continuous WRITE+READ traffic while the buffer moves and is evicted */
TEST_F(mover, moves_during_traffic)
{
	struct side *a = &self->a, *b = &self->b;
	struct mover_thread m = { .ctl = self->ctl, .fd = self->fd };
	long long inval = hw_counter("remu1", "dmabuf_invalidations");
	double t0 = now_ms();
	pthread_t th;
	int it, bad = 0;

	memset(self->want, 0, BUF_SIZE);
	ASSERT_EQ(0, tdb_rw(self->ctl, self->fd, 1, 0, self->want, BUF_SIZE));
	ASSERT_EQ(0, pthread_create(&th, NULL, mover_fn, &m));
	for (it = 0; !bad && (it < 400 || m.moves + m.evictions < 20) &&
		     now_ms() - t0 < 60000; it++) {
		uint64_t off = (it % SLOTS) * SLOT_STRIDE + SLOT_OFF;

		/* host: [0, SLOT_LEN) what is written, then what is read */
		if (mv_write(a, b, off, SLOT_LEN, it, 0) != IBV_WC_SUCCESS) {
			bad = 1;
			break;
		}
		memcpy(self->want + MR_OFF + off, a->host, SLOT_LEN);
		memset(a->host + SLOT_LEN, 0, SLOT_LEN);
		if (mv_read(a, b, off, SLOT_LEN, SLOT_LEN) != IBV_WC_SUCCESS ||
		    cmp(a->host + SLOT_LEN, a->host, SLOT_LEN) != -1)
			bad = 2;
	}
	m.stop = 1;
	pthread_join(th, NULL);
	EXPECT_EQ(0, bad) TH_LOG("iteration %d", it);
	EXPECT_EQ(0, m.errors) TH_LOG("mover: %s", strerror(-m.last_err));
	TH_LOG("%d WRITE+READ pairs, %d moves, %d evictions, %d while evicted",
	       it, m.moves, m.evictions, m.idle);
	EXPECT_LE(10, m.moves);
	EXPECT_LE(2, m.evictions);
	EXPECT_LE(inval + 1, hw_counter("remu1", "dmabuf_invalidations"));
	/* no lost write: the exporter holds the last write of every slot */
	ASSERT_EQ(0, tdb_rw(self->ctl, self->fd, 0, 0, self->got, BUF_SIZE));
	EXPECT_EQ(-1, cmp(self->got, self->want, BUF_SIZE));
}

/* the MR holds the dma-buf: closing the only fd changes nothing */
TEST_F(mover, close_fd_while_registered)
{
	struct side *a = &self->a, *b = &self->b;

	ASSERT_EQ(IBV_WC_SUCCESS, mv_write(a, b, 0, 50000, 5, 0));
	memcpy(self->want, a->host, 50000);
	ASSERT_EQ(0, close(self->fd));
	self->fd = -1;
	memset(a->host, 0, BUF_SIZE);
	ASSERT_EQ(IBV_WC_SUCCESS, mv_read(a, b, 0, 50000, 0));
	EXPECT_EQ(-1, cmp(a->host, self->want, 50000));
	ASSERT_EQ(IBV_WC_SUCCESS, mv_write(a, b, 60000, 8000, 6, 0));
	memset(a->host + 8000, 0, 8000);
	ASSERT_EQ(IBV_WC_SUCCESS, mv_read(a, b, 60000, 8000, 8000));
	EXPECT_EQ(-1, cmp(a->host + 8000, a->host, 8000));
	EXPECT_EQ(0, ibv_dereg_mr(b->dmr));
	b->dmr = NULL;
}

/* registrations and deregistrations while a thread moves the buffer */
TEST_F(mover, dereg_during_moves)
{
	struct side *a = &self->a, *b = &self->b;
	struct mover_thread m = { .ctl = self->ctl, .fd = self->fd };
	pthread_t th;
	int it, bad = 0;

	EXPECT_EQ(0, ibv_dereg_mr(b->dmr));
	b->dmr = NULL;
	ASSERT_EQ(0, pthread_create(&th, NULL, mover_fn, &m));
	for (it = 0; it < 40 && !bad; it++) {
		b->dmr = ibv_reg_dmabuf_mr(b->pd, MR_OFF, MR_LEN, MR_IOVA,
					   self->fd, ACCESS_ALL);
		if (!b->dmr) {
			bad = 1;
			break;
		}
		if (mv_write(a, b, it * 1000, 5000, it, 0) != IBV_WC_SUCCESS ||
		    mv_read(a, b, it * 1000, 5000, 5000) != IBV_WC_SUCCESS ||
		    cmp(a->host + 5000, a->host, 5000) != -1)
			bad = 2;
		if (ibv_dereg_mr(b->dmr))
			bad = 3;
		b->dmr = NULL;
	}
	m.stop = 1;
	pthread_join(th, NULL);
	EXPECT_EQ(0, bad) TH_LOG("iteration %d", it);
	EXPECT_EQ(0, m.errors) TH_LOG("mover: %s", strerror(-m.last_err));
	EXPECT_LE(1, m.moves);
	EXPECT_EQ(0, tdb_info(self->ctl, self->fd).attachments);
}

/* ---- fixture kinds: P2P, I/O memory, no vmap ---- */

FIXTURE(kinds) {
	struct side a, b;
	int ctl, fd;
	int mrs;
	uint8_t *got;
};

FIXTURE_VARIANT(kinds) {
	unsigned int flags;
	bool p2p;	/* remu reaches it through DMA addresses */
};

FIXTURE_VARIANT_ADD(kinds, p2p) { .flags = REMU_TDB_P2P, .p2p = true };
FIXTURE_VARIANT_ADD(kinds, iomem) { .flags = REMU_TDB_IOMEM };
FIXTURE_VARIANT_ADD(kinds, novmap) { .flags = REMU_TDB_NO_VMAP, .p2p = true };

FIXTURE_SETUP(kinds)
{
	struct remu_tdb_info i;

	memset(&self->a, 0, sizeof(self->a));
	memset(&self->b, 0, sizeof(self->b));
	self->fd = -1;
	self->got = malloc(BUF_SIZE);
	ASSERT_NE(NULL, self->got);
	self->mrs = remu_obj_count("mr");
	self->ctl = open(TDB_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->ctl) TH_LOG("%s: %s (remu_test_dmabuf.ko loaded?)",
				       TDB_PATH, strerror(errno));
	self->fd = tdb_create(self->ctl, BUF_SIZE, variant->flags);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, side_open(&self->a, "remu0"));
	ASSERT_EQ(0, side_open(&self->b, "remu1"));
	ASSERT_EQ(0, side_connect(&self->a, &self->b));
	ASSERT_EQ(0, side_connect(&self->b, &self->a));
	self->b.dmr = ibv_reg_dmabuf_mr(self->b.pd, MR_OFF, MR_LEN, MR_IOVA,
					self->fd, ACCESS_ALL);
	ASSERT_NE(NULL, self->b.dmr) TH_LOG("reg_dmabuf_mr: %s",
					    strerror(errno));
	i = tdb_info(self->ctl, self->fd);
	EXPECT_EQ(1, i.attachments);
	/* P2P: a table mapped, no CPU mapping; else the other way round */
	EXPECT_EQ(variant->p2p, i.mapped);
	EXPECT_EQ(!variant->p2p, i.vmapped);
	EXPECT_EQ(variant->p2p, hw_counter("remu1", "dmabuf_p2p_mrs"));
}

FIXTURE_TEARDOWN(kinds)
{
	side_close(&self->a);
	side_close(&self->b);
	if (self->fd >= 0) {
		EXPECT_EQ(0, tdb_info(self->ctl, self->fd).attachments);
		EXPECT_EQ(0, tdb_info(self->ctl, self->fd).mapped);
		close(self->fd);
	}
	if (self->ctl >= 0)
		close(self->ctl);
	free(self->got);
	EXPECT_EQ(self->mrs, remu_obj_count("mr"));
	EXPECT_EQ(0, hw_counter("remu1", "dmabuf_mrs"));
	EXPECT_EQ(0, hw_counter("remu1", "dmabuf_p2p_mrs"));
}

/* the exporter's own bytes [MR_OFF + off, + len) equal @want */
static long kinds_cmp(FIXTURE_DATA(kinds) *self, uint64_t off,
		      const uint8_t *want, uint32_t len)
{
	if (tdb_rw(self->ctl, self->fd, 0, MR_OFF + off, self->got, len))
		return -2;
	return cmp(self->got, want, len);
}

TEST_F(kinds, write_read_atomic)
{
	struct side *a = &self->a, *b = &self->b;
	uint64_t v = 1000;
	unsigned int k;

	for (k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
		uint32_t len = lens[k];
		uint64_t off = (k * 3001) % (MR_LEN - len + 1);

		/* remote WRITE into the buffer */
		fill(a->host, len, k + 1);
		ASSERT_EQ(IBV_WC_SUCCESS,
			  post1(a, IBV_WR_RDMA_WRITE, HOST(a, 0),
				a->host_mr->lkey, len, MR_IOVA + off,
				b->dmr->rkey));
		EXPECT_EQ(-1, kinds_cmp(self, off, a->host, len))
			TH_LOG("WRITE of %u", len);
		/* remote READ of what the exporter wrote */
		fill(self->got, len, k + 2);
		ASSERT_EQ(0, tdb_rw(self->ctl, self->fd, 1, MR_OFF + off,
				    self->got, len));
		memset(a->host, 0, len);
		ASSERT_EQ(IBV_WC_SUCCESS,
			  post1(a, IBV_WR_RDMA_READ, HOST(a, 0),
				a->host_mr->lkey, len, MR_IOVA + off,
				b->dmr->rkey));
		EXPECT_EQ(-1, kinds_cmp(self, off, a->host, len))
			TH_LOG("READ of %u", len);
		/* remu1's local SGE: WRITE out of it, READ into it */
		memset(a->host, 0, len);
		ASSERT_EQ(IBV_WC_SUCCESS,
			  post1(b, IBV_WR_RDMA_WRITE, MR_IOVA + off,
				b->dmr->lkey, len, HOST(a, 0),
				a->host_mr->rkey));
		EXPECT_EQ(-1, kinds_cmp(self, off, a->host, len));
		fill(a->host, len, k + 3);
		ASSERT_EQ(IBV_WC_SUCCESS,
			  post1(b, IBV_WR_RDMA_READ, MR_IOVA + off,
				b->dmr->lkey, len, HOST(a, 0),
				a->host_mr->rkey));
		EXPECT_EQ(-1, kinds_cmp(self, off, a->host, len));
	}
	/* atomics: FETCH_ADD, a CMP_SWP that swaps and one that does not */
	ASSERT_EQ(0, tdb_rw(self->ctl, self->fd, 1, MR_OFF + 4088, &v, 8));
	ASSERT_EQ(IBV_WC_SUCCESS, atomic1(a, IBV_WR_ATOMIC_FETCH_AND_ADD,
					   MR_IOVA + 4088, b->dmr->rkey, 24, 0));
	EXPECT_EQ(1000, *(uint64_t *)a->host);
	ASSERT_EQ(IBV_WC_SUCCESS, atomic1(a, IBV_WR_ATOMIC_CMP_AND_SWP,
					   MR_IOVA + 4088, b->dmr->rkey, 1024,
					   77));
	EXPECT_EQ(1024, *(uint64_t *)a->host);
	ASSERT_EQ(IBV_WC_SUCCESS, atomic1(a, IBV_WR_ATOMIC_CMP_AND_SWP,
					   MR_IOVA + 4088, b->dmr->rkey, 1, 2));
	EXPECT_EQ(77, *(uint64_t *)a->host);
	ASSERT_EQ(0, tdb_rw(self->ctl, self->fd, 0, MR_OFF + 4088, &v, 8));
	EXPECT_EQ(77, v);
	/* P2P: still the one table mapped at registration */
	EXPECT_EQ(variant->p2p ? 1 : 0, tdb_info(self->ctl, self->fd).maps);
}

/* the exporter moves the buffer: remu maps it again, the data followed */
TEST_F(kinds, move)
{
	struct side *a = &self->a, *b = &self->b;
	long long remaps = hw_counter("remu1", "dmabuf_remaps");
	struct remu_tdb_info i = tdb_info(self->ctl, self->fd);
	int err;

	fill(a->host, 20000, 40);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  post1(a, IBV_WR_RDMA_WRITE, HOST(a, 0), a->host_mr->lkey,
			20000, MR_IOVA + 100, b->dmr->rkey));
	err = tdb_move(self->ctl, self->fd, 0);
	/*
	 * Where the kernel pins a dynamic exporter around every map by a
	 * dynamic importer (6.x without CONFIG_DMABUF_MOVE_NOTIFY), remu's
	 * map of an ordinary exporter pins it, and it cannot move; a P2P
	 * one (as VFIO's) takes such pins without promising to stay.
	 */
	if (i.pins) {
		EXPECT_EQ(-EBUSY, err);
		SKIP(return, "the kernel pinned this exporter for remu's map");
	}
	ASSERT_EQ(0, err);
	i = tdb_info(self->ctl, self->fd);
	EXPECT_EQ(0, i.mapped);
	EXPECT_EQ(0, i.vmapped);
	memset(a->host + 20000, 0, 20000);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  post1(a, IBV_WR_RDMA_READ, HOST(a, 20000), a->host_mr->lkey,
			20000, MR_IOVA + 100, b->dmr->rkey));
	EXPECT_EQ(-1, cmp(a->host + 20000, a->host, 20000));
	EXPECT_EQ(remaps + 1, hw_counter("remu1", "dmabuf_remaps"));
	i = tdb_info(self->ctl, self->fd);
	EXPECT_EQ(variant->p2p, i.mapped);
	EXPECT_EQ(!variant->p2p, i.vmapped);
	/* a WRITE after the move lands in the new pages */
	fill(a->host, 9000, 41);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  post1(a, IBV_WR_RDMA_WRITE, HOST(a, 0), a->host_mr->lkey,
			9000, MR_IOVA + 30000, b->dmr->rkey));
	EXPECT_EQ(-1, kinds_cmp(self, 30000, a->host, 9000));
}

/* revoked: accesses fail, the MR stays; re-enabled: it works again */
TEST_F(kinds, revoke_reenable)
{
	struct side *a = &self->a, *b = &self->b;
	long long moves = hw_counter("remu1", "dmabuf_moves");
	long long errs = hw_counter("remu1", "dmabuf_map_errors");
	struct remu_tdb_info i;

	/* the dma-buf core WARNs when a vmap fails: no such exporter revokes */
	if (!variant->p2p) {
		EXPECT_EQ(-EINVAL, tdb_revoke(self->ctl, self->fd, 1));
		SKIP(return, "an exporter with a CPU mapping does not revoke");
	}

	fill(a->host, 8000, 50);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  post1(a, IBV_WR_RDMA_WRITE, HOST(a, 0), a->host_mr->lkey,
			8000, MR_IOVA + 500, b->dmr->rkey));
	memcpy(self->got + BUF_SIZE / 2, a->host, 8000);

	/* revoked: remu dropped everything in move_notify (else EBUSY) */
	ASSERT_EQ(0, tdb_revoke(self->ctl, self->fd, 1));
	i = tdb_info(self->ctl, self->fd);
	EXPECT_EQ(1, i.revoked);
	EXPECT_EQ(0, i.mapped);
	EXPECT_EQ(0, i.vmapped);
	EXPECT_EQ(moves + 1, hw_counter("remu1", "dmabuf_moves"));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  post1(a, IBV_WR_RDMA_READ, HOST(a, 0), a->host_mr->lkey,
			64, MR_IOVA + 500, b->dmr->rkey));
	EXPECT_LE(errs + 1, hw_counter("remu1", "dmabuf_map_errors"));
	ASSERT_EQ(0, side_reconnect(a, b));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  post1(a, IBV_WR_RDMA_WRITE, HOST(a, 0), a->host_mr->lkey,
			64, MR_IOVA + 500, b->dmr->rkey));
	ASSERT_EQ(0, side_reconnect(a, b));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  atomic1(a, IBV_WR_ATOMIC_FETCH_AND_ADD, MR_IOVA + 512,
			  b->dmr->rkey, 1, 0));
	ASSERT_EQ(0, side_reconnect(a, b));
	EXPECT_EQ(IBV_WC_LOC_PROT_ERR,
		  post1(b, IBV_WR_RDMA_WRITE, MR_IOVA + 500, b->dmr->lkey, 64,
			HOST(a, 0), a->host_mr->rkey));
	ASSERT_EQ(0, side_reconnect(a, b));
	/* nothing reached the buffer meanwhile */
	EXPECT_EQ(-1, kinds_cmp(self, 500, self->got + BUF_SIZE / 2, 8000));

	/* re-enabled: the same MR, the bytes the exporter kept */
	ASSERT_EQ(0, tdb_revoke(self->ctl, self->fd, 0));
	memset(a->host, 0, 8000);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  post1(a, IBV_WR_RDMA_READ, HOST(a, 0), a->host_mr->lkey,
			8000, MR_IOVA + 500, b->dmr->rkey));
	EXPECT_EQ(-1, cmp(a->host, self->got + BUF_SIZE / 2, 8000));
	fill(a->host, 3000, 51);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  post1(a, IBV_WR_RDMA_WRITE, HOST(a, 0), a->host_mr->lkey,
			3000, MR_IOVA + 9000, b->dmr->rkey));
	EXPECT_EQ(-1, kinds_cmp(self, 9000, a->host, 3000));
	ASSERT_EQ(IBV_WC_SUCCESS,
		  post1(b, IBV_WR_RDMA_WRITE, MR_IOVA + 9000, b->dmr->lkey,
			3000, HOST(a, 5000), a->host_mr->rkey));
	EXPECT_EQ(-1, cmp(a->host + 5000, a->host, 3000));
	EXPECT_EQ(0, tdb_info(self->ctl, self->fd).revoked);
}

/* a P2P buffer takes peer-to-peer importers only, as VFIO's */
TEST_F(kinds, peer2peer_only)
{
	struct remu_tdb_import imp;
	int c;

	if (!(variant->flags & REMU_TDB_P2P))
		SKIP(return, "not a P2P buffer");
	c = open(TDB_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, c);
	ASSERT_EQ(0, tdb_import(c, self->fd, REMU_TDB_IMP_MAP, &imp));
	EXPECT_EQ(-EOPNOTSUPP, imp.attach_err);
	ASSERT_EQ(0, tdb_import(c, self->fd, REMU_TDB_IMP_P2P |
				REMU_TDB_IMP_MAP, &imp));
	EXPECT_EQ(0, imp.attach_err);
	EXPECT_EQ(0, imp.map_err);
	EXPECT_EQ(0, imp.pages);	/* DMA addresses only */
	EXPECT_EQ(BUF_SIZE, imp.dma_len);
	EXPECT_EQ(2, tdb_info(self->ctl, self->fd).attachments);
	close(c);
	EXPECT_EQ(1, tdb_info(self->ctl, self->fd).attachments);
}

/* ---- bad input ---- */

static int reg_errno(struct ibv_pd *pd, uint64_t off, size_t len,
		     uint64_t iova, int fd, int access)
{
	struct ibv_mr *mr;

	errno = 0;
	mr = ibv_reg_dmabuf_mr(pd, off, len, iova, fd, access);
	if (mr) {
		ibv_dereg_mr(mr);
		return 0;
	}
	return errno;
}

TEST(bad_input)
{
	struct ibv_context *ctx = remu_open("remu0");
	int mrs = remu_obj_count("mr");
	int ctl, fd, memfd, heap, rofd;
	struct ibv_pd *pd;

	ASSERT_NE(NULL, ctx);
	pd = ibv_alloc_pd(ctx);
	ASSERT_NE(NULL, pd);
	ctl = open(TDB_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, ctl);
	fd = tdb_create(ctl, BUF_SIZE, 0);
	ASSERT_LE(0, fd);

	/* not a dma-buf; not an fd at all */
	memfd = memfd_create("remu-not-dmabuf", 0);
	ASSERT_LE(0, memfd);
	ASSERT_EQ(0, ftruncate(memfd, BUF_SIZE));
	EXPECT_EQ(EINVAL, reg_errno(pd, 0, 4096, 0, memfd, ACCESS_ALL));
	EXPECT_EQ(EBADF, reg_errno(pd, 0, 4096, 0, 1000, ACCESS_ALL));

	/* the range: beyond the buffer, at its end, empty, overflowing */
	EXPECT_EQ(EINVAL, reg_errno(pd, 0, BUF_SIZE + 1, 0, fd, ACCESS_ALL));
	EXPECT_EQ(EINVAL, reg_errno(pd, 4096, BUF_SIZE, 4096, fd,
				    ACCESS_ALL));
	EXPECT_EQ(EINVAL, reg_errno(pd, BUF_SIZE, 1, 0, fd, ACCESS_ALL));
	EXPECT_EQ(EINVAL, reg_errno(pd, 0, 0, 0, fd, ACCESS_ALL));
	EXPECT_EQ(EINVAL, reg_errno(pd, 0xfffffffffffff000ULL, 8192,
				    0x1000, fd, ACCESS_ALL));
	/* offset and iova must agree within the page */
	EXPECT_EQ(EINVAL, reg_errno(pd, 100, 4096, 200, fd, ACCESS_ALL));
	/* the whole buffer and its last byte are fine */
	EXPECT_EQ(0, reg_errno(pd, 0, BUF_SIZE, 0, fd, ACCESS_ALL));
	EXPECT_EQ(0, reg_errno(pd, BUF_SIZE - 1, 1, 0xfff, fd, ACCESS_ALL));

	/* a read-only dma-buf gives no write rights */
	rofd = tdb_create(ctl, BUF_SIZE, REMU_TDB_RDONLY);
	ASSERT_LE(0, rofd);
	EXPECT_EQ(EACCES, reg_errno(pd, 0, 4096, 0, rofd,
				    IBV_ACCESS_LOCAL_WRITE));
	EXPECT_EQ(EACCES, reg_errno(pd, 0, 4096, 0, rofd, ACCESS_ALL));
	EXPECT_EQ(0, reg_errno(pd, 0, 4096, 0, rofd, IBV_ACCESS_REMOTE_READ));
	close(rofd);
	heap = open("/dev/dma_heap/system", O_RDONLY | O_CLOEXEC);
	if (heap >= 0) {
		struct dma_heap_allocation_data ha = {
			.len = BUF_SIZE, .fd_flags = O_RDONLY | O_CLOEXEC };

		ASSERT_EQ(0, ioctl(heap, DMA_HEAP_IOCTL_ALLOC, &ha));
		EXPECT_EQ(EACCES, reg_errno(pd, 0, 4096, 0, ha.fd,
					    IBV_ACCESS_LOCAL_WRITE));
		EXPECT_EQ(0, reg_errno(pd, 0, 4096, 0, ha.fd, 0));
		close(ha.fd);
		close(heap);
	} else {
		/* only a kernel without the heap (6.1) may lack it; the
		 * read-only case above (test exporter) still ran */
		const char *why = dbuf_exporter_missing(EXP_HEAP);

		TH_LOG("read-only heap case not run: %s",
		       why ? why : strerror(errno));
		EXPECT_NE(NULL, why);
	}

	/* no CPU mapping: reached through its DMA addresses instead */
	rofd = tdb_create(ctl, BUF_SIZE, REMU_TDB_NO_VMAP);
	ASSERT_LE(0, rofd);
	EXPECT_EQ(0, reg_errno(pd, 0, 4096, 0, rofd, 0));
	EXPECT_EQ(0, tdb_info(ctl, rofd).attachments);
	close(rofd);
	/* DMA addresses that are no memory remu can reach */
	rofd = tdb_create(ctl, BUF_SIZE, REMU_TDB_P2P | REMU_TDB_BAD_DMA);
	ASSERT_LE(0, rofd);
	EXPECT_EQ(EOPNOTSUPP, reg_errno(pd, 0, 4096, 0, rofd, ACCESS_ALL));
	EXPECT_EQ(0, tdb_info(ctl, rofd).attachments);
	EXPECT_EQ(0, tdb_info(ctl, rofd).mapped);
	close(rofd);
	/* an exporter with no P2P path to remu's device (EINVAL) */
	rofd = tdb_create(ctl, BUF_SIZE, REMU_TDB_P2P | REMU_TDB_NO_PATH);
	ASSERT_LE(0, rofd);
	EXPECT_EQ(EOPNOTSUPP, reg_errno(pd, 0, 4096, 0, rofd, ACCESS_ALL));
	EXPECT_EQ(0, tdb_info(ctl, rofd).attachments);
	close(rofd);
	/* revoked: the exporter refuses the attachment */
	rofd = tdb_create(ctl, BUF_SIZE, REMU_TDB_P2P);
	ASSERT_LE(0, rofd);
	ASSERT_EQ(0, tdb_revoke(ctl, rofd, 1));
	EXPECT_EQ(ENODEV, reg_errno(pd, 0, 4096, 0, rofd, ACCESS_ALL));
	EXPECT_EQ(0, tdb_info(ctl, rofd).attachments);
	ASSERT_EQ(0, tdb_revoke(ctl, rofd, 0));
	EXPECT_EQ(0, reg_errno(pd, 0, 4096, 0, rofd, ACCESS_ALL));
	close(rofd);
	/* a buffer without vmap and not P2P, revoked: its map refuses */
	rofd = tdb_create(ctl, BUF_SIZE, REMU_TDB_NO_VMAP);
	ASSERT_LE(0, rofd);
	ASSERT_EQ(0, tdb_revoke(ctl, rofd, 1));
	EXPECT_EQ(ENODEV, reg_errno(pd, 0, 4096, 0, rofd, ACCESS_ALL));
	EXPECT_EQ(0, tdb_info(ctl, rofd).attachments);
	close(rofd);

	EXPECT_EQ(0, tdb_info(ctl, fd).attachments);
	close(memfd);
	close(fd);
	close(ctl);
	EXPECT_EQ(0, ibv_dealloc_pd(pd));
	ibv_close_device(ctx);
	EXPECT_EQ(mrs, remu_obj_count("mr"));
	EXPECT_EQ(0, hw_counter("remu0", "dmabuf_mrs"));
}

TEST_HARNESS_MAIN
