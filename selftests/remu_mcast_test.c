// SPDX-License-Identifier: GPL-2.0
/*
 * remu_mcast_test - UD multicast (docs/multicast.md), mlx5's contract.
 *
 * rules: ibv_attach_mcast/ibv_detach_mcast errors (RC/UC QPs and unicast
 * GIDs EINVAL, a second attach of the same QP succeeds and changes
 * nothing, one QP attached under two MLIDs stays attached until both are
 * detached, a detach of what is not attached EINVAL, destroying an
 * attached QP EBUSY), the limits the device attributes report enforced
 * exactly there with ENOMEM (QPs per group, groups per device; the total
 * is their product, as on mlx5), and the IP group membership each group
 * gives the netdev (/proc/net/igmp, /proc/net/igmp6 of its namespace)
 * while a QP is attached and only then.
 *
 * mc (IPv4-mapped and IPv6 MGIDs): one sender on remu0, two receivers on
 * remu1 (namespace peer) and one on remu0.  Every receiver gets every
 * message (0 B to the MTU, with and without immediate) byte for byte,
 * with src_qp, IBV_WC_GRH and the IP header of the group's address in
 * the GRH area; the frame on v0 goes to the group's multicast MAC and IP
 * with BTH DestQP 0xffffff; the counters rcvd_mcast_pkts, rdma_recvs and
 * rcvd_mcast_no_qp move by exactly what was sent.  A detached QP gets
 * nothing more; the Q_Key is checked per QP; the sender itself receives
 * its own messages when attached (unless created with
 * IBV_QP_CREATE_BLOCK_SELF_MCAST_LB); a QP that cannot be destroyed
 * while attached still receives; a process killed while attached
 * leaves no group behind.  netns_exit: a device whose namespace is
 * deleted under an attached QP takes its groups with it.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "remu_lib.h"

#define QKEY		0x11223344u
#define GRH_LEN		40
#define SLOT		(GRH_LEN + 4096 + 64)	/* one receive buffer */
#define NRECV		16
#define MCAST_QPN	0xffffffu

/* one UD QP with its own context, receive buffers and source GID */
struct mq {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *scq;	/* sends */
	struct ibv_cq *cq;	/* receives */
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	union ibv_gid gid;
	int gid_index;
	uint32_t mtu;
	uint32_t next_recv;
};

/*
 * Open @m on @dev: an RTS UD QP with Q_Key QKEY and the IPv4-mapped (or,
 * with @v6, IPv6) GID as source; @no_self creates it with
 * IBV_QP_CREATE_BLOCK_SELF_MCAST_LB.  0 or -1.
 */
static int mq_open(struct mq *m, const char *dev, int v6, int no_self)
{
	struct ibv_qp_init_attr_ex ia = {
		.qp_type = IBV_QPT_UD, .sq_sig_all = 0,
		.cap = { .max_send_wr = 16, .max_recv_wr = NRECV,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD,
	};
	struct ibv_port_attr pa;

	memset(m, 0, sizeof(*m));
	m->ctx = remu_open(dev);
	if (!m->ctx || ibv_query_port(m->ctx, 1, &pa))
		return -1;
	m->mtu = 128u << pa.active_mtu;
	m->gid_index = remu_roce_gid(m->ctx, !v6, &m->gid);
	m->pd = ibv_alloc_pd(m->ctx);
	m->cq = m->pd ? ibv_create_cq(m->ctx, 64, NULL, NULL, 0) : NULL;
	m->scq = m->cq ? ibv_create_cq(m->ctx, 64, NULL, NULL, 0) : NULL;
	m->buf = aligned_alloc(4096, 2 * NRECV * SLOT);
	if (m->gid_index < 0 || !m->scq || !m->buf)
		return -1;
	m->mr = ibv_reg_mr(m->pd, m->buf, 2 * NRECV * SLOT,
			   IBV_ACCESS_LOCAL_WRITE);
	if (!m->mr)
		return -1;
	ia.pd = m->pd;
	ia.send_cq = m->scq;
	ia.recv_cq = m->cq;
	if (no_self) {
		ia.comp_mask |= IBV_QP_INIT_ATTR_CREATE_FLAGS;
		ia.create_flags = IBV_QP_CREATE_BLOCK_SELF_MCAST_LB;
	}
	m->qp = ibv_create_qp_ex(m->ctx, &ia);
	if (!m->qp)
		return -1;
	return remu_ud_ready(m->qp, QKEY, 0) ? -1 : 0;
}

static void mq_close(struct mq *m)
{
	remu_close_objs(m->qp, NULL, m->mr, m->cq, NULL, NULL);
	remu_close_objs(NULL, NULL, NULL, m->scq, m->pd, m->ctx);
	free(m->buf);
	memset(m, 0, sizeof(*m));
}

/* mq_open(), retried for up to 5 s while the GID is not there yet */
static int mq_open_wait(struct mq *m, const char *dev, int v6, int no_self)
{
	int i;

	for (i = 0; i < 50; i++) {
		if (!mq_open(m, dev, v6, no_self))
			return 0;
		mq_close(m);
		usleep(100000);
	}
	return -1;
}

/* @n receives of one SLOT each (in the second half of the buffer) */
static int mq_post_recvs(struct mq *m, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		uint32_t k = m->next_recv++ % NRECV;
		struct ibv_sge sge = {
			(uintptr_t)m->buf + (NRECV + k) * SLOT, SLOT,
			m->mr->lkey };

		memset(m->buf + (NRECV + k) * SLOT, 0xee, SLOT);
		if (remu_post_recv(m->qp, k, &sge, 1))
			return -1;
	}
	return 0;
}

/* the MGID of the IPv4 group or IPv6 group @addr */
static void mgid_of(const char *addr, union ibv_gid *g)
{
	memset(g, 0, sizeof(*g));
	if (strchr(addr, ':')) {
		inet_pton(AF_INET6, addr, g->raw);
	} else {
		g->raw[10] = g->raw[11] = 0xff;
		inet_pton(AF_INET, addr, g->raw + 12);
	}
}

static int is_v4(const union ibv_gid *g)
{
	static const uint8_t pfx[12] = { [10] = 0xff, [11] = 0xff };

	return !memcmp(g->raw, pfx, sizeof(pfx));
}

/* message @i of a series: its length and its bytes */
static uint8_t pattern(uint32_t seed, uint32_t i, uint32_t k)
{
	return (uint8_t)(k * 13 + i * 7 + seed + (k >> 8));
}

/*
 * Post @n messages of the lengths @lens (at most NRECV) from @s to the
 * group through @ah, as one list, message i from its own buffer
 * (SEND_WITH_IMM for odd i, imm = seed + i): 0 or ibv_post_send's error.
 */
static int post_msgs(struct mq *s, struct ibv_ah *ah, const uint32_t *lens,
		     int n, uint32_t seed)
{
	struct ibv_send_wr wr[NRECV], *bad;
	struct ibv_sge sge[NRECV];
	int i;

	for (i = 0; i < n; i++) {
		uint8_t *b = s->buf + i * SLOT;
		uint32_t k;

		for (k = 0; k < lens[i]; k++)
			b[k] = pattern(seed, i, k);
		sge[i] = (struct ibv_sge){ (uintptr_t)b, lens[i], s->mr->lkey };
		memset(&wr[i], 0, sizeof(wr[i]));
		wr[i].wr_id = seed + i;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].opcode = i & 1 ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].imm_data = htobe32(seed + i);
		wr[i].wr.ud.ah = ah;
		wr[i].wr.ud.remote_qpn = MCAST_QPN;
		wr[i].wr.ud.remote_qkey = QKEY;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	return ibv_post_send(s->qp, wr, &bad);
}

/* the @n send completions of post_msgs(@seed), in order: 0 or -1 */
static int sent_msgs(struct mq *s, int n, uint32_t seed)
{
	struct ibv_wc wc;
	int i;

	for (i = 0; i < n; i++)
		if (remu_poll_one(s->scq, &wc, 10) != IBV_WC_SUCCESS ||
		    wc.wr_id != seed + i)
			return -1;
	return 0;
}

/* post_msgs() and wait for the sends to complete: 0 or -1 */
static int send_msgs(struct mq *s, struct ibv_ah *ah, const uint32_t *lens,
		     int n, uint32_t seed)
{
	if (post_msgs(s, ah, lens, n, seed))
		return -1;
	return sent_msgs(s, n, seed);
}

/*
 * @r receives exactly the @n messages send_msgs(@lens, @seed) sent from
 * @s to the group @mgid, in order: completion, GRH area and data checked.
 */
static void expect_msgs(struct __test_metadata *_metadata, struct mq *r,
			struct mq *s, const union ibv_gid *mgid,
			const uint32_t *lens, int n, uint32_t seed)
{
	struct ibv_wc wc;
	int i;

	for (i = 0; i < n; i++) {
		const uint8_t *b;
		uint32_t k;

		ASSERT_EQ(IBV_WC_SUCCESS, remu_poll_one(r->cq, &wc, 10))
			TH_LOG("message %d of %d", i, n);
		b = r->buf + (NRECV + wc.wr_id) * SLOT;
		EXPECT_EQ(IBV_WC_RECV, wc.opcode);
		EXPECT_EQ(GRH_LEN + lens[i], wc.byte_len);
		EXPECT_EQ(r->qp->qp_num, wc.qp_num);
		EXPECT_EQ(s->qp->qp_num, wc.src_qp);
		EXPECT_TRUE(wc.wc_flags & IBV_WC_GRH);
		EXPECT_EQ(i & 1 ? IBV_WC_WITH_IMM : 0,
			  wc.wc_flags & IBV_WC_WITH_IMM);
		if (i & 1)
			EXPECT_EQ(htobe32(seed + i), wc.imm_data);
		if (is_v4(mgid)) {	/* IPv4 header in bytes 20..39 */
			EXPECT_EQ(0x45, b[20]);
			EXPECT_EQ(17, b[29]);
			EXPECT_EQ(0, memcmp(b + 32, s->gid.raw + 12, 4));
			EXPECT_EQ(0, memcmp(b + 36, mgid->raw + 12, 4));
		} else {		/* IPv6 header in bytes 0..39 */
			EXPECT_EQ(6, b[0] >> 4);
			EXPECT_EQ(17, b[6]);
			EXPECT_EQ(0, memcmp(b + 8, s->gid.raw, 16));
			EXPECT_EQ(0, memcmp(b + 24, mgid->raw, 16));
		}
		for (k = 0; k < lens[i]; k++)
			if (b[GRH_LEN + k] != pattern(seed, i, k))
				break;
		EXPECT_EQ(lens[i], k) TH_LOG("message %d differs at byte %u",
					     i, k);
		EXPECT_EQ(0xee, b[GRH_LEN + lens[i]]);	/* nothing beyond */
	}
}

/* nothing arrives on @m within 300 ms */
static int no_completion(struct mq *m)
{
	struct ibv_wc wc;

	return remu_poll_one(m->cq, &wc, 0.3) == -1;
}

/* a UD AH from @s to the group @mgid */
static struct ibv_ah *group_ah(struct mq *s, const union ibv_gid *mgid)
{
	struct ibv_ah_attr a;

	remu_set_av(&a, mgid, s->gid_index, 0);
	return ibv_create_ah(s->pd, &a);
}

/*
 * The users of the IP group @mgid on netdev @ifname in network namespace
 * @ns (NULL: this one), from /proc/net/igmp or /proc/net/igmp6: 0 when
 * the netdev is not a member, -1 if the file cannot be read.
 */
static int igmp_users(const char *ns, const char *ifname,
		      const union ibv_gid *mgid)
{
	char cmd[128], line[256], dev[32], want[40], addr[40];
	int users = 0, cur = 0, n, i;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "%s%s cat /proc/net/%s",
		 ns ? "ip netns exec " : "", ns ? ns : "",
		 is_v4(mgid) ? "igmp" : "igmp6");
	f = popen(cmd, "r");
	if (!f)
		return -1;
	if (is_v4(mgid)) {
		uint32_t a;

		/* the group as the kernel prints it: %08X of the __be32 */
		memcpy(&a, mgid->raw + 12, 4);
		snprintf(want, sizeof(want), "%08X", a);
		/* "Idx Device : Count ..." then "\t\t\t\tGROUP USERS ..." */
		while (fgets(line, sizeof(line), f)) {
			if (line[0] != '\t') {
				cur = sscanf(line, "%d %31s", &i, dev) == 2 &&
				      !strcmp(dev, ifname);
				continue;
			}
			if (cur && sscanf(line, "%39s %d", addr, &n) == 2 &&
			    !strcmp(addr, want))
				users = n;
		}
	} else {
		for (i = 0; i < 16; i++)
			sprintf(want + 2 * i, "%02x", mgid->raw[i]);
		/* "IDX DEV ADDR USERS FLAGS TIMER" */
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "%d %31s %39s %d", &i, dev, addr,
				   &n) == 4 && !strcmp(dev, ifname) &&
			    !strcmp(addr, want))
				users = n;
	}
	return pclose(f) ? -1 : users;
}

/* port counter @name of @dev, the core's cache waited out */
static long long cnt(const char *dev, const char *name)
{
	return remu_hw_counter(dev, name, true);
}

/* ---- the rules ------------------------------------------------------ */

/* the limits: the total is the product of the other two (as on mlx5) */
TEST(attrs)
{
	const char *devs[] = { "remu0", "remu1" };
	struct ibv_device_attr a;
	struct ibv_context *ctx;
	unsigned int i;

	for (i = 0; i < 2; i++) {
		ctx = remu_open(devs[i]);
		ASSERT_NE(NULL, ctx);
		ASSERT_EQ(0, ibv_query_device(ctx, &a));
		EXPECT_LT(0, a.max_mcast_grp);
		EXPECT_LT(0, a.max_mcast_qp_attach);
		EXPECT_EQ((long long)a.max_mcast_grp * a.max_mcast_qp_attach,
			  a.max_total_mcast_qp_attach);
		ibv_close_device(ctx);
	}
}

/* which QPs and GIDs may attach, twice, detach errors, destroy EBUSY */
TEST(attach_rules)
{
	static const struct ibv_qp_cap cap = { .max_send_wr = 1,
		.max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 };
	int grp0 = remu_obj_count("mcast_grp");
	int att0 = remu_obj_count("mcast_attach");
	union ibv_gid g, g2, bad;
	struct ibv_qp *rc, *uc, *ud;
	struct mq m;

	ASSERT_EQ(0, mq_open(&m, "remu0", 0, 0));
	mgid_of("239.77.1.1", &g);
	mgid_of("239.77.1.2", &g2);
	rc = remu_create_qp(m.pd, m.cq, IBV_QPT_RC, &cap);
	uc = remu_create_qp(m.pd, m.cq, IBV_QPT_UC, &cap);
	ud = remu_create_qp(m.pd, m.cq, IBV_QPT_UD, &cap);	/* RESET */
	ASSERT_NE(NULL, rc);
	ASSERT_NE(NULL, uc);
	ASSERT_NE(NULL, ud);

	/* UD only */
	EXPECT_EQ(EINVAL, ibv_attach_mcast(rc, &g, 0));
	EXPECT_EQ(EINVAL, ibv_attach_mcast(uc, &g, 0));
	/* multicast GIDs only: our own address, a unicast IPv6 one */
	EXPECT_EQ(EINVAL, ibv_attach_mcast(m.qp, &m.gid, 0));
	mgid_of("fd77::1", &bad);
	EXPECT_EQ(EINVAL, ibv_attach_mcast(m.qp, &bad, 0));
	mgid_of("10.77.0.2", &bad);
	EXPECT_EQ(EINVAL, ibv_attach_mcast(m.qp, &bad, 0));
	EXPECT_EQ(grp0, remu_obj_count("mcast_grp"));
	EXPECT_EQ(att0, remu_obj_count("mcast_attach"));
	EXPECT_EQ(0, igmp_users(NULL, "v0", &g));

	/* attach, also in RESET; a second attach of the same QP is a no-op */
	EXPECT_EQ(0, ibv_attach_mcast(m.qp, &g, 0));
	EXPECT_EQ(0, ibv_attach_mcast(ud, &g, 0));
	EXPECT_EQ(0, ibv_attach_mcast(m.qp, &g, 0));
	EXPECT_EQ(grp0 + 1, remu_obj_count("mcast_grp"));
	EXPECT_EQ(att0 + 2, remu_obj_count("mcast_attach"));
	EXPECT_EQ(1, igmp_users(NULL, "v0", &g));

	/* detach: not attached (to that group, or at all) is EINVAL */
	EXPECT_EQ(EINVAL, ibv_detach_mcast(m.qp, &g2, 0));
	EXPECT_EQ(EINVAL, ibv_detach_mcast(rc, &g, 0));
	/* an attached QP cannot be destroyed */
	EXPECT_EQ(EBUSY, ibv_destroy_qp(ud));
	EXPECT_EQ(0, ibv_detach_mcast(ud, &g, 0));
	EXPECT_EQ(EINVAL, ibv_detach_mcast(ud, &g, 0));
	EXPECT_EQ(0, ibv_destroy_qp(ud));
	EXPECT_EQ(att0 + 1, remu_obj_count("mcast_attach"));
	EXPECT_EQ(1, igmp_users(NULL, "v0", &g));
	/* the last detach frees the group and leaves the IP group */
	EXPECT_EQ(0, ibv_detach_mcast(m.qp, &g, 0));
	EXPECT_EQ(grp0, remu_obj_count("mcast_grp"));
	EXPECT_EQ(att0, remu_obj_count("mcast_attach"));
	EXPECT_EQ(0, igmp_users(NULL, "v0", &g));
	EXPECT_EQ(0, ibv_destroy_qp(rc));
	EXPECT_EQ(0, ibv_destroy_qp(uc));
	mq_close(&m);
}

/*
 * One QP attached to one group under two MLIDs: uverbs keeps the two
 * attachments apart and the core counts both in the QP's use count, so
 * each detach must succeed and the QP stays attached (and its IP group
 * joined) until the second one; then it can be destroyed.  Before remu
 * counted a repeated attach, the second detach failed with EINVAL, the
 * core's count stayed up and the QP (and its PD, CQ, context) could never
 * be destroyed, not even when the process exited (remu_uverbsfuzz_test
 * found it).
 */
TEST(attach_two_mlids)
{
	static const struct ibv_qp_cap cap = { .max_send_wr = 1,
		.max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 };
	int grp0 = remu_obj_count("mcast_grp");
	int att0 = remu_obj_count("mcast_attach");
	struct ibv_qp *ud;
	union ibv_gid g;
	struct mq m;

	ASSERT_EQ(0, mq_open(&m, "remu0", 0, 0));
	mgid_of("239.77.1.3", &g);
	ud = remu_create_qp(m.pd, m.cq, IBV_QPT_UD, &cap);
	ASSERT_NE(NULL, ud);

	EXPECT_EQ(0, ibv_attach_mcast(ud, &g, 0));
	EXPECT_EQ(0, ibv_attach_mcast(ud, &g, 0xc001));
	EXPECT_EQ(grp0 + 1, remu_obj_count("mcast_grp"));
	EXPECT_EQ(att0 + 1, remu_obj_count("mcast_attach"));
	EXPECT_EQ(1, igmp_users(NULL, "v0", &g));
	EXPECT_EQ(0, ibv_detach_mcast(ud, &g, 0));
	/* still attached once */
	EXPECT_EQ(att0 + 1, remu_obj_count("mcast_attach"));
	EXPECT_EQ(1, igmp_users(NULL, "v0", &g));
	EXPECT_EQ(EBUSY, ibv_destroy_qp(ud));
	EXPECT_EQ(0, ibv_detach_mcast(ud, &g, 0xc001));
	EXPECT_EQ(grp0, remu_obj_count("mcast_grp"));
	EXPECT_EQ(att0, remu_obj_count("mcast_attach"));
	EXPECT_EQ(0, igmp_users(NULL, "v0", &g));
	EXPECT_EQ(0, ibv_destroy_qp(ud));
	mq_close(&m);
}

/* max_mcast_qp_attach QPs on one group, the next one ENOMEM */
TEST(limit_qps_per_group)
{
	static const struct ibv_qp_cap cap = { .max_send_wr = 1,
		.max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 };
	struct ibv_device_attr a;
	struct ibv_qp **qps;
	union ibv_gid g, g2;
	struct mq m;
	int i, n;

	ASSERT_EQ(0, mq_open(&m, "remu0", 0, 0));
	ASSERT_EQ(0, ibv_query_device(m.ctx, &a));
	n = a.max_mcast_qp_attach;
	qps = calloc(n + 1, sizeof(*qps));
	ASSERT_NE(NULL, qps);
	mgid_of("239.77.2.1", &g);
	mgid_of("239.77.2.2", &g2);
	for (i = 0; i <= n; i++) {
		qps[i] = remu_create_qp(m.pd, m.cq, IBV_QPT_UD, &cap);
		ASSERT_NE(NULL, qps[i]);
	}
	for (i = 0; i < n; i++)
		ASSERT_EQ(0, ibv_attach_mcast(qps[i], &g, 0)) TH_LOG("QP %d", i);
	EXPECT_EQ(ENOMEM, ibv_attach_mcast(qps[n], &g, 0));
	/* the limit is per group */
	EXPECT_EQ(0, ibv_attach_mcast(qps[n], &g2, 0));
	EXPECT_EQ(0, ibv_detach_mcast(qps[0], &g, 0));
	EXPECT_EQ(0, ibv_attach_mcast(qps[n], &g, 0));
	EXPECT_EQ(ENOMEM, ibv_attach_mcast(qps[0], &g, 0));
	for (i = 1; i <= n; i++)
		EXPECT_EQ(0, ibv_detach_mcast(qps[i], &g, 0));
	EXPECT_EQ(0, ibv_detach_mcast(qps[n], &g2, 0));
	EXPECT_EQ(0, igmp_users(NULL, "v0", &g));
	for (i = 0; i <= n; i++)
		EXPECT_EQ(0, ibv_destroy_qp(qps[i]));
	free(qps);
	mq_close(&m);
}

/* the group of index @i of a series: IPv4 239.78.x.y */
static void series_gid(int i, union ibv_gid *g)
{
	char a[32];

	snprintf(a, sizeof(a), "239.78.%d.%d", i / 250, i % 250 + 1);
	mgid_of(a, g);
}

/* max_mcast_grp groups per device, the next one ENOMEM, each an IP group */
TEST(limit_groups)
{
	static const struct ibv_qp_cap cap = { .max_send_wr = 1,
		.max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 };
	int grp0 = remu_obj_count("mcast_grp");
	struct ibv_device_attr a;
	struct ibv_qp *qp2;
	union ibv_gid g;
	struct mq m;
	int i, n;

	ASSERT_EQ(0, mq_open(&m, "remu0", 0, 0));
	ASSERT_EQ(0, ibv_query_device(m.ctx, &a));
	n = a.max_mcast_grp;
	qp2 = remu_create_qp(m.pd, m.cq, IBV_QPT_UD, &cap);
	ASSERT_NE(NULL, qp2);
	for (i = 0; i < n; i++) {
		series_gid(i, &g);
		ASSERT_EQ(0, ibv_attach_mcast(m.qp, &g, 0)) TH_LOG("group %d", i);
	}
	EXPECT_EQ(grp0 + n, remu_obj_count("mcast_grp"));
	series_gid(n, &g);
	EXPECT_EQ(ENOMEM, ibv_attach_mcast(m.qp, &g, 0));
	EXPECT_EQ(ENOMEM, ibv_attach_mcast(qp2, &g, 0));
	EXPECT_EQ(0, igmp_users(NULL, "v0", &g));
	/* another QP on a group that exists is no new group */
	series_gid(n - 1, &g);
	EXPECT_EQ(0, ibv_attach_mcast(qp2, &g, 0));
	EXPECT_EQ(1, igmp_users(NULL, "v0", &g));
	series_gid(0, &g);
	EXPECT_EQ(1, igmp_users(NULL, "v0", &g));
	EXPECT_EQ(0, ibv_detach_mcast(m.qp, &g, 0));
	EXPECT_EQ(0, igmp_users(NULL, "v0", &g));
	/* one group freed: one new group fits */
	series_gid(n, &g);
	EXPECT_EQ(0, ibv_attach_mcast(m.qp, &g, 0));
	EXPECT_EQ(0, ibv_detach_mcast(m.qp, &g, 0));
	series_gid(n - 1, &g);
	EXPECT_EQ(0, ibv_detach_mcast(qp2, &g, 0));
	for (i = 1; i < n; i++) {
		series_gid(i, &g);
		EXPECT_EQ(0, ibv_detach_mcast(m.qp, &g, 0));
	}
	EXPECT_EQ(grp0, remu_obj_count("mcast_grp"));
	series_gid(n - 1, &g);
	EXPECT_EQ(0, igmp_users(NULL, "v0", &g));
	EXPECT_EQ(0, ibv_destroy_qp(qp2));
	mq_close(&m);
}

/* ---- data ----------------------------------------------------------- */

FIXTURE(mc) {
	struct mq s, r1, r2, r3;	/* remu0; remu1, remu1; remu0 */
	union ibv_gid mgid;
	struct ibv_ah *ah;
	uint32_t lens[6];
	int grp0, att0;
};

FIXTURE_VARIANT(mc) {
	const char *group;
	const char *addr0, *addr1;	/* extra IPv6 addresses of v0, v1 */
};

FIXTURE_VARIANT_ADD(mc, ipv4) { .group = "239.77.0.10" };
FIXTURE_VARIANT_ADD(mc, ipv6) {
	.group = "ff0e::77:10", .addr0 = "fd77:c::1", .addr1 = "fd77:c::2",
};

FIXTURE_SETUP(mc)
{
	int v6 = variant->addr0 != NULL;
	char cmd[160];

	memset(&self->s, 0, sizeof(self->s));
	memset(&self->r1, 0, sizeof(self->r1));
	memset(&self->r2, 0, sizeof(self->r2));
	memset(&self->r3, 0, sizeof(self->r3));
	self->ah = NULL;
	self->grp0 = remu_obj_count("mcast_grp");
	self->att0 = remu_obj_count("mcast_attach");
	if (v6) {
		/*
		 * IPv6 addresses of our own (other tests may flush v0's);
		 * a test that failed an assertion may have left them
		 */
		snprintf(cmd, sizeof(cmd),
			 "ip addr replace %s/64 dev v0 nodad && "
			 "ip -n peer addr replace %s/64 dev v1 nodad",
			 variant->addr0, variant->addr1);
		ASSERT_EQ(0, remu_sh(cmd));
	}
	/* the GIDs follow the addresses within a moment */
	ASSERT_EQ(0, mq_open_wait(&self->s, "remu0", v6, 0));
	ASSERT_EQ(0, mq_open_wait(&self->r1, "remu1", v6, 0));
	ASSERT_EQ(0, mq_open_wait(&self->r2, "remu1", v6, 0));
	ASSERT_EQ(0, mq_open_wait(&self->r3, "remu0", v6, 0));
	ASSERT_EQ(0, mq_post_recvs(&self->r1, NRECV));
	ASSERT_EQ(0, mq_post_recvs(&self->r2, NRECV));
	ASSERT_EQ(0, mq_post_recvs(&self->r3, NRECV));
	mgid_of(variant->group, &self->mgid);
	self->ah = group_ah(&self->s, &self->mgid);
	ASSERT_NE(NULL, self->ah);
	/* UD messages: 0 B to the MTU */
	self->lens[0] = 0;
	self->lens[1] = 1;
	self->lens[2] = 63;
	self->lens[3] = 1000;
	self->lens[4] = self->s.mtu - 1;
	self->lens[5] = self->s.mtu;
	ASSERT_LE(self->s.mtu, 4096);
}

FIXTURE_TEARDOWN(mc)
{
	char cmd[160];

	/* detach whatever a failed test left attached */
	if (self->s.qp)
		ibv_detach_mcast(self->s.qp, &self->mgid, 0);
	if (self->r1.qp)
		ibv_detach_mcast(self->r1.qp, &self->mgid, 0);
	if (self->r2.qp)
		ibv_detach_mcast(self->r2.qp, &self->mgid, 0);
	if (self->r3.qp)
		ibv_detach_mcast(self->r3.qp, &self->mgid, 0);
	if (self->ah)
		ibv_destroy_ah(self->ah);
	mq_close(&self->s);
	mq_close(&self->r1);
	mq_close(&self->r2);
	mq_close(&self->r3);
	EXPECT_EQ(self->grp0, remu_obj_count("mcast_grp"));
	EXPECT_EQ(self->att0, remu_obj_count("mcast_attach"));
	if (variant->addr0) {
		snprintf(cmd, sizeof(cmd),
			 "ip addr del %s/64 dev v0; ip -n peer addr del %s/64 dev v1",
			 variant->addr0, variant->addr1);
		remu_sh(cmd);
	}
}

/*
 * An AF_PACKET socket on v0 that sees the frames remu0 sends: -1 or the
 * socket, with a 2 s receive timeout.
 */
static int capture_open(void)
{
	struct sockaddr_ll sll = { .sll_family = AF_PACKET,
				   .sll_protocol = htons(ETH_P_ALL) };
	struct timeval tv = { .tv_sec = 2 };
	int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));

	sll.sll_ifindex = if_nametoindex("v0");
	if (fd < 0 || !sll.sll_ifindex ||
	    bind(fd, (struct sockaddr *)&sll, sizeof(sll)) ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv))) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/*
 * The first RoCEv2 frame to the group @mgid on @fd: its Ethernet
 * destination, and the BTH and DETH checked: DestQP 0xffffff, source QP
 * @sqpn, Q_Key.  0 when such a frame came, -1 otherwise.
 */
static int capture_check(struct __test_metadata *_metadata, int fd,
			 const union ibv_gid *mgid, uint32_t sqpn)
{
	uint8_t f[9100], mac[6];
	const uint8_t *ip, *udp, *bth;
	ssize_t len;
	int v4 = is_v4(mgid);

	if (v4) {	/* 01:00:5e + the low 23 bits of the group */
		mac[0] = 0x01; mac[1] = 0x00; mac[2] = 0x5e;
		mac[3] = mgid->raw[13] & 0x7f;
		mac[4] = mgid->raw[14];
		mac[5] = mgid->raw[15];
	} else {	/* 33:33 + the low 32 bits */
		mac[0] = mac[1] = 0x33;
		memcpy(mac + 2, mgid->raw + 12, 4);
	}
	while ((len = recv(fd, f, sizeof(f), 0)) > 0) {
		ip = f + 14;
		if (v4) {
			if (len < 14 + 20 + 8 + 12 + 8 || f[12] != 0x08 ||
			    f[13] != 0x00 || ip[9] != 17 ||
			    memcmp(ip + 16, mgid->raw + 12, 4))
				continue;
			udp = ip + 20;
		} else {
			if (len < 14 + 40 + 8 + 12 + 8 || f[12] != 0x86 ||
			    f[13] != 0xdd || ip[6] != 17 ||
			    memcmp(ip + 24, mgid->raw, 16))
				continue;
			udp = ip + 40;
		}
		if (udp[2] != 4791 >> 8 || udp[3] != (4791 & 0xff))
			continue;
		bth = udp + 8;
		EXPECT_EQ(0, memcmp(f, mac, 6));
		EXPECT_EQ(0xff, bth[5]);	/* DestQP 0xffffff */
		EXPECT_EQ(0xff, bth[6]);
		EXPECT_EQ(0xff, bth[7]);
		EXPECT_EQ(QKEY, be32toh(*(const uint32_t *)(bth + 12)));
		EXPECT_EQ(sqpn, be32toh(*(const uint32_t *)(bth + 16)) &
				MCAST_QPN);
		return 0;
	}
	return -1;
}

/*
 * Two receivers on remu1 and one on remu0 get every message; the group
 * is an IP group of v1 (peer) and v0 exactly while attached; a detached
 * receiver gets nothing more.
 */
TEST_F(mc, deliver)
{
	long long p1 = cnt("remu1", "rcvd_mcast_pkts");
	long long p0 = cnt("remu0", "rcvd_mcast_pkts");
	long long q1 = cnt("remu1", "rdma_recvs");
	long long q0 = cnt("remu0", "rdma_recvs");
	long long n1 = cnt("remu1", "rcvd_mcast_no_qp");
	union ibv_gid *g = &self->mgid;
	int fd;

	EXPECT_EQ(0, igmp_users("peer", "v1", g));
	EXPECT_EQ(0, igmp_users(NULL, "v0", g));
	ASSERT_EQ(0, ibv_attach_mcast(self->r1.qp, g, 0));
	ASSERT_EQ(0, ibv_attach_mcast(self->r2.qp, g, 0));
	ASSERT_EQ(0, ibv_attach_mcast(self->r3.qp, g, 0));
	/* one membership per device and group, in the netdev's namespace */
	EXPECT_EQ(1, igmp_users("peer", "v1", g));
	EXPECT_EQ(1, igmp_users(NULL, "v0", g));
	EXPECT_EQ(0, igmp_users(NULL, "v1", g));	/* not in init */
	EXPECT_EQ(self->grp0 + 2, remu_obj_count("mcast_grp"));
	EXPECT_EQ(self->att0 + 3, remu_obj_count("mcast_attach"));

	fd = capture_open();
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, send_msgs(&self->s, self->ah, self->lens, 6, 100));
	EXPECT_EQ(0, capture_check(_metadata, fd, g, self->s.qp->qp_num));
	close(fd);
	expect_msgs(_metadata, &self->r1, &self->s, g, self->lens, 6, 100);
	expect_msgs(_metadata, &self->r2, &self->s, g, self->lens, 6, 100);
	expect_msgs(_metadata, &self->r3, &self->s, g, self->lens, 6, 100);
	/* once per packet and device; once per receive */
	EXPECT_EQ(p1 + 6, cnt("remu1", "rcvd_mcast_pkts"));
	EXPECT_EQ(p0 + 6, cnt("remu0", "rcvd_mcast_pkts"));
	EXPECT_EQ(q1 + 12, cnt("remu1", "rdma_recvs"));
	EXPECT_EQ(q0 + 6, cnt("remu0", "rdma_recvs"));
	EXPECT_EQ(n1, cnt("remu1", "rcvd_mcast_no_qp"));

	/* r1 detached: the others still receive */
	ASSERT_EQ(0, ibv_detach_mcast(self->r1.qp, g, 0));
	EXPECT_EQ(1, igmp_users("peer", "v1", g));
	ASSERT_EQ(0, send_msgs(&self->s, self->ah, self->lens + 2, 2, 200));
	expect_msgs(_metadata, &self->r2, &self->s, g, self->lens + 2, 2, 200);
	expect_msgs(_metadata, &self->r3, &self->s, g, self->lens + 2, 2, 200);
	EXPECT_TRUE(no_completion(&self->r1));
	EXPECT_EQ(p1 + 8, cnt("remu1", "rcvd_mcast_pkts"));
	EXPECT_EQ(q1 + 14, cnt("remu1", "rdma_recvs"));

	/* the last QP of remu1 gone: v1 leaves the group, remu1 sees nothing */
	ASSERT_EQ(0, ibv_detach_mcast(self->r2.qp, g, 0));
	EXPECT_EQ(0, igmp_users("peer", "v1", g));
	ASSERT_EQ(0, send_msgs(&self->s, self->ah, self->lens + 3, 1, 300));
	expect_msgs(_metadata, &self->r3, &self->s, g, self->lens + 3, 1, 300);
	EXPECT_TRUE(no_completion(&self->r2));
	EXPECT_EQ(p1 + 8, cnt("remu1", "rcvd_mcast_pkts"));
	EXPECT_EQ(n1, cnt("remu1", "rcvd_mcast_no_qp"));
	ASSERT_EQ(0, ibv_detach_mcast(self->r3.qp, g, 0));
	EXPECT_EQ(0, igmp_users(NULL, "v0", g));
	EXPECT_EQ(self->grp0, remu_obj_count("mcast_grp"));
}

/*
 * A packet to a group the netdev is a member of but no QP of the device
 * is attached to (the address joined by `ip addr ... autojoin`): dropped
 * and counted in rcvd_mcast_no_qp.
 */
TEST_F(mc, no_qp_counted)
{
	long long p1 = cnt("remu1", "rcvd_mcast_pkts");
	long long n1 = cnt("remu1", "rcvd_mcast_no_qp");
	long long r1 = cnt("remu1", "rcvd_pkts");
	char cmd[160];

	snprintf(cmd, sizeof(cmd), "ip -n peer addr add %s/%d dev v1 autojoin",
		 variant->group, is_v4(&self->mgid) ? 32 : 128);
	ASSERT_EQ(0, remu_sh(cmd));
	EXPECT_EQ(1, igmp_users("peer", "v1", &self->mgid));
	EXPECT_EQ(0, send_msgs(&self->s, self->ah, self->lens, 3, 400));
	/* each one arrives, finds no QP */
	usleep(300000);
	EXPECT_EQ(r1 + 3, cnt("remu1", "rcvd_pkts"));
	EXPECT_EQ(n1 + 3, cnt("remu1", "rcvd_mcast_no_qp"));
	EXPECT_EQ(p1, cnt("remu1", "rcvd_mcast_pkts"));
	EXPECT_TRUE(no_completion(&self->r1));
	/* with a QP attached the same packets are delivered */
	ASSERT_EQ(0, ibv_attach_mcast(self->r1.qp, &self->mgid, 0));
	EXPECT_EQ(2, igmp_users("peer", "v1", &self->mgid));
	EXPECT_EQ(0, send_msgs(&self->s, self->ah, self->lens, 2, 500));
	expect_msgs(_metadata, &self->r1, &self->s, &self->mgid, self->lens, 2,
		    500);
	EXPECT_EQ(n1 + 3, cnt("remu1", "rcvd_mcast_no_qp"));
	EXPECT_EQ(p1 + 2, cnt("remu1", "rcvd_mcast_pkts"));
	EXPECT_EQ(0, ibv_detach_mcast(self->r1.qp, &self->mgid, 0));
	snprintf(cmd, sizeof(cmd), "ip -n peer addr del %s/%d dev v1 autojoin",
		 variant->group, is_v4(&self->mgid) ? 32 : 128);
	EXPECT_EQ(0, remu_sh(cmd));
	EXPECT_EQ(0, igmp_users("peer", "v1", &self->mgid));
}

/* each attached QP checks the Q_Key of its own copy */
TEST_F(mc, qkey_per_qp)
{
	struct ibv_qp_attr qa = { .qkey = QKEY + 1 };
	long long q1 = cnt("remu1", "rdma_recvs");
	long long p1 = cnt("remu1", "rcvd_mcast_pkts");

	ASSERT_EQ(0, ibv_modify_qp(self->r2.qp, &qa, IBV_QP_QKEY));
	ASSERT_EQ(0, ibv_attach_mcast(self->r1.qp, &self->mgid, 0));
	ASSERT_EQ(0, ibv_attach_mcast(self->r2.qp, &self->mgid, 0));
	ASSERT_EQ(0, send_msgs(&self->s, self->ah, self->lens, 4, 600));
	expect_msgs(_metadata, &self->r1, &self->s, &self->mgid, self->lens, 4,
		    600);
	EXPECT_TRUE(no_completion(&self->r2));
	EXPECT_EQ(p1 + 4, cnt("remu1", "rcvd_mcast_pkts"));
	EXPECT_EQ(q1 + 4, cnt("remu1", "rdma_recvs"));
	EXPECT_EQ(0, ibv_detach_mcast(self->r1.qp, &self->mgid, 0));
	EXPECT_EQ(0, ibv_detach_mcast(self->r2.qp, &self->mgid, 0));
}

/*
 * Loopback on one device: an attached sender receives its own messages
 * (mlx5's default) and so does another QP of its device; a sender
 * created with IBV_QP_CREATE_BLOCK_SELF_MCAST_LB does not, the other QP
 * still does.
 */
TEST_F(mc, loopback_self)
{
	int v6 = !is_v4(&self->mgid);
	long long p0 = cnt("remu0", "rcvd_mcast_pkts");
	struct ibv_ah *ah;
	struct mq b;

	ASSERT_EQ(0, mq_post_recvs(&self->s, NRECV));
	ASSERT_EQ(0, ibv_attach_mcast(self->s.qp, &self->mgid, 0));
	ASSERT_EQ(0, ibv_attach_mcast(self->r3.qp, &self->mgid, 0));
	ASSERT_EQ(0, send_msgs(&self->s, self->ah, self->lens, 3, 700));
	expect_msgs(_metadata, &self->s, &self->s, &self->mgid, self->lens, 3,
		    700);
	expect_msgs(_metadata, &self->r3, &self->s, &self->mgid, self->lens, 3,
		    700);
	EXPECT_EQ(p0 + 3, cnt("remu0", "rcvd_mcast_pkts"));

	ASSERT_EQ(0, mq_open(&b, "remu0", v6, 1));
	ASSERT_EQ(0, mq_post_recvs(&b, NRECV));
	ASSERT_EQ(0, ibv_attach_mcast(b.qp, &self->mgid, 0));
	ah = group_ah(&b, &self->mgid);
	ASSERT_NE(NULL, ah);
	ASSERT_EQ(0, send_msgs(&b, ah, self->lens, 2, 800));
	expect_msgs(_metadata, &self->r3, &b, &self->mgid, self->lens, 2, 800);
	expect_msgs(_metadata, &self->s, &b, &self->mgid, self->lens, 2, 800);
	EXPECT_TRUE(no_completion(&b));
	EXPECT_EQ(p0 + 5, cnt("remu0", "rcvd_mcast_pkts"));
	/* its own QP still receives what others send */
	ASSERT_EQ(0, send_msgs(&self->s, self->ah, self->lens, 1, 900));
	expect_msgs(_metadata, &b, &self->s, &self->mgid, self->lens, 1, 900);
	EXPECT_EQ(0, ibv_detach_mcast(b.qp, &self->mgid, 0));
	EXPECT_EQ(0, ibv_destroy_ah(ah));
	mq_close(&b);
	EXPECT_EQ(0, ibv_detach_mcast(self->s.qp, &self->mgid, 0));
	EXPECT_EQ(0, ibv_detach_mcast(self->r3.qp, &self->mgid, 0));
}

/* destroying an attached QP fails (EBUSY) and leaves it working */
TEST_F(mc, destroy_attached)
{
	ASSERT_EQ(0, ibv_attach_mcast(self->r1.qp, &self->mgid, 0));
	EXPECT_EQ(EBUSY, ibv_destroy_qp(self->r1.qp));
	EXPECT_EQ(1, igmp_users("peer", "v1", &self->mgid));
	ASSERT_EQ(0, send_msgs(&self->s, self->ah, self->lens, 2, 1000));
	expect_msgs(_metadata, &self->r1, &self->s, &self->mgid, self->lens, 2,
		    1000);
	ASSERT_EQ(0, ibv_detach_mcast(self->r1.qp, &self->mgid, 0));
	EXPECT_EQ(0, ibv_destroy_qp(self->r1.qp));
	self->r1.qp = NULL;
	EXPECT_EQ(0, igmp_users("peer", "v1", &self->mgid));
}

/*
 * The AH destroyed right after ibv_post_send() returned (what mckey's
 * sender does): the sends already posted still go out and complete, as
 * on a NIC that copies the address vector into the WQE.
 */
TEST_F(mc, ah_destroyed_after_post)
{
	long long p1 = cnt("remu1", "rcvd_mcast_pkts");

	ASSERT_EQ(0, ibv_attach_mcast(self->r1.qp, &self->mgid, 0));
	ASSERT_EQ(0, post_msgs(&self->s, self->ah, self->lens, 6, 1100));
	ASSERT_EQ(0, ibv_destroy_ah(self->ah));
	self->ah = NULL;
	EXPECT_EQ(0, sent_msgs(&self->s, 6, 1100));
	expect_msgs(_metadata, &self->r1, &self->s, &self->mgid, self->lens, 6,
		    1100);
	EXPECT_EQ(p1 + 6, cnt("remu1", "rcvd_mcast_pkts"));
	EXPECT_EQ(IBV_QPS_RTS, remu_qp_state(self->s.qp));
	EXPECT_EQ(0, ibv_detach_mcast(self->r1.qp, &self->mgid, 0));
}

/* a process killed while attached: its QP is detached, the group left */
TEST_F(mc, process_killed)
{
	int v6 = !is_v4(&self->mgid);
	int pfd[2], st, i;
	char c = 0;
	pid_t pid;

	ASSERT_EQ(0, pipe(pfd));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct mq m;

		close(pfd[0]);
		if (mq_open(&m, "remu1", v6, 0) ||
		    ibv_attach_mcast(m.qp, &self->mgid, 0))
			_exit(1);
		c = 1;
		if (write(pfd[1], &c, 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(pfd[1]);
	ASSERT_EQ(1, read(pfd[0], &c, 1));
	close(pfd[0]);
	EXPECT_EQ(1, igmp_users("peer", "v1", &self->mgid));
	EXPECT_EQ(self->att0 + 1, remu_obj_count("mcast_attach"));
	kill(pid, SIGKILL);
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	for (i = 0; i < 50; i++) {
		if (remu_obj_count("mcast_attach") == self->att0)
			break;
		usleep(100000);
	}
	EXPECT_EQ(self->att0, remu_obj_count("mcast_attach"));
	EXPECT_EQ(self->grp0, remu_obj_count("mcast_grp"));
	EXPECT_EQ(0, igmp_users("peer", "v1", &self->mgid));
}

/* ---- a namespace deleted under an attached QP ------------------------ */

#define NS_CMD	"ip netns exec mcns "

TEST(netns_exit)
{
	int grp0 = remu_obj_count("mcast_grp");
	int att0 = remu_obj_count("mcast_attach");
	union ibv_gid g4, g6;
	struct mq m;

	remu_sh("ip netns del mcns 2>/dev/null; ip link del mx0 2>/dev/null");
	ASSERT_EQ(0, remu_sh("ip netns add mcns && "
			     "ip link add mx0 type veth peer name mx1 && "
			     "ip link set mx1 netns mcns && "
			     NS_CMD "ip addr add 10.78.0.2/24 dev mx1 && "
			     NS_CMD "ip link set mx1 up && ip link set mx0 up && "
			     NS_CMD "rdma link add remumc type remu netdev mx1"));
	ASSERT_EQ(0, mq_open_wait(&m, "remumc", 0, 0));
	mgid_of("239.77.9.9", &g4);
	mgid_of("ff0e::77:99", &g6);
	ASSERT_EQ(0, ibv_attach_mcast(m.qp, &g4, 0));
	ASSERT_EQ(0, ibv_attach_mcast(m.qp, &g6, 0));
	EXPECT_EQ(1, igmp_users("mcns", "mx1", &g4));
	EXPECT_EQ(1, igmp_users("mcns", "mx1", &g6));
	EXPECT_EQ(grp0 + 2, remu_obj_count("mcast_grp"));
	EXPECT_EQ(att0 + 2, remu_obj_count("mcast_attach"));

	ASSERT_EQ(0, remu_sh("ip netns del mcns"));
	EXPECT_EQ(0, remu_wait_fatal(m.ctx, 20));
	EXPECT_EQ(grp0, remu_obj_count("mcast_grp"));
	EXPECT_EQ(att0, remu_obj_count("mcast_attach"));
	/* what the process holds can still be released */
	EXPECT_EQ(0, ibv_destroy_qp(m.qp));
	m.qp = NULL;
	mq_close(&m);
	remu_sh("ip link del mx0 2>/dev/null");
}

TEST_HARNESS_MAIN
