// SPDX-License-Identifier: GPL-2.0
/*
 * remu_import_test - sharing a verbs context between processes:
 * ibv_import_device(), ibv_import_pd(), ibv_import_mr(), ibv_import_dm()
 * and ibv_unimport_*() (docs/sharing.md).
 *
 * Every case forks an owner process, which opens remu0, allocates a PD,
 * registers an MR over memory both processes share (MAP_SHARED, mapped
 * before the fork, so at the same address in both), allocates device
 * memory and fills it, and hands its command fd to the test process over
 * a UNIX socket (SCM_RIGHTS) with the handles and keys.  The test
 * process imports the context and the objects, makes its own CQ and RC QP
 * in the imported context on the imported PD, and connects it to a QP on
 * remu1.  The owner then serves requests on the socket: read its device
 * memory back, deregister its MR, free its PD, exit.
 *
 *   objects_and_data  the imported keys and length are the owner's; remu1
 *                     WRITEs into the imported MR, the importer SENDs from
 *                     it and READs into it: byte for byte
 *   device_memory     the owner's bytes read through the imported DM, the
 *                     importer's bytes read back by the owner through its
 *                     own; an MR on the imported DM read by remu1; the
 *                     length checks of the original (EFAULT past it)
 *   owner_gone        the owner exits without cleaning up: everything
 *                     keeps working while the importer holds the context
 *   refused           import of a closed fd (EINVAL), of a file that is
 *                     no verbs device (ENODEV), of handles that name
 *                     nothing (ENOENT) or an object of another type
 *                     (EINVAL)
 *   unimport_destroy  unimport leaves the objects alive (imported again,
 *                     same keys); the owner's dereg kills the key (remu1's
 *                     WRITE: remote access error) and the handle (ENOENT);
 *                     the owner cannot free the PD while the importer's QP
 *                     is on it (EBUSY), can once it is gone
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "remu_lib.h"

#define GID_INDEX	1	/* the IPv4-mapped RoCEv2 GID */
#define SHM_LEN		(1 << 20)
#define DM_LEN		8192
#define MSG_LEN		60000
#define BOGUS_HANDLE	0x7ffff0

static const struct ibv_qp_cap icap = { .max_send_wr = 16, .max_recv_wr = 16,
					.max_send_sge = 1, .max_recv_sge = 1 };

/* what the owner hands over with its command fd */
struct offer {
	uint32_t pd, mr, dm;	/* handles */
	uint32_t lkey, rkey;
	uint64_t mr_len;
	int err;		/* the step of the owner that failed, or 0 */
};

static void fill(uint8_t *p, size_t len, uint32_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 11 + seed + (i >> 9));
}

/* one message of @len bytes on @sock, with @fd attached unless -1 */
static int send_msg(int sock, const void *buf, size_t len, int fd)
{
	char ctl[CMSG_SPACE(sizeof(int))] = {};
	struct iovec iov = { (void *)buf, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *c;

	if (fd >= 0) {
		mh.msg_control = ctl;
		mh.msg_controllen = sizeof(ctl);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	return sendmsg(sock, &mh, 0) == (ssize_t)len ? 0 : -1;
}

/* one message into @buf; the fd that came with it into *@fd (or -1) */
static ssize_t recv_msg(int sock, void *buf, size_t len, int *fd)
{
	char ctl[CMSG_SPACE(sizeof(int))] = {};
	struct iovec iov = { buf, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = ctl, .msg_controllen = sizeof(ctl) };
	struct cmsghdr *c;
	ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);

	if (fd) {
		*fd = -1;
		c = CMSG_FIRSTHDR(&mh);
		if (n > 0 && c && c->cmsg_type == SCM_RIGHTS)
			memcpy(fd, CMSG_DATA(c), sizeof(int));
	}
	return n;
}

/*
 * The owner: make the objects, hand them over, then serve one-letter
 * requests until told to go or the socket closes:
 *   'r'  the device memory's bytes, as the owner reads them
 *   'm'  deregister the MR: the verb's return value
 *   'p'  free the PD: the verb's return value (EBUSY while used)
 *   'q'  exit at once, cleaning up nothing
 */
static void owner(int sock, uint8_t *shm)
{
	struct ibv_alloc_dm_attr da = { .length = DM_LEN };
	struct offer o = {};
	struct ibv_context *ctx = remu_open("remu0");
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	struct ibv_mr *mr = NULL;
	struct ibv_dm *dm = NULL;
	uint8_t data[DM_LEN];
	int ret;
	char c;

	if (pd)
		mr = ibv_reg_mr(pd, shm, SHM_LEN, IBV_ACCESS_LOCAL_WRITE |
				REMU_ACCESS_REMOTE_ALL);
	if (mr)
		dm = ibv_alloc_dm(ctx, &da);
	fill(data, DM_LEN, 200);
	if (!dm || ibv_memcpy_to_dm(dm, 0, data, DM_LEN))
		o.err = 1;
	else
		o = (struct offer){ .pd = pd->handle, .mr = mr->handle,
				    .dm = dm->handle, .lkey = mr->lkey,
				    .rkey = mr->rkey, .mr_len = mr->length };
	if (send_msg(sock, &o, sizeof(o), o.err ? -1 : ctx->cmd_fd) || o.err)
		_exit(1);
	while (recv_msg(sock, &c, 1, NULL) == 1) {
		switch (c) {
		case 'r':
			ret = ibv_memcpy_from_dm(data, dm, 0, DM_LEN);
			if (ret || send_msg(sock, data, DM_LEN, -1))
				_exit(2);
			break;
		case 'm':
			ret = ibv_dereg_mr(mr);
			send_msg(sock, &ret, sizeof(ret), -1);
			break;
		case 'p':
			ret = ibv_dealloc_pd(pd);
			send_msg(sock, &ret, sizeof(ret), -1);
			break;
		case 'q':
			_exit(0);
		}
	}
	_exit(0);
}

FIXTURE(import) {
	uint8_t *shm;
	int sock;
	pid_t owner;
	int fd;			/* the owner's command fd, received */
	struct offer o;
	struct ibv_context *ctx;	/* imported */
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct remu_end peer;	/* remu1 */
	struct ibv_mr *pmr;
	uint8_t *pbuf;
	struct ibv_cq *cq;	/* the importer's, in the imported context */
	struct ibv_qp *qp;
	union ibv_gid gid;
	enum ibv_mtu mtu;
};

FIXTURE_SETUP(import)
{
	int sv[2];

	memset(&self->peer, 0, sizeof(self->peer));
	self->shm = mmap(NULL, SHM_LEN, PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, self->shm);
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv));
	fflush(stdout);
	fflush(stderr);
	self->owner = fork();
	ASSERT_LE(0, self->owner);
	if (!self->owner) {
		close(sv[0]);
		owner(sv[1], self->shm);
	}
	close(sv[1]);
	self->sock = sv[0];
	ASSERT_EQ(sizeof(self->o),
		  recv_msg(self->sock, &self->o, sizeof(self->o), &self->fd));
	ASSERT_EQ(0, self->o.err);
	ASSERT_LE(0, self->fd);
}

FIXTURE_TEARDOWN(import)
{
	int st;

	if (self->qp)
		ibv_destroy_qp(self->qp);
	if (self->cq)
		ibv_destroy_cq(self->cq);
	if (self->mr)
		ibv_unimport_mr(self->mr);
	if (self->pd)
		ibv_unimport_pd(self->pd);
	if (self->ctx)
		ibv_close_device(self->ctx);	/* closes the received fd */
	else if (self->fd >= 0)
		close(self->fd);
	if (self->pmr)
		ibv_dereg_mr(self->pmr);
	remu_end_close(&self->peer);
	free(self->pbuf);
	close(self->sock);	/* the owner's loop ends */
	if (self->owner > 0)
		waitpid(self->owner, &st, 0);
	munmap(self->shm, SHM_LEN);
}

/* the owner's answer to @req: an int, or -1000 when none came */
static int ask(int sock, char req)
{
	int ret = -1000;

	if (send_msg(sock, &req, 1, -1) ||
	    recv_msg(sock, &ret, sizeof(ret), NULL) != sizeof(ret))
		return -1000;
	return ret;
}

/*
 * Import the context, PD and MR; the importer's CQ and RC QP on them,
 * connected to a QP on remu1 with an MR of its own: 0 or -1.
 */
static int import_and_connect(FIXTURE_DATA(import) *self)
{
	struct remu_conn_attr ra = REMU_RC_ATTR(0x600);
	struct remu_conn_dest d;

	self->ctx = ibv_import_device(self->fd);
	if (!self->ctx)
		return -1;
	self->pd = ibv_import_pd(self->ctx, self->o.pd);
	self->mr = self->pd ? ibv_import_mr(self->pd, self->o.mr) : NULL;
	if (!self->mr || remu_port_gid(self->ctx, GID_INDEX, &self->gid,
				       &self->mtu))
		return -1;
	self->cq = ibv_create_cq(self->ctx, 32, NULL, NULL, 0);
	self->qp = self->cq ? remu_create_qp(self->pd, self->cq, IBV_QPT_RC,
					     &icap) : NULL;
	self->pbuf = aligned_alloc(4096, SHM_LEN);
	if (!self->qp || !self->pbuf ||
	    remu_end_open(&self->peer, "remu1", GID_INDEX, 32, &icap))
		return -1;
	memset(self->pbuf, 0, SHM_LEN);
	self->pmr = ibv_reg_mr(self->peer.pd, self->pbuf, SHM_LEN,
			       IBV_ACCESS_LOCAL_WRITE | REMU_ACCESS_REMOTE_ALL);
	if (!self->pmr)
		return -1;
	d = (struct remu_conn_dest){ .qpn = self->peer.qp->qp_num,
		.gid = self->peer.gid,
		.mtu = remu_min_mtu(self->mtu, self->peer.mtu) };
	if (remu_qp_connect(self->qp, &ra, GID_INDEX, &d))
		return -1;
	d = (struct remu_conn_dest){ .qpn = self->qp->qp_num, .gid = self->gid,
				     .mtu = d.mtu };
	return remu_qp_connect(self->peer.qp, &ra, GID_INDEX, &d);
}

/*
 * remu1 WRITEs into the imported MR, the importer SENDs from it and READs
 * into it, each @len bytes at @off (pattern @seed): 0, or the step that
 * failed.  The shared memory is the owner's MR as this process maps it.
 */
static int move_data(FIXTURE_DATA(import) *self, size_t off, uint32_t len,
		     uint32_t seed)
{
	uint8_t *shm = self->shm;
	struct ibv_sge sge = { (uintptr_t)shm + off, len, self->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 9, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND };
	struct ibv_sge rsge = { (uintptr_t)self->pbuf + 2 * len, len,
				self->pmr->lkey };
	struct ibv_wc wc;

	fill(self->pbuf, len, seed);
	memset(shm + off, 0, len);
	if (remu_rdma1(self->peer.qp, self->peer.cq, IBV_WR_RDMA_WRITE,
		       (uintptr_t)self->pbuf, self->pmr->lkey, len,
		       (uintptr_t)shm + off, self->mr->rkey, 10))
		return 1;
	if (remu_cmp(self->pbuf, shm + off, len) != -1)
		return 2;
	fill(shm + off, len, seed + 1);
	if (remu_post_recv(self->peer.qp, 3, &rsge, 1) ||
	    remu_run_wr(self->qp, self->cq, &wr, 10) ||
	    remu_poll_one(self->peer.cq, &wc, 10) || wc.byte_len != len)
		return 3;
	if (remu_cmp(shm + off, self->pbuf + 2 * len, len) != -1)
		return 4;
	fill(self->pbuf + len, len, seed + 2);
	if (remu_rdma1(self->qp, self->cq, IBV_WR_RDMA_READ,
		       (uintptr_t)shm + off, self->mr->lkey, len,
		       (uintptr_t)self->pbuf + len, self->pmr->rkey, 10))
		return 5;
	return remu_cmp(self->pbuf + len, shm + off, len) != -1 ? 6 : 0;
}

TEST_F(import, objects_and_data)
{
	ASSERT_EQ(0, import_and_connect(self));
	EXPECT_STREQ("remu0", ibv_get_device_name(self->ctx->device));
	EXPECT_EQ(self->o.pd, self->pd->handle);
	EXPECT_EQ(self->ctx, self->pd->context);
	/* the owner's keys and length; no address, as on mlx5 */
	EXPECT_EQ(self->o.mr, self->mr->handle);
	EXPECT_EQ(self->o.lkey, self->mr->lkey);
	EXPECT_EQ(self->o.rkey, self->mr->rkey);
	EXPECT_EQ(self->o.mr_len, self->mr->length);
	EXPECT_EQ(SHM_LEN, self->mr->length);
	EXPECT_EQ(NULL, self->mr->addr);
	EXPECT_EQ(self->pd, self->mr->pd);
	EXPECT_EQ(0, move_data(self, 4096, MSG_LEN, 1));
	EXPECT_EQ(0, move_data(self, 300001, 5000, 7));
}

TEST_F(import, device_memory)
{
	uint8_t want[DM_LEN], got[DM_LEN];
	struct ibv_dm *dm;
	struct ibv_mr *dmr;

	ASSERT_EQ(0, import_and_connect(self));
	dm = ibv_import_dm(self->ctx, self->o.dm);
	ASSERT_NE(NULL, dm);
	EXPECT_EQ(self->o.dm, dm->handle);
	EXPECT_EQ(self->ctx, dm->context);
	/* the owner's bytes */
	fill(want, DM_LEN, 200);
	ASSERT_EQ(0, ibv_memcpy_from_dm(got, dm, 0, DM_LEN));
	EXPECT_EQ(-1, remu_cmp(want, got, DM_LEN));
	/* the importer's bytes, read back by the owner through its mapping */
	fill(want, DM_LEN, 77);
	ASSERT_EQ(0, ibv_memcpy_to_dm(dm, 0, want, DM_LEN));
	ASSERT_EQ(0, send_msg(self->sock, "r", 1, -1));
	ASSERT_EQ(DM_LEN, recv_msg(self->sock, got, DM_LEN, NULL));
	EXPECT_EQ(-1, remu_cmp(want, got, DM_LEN));
	/* the length the owner asked for holds here too */
	EXPECT_EQ(EFAULT, ibv_memcpy_from_dm(got, dm, DM_LEN - 4, 8));
	/* an MR on the imported DM, read by remu1 */
	dmr = ibv_reg_dm_mr(self->pd, dm, 0, DM_LEN, IBV_ACCESS_ZERO_BASED |
			    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	ASSERT_NE(NULL, dmr);
	EXPECT_EQ(DM_LEN, dmr->length);
	memset(self->pbuf, 0, DM_LEN);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  remu_rdma1(self->peer.qp, self->peer.cq, IBV_WR_RDMA_READ,
			     (uintptr_t)self->pbuf, self->pmr->lkey, DM_LEN,
			     0, dmr->rkey, 10));
	EXPECT_EQ(-1, remu_cmp(want, self->pbuf, DM_LEN));
	EXPECT_EQ(0, ibv_dereg_mr(dmr));
	ibv_unimport_dm(dm);
	/* the owner's DM is still there */
	ASSERT_EQ(0, send_msg(self->sock, "r", 1, -1));
	ASSERT_EQ(DM_LEN, recv_msg(self->sock, got, DM_LEN, NULL));
	EXPECT_EQ(-1, remu_cmp(want, got, DM_LEN));
}

TEST_F(import, owner_gone)
{
	uint8_t want[DM_LEN], got[DM_LEN];
	struct ibv_dm *dm;
	int st;

	ASSERT_EQ(0, import_and_connect(self));
	dm = ibv_import_dm(self->ctx, self->o.dm);
	ASSERT_NE(NULL, dm);
	ASSERT_EQ(0, send_msg(self->sock, "q", 1, -1));
	ASSERT_EQ(self->owner, waitpid(self->owner, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st));
	self->owner = -1;
	/* the context and its objects live on with the importer */
	EXPECT_EQ(0, move_data(self, 8192, MSG_LEN, 30));
	fill(want, DM_LEN, 200);
	ASSERT_EQ(0, ibv_memcpy_from_dm(got, dm, 0, DM_LEN));
	EXPECT_EQ(-1, remu_cmp(want, got, DM_LEN));
	ibv_unimport_dm(dm);
}

TEST_F(import, refused)
{
	int closed = dup(self->fd), devnull = open("/dev/null", O_RDWR);
	struct ibv_context *ctx;

	ASSERT_LE(0, closed);
	ASSERT_LE(0, devnull);
	close(closed);
	errno = 0;
	EXPECT_EQ(NULL, ibv_import_device(closed));
	EXPECT_EQ(EINVAL, errno);
	errno = 0;
	EXPECT_EQ(NULL, ibv_import_device(devnull));
	EXPECT_EQ(ENODEV, errno);
	close(devnull);

	ctx = self->ctx = ibv_import_device(self->fd);
	ASSERT_NE(NULL, ctx);
	self->pd = ibv_import_pd(ctx, self->o.pd);
	ASSERT_NE(NULL, self->pd);
	/* handles that name nothing */
	errno = 0;
	EXPECT_EQ(NULL, ibv_import_pd(ctx, BOGUS_HANDLE));
	EXPECT_EQ(ENOENT, errno);
	errno = 0;
	EXPECT_EQ(NULL, ibv_import_mr(self->pd, BOGUS_HANDLE));
	EXPECT_EQ(ENOENT, errno);
	errno = 0;
	EXPECT_EQ(NULL, ibv_import_dm(ctx, BOGUS_HANDLE));
	EXPECT_EQ(ENOENT, errno);
	/* handles of an object of another type */
	errno = 0;
	EXPECT_EQ(NULL, ibv_import_pd(ctx, self->o.mr));
	EXPECT_EQ(EINVAL, errno);
	errno = 0;
	EXPECT_EQ(NULL, ibv_import_mr(self->pd, self->o.pd));
	EXPECT_EQ(EINVAL, errno);
	errno = 0;
	EXPECT_EQ(NULL, ibv_import_dm(ctx, self->o.mr));
	EXPECT_EQ(EINVAL, errno);
	errno = 0;
	EXPECT_EQ(NULL, ibv_import_dm(ctx, self->o.pd));
	EXPECT_EQ(EINVAL, errno);
}

TEST_F(import, unimport_destroy)
{
	uint32_t rkey;
	int st;

	ASSERT_EQ(0, import_and_connect(self));
	rkey = self->mr->rkey;
	/* unimport frees nothing in the kernel: import again, same keys */
	ibv_unimport_mr(self->mr);
	self->mr = ibv_import_mr(self->pd, self->o.mr);
	ASSERT_NE(NULL, self->mr);
	EXPECT_EQ(rkey, self->mr->rkey);
	EXPECT_EQ(0, move_data(self, 0, 4096, 50));

	/* the owner deregisters: the key and the handle are gone */
	EXPECT_EQ(0, ask(self->sock, 'm'));
	errno = 0;
	EXPECT_EQ(NULL, ibv_import_mr(self->pd, self->o.mr));
	EXPECT_EQ(ENOENT, errno);
	st = remu_rdma1(self->peer.qp, self->peer.cq, IBV_WR_RDMA_WRITE,
			(uintptr_t)self->pbuf, self->pmr->lkey, 64,
			(uintptr_t)self->shm, rkey, 10);
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, st);
	ibv_unimport_mr(self->mr);
	self->mr = NULL;

	/* the PD: busy while the importer's QP is on it, then freed */
	EXPECT_EQ(EBUSY, ask(self->sock, 'p'));
	ASSERT_EQ(0, ibv_destroy_qp(self->qp));
	self->qp = NULL;
	EXPECT_EQ(0, ask(self->sock, 'p'));
	errno = 0;
	EXPECT_EQ(NULL, ibv_import_pd(self->ctx, self->o.pd));
	EXPECT_EQ(ENOENT, errno);
	ibv_unimport_pd(self->pd);
	self->pd = NULL;
}

TEST_HARNESS_MAIN
