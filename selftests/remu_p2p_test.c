// SPDX-License-Identifier: GPL-2.0
/*
 * remu_p2p_test - device memory exported as a dma-buf and imported peer
 * to peer (docs/dma-buf.md, "Device memory as a dma-buf").
 *
 * Fixture exp (variants remu0 -> remu1 and remu1 -> remu0): the exporter
 * device allocates a DM of 40000 bytes (40960 in pages), fills it with
 * ibv_memcpy_to_dm() and exports it (remudv_dm_export_dmabuf_fd(), or
 * ibv_dm_export_dmabuf_fd() when built with REMU_HAVE_IBV_DM_EXPORT); the
 * importer device registers the dma-buf with ibv_reg_dmabuf_mr() at an
 * offset (byte 8192 of the DM at its first iova), which remu reaches peer
 * to peer (no vmap).  A QP on the exporter device then WRITEs, READs,
 * FETCH_ADDs and CMP_SWPs through the importer's MR, and the importer's
 * QP uses the MR as its local SGE both ways; every byte is checked with
 * ibv_memcpy_from_dm() against a model of the DM.
 *  - write_read_atomic: the above, lengths 1 B to the whole MR.
 *  - free_dm_revokes: ibv_free_dm() while imported revokes: the importer
 *    was told (move_notify, its mapping dropped), the next remote access
 *    completes with IBV_WC_REM_ACCESS_ERR, a local one with
 *    IBV_WC_LOC_PROT_ERR, the MR stays and deregisters; the pages stay
 *    out of the pool until the last fd is closed, then return.
 *  - fd_closed_while_imported: the MR holds the dma-buf; the fd closed,
 *    traffic goes on; freeing the DM still revokes.
 *  - two_exports: two dma-bufs of one DM imported as two MRs see the same
 *    bytes; freeing the DM revokes both.
 * test_importer: remu_test_dmabuf.ko's importer attaches to remu's export:
 * refused without peer2peer (EOPNOTSUPP), pin refused where the kernel
 * does not pin around maps (7.x), one DMA-address-only entry over the
 * whole allocation, whose memory is the DM's (read and written through
 * it); a device that cannot do DMA refused at map (EOPNOTSUPP); revoke
 * on free: move_notify, later maps and attaches ENODEV.
 * absent_p2p_pci: the device on a veth says why it cannot take PCI peers.
 * export_refused: a freed DM's handle, another process's handle (raw
 * ioctls), and the process's own DM exported in the child; no fd left
 * (EMFILE), an fd number that cannot be copied out (EFAULT): nothing
 * exported behind either.
 * process_killed: the exporting process is killed while its dma-buf is
 * imported by another: revoked, nothing leaks, the pages come back.
 * device_deleted: `rdma link delete` of the exporting device while its
 * dma-buf is imported: revoked; the dma-buf, and the device's memory
 * pool with it, outlive the device until the last fd is closed.
 *
 * remu_test_dmabuf.ko is loaded by run_tests.sh around this test.
 */
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/rdma_user_ioctl.h>
#include <rdma/remu-abi.h>

#include "kselftest_harness.h"
#include "remu_dmabuf_lib.h"
#include "remudv.h"

#define DM_LEN		40000			/* a multiple of 4 */
#define DM_PAGES	40960			/* what the dma-buf holds */
#define P_OFF		8192			/* DM byte at the MR's iova */
#define P_LEN		(DM_LEN - P_OFF)
#define P_IOVA		0x5a5a00000000ULL	/* same offset in the page */

static long long dm_stat(const char *dev, const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/%s", dev, name);
	return remu_read_num(path);
}

/* wait up to 2 s for @dev's dm_in_use to be @want; the value last read */
static long long dm_in_use_becomes(const char *dev, long long want)
{
	long long v = -1;
	int i;

	for (i = 0; i < 40; i++) {
		v = dm_stat(dev, "dm_in_use");
		if (v == want)
			break;
		usleep(50000);
	}
	return v;
}

/* the DM's bytes [off, off + len), read with 4-byte aligned copies */
static int dm_get(struct ibv_dm *dm, size_t off, size_t len, uint8_t *out)
{
	uint8_t tmp[DM_LEN];
	size_t a = off & ~3UL, b = (off + len + 3) & ~3UL;

	if (b > DM_LEN || ibv_memcpy_from_dm(tmp, dm, a, b - a))
		return -1;
	memcpy(out, tmp + (off - a), len);
	return 0;
}

/* REMU_METHOD_DM_EXPORT_DMABUF by hand, naming a DM by handle number */
static int raw_export(struct ibv_context *ctx, uint32_t dm_handle, int *fd)
{
	struct {
		struct ib_uverbs_ioctl_hdr hdr;
		struct ib_uverbs_attr attr[2];
	} cmd = {};
	uint32_t ufd = ~0u;

	cmd.hdr.length = sizeof(cmd);
	cmd.hdr.object_id = UVERBS_OBJECT_DM;
	cmd.hdr.method_id = REMU_METHOD_DM_EXPORT_DMABUF;
	cmd.hdr.num_attrs = 2;
	cmd.attr[0].attr_id = REMU_ATTR_EXPORT_DMABUF_DM_HANDLE;
	cmd.attr[0].data = dm_handle;
	cmd.attr[1].attr_id = REMU_ATTR_EXPORT_DMABUF_FD;
	cmd.attr[1].len = sizeof(ufd);
	cmd.attr[1].data = (uintptr_t)&ufd;
	if (ioctl(ctx->cmd_fd, RDMA_VERBS_IOCTL, &cmd))
		return errno;
	*fd = (int)ufd;
	return 0;
}

/* the same with the fd's out pointer @uptr as given: 0 or an errno */
static int raw_export_to(struct ibv_context *ctx, uint32_t dm_handle,
			 uint64_t uptr)
{
	struct {
		struct ib_uverbs_ioctl_hdr hdr;
		struct ib_uverbs_attr attr[2];
	} cmd = {};

	cmd.hdr.length = sizeof(cmd);
	cmd.hdr.object_id = UVERBS_OBJECT_DM;
	cmd.hdr.method_id = REMU_METHOD_DM_EXPORT_DMABUF;
	cmd.hdr.num_attrs = 2;
	cmd.attr[0].attr_id = REMU_ATTR_EXPORT_DMABUF_DM_HANDLE;
	cmd.attr[0].data = dm_handle;
	cmd.attr[1].attr_id = REMU_ATTR_EXPORT_DMABUF_FD;
	cmd.attr[1].len = sizeof(uint32_t);
	cmd.attr[1].data = uptr;
	return ioctl(ctx->cmd_fd, RDMA_VERBS_IOCTL, &cmd) ? errno : 0;
}

/*
 * The export under test: ibv_dm_export_dmabuf_fd() when the libibverbs
 * the test is built against has it (rdma-core 62 and later; build with
 * -DREMU_HAVE_IBV_DM_EXPORT and a libremu built in that tree, whose
 * dm_export_dmabuf_fd op runs the same command), else libremu's
 * remudv_dm_export_dmabuf_fd().
 */
static int dm_export(struct ibv_dm *dm)
{
#ifdef REMU_HAVE_IBV_DM_EXPORT
	return ibv_dm_export_dmabuf_fd(dm);
#else
	return remudv_dm_export_dmabuf_fd(dm);
#endif
}

static struct ibv_dm *dm_alloc(struct ibv_context *ctx, size_t len)
{
	struct ibv_alloc_dm_attr a = { .length = len };

	return ibv_alloc_dm(ctx, &a);
}

/* ---- fixture exp: DM of one device, imported by the other ---- */

FIXTURE(exp) {
	struct side e, i;	/* exporter's end, importer's end (i.dmr) */
	struct ibv_dm *dm;
	int fd;
	uint8_t model[DM_LEN];
	long long in_use0;
	int mrs, dms;
};

FIXTURE_VARIANT(exp) {
	const char *exporter, *importer;
};

FIXTURE_VARIANT_ADD(exp, remu0_to_remu1) {
	.exporter = "remu0", .importer = "remu1",
};

FIXTURE_VARIANT_ADD(exp, remu1_to_remu0) {
	.exporter = "remu1", .importer = "remu0",
};

FIXTURE_SETUP(exp)
{
	memset(&self->e, 0, sizeof(self->e));
	memset(&self->i, 0, sizeof(self->i));
	self->fd = -1;
	self->mrs = remu_obj_count("mr");
	self->dms = remu_obj_count("dm");
	ASSERT_LE(0, self->dms);
	self->in_use0 = dm_stat(variant->exporter, "dm_in_use");
	ASSERT_LE(0, self->in_use0);
	ASSERT_EQ(0, side_open(&self->e, variant->exporter));
	ASSERT_EQ(0, side_open(&self->i, variant->importer));
	ASSERT_EQ(0, side_connect(&self->e, &self->i));
	ASSERT_EQ(0, side_connect(&self->i, &self->e));

	self->dm = dm_alloc(self->e.ctx, DM_LEN);
	ASSERT_NE(NULL, self->dm) TH_LOG("alloc_dm: %s", strerror(errno));
	fill(self->model, DM_LEN, 1);
	ASSERT_EQ(0, ibv_memcpy_to_dm(self->dm, 0, self->model, DM_LEN));
	self->fd = dm_export(self->dm);
	ASSERT_LE(0, self->fd) TH_LOG("export: %s", strerror(errno));
	self->i.dmr = ibv_reg_dmabuf_mr(self->i.pd, P_OFF, P_LEN, P_IOVA,
					self->fd, ACCESS_ALL);
	ASSERT_NE(NULL, self->i.dmr) TH_LOG("reg_dmabuf_mr: %s",
					    strerror(errno));
	/* one export, mapped once (by remu, peer to peer), pages held */
	EXPECT_EQ(1, hw_counter(variant->exporter, "dmabuf_exports"));
	EXPECT_EQ(1, hw_counter(variant->exporter, "dmabuf_export_maps"));
	EXPECT_EQ(1, hw_counter(variant->importer, "dmabuf_p2p_mrs"));
	EXPECT_EQ(self->in_use0 + DM_PAGES,
		  dm_stat(variant->exporter, "dm_in_use"));
}

FIXTURE_TEARDOWN(exp)
{
	side_close(&self->i);
	if (self->fd >= 0)
		close(self->fd);
	if (self->dm)
		EXPECT_EQ(0, ibv_free_dm(self->dm));
	side_close(&self->e);
	EXPECT_EQ(self->mrs, remu_obj_count("mr"));
	EXPECT_EQ(self->in_use0, dm_in_use_becomes(variant->exporter,
						   self->in_use0));
	EXPECT_EQ(self->dms, remu_obj_count("dm"));
	EXPECT_EQ(0, hw_counter(variant->exporter, "dmabuf_exports"));
	EXPECT_EQ(0, hw_counter(variant->exporter, "dmabuf_export_maps"));
	EXPECT_EQ(0, hw_counter(variant->importer, "dmabuf_p2p_mrs"));
}

static const uint32_t plens[] = { 1, 5, 4095, 4097, 12000, P_LEN };

/* remote WRITE/READ/atomics and local SGEs through the imported MR */
TEST_F(exp, write_read_atomic)
{
	struct side *e = &self->e, *i = &self->i;
	uint8_t *got = malloc(DM_LEN);
	uint64_t word;
	unsigned int k;

	ASSERT_NE(NULL, got);
	/* the import sees what the exporter's process wrote */
	ASSERT_EQ(IBV_WC_SUCCESS,
		  post1(e, IBV_WR_RDMA_READ, HOST(e, 0), e->host_mr->lkey,
			P_LEN, P_IOVA, i->dmr->rkey));
	EXPECT_EQ(-1, cmp(e->host, self->model + P_OFF, P_LEN));

	for (k = 0; k < sizeof(plens) / sizeof(plens[0]); k++) {
		uint32_t len = plens[k];
		uint64_t off = (k * 1237) % (P_LEN - len + 1);

		/* remote WRITE into the DM */
		fill(e->host, len, k + 10);
		ASSERT_EQ(IBV_WC_SUCCESS,
			  post1(e, IBV_WR_RDMA_WRITE, HOST(e, 0),
				e->host_mr->lkey, len, P_IOVA + off,
				i->dmr->rkey));
		memcpy(self->model + P_OFF + off, e->host, len);
		ASSERT_EQ(0, dm_get(self->dm, 0, DM_LEN, got));
		EXPECT_EQ(-1, cmp(got, self->model, DM_LEN))
			TH_LOG("WRITE of %u at %llu", len,
			       (unsigned long long)off);

		/* remote READ out of it, after the process wrote there */
		fill(self->model, DM_LEN, k + 20);
		ASSERT_EQ(0, ibv_memcpy_to_dm(self->dm, 0, self->model,
					      DM_LEN));
		memset(e->host, 0, len);
		ASSERT_EQ(IBV_WC_SUCCESS,
			  post1(e, IBV_WR_RDMA_READ, HOST(e, 0),
				e->host_mr->lkey, len, P_IOVA + off,
				i->dmr->rkey));
		EXPECT_EQ(-1, cmp(e->host, self->model + P_OFF + off, len))
			TH_LOG("READ of %u at %llu", len,
			       (unsigned long long)off);

		/* the importer's local SGE: WRITE out of the DM */
		memset(e->host, 0, len);
		ASSERT_EQ(IBV_WC_SUCCESS,
			  post1(i, IBV_WR_RDMA_WRITE, P_IOVA + off,
				i->dmr->lkey, len, HOST(e, 0),
				e->host_mr->rkey));
		EXPECT_EQ(-1, cmp(e->host, self->model + P_OFF + off, len));

		/* and READ into it */
		fill(e->host, len, k + 30);
		ASSERT_EQ(IBV_WC_SUCCESS,
			  post1(i, IBV_WR_RDMA_READ, P_IOVA + off,
				i->dmr->lkey, len, HOST(e, 0),
				e->host_mr->rkey));
		memcpy(self->model + P_OFF + off, e->host, len);
		ASSERT_EQ(0, dm_get(self->dm, 0, DM_LEN, got));
		EXPECT_EQ(-1, cmp(got, self->model, DM_LEN));
	}

	/* atomics on a DM word (MR byte 64 is DM byte P_OFF + 64) */
	word = 1000;
	ASSERT_EQ(0, ibv_memcpy_to_dm(self->dm, P_OFF + 64, &word, 8));
	ASSERT_EQ(IBV_WC_SUCCESS, atomic1(e, IBV_WR_ATOMIC_FETCH_AND_ADD,
					   P_IOVA + 64, i->dmr->rkey, 234, 0));
	EXPECT_EQ(1000, *(uint64_t *)e->host);
	ASSERT_EQ(IBV_WC_SUCCESS, atomic1(e, IBV_WR_ATOMIC_CMP_AND_SWP,
					   P_IOVA + 64, i->dmr->rkey, 1234,
					   0x1122334455667788ULL));
	EXPECT_EQ(1234, *(uint64_t *)e->host);
	/* a compare that fails swaps nothing */
	ASSERT_EQ(IBV_WC_SUCCESS, atomic1(e, IBV_WR_ATOMIC_CMP_AND_SWP,
					   P_IOVA + 64, i->dmr->rkey, 1, 2));
	EXPECT_EQ(0x1122334455667788ULL, *(uint64_t *)e->host);
	ASSERT_EQ(0, ibv_memcpy_from_dm(&word, self->dm, P_OFF + 64, 8));
	EXPECT_EQ(0x1122334455667788ULL, word);

	/* past the MR's end: refused, the DM untouched */
	memcpy(self->model + P_OFF + 64, &word, 8);
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  post1(e, IBV_WR_RDMA_WRITE, HOST(e, 0), e->host_mr->lkey,
			16, P_IOVA + P_LEN - 8, i->dmr->rkey));
	ASSERT_EQ(0, dm_get(self->dm, 0, DM_LEN, got));
	EXPECT_EQ(-1, cmp(got, self->model, DM_LEN));
	/* one mapping all along: no move, no re-map */
	EXPECT_EQ(1, hw_counter(variant->exporter, "dmabuf_export_maps"));
	free(got);
}

/* ibv_free_dm() while imported revokes; the pages come back at the end */
TEST_F(exp, free_dm_revokes)
{
	struct side *e = &self->e, *i = &self->i;
	long long revokes = hw_counter(variant->exporter,
				       "dmabuf_export_revokes");
	long long moves = hw_counter(variant->importer, "dmabuf_moves");
	long long inval = hw_counter(variant->importer,
				     "dmabuf_invalidations");
	long long errs = hw_counter(variant->importer, "dmabuf_map_errors");

	fill(e->host, 4096, 3);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  post1(e, IBV_WR_RDMA_WRITE, HOST(e, 0), e->host_mr->lkey,
			4096, P_IOVA, i->dmr->rkey));

	/* no MR on the DM itself: the free succeeds, and revokes */
	ASSERT_EQ(0, ibv_free_dm(self->dm));
	self->dm = NULL;
	EXPECT_EQ(revokes + 1, hw_counter(variant->exporter,
					  "dmabuf_export_revokes"));
	/* remu dropped its mapping in move_notify */
	EXPECT_EQ(0, hw_counter(variant->exporter, "dmabuf_export_maps"));
	EXPECT_EQ(moves + 1, hw_counter(variant->importer, "dmabuf_moves"));
	EXPECT_EQ(inval + 1, hw_counter(variant->importer,
					"dmabuf_invalidations"));

	/* a remote access fails as on mlx5, and the MR is still there */
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  post1(e, IBV_WR_RDMA_WRITE, HOST(e, 0), e->host_mr->lkey,
			64, P_IOVA, i->dmr->rkey));
	EXPECT_LE(errs + 1, hw_counter(variant->importer,
				       "dmabuf_map_errors"));
	ASSERT_EQ(0, side_reconnect(e, i));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  post1(e, IBV_WR_RDMA_READ, HOST(e, 0), e->host_mr->lkey,
			64, P_IOVA + 100, i->dmr->rkey));
	ASSERT_EQ(0, side_reconnect(e, i));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  atomic1(e, IBV_WR_ATOMIC_FETCH_AND_ADD, P_IOVA + 64,
			  i->dmr->rkey, 1, 0));
	/* a local SGE in it */
	ASSERT_EQ(0, side_reconnect(e, i));
	EXPECT_EQ(IBV_WC_LOC_PROT_ERR,
		  post1(i, IBV_WR_RDMA_WRITE, P_IOVA, i->dmr->lkey, 64,
			HOST(e, 0), e->host_mr->rkey));
	/* the pair itself still works */
	ASSERT_EQ(0, side_reconnect(e, i));
	ASSERT_EQ(IBV_WC_SUCCESS,
		  post1(e, IBV_WR_RDMA_WRITE, HOST(e, 0), e->host_mr->lkey,
			64, HOST(i, 0), i->host_mr->rkey));

	/* the dma-buf holds the pages until its last reference goes */
	EXPECT_EQ(self->in_use0 + DM_PAGES,
		  dm_stat(variant->exporter, "dm_in_use"));
	EXPECT_EQ(0, ibv_dereg_mr(i->dmr));
	i->dmr = NULL;
	EXPECT_EQ(self->in_use0 + DM_PAGES,
		  dm_stat(variant->exporter, "dm_in_use"));
	EXPECT_EQ(1, hw_counter(variant->exporter, "dmabuf_exports"));
	ASSERT_EQ(0, close(self->fd));
	self->fd = -1;
	EXPECT_EQ(self->in_use0, dm_in_use_becomes(variant->exporter,
						   self->in_use0));
	EXPECT_EQ(0, hw_counter(variant->exporter, "dmabuf_exports"));
}

/* the MR holds the dma-buf: the fd closed, it goes on; free revokes */
TEST_F(exp, fd_closed_while_imported)
{
	struct side *e = &self->e, *i = &self->i;
	uint8_t got[8192];

	ASSERT_EQ(0, close(self->fd));
	self->fd = -1;
	fill(e->host, 8192, 4);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  post1(e, IBV_WR_RDMA_WRITE, HOST(e, 0), e->host_mr->lkey,
			8192, P_IOVA + 3000, i->dmr->rkey));
	ASSERT_EQ(0, dm_get(self->dm, P_OFF + 3000, 8192, got));
	EXPECT_EQ(-1, cmp(got, e->host, 8192));
	EXPECT_EQ(1, hw_counter(variant->exporter, "dmabuf_exports"));

	ASSERT_EQ(0, ibv_free_dm(self->dm));
	self->dm = NULL;
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  post1(e, IBV_WR_RDMA_READ, HOST(e, 0), e->host_mr->lkey,
			64, P_IOVA, i->dmr->rkey));
	EXPECT_EQ(self->in_use0 + DM_PAGES,
		  dm_stat(variant->exporter, "dm_in_use"));
	/* the MR held the last reference */
	EXPECT_EQ(0, ibv_dereg_mr(i->dmr));
	i->dmr = NULL;
	EXPECT_EQ(self->in_use0, dm_in_use_becomes(variant->exporter,
						   self->in_use0));
}

/* two dma-bufs of one DM: the same bytes; freeing revokes both */
TEST_F(exp, two_exports)
{
	struct side *e = &self->e, *i = &self->i;
	long long revokes = hw_counter(variant->exporter,
				       "dmabuf_export_revokes");
	struct ibv_mr *mr2;
	int fd2;

	fd2 = dm_export(self->dm);
	ASSERT_LE(0, fd2);
	EXPECT_NE(self->fd, fd2);
	/* the whole dma-buf, at iova 0 */
	mr2 = ibv_reg_dmabuf_mr(i->pd, 0, DM_PAGES, 0, fd2, ACCESS_ALL);
	ASSERT_NE(NULL, mr2);
	EXPECT_EQ(2, hw_counter(variant->exporter, "dmabuf_exports"));
	EXPECT_EQ(2, hw_counter(variant->exporter, "dmabuf_export_maps"));

	fill(e->host, 5000, 5);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  post1(e, IBV_WR_RDMA_WRITE, HOST(e, 0), e->host_mr->lkey,
			5000, P_IOVA + 10, i->dmr->rkey));
	memset(e->host + 8192, 0, 5000);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  post1(e, IBV_WR_RDMA_READ, HOST(e, 8192), e->host_mr->lkey,
			5000, P_OFF + 10, mr2->rkey));
	EXPECT_EQ(-1, cmp(e->host + 8192, e->host, 5000));
	/* the page rounding is memory too: bytes past DM_LEN are zero */
	ASSERT_EQ(IBV_WC_SUCCESS,
		  post1(e, IBV_WR_RDMA_READ, HOST(e, 0), e->host_mr->lkey,
			DM_PAGES - DM_LEN, DM_LEN, mr2->rkey));
	EXPECT_EQ(0, e->host[0]);
	EXPECT_EQ(0, e->host[DM_PAGES - DM_LEN - 1]);

	ASSERT_EQ(0, ibv_free_dm(self->dm));
	self->dm = NULL;
	EXPECT_EQ(revokes + 2, hw_counter(variant->exporter,
					  "dmabuf_export_revokes"));
	EXPECT_EQ(0, hw_counter(variant->exporter, "dmabuf_export_maps"));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  post1(e, IBV_WR_RDMA_READ, HOST(e, 0), e->host_mr->lkey,
			64, 0, mr2->rkey));
	EXPECT_EQ(0, ibv_dereg_mr(mr2));
	close(fd2);
}

/* ---- the test exporter's importer against remu's export ---- */

TEST(test_importer)
{
	struct ibv_context *ctx = remu_open("remu0");
	long long in_use0 = dm_stat("remu0", "dm_in_use");
	int dms = remu_obj_count("dm");
	struct remu_tdb_import imp;
	struct remu_tdb_rw rw = {};
	uint8_t pat[10000], got[10000];
	int c1, c2, c3, fd;
	struct ibv_dm *dm;

	ASSERT_NE(NULL, ctx);
	c1 = open(TDB_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, c1) TH_LOG("%s: %s (remu_test_dmabuf.ko loaded?)",
				TDB_PATH, strerror(errno));
	c2 = open(TDB_PATH, O_RDWR | O_CLOEXEC);
	c3 = open(TDB_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, c2);
	ASSERT_LE(0, c3);
	dm = dm_alloc(ctx, sizeof(pat));
	ASSERT_NE(NULL, dm);
	fill(pat, sizeof(pat), 7);
	ASSERT_EQ(0, ibv_memcpy_to_dm(dm, 0, pat, sizeof(pat)));
	fd = dm_export(dm);
	ASSERT_LE(0, fd);

	/* an importer that cannot take peer-to-peer addresses: refused */
	ASSERT_EQ(0, tdb_import(c1, fd, REMU_TDB_IMP_MAP, &imp));
	EXPECT_EQ(-EOPNOTSUPP, imp.attach_err);
	EXPECT_EQ(0, tdb_import_info(c1).attached);

	/* a peer-to-peer one: attach, pin, map */
	ASSERT_EQ(0, tdb_import(c2, fd, REMU_TDB_IMP_P2P | REMU_TDB_IMP_PIN |
				REMU_TDB_IMP_MAP, &imp));
	EXPECT_EQ(0, imp.attach_err);
	/* pin: refused where dynamic importers are never pinned */
	EXPECT_EQ(imp.pin_on_map ? 0 : -EOPNOTSUPP, imp.pin_err);
	TH_LOG("pin %s on this kernel", imp.pin_on_map ? "accepted" :
						   "refused");
	EXPECT_EQ(0, imp.map_err);
	/* one entry, DMA addresses only, the whole allocation */
	EXPECT_EQ(1, imp.nents);
	EXPECT_EQ(0, imp.pages);
	EXPECT_EQ(12288, imp.dma_len);
	EXPECT_NE(0, imp.dma_addr);
	EXPECT_EQ(0, imp.dma_addr & 4095);
	EXPECT_EQ(1, hw_counter("remu0", "dmabuf_export_maps"));

	/* those addresses are the DM's memory, both ways */
	rw.offset = 0;
	rw.len = sizeof(got);
	rw.buf = (uintptr_t)got;
	ASSERT_EQ(0, ioctl(c2, REMU_TDB_IMPORT_READ, &rw));
	EXPECT_EQ(-1, cmp(got, pat, sizeof(pat)));
	fill(got, 100, 8);
	rw.offset = 4000;
	rw.len = 100;
	ASSERT_EQ(0, ioctl(c2, REMU_TDB_IMPORT_WRITE, &rw));
	memcpy(pat + 4000, got, 100);
	ASSERT_EQ(0, ibv_memcpy_from_dm(got, dm, 0, sizeof(got)));
	EXPECT_EQ(-1, cmp(got, pat, sizeof(pat)));

	/* a device that cannot do DMA at all: the map is refused */
	ASSERT_EQ(0, tdb_import(c3, fd, REMU_TDB_IMP_P2P | REMU_TDB_IMP_MAP |
				REMU_TDB_IMP_NOMASK, &imp));
	EXPECT_EQ(0, imp.attach_err);
	EXPECT_EQ(-EOPNOTSUPP, imp.map_err);
	EXPECT_EQ(0, tdb_import_info(c3).mapped);
	EXPECT_EQ(1, hw_counter("remu0", "dmabuf_export_maps"));
	ASSERT_EQ(0, ioctl(c3, REMU_TDB_IMPORT_DROP));

	/* free: the importer is told and unmaps; no more maps or attaches */
	ASSERT_EQ(0, ibv_free_dm(dm));
	EXPECT_EQ(1, tdb_import_info(c2).moves);
	EXPECT_EQ(0, tdb_import_info(c2).mapped);
	EXPECT_EQ(0, hw_counter("remu0", "dmabuf_export_maps"));
	EXPECT_EQ(-1, ioctl(c2, REMU_TDB_IMPORT_MAP));
	EXPECT_EQ(ENODEV, errno);
	ASSERT_EQ(0, tdb_import(c3, fd, REMU_TDB_IMP_P2P | REMU_TDB_IMP_MAP,
				&imp));
	EXPECT_EQ(-ENODEV, imp.attach_err);

	/* held by the dma-buf until the fd and the importer let go */
	EXPECT_EQ(in_use0 + 12288, dm_stat("remu0", "dm_in_use"));
	close(fd);
	EXPECT_EQ(in_use0 + 12288, dm_stat("remu0", "dm_in_use"));
	close(c2);
	EXPECT_EQ(in_use0, dm_in_use_becomes("remu0", in_use0));
	EXPECT_EQ(dms, remu_obj_count("dm"));
	EXPECT_EQ(0, hw_counter("remu0", "dmabuf_exports"));
	close(c1);
	close(c3);
	ibv_close_device(ctx);
}

/* ---- what the device says it cannot take ---- */

/*
 * remu0 sits on a veth: exporters that map only for a PCI peer (VFIO's
 * BAR export) cannot be registered on it, and its sysfs "absent" file
 * says why: the kernel has no CONFIG_PCI_P2PDMA (Debian's 6.1, 6.12), or
 * the netdev has no PCI function above it.
 */
TEST(absent_p2p_pci)
{
	char why[256];

	ASSERT_NE(NULL, remu_absent("remu0", "p2p_pci", why, sizeof(why)))
		TH_LOG("no p2p_pci line in /sys/class/infiniband/remu0/absent");
	TH_LOG("%s", why);
	EXPECT_TRUE(strstr(why, "CONFIG_PCI_P2PDMA") ||
		    strstr(why, "netdev v0 has no PCI function"));
}

/* ---- refused exports ---- */

/* the child's half of export_refused: exit 0 if all went as it should */
static int foreign_child(uint32_t parent_handle)
{
	struct ibv_context *ctx = remu_open("remu0");
	struct ibv_dm *dm;
	int fd = -1;

	if (!ctx)
		return 10;
	/* the parent's DM by number: not in this context */
	if (raw_export(ctx, parent_handle, &fd) != ENOENT)
		return 11;
	dm = dm_alloc(ctx, 4096);
	if (!dm)
		return 12;
	fd = dm_export(dm);
	if (fd < 0)
		return 13;
	close(fd);
	if (ibv_free_dm(dm))
		return 14;
	ibv_close_device(ctx);
	return 0;
}

TEST(export_refused)
{
	struct ibv_context *ctx = remu_open("remu0");
	int dms = remu_obj_count("dm");
	struct ibv_dm *dm, *dm2;
	struct rlimit rl, low;
	uint32_t handle;
	int fd = -1, st, next;
	pid_t pid;

	ASSERT_NE(NULL, ctx);
	dm = dm_alloc(ctx, 4096);
	ASSERT_NE(NULL, dm);
	dm2 = dm_alloc(ctx, 4096);
	ASSERT_NE(NULL, dm2);
	/* the raw command works on a live DM */
	handle = dm->handle;
	ASSERT_EQ(0, raw_export(ctx, handle, &fd));
	EXPECT_LE(0, fd);
	close(fd);
	/* another process names it */
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		_exit(foreign_child(handle));
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFEXITED(st));
	EXPECT_EQ(0, WEXITSTATUS(st)) TH_LOG("child step %d",
					     WEXITSTATUS(st));
	/* freed: its handle names nothing */
	ASSERT_EQ(0, ibv_free_dm(dm));
	fd = -1;
	EXPECT_EQ(ENOENT, raw_export(ctx, handle, &fd));
	EXPECT_EQ(-1, fd);
	/* a handle never given out */
	EXPECT_EQ(ENOENT, raw_export(ctx, 0x7fffff, &fd));
	EXPECT_EQ(0, hw_counter("remu0", "dmabuf_exports"));
	/* no fd left: EMFILE, and nothing exported behind */
	next = dup(0);
	ASSERT_LE(0, next);
	close(next);
	ASSERT_EQ(0, getrlimit(RLIMIT_NOFILE, &rl));
	low = rl;
	low.rlim_cur = next;
	ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &low));
	errno = 0;
	fd = dm_export(dm2);
	ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &rl));
	EXPECT_EQ(-1, fd);
	EXPECT_EQ(EMFILE, errno);
	EXPECT_EQ(0, hw_counter("remu0", "dmabuf_exports"));
	/* the fd number cannot be copied out: EFAULT, no fd made */
	EXPECT_EQ(EFAULT, raw_export_to(ctx, dm2->handle, 1));
	EXPECT_EQ(0, hw_counter("remu0", "dmabuf_exports"));
	fd = dup(0);
	EXPECT_EQ(next, fd);
	close(fd);
	/* not a remu DM at all: remudv refuses */
	errno = 0;
	EXPECT_EQ(-1, remudv_dm_export_dmabuf_fd(NULL));
	EXPECT_EQ(EOPNOTSUPP, errno);
	EXPECT_EQ(0, ibv_free_dm(dm2));
	ibv_close_device(ctx);
	EXPECT_EQ(dms, remu_obj_count("dm"));
}

/* ---- the exporting process killed ---- */

static void send_fd(int sock, int fd)
{
	char c = 'f', cbuf[CMSG_SPACE(sizeof(int))] = {};
	struct iovec iov = { &c, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	if (sendmsg(sock, &m, 0) != 1)
		_exit(20);
}

static int recv_fd(int sock)
{
	char c, cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &c, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;
	int fd;

	if (recvmsg(sock, &m, 0) != 1)
		return -1;
	cm = CMSG_FIRSTHDR(&m);
	if (!cm || cm->cmsg_type != SCM_RIGHTS)
		return -1;
	memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}

/* the child: a DM on remu0 with a pattern, exported, fd to the parent */
static void exporter_child(int sock)
{
	struct ibv_context *ctx = remu_open("remu0");
	uint8_t pat[DM_LEN];
	struct ibv_dm *dm;
	int fd;

	dm = ctx ? dm_alloc(ctx, DM_LEN) : NULL;
	if (!dm)
		_exit(21);
	fill(pat, DM_LEN, 9);
	if (ibv_memcpy_to_dm(dm, 0, pat, DM_LEN))
		_exit(22);
	fd = dm_export(dm);
	if (fd < 0)
		_exit(23);
	send_fd(sock, fd);
	for (;;)
		pause();
}

TEST(process_killed)
{
	long long in_use0 = dm_stat("remu0", "dm_in_use");
	long long revokes = hw_counter("remu0", "dmabuf_export_revokes");
	int dms = remu_obj_count("dm"), mrs = remu_obj_count("mr");
	struct side a = {}, b = {};
	uint8_t pat[DM_LEN];
	int sv[2], fd, st;
	pid_t pid;

	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		close(sv[0]);
		exporter_child(sv[1]);
	}
	close(sv[1]);
	fd = recv_fd(sv[0]);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, side_open(&a, "remu0"));
	ASSERT_EQ(0, side_open(&b, "remu1"));
	ASSERT_EQ(0, side_connect(&a, &b));
	ASSERT_EQ(0, side_connect(&b, &a));
	/* the other process's DM, imported here on remu1 */
	b.dmr = ibv_reg_dmabuf_mr(b.pd, 0, DM_LEN, 0, fd, ACCESS_ALL);
	ASSERT_NE(NULL, b.dmr);
	fill(pat, DM_LEN, 9);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  post1(&a, IBV_WR_RDMA_READ, HOST(&a, 0), a.host_mr->lkey,
			DM_LEN, 0, b.dmr->rkey));
	EXPECT_EQ(-1, cmp(a.host, pat, DM_LEN));

	/* its process dies: its context closes, the DM is freed */
	ASSERT_EQ(0, kill(pid, SIGKILL));
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFSIGNALED(st));
	EXPECT_EQ(revokes + 1, hw_counter("remu0", "dmabuf_export_revokes"));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  post1(&a, IBV_WR_RDMA_WRITE, HOST(&a, 0), a.host_mr->lkey,
			64, 0, b.dmr->rkey));
	EXPECT_EQ(in_use0 + DM_PAGES, dm_stat("remu0", "dm_in_use"));
	EXPECT_EQ(0, ibv_dereg_mr(b.dmr));
	b.dmr = NULL;
	close(fd);
	close(sv[0]);
	EXPECT_EQ(in_use0, dm_in_use_becomes("remu0", in_use0));
	side_close(&a);
	side_close(&b);
	EXPECT_EQ(dms, remu_obj_count("dm"));
	EXPECT_EQ(mrs, remu_obj_count("mr"));
}

/* ---- the exporting device deleted ---- */

#define XDEV	"remupx"

static const char *const dm_type[] = { "dm" };

TEST(device_deleted)
{
	long long moves, inval;
	int dms = remu_obj_count("dm"), mrs = remu_obj_count("mr");
	struct side a = {}, b = {};
	struct ibv_context *x;
	struct ibv_dm *dm;
	uint8_t pat[4096];
	int fd;

	remu_sh("rdma link delete " XDEV " 2>/dev/null; ip link del rpx0 2>/dev/null");
	ASSERT_EQ(0, remu_sh("ip link add rpx0 type veth peer name rpx1 && "
			     "ip link set rpx1 up && ip link set rpx0 up && "
			     "rdma link add " XDEV " type remu netdev rpx0"));
	x = remu_open(XDEV);
	ASSERT_NE(NULL, x);
	dm = dm_alloc(x, sizeof(pat));
	ASSERT_NE(NULL, dm);
	fill(pat, sizeof(pat), 11);
	ASSERT_EQ(0, ibv_memcpy_to_dm(dm, 0, pat, sizeof(pat)));
	fd = dm_export(dm);
	ASSERT_LE(0, fd);

	/* remu0 reads it through remu1's MR */
	ASSERT_EQ(0, side_open(&a, "remu0"));
	ASSERT_EQ(0, side_open(&b, "remu1"));
	ASSERT_EQ(0, side_connect(&a, &b));
	ASSERT_EQ(0, side_connect(&b, &a));
	b.dmr = ibv_reg_dmabuf_mr(b.pd, 0, sizeof(pat), 0, fd, ACCESS_ALL);
	ASSERT_NE(NULL, b.dmr);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  post1(&a, IBV_WR_RDMA_READ, HOST(&a, 0), a.host_mr->lkey,
			sizeof(pat), 0, b.dmr->rkey));
	EXPECT_EQ(-1, cmp(a.host, pat, sizeof(pat)));
	moves = hw_counter("remu1", "dmabuf_moves");
	inval = hw_counter("remu1", "dmabuf_invalidations");

	/* the device goes away under the process: its DM is freed, revoked */
	ASSERT_EQ(0, remu_sh("timeout 20 rdma link delete " XDEV));
	EXPECT_EQ(0, remu_device_listed(XDEV));
	EXPECT_EQ(moves + 1, hw_counter("remu1", "dmabuf_moves"));
	EXPECT_EQ(inval + 1, hw_counter("remu1", "dmabuf_invalidations"));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  post1(&a, IBV_WR_RDMA_WRITE, HOST(&a, 0), a.host_mr->lkey,
			64, 0, b.dmr->rkey));
	/* the dma-buf (and the device's pool) outlive the device */
	EXPECT_EQ(dms + 1, remu_obj_count("dm"));
	EXPECT_EQ(0, ibv_dereg_mr(b.dmr));
	b.dmr = NULL;
	EXPECT_EQ(dms + 1, remu_obj_count("dm"));
	close(fd);
	EXPECT_EQ(-1, remu_obj_counts_back(dm_type, 1, &dms, 2));
	ibv_free_dm(dm);	/* fails: the device is gone; frees libremu's */
	ibv_close_device(x);
	side_close(&a);
	side_close(&b);
	EXPECT_EQ(mrs, remu_obj_count("mr"));
	remu_sh("ip link del rpx0 2>/dev/null");
}

TEST_HARNESS_MAIN
