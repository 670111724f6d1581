// SPDX-License-Identifier: GPL-2.0
/*
 * remu_device_test - the device as verbs programs see it: opened through
 * libremu, attributes true to what is implemented, a RoCEv2 port whose
 * state follows the link and whose GID table follows the netdev's
 * addresses, protection domains, and cleanup when a process dies.
 *
 * Runs in the test VM after scripts/remu-up (remu0 on v0 in the initial
 * namespace, remu1 on v1 in namespace "peer").
 */
#include <arpa/inet.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/rdma_user_ioctl.h>

#include "kselftest_harness.h"
#include "remu_lib.h"

FIXTURE(dev) {
	struct ibv_context *ctx;
};

FIXTURE_VARIANT(dev) {
	const char *name;	/* RDMA device */
	const char *ip_netns;	/* "ip" prefix that reaches its netdev */
	const char *ifname;
	const char *ip4;
	const char *ip6;
};

FIXTURE_VARIANT_ADD(dev, remu0) {
	.name = "remu0", .ip_netns = "ip", .ifname = "v0",
	.ip4 = "10.77.0.1", .ip6 = "fd77::1",
};

FIXTURE_VARIANT_ADD(dev, remu1) {
	.name = "remu1", .ip_netns = "ip -n peer", .ifname = "v1",
	.ip4 = "10.77.0.2", .ip6 = "fd77::2",
};

FIXTURE_SETUP(dev)
{
	self->ctx = remu_open(variant->name);
	ASSERT_NE(NULL, self->ctx) TH_LOG("cannot open %s", variant->name);
}

FIXTURE_TEARDOWN(dev)
{
	if (self->ctx)
		ibv_close_device(self->ctx);
}

/* Is @gid (RoCEv2) in the port's GID table? */
static int has_gid(struct ibv_context *ctx, const union ibv_gid *gid)
{
	struct ibv_port_attr pa;
	struct ibv_gid_entry e;
	int i;

	if (ibv_query_port(ctx, 1, &pa))
		return 0;
	for (i = 0; i < pa.gid_tbl_len; i++) {
		if (ibv_query_gid_ex(ctx, 1, i, &e, 0))
			continue;
		if (e.gid_type == IBV_GID_TYPE_ROCE_V2 &&
		    !memcmp(&e.gid, gid, sizeof(*gid)))
			return 1;
	}
	return 0;
}

static void ipv4_mapped(union ibv_gid *gid, const char *ip4)
{
	memset(gid, 0, sizeof(*gid));
	gid->raw[10] = 0xff;
	gid->raw[11] = 0xff;
	inet_pton(AF_INET, ip4, &gid->raw[12]);
}

/* Wait up to 3 s for has_gid() to become @want. */
static int wait_gid(struct ibv_context *ctx, const union ibv_gid *gid, int want)
{
	int i;

	for (i = 0; i < 30; i++) {
		if (has_gid(ctx, gid) == want)
			return 1;
		usleep(100000);
	}
	return 0;
}

/* Wait up to 3 s for the async event @type on @ctx. */
static int wait_event(struct ibv_context *ctx, enum ibv_event_type type)
{
	struct pollfd pfd = { .fd = ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;
	int i, got = 0;

	for (i = 0; i < 30 && !got; i++) {
		if (poll(&pfd, 1, 100) != 1)
			continue;
		if (ibv_get_async_event(ctx, &ev))
			return 0;
		got = ev.event_type == type;
		ibv_ack_async_event(&ev);
	}
	return got;
}

/* The context was opened by libremu, not by another provider. */
TEST_F(dev, opened_by_remu_provider)
{
	EXPECT_TRUE(remu_provider_loaded());
	EXPECT_STREQ(variant->name, ibv_get_device_name(self->ctx->device));
	EXPECT_EQ(IBV_NODE_CA, self->ctx->device->node_type);
	EXPECT_EQ(IBV_TRANSPORT_IB, self->ctx->device->transport_type);
}

/* Attributes are those of what remu implements today, nothing invented. */
TEST_F(dev, query_device)
{
	struct ibv_device_attr_ex ax = {};
	struct ibv_device_attr *a = &ax.orig_attr;

	ASSERT_EQ(0, ibv_query_device_ex(self->ctx, NULL, &ax));
	EXPECT_STREQ("0.1.0", a->fw_ver);
	EXPECT_EQ(0xffffff, a->vendor_id);
	EXPECT_EQ(1, a->phys_port_cnt);
	EXPECT_EQ(0x10000, a->max_pd);
	EXPECT_EQ(1, a->max_pkeys);
	EXPECT_NE(0, a->node_guid);
	EXPECT_EQ(a->node_guid, a->sys_image_guid);
	/* queues and MRs exist: remu_queue_test and remu_mr_test check limits */
	EXPECT_NE(0, a->max_qp);
	EXPECT_NE(0, a->max_cq);
	EXPECT_NE(0, a->max_srq);
	EXPECT_NE(0, a->max_mr);
	/* atomics are atomic among this device's (remu_datapath_test) */
	EXPECT_EQ(IBV_ATOMIC_HCA, a->atomic_cap);
	/* on-demand paging, explicit and implicit (remu_odp_test) */
	EXPECT_EQ(IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT,
		  ax.odp_caps.general_caps);
	/* device memory: the pool remu reserved (default 1 MiB; sysfs
	 * dm_size says the same; remu_dm_test uses it) */
	EXPECT_EQ(1024 * 1024, ax.max_dm_size);
}

/* One RoCEv2 port, active, Ethernet, 4096 MTU on the 9000-byte veth. */
TEST_F(dev, query_port)
{
	struct ibv_port_attr pa;
	uint16_t pkey;

	ASSERT_EQ(0, ibv_query_port(self->ctx, 1, &pa));
	EXPECT_EQ(IBV_PORT_ACTIVE, pa.state);
	EXPECT_EQ(IBV_LINK_LAYER_ETHERNET, pa.link_layer);
	EXPECT_EQ(IBV_MTU_4096, pa.max_mtu);
	EXPECT_EQ(IBV_MTU_4096, pa.active_mtu);
	EXPECT_EQ(128, pa.gid_tbl_len);
	EXPECT_EQ(1, pa.pkey_tbl_len);
	EXPECT_EQ(5, pa.phys_state);	/* LinkUp */
	ASSERT_EQ(0, ibv_query_pkey(self->ctx, 1, 0, &pkey));
	EXPECT_EQ(0xffff, ntohs(pkey));
	EXPECT_NE(0, ibv_query_port(self->ctx, 2, &pa));
}

/* The number a shell command prints, or -1. */
static long long sh_num(const char *cmd)
{
	long long v = -1;
	FILE *f = popen(cmd, "r");

	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	pclose(f);
	return v;
}

/*
 * The IB speed and width that stand for a link of @mbps (unknown: 1 Gb/s)
 * with no lanes reported (as veth): ib_get_eth_speed()'s table, which rxe
 * and mlx5's RoCE ports report too.
 */
static void eth_speed(long long mbps, uint8_t *speed, uint8_t *width)
{
	/*
	 * IBA's encodings (libibverbs 44 names none): speed SDR 1, DDR 2,
	 * FDR10 8, EDR 32, HDR 64, NDR 128; width 1X 1, 4X 2, 2X 16
	 */
	static const struct { long long upto; uint8_t speed, width; } t[] = {
		{ 1000, 1, 1 }, { 10000, 8, 1 }, { 20000, 2, 2 },
		{ 25000, 32, 1 }, { 40000, 8, 2 }, { 50000, 32, 16 },
		{ 100000, 32, 2 }, { 200000, 64, 2 }, { -1, 128, 2 },
	};
	unsigned int i;

	if (mbps <= 0)
		mbps = 1000;
	for (i = 0; t[i].upto > 0 && mbps > t[i].upto; i++)
		;
	*speed = t[i].speed;
	*width = t[i].width;
}

/* rdma-core 62's names (7.x's uapi), absent from older headers */
#define REMU_METHOD_QUERY_PORT_SPEED	(UVERBS_METHOD_QUERY_GID_ENTRY + 1)
#define REMU_ATTR_QUERY_PORT_SPEED_PORT	0
#define REMU_ATTR_QUERY_PORT_SPEED_RESP	1

/*
 * ibv_query_port_speed()'s command, made by hand (libibverbs 44 has no
 * such verb): 0 with *@speed in 100 Mb/s, or the errno (EPROTONOSUPPORT
 * or EOPNOTSUPP from a kernel without the method, before 7.x).
 */
static int query_port_speed(struct ibv_context *ctx, uint32_t port,
			    uint64_t *speed)
{
	struct {
		struct ib_uverbs_ioctl_hdr hdr;
		struct ib_uverbs_attr attrs[2];
	} cmd = {
		.hdr = { .length = sizeof(cmd), .object_id = UVERBS_OBJECT_DEVICE,
			 .method_id = REMU_METHOD_QUERY_PORT_SPEED,
			 .num_attrs = 2 },
		.attrs = {
			{ .attr_id = REMU_ATTR_QUERY_PORT_SPEED_PORT,
			  .len = sizeof(uint64_t), .data = port },
			{ .attr_id = REMU_ATTR_QUERY_PORT_SPEED_RESP,
			  .len = sizeof(*speed), .data = (uintptr_t)speed },
		},
	};

	return ioctl(ctx->cmd_fd, RDMA_VERBS_IOCTL, &cmd) ? errno : 0;
}

/*
 * The port's speed follows its netdev's link speed, as rxe's and mlx5's
 * RoCE ports do: active_speed/active_width encode it (ib_get_eth_speed()),
 * and ibv_query_port_speed() gives it in 100 Mb/s where the kernel has
 * that verb (7.x), 0 while the link is down.
 */
TEST_F(dev, port_speed)
{
	struct ibv_port_attr pa;
	uint8_t speed, width;
	long long mbps;
	uint64_t qps = 0;
	char cmd[256];
	int err;

	/* -1 ("unknown" or an error): 1 Gb/s, as the kernel counts it */
	snprintf(cmd, sizeof(cmd), "%s cat /sys/class/net/%s/speed",
		 strcmp(variant->ip_netns, "ip") ? "ip netns exec peer" : "",
		 variant->ifname);
	mbps = sh_num(cmd);
	TH_LOG("%s: %lld Mb/s", variant->ifname, mbps);
	eth_speed(mbps, &speed, &width);
	ASSERT_EQ(0, ibv_query_port(self->ctx, 1, &pa));
	EXPECT_EQ(speed, pa.active_speed);
	EXPECT_EQ(width, pa.active_width);

	err = query_port_speed(self->ctx, 1, &qps);
	if (err == EPROTONOSUPPORT || err == EOPNOTSUPP) {
		TH_LOG("no ibv_query_port_speed() in this kernel (7.x has it)");
		return;
	}
	ASSERT_EQ(0, err);
	EXPECT_EQ((mbps > 0 ? mbps : 1000) / 100, qps);
	EXPECT_NE(0, query_port_speed(self->ctx, 2, &qps));

	/* 0 while the link is down */
	snprintf(cmd, sizeof(cmd), "%s link set %s down", variant->ip_netns,
		 variant->ifname);
	ASSERT_EQ(0, remu_sh(cmd));
	err = query_port_speed(self->ctx, 1, &qps);
	snprintf(cmd, sizeof(cmd), "%s link set %s up", variant->ip_netns,
		 variant->ifname);
	ASSERT_EQ(0, remu_sh(cmd));
	EXPECT_TRUE(wait_event(self->ctx, IBV_EVENT_PORT_ACTIVE));
	EXPECT_EQ(0, err);
	EXPECT_EQ(0, qps);
}

/* The netdev's IPv4 and IPv6 addresses are RoCEv2 GIDs. */
TEST_F(dev, gids_from_addresses)
{
	union ibv_gid gid;

	ipv4_mapped(&gid, variant->ip4);
	EXPECT_TRUE(has_gid(self->ctx, &gid)) TH_LOG("no GID ::ffff:%s",
						     variant->ip4);
	ASSERT_EQ(1, inet_pton(AF_INET6, variant->ip6, gid.raw));
	EXPECT_TRUE(has_gid(self->ctx, &gid)) TH_LOG("no GID %s",
						     variant->ip6);
}

/* Adding and removing an address adds and removes its GID. */
TEST_F(dev, gid_table_follows_addresses)
{
	char cmd[256];
	union ibv_gid gid;

	ipv4_mapped(&gid, "10.77.9.1");
	ASSERT_FALSE(has_gid(self->ctx, &gid));
	snprintf(cmd, sizeof(cmd), "%s addr add 10.77.9.1/24 dev %s",
		 variant->ip_netns, variant->ifname);
	ASSERT_EQ(0, remu_sh(cmd));
	EXPECT_TRUE(wait_gid(self->ctx, &gid, 1));
	snprintf(cmd, sizeof(cmd), "%s addr del 10.77.9.1/24 dev %s",
		 variant->ip_netns, variant->ifname);
	ASSERT_EQ(0, remu_sh(cmd));
	EXPECT_TRUE(wait_gid(self->ctx, &gid, 0));
}

/* Link down and up: port state and async events follow. */
TEST_F(dev, port_follows_link)
{
	struct ibv_port_attr pa;
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "%s link set %s down", variant->ip_netns,
		 variant->ifname);
	ASSERT_EQ(0, remu_sh(cmd));
	EXPECT_TRUE(wait_event(self->ctx, IBV_EVENT_PORT_ERR));
	ASSERT_EQ(0, ibv_query_port(self->ctx, 1, &pa));
	EXPECT_EQ(IBV_PORT_DOWN, pa.state);

	snprintf(cmd, sizeof(cmd), "%s link set %s up", variant->ip_netns,
		 variant->ifname);
	ASSERT_EQ(0, remu_sh(cmd));
	EXPECT_TRUE(wait_event(self->ctx, IBV_EVENT_PORT_ACTIVE));
	ASSERT_EQ(0, ibv_query_port(self->ctx, 1, &pa));
	EXPECT_EQ(IBV_PORT_ACTIVE, pa.state);
}

/* Many PDs, each counted by the module, all released. */
TEST_F(dev, pd_alloc_dealloc)
{
	struct ibv_pd *pd[64];
	int base = remu_obj_count("pd");
	int i;

	ASSERT_LE(0, base);
	for (i = 0; i < 64; i++) {
		pd[i] = ibv_alloc_pd(self->ctx);
		ASSERT_NE(NULL, pd[i]);
	}
	EXPECT_EQ(base + 64, remu_obj_count("pd"));
	for (i = 0; i < 64; i++)
		ASSERT_EQ(0, ibv_dealloc_pd(pd[i]));
	EXPECT_EQ(base, remu_obj_count("pd"));
}

/* A process that dies holding a context and PDs leaves nothing behind. */
TEST_F(dev, cleanup_on_process_exit)
{
	int pd0 = remu_obj_count("pd"), uc0 = remu_obj_count("ucontext");
	int status, i;
	pid_t pid;

	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct ibv_context *c = remu_open(variant->name);

		for (i = 0; c && i < 8; i++)
			ibv_alloc_pd(c);
		_exit(c && remu_obj_count("pd") == pd0 + 8 ? 0 : 1);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_EQ(0, WEXITSTATUS(status));
	EXPECT_EQ(pd0, remu_obj_count("pd"));
	EXPECT_EQ(uc0, remu_obj_count("ucontext"));
}

TEST_HARNESS_MAIN
