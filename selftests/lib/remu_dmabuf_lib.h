/* SPDX-License-Identifier: GPL-2.0 */
/*
 * remu_dmabuf_lib.h - helpers of remu_dmabuf_test and tools/remu_dmabuf_bench:
 * dma-bufs from the stock exporters (remu_dmabuf_exp_lib.h), the ioctls of the test
 * exporter remu_test_dmabuf.ko, and an RC pair (struct side) with one
 * host buffer and one dma-buf MR per side.  Header-only, like remu_lib.h.
 */
#ifndef REMU_DMABUF_LIB_H
#define REMU_DMABUF_LIB_H

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <linux/dma-buf.h>

#include "remu_lib.h"
#include "remu_dmabuf_exp_lib.h"
#include "../remu_test_dmabuf/remu_test_dmabuf.h"

#define GID_INDEX	1	/* the IPv4-mapped RoCEv2 GID */
#define BUF_SIZE	(256 << 10)
#define MR_OFF		8192	/* dma-buf byte at the MR's first iova */
#define MR_LEN		(BUF_SIZE - MR_OFF)
#define MR_IOVA		0x7e5500002000ULL	/* same offset in the page */
#define ACCESS_ALL	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
			 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
#define TDB_PATH	"/dev/" REMU_TDB_DEVNAME

/* a port counter of @dev from sysfs, past the hw_stats cache, or -1 */
static inline long long hw_counter(const char *dev, const char *name)
{
	return remu_hw_counter(dev, name, true);
}

static inline void fill(uint8_t *p, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 31 + seed * 7 + (i >> 10) + 1);
}

/* byte for byte: the first differing offset, or -1 */
static inline long cmp(const uint8_t *a, const uint8_t *b, size_t len)
{
	return remu_cmp(a, b, len);
}

static inline double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* ---- the test exporter ---- */

static inline int tdb_create(int ctl, size_t size, unsigned int flags)
{
	struct remu_tdb_create c = { .size = size, .flags = flags };

	return ioctl(ctl, REMU_TDB_CREATE, &c) ? -1 : c.fd;
}

static inline int tdb_rw(int ctl, int fd, int write, uint64_t off, void *buf,
		  size_t len)
{
	struct remu_tdb_rw rw = { .fd = fd, .offset = off, .len = len,
				  .buf = (uintptr_t)buf };

	return ioctl(ctl, write ? REMU_TDB_WRITE : REMU_TDB_READ, &rw);
}

static inline int tdb_move(int ctl, int fd, unsigned int delay_ms)
{
	struct remu_tdb_move m = { .fd = fd, .delay_ms = delay_ms };

	return ioctl(ctl, REMU_TDB_MOVE, &m) ? -errno : 0;
}

static inline int tdb_evict(int ctl, int fd)
{
	return ioctl(ctl, REMU_TDB_EVICT, &fd) ? -errno : 0;
}

static inline struct remu_tdb_info tdb_info(int ctl, int fd)
{
	struct remu_tdb_info i = { .fd = fd };

	if (ioctl(ctl, REMU_TDB_INFO, &i))
		i.moves = ~0ULL;
	return i;
}

/* revoke (1) or re-enable (0) a buffer: 0 or -errno */
static inline int tdb_revoke(int ctl, int fd, int revoke)
{
	struct remu_tdb_revoke r = { .fd = fd, .revoke = revoke };

	return ioctl(ctl, REMU_TDB_REVOKE, &r) ? -errno : 0;
}

/* the test importer of @ctl's open file takes @fd: 0 or -errno */
static inline int tdb_import(int ctl, int fd, unsigned int flags,
			     struct remu_tdb_import *out)
{
	memset(out, 0, sizeof(*out));
	out->fd = fd;
	out->flags = flags;
	return ioctl(ctl, REMU_TDB_IMPORT, out) ? -errno : 0;
}

static inline struct remu_tdb_import_info tdb_import_info(int ctl)
{
	struct remu_tdb_import_info i = {};

	if (ioctl(ctl, REMU_TDB_IMPORT_INFO, &i))
		i.moves = ~0ULL;
	return i;
}

/* ---- RC pair ---- */

/**
 * struct side - one end of the RC connection
 * @host:	BUF_SIZE bytes of ordinary memory, registered as @host_mr
 * @dmr:	the dma-buf MR (iova MR_IOVA, dma-buf byte MR_OFF), or NULL
 */
struct side {
	const char *dev;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	uint8_t *host;
	struct ibv_mr *host_mr;
	struct ibv_mr *dmr;
	union ibv_gid gid;
	enum ibv_mtu mtu;
};

static inline int side_open(struct side *s, const char *dev)
{
	static const struct ibv_qp_cap cap = {
		.max_send_wr = 16, .max_recv_wr = 16,
		.max_send_sge = 2, .max_recv_sge = 2,
	};

	s->dev = dev;
	s->ctx = remu_open_port(dev, GID_INDEX, &s->gid, &s->mtu);
	s->pd = s->ctx ? ibv_alloc_pd(s->ctx) : NULL;
	s->cq = s->pd ? ibv_create_cq(s->ctx, 64, NULL, NULL, 0) : NULL;
	s->host = aligned_alloc(4096, BUF_SIZE);
	if (!s->cq || !s->host)
		return -1;
	memset(s->host, 0, BUF_SIZE);
	s->host_mr = ibv_reg_mr(s->pd, s->host, BUF_SIZE, ACCESS_ALL);
	s->qp = s->host_mr ? remu_create_qp(s->pd, s->cq, IBV_QPT_RC, &cap) :
			     NULL;
	return s->qp ? 0 : -1;
}

static inline int side_connect(struct side *s, struct side *peer)
{
	struct remu_conn_attr ra = REMU_RC_ATTR(0x123);
	struct remu_conn_dest d = { .qpn = peer->qp->qp_num, .gid = peer->gid,
				    .mtu = remu_min_mtu(s->mtu, peer->mtu) };

	return remu_qp_connect(s->qp, &ra, GID_INDEX, &d);
}

static inline void side_close(struct side *s)
{
	if (s->qp)
		ibv_destroy_qp(s->qp);
	if (s->dmr)
		ibv_dereg_mr(s->dmr);
	remu_close_objs(NULL, NULL, s->host_mr, s->cq, s->pd, s->ctx);
	free(s->host);
}

static inline int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	return remu_poll_one(cq, wc, 20);
}

/* one signalled WR from @s; returns its completion status */
static inline int post1(struct side *s, enum ibv_wr_opcode op, uint64_t laddr,
		 uint32_t lkey, uint32_t len, uint64_t raddr, uint32_t rkey)
{
	return remu_rdma1(s->qp, s->cq, op, laddr, lkey, len, raddr, rkey, 20);
}

static inline int post_recv1(struct side *s, uint64_t addr, uint32_t lkey,
		      uint32_t len)
{
	struct ibv_sge sge = { addr, len, lkey };

	return remu_post_recv(s->qp, 7, &sge, 1);
}

/* host address of @s's host buffer at byte @off */
#define HOST(s, off)	((uintptr_t)(s)->host + (off))

/* one 8-byte atomic from @s at @raddr (@rkey), old value to @s's host[0] */
static inline int atomic1(struct side *s, enum ibv_wr_opcode op,
			  uint64_t raddr, uint32_t rkey, uint64_t cmp_add,
			  uint64_t swap)
{
	struct ibv_sge sge = { HOST(s, 0), 8, s->host_mr->lkey };
	struct ibv_send_wr wr = { .wr_id = op, .sg_list = &sge, .num_sge = 1,
				  .opcode = op };

	wr.wr.atomic.remote_addr = raddr;
	wr.wr.atomic.rkey = rkey;
	wr.wr.atomic.compare_add = cmp_add;
	wr.wr.atomic.swap = swap;
	return remu_run_wr(s->qp, s->cq, &wr, 20);
}

/* both QPs through RESET and connected again (after an error): 0 or -1 */
static inline int side_reconnect(struct side *a, struct side *b)
{
	struct remu_conn_attr ra = REMU_RC_ATTR(0x321);
	struct remu_conn_dest da = { .qpn = b->qp->qp_num, .gid = b->gid,
				     .mtu = remu_min_mtu(a->mtu, b->mtu) };
	struct remu_conn_dest db = { .qpn = a->qp->qp_num, .gid = a->gid,
				     .mtu = da.mtu };

	ra.reset = true;
	if (remu_qp_connect(a->qp, &ra, GID_INDEX, &da))
		return -1;
	return remu_qp_connect(b->qp, &ra, GID_INDEX, &db) ? -1 : 0;
}

#endif /* REMU_DMABUF_LIB_H */
