// SPDX-License-Identifier: GPL-2.0
/*
 * remu_net.c - RoCEv2 over UDP port 4791: the wire layer between the
 * engines and the network, in any network namespace.
 *
 * Owns:
 * - one UDP tunnel socket pair (IPv4 and IPv6, port 4791) per network
 *   namespace holding a remu device (struct remu_ns, on remu_ns_list):
 *   made by the first device's newlink in its netdev's namespace, freed
 *   by the last device's dealloc_driver, or released at once by the
 *   namespace's pernet exit (the entry lives on, socketless, until its
 *   last device is gone).  With port 4791 taken (rdma_rxe binds it in the
 *   initial namespace) newlink fails with EADDRINUSE.
 * - transmit: packets for the engines to fill, the payload in the linear
 *   part (remu_net_alloc_skb()) or attached by reference as page frags
 *   (remu_net_alloc_skb_ref(), remu_net_end_ref()); remu_net_xmit()
 *   routes in the netdev's namespace (RC/UC through the QP's per-CPU
 *   dst_cache), adds the UDP and IP headers and the ICRC and hands the
 *   packet to the IP stack, or, to an address of a remu device in the same
 *   namespace, straight to that device's receive path without an ICRC
 *   (remu_net_loopback()).
 * - receive: remu_udp_encap_rcv() (softirq) finds the remu device (by
 *   ingress netdev, or on lo by destination address), checks the packet
 *   (IP options, lengths, ICRC, BTH version, opcode, pad, P_Key), counts
 *   every drop by reason and hands a parsed struct remu_pkt to remu_rcv().
 *
 * Locking: remu_ns_lock (a mutex) protects remu_ns_list, each entry's
 * sockets and user count, and the device lists' writers; it nests inside
 * nothing of remu's and no rtnl_lock is taken under it.  The receive path
 * reads sk_user_data and the device lists under RCU only (encap_rcv runs
 * inside rcu_read_lock); entries and devices are freed after a grace
 * period.  Nothing on the receive path sleeps.  The loopback path runs it
 * in the sender's context, with BH off and under rcu_read_lock as in
 * softirq; it never sends, so it never recurses.
 */
#include <linux/debugfs.h>
#include <linux/if_vlan.h>
#include <linux/inetdevice.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/seq_file.h>
#include <linux/udp.h>
#include <net/addrconf.h>
#include <net/ip.h>
#include <net/ip6_route.h>
#include <net/ipv6.h>
#include <net/net_namespace.h>
#include <net/route.h>
#include <net/udp_tunnel.h>
#include <rdma/ib_cache.h>

#include "remu.h"
#include "remu_net.h"
#include "remu_trace.h"

/**
 * struct remu_ns - remu's presence in one network namespace
 * @list:	entry in remu_ns_list
 * @net:	the namespace, not referenced (a device must not pin its own
 *		netdev's namespace); NULL once the namespace has exited
 * @sk4, @sk6:	the UDP tunnel sockets on port 4791, NULL once released
 * @users:	remu devices in this namespace
 * @devs:	those devices (struct remu_dev.ns_node), RCU list
 */
struct remu_ns {
	struct list_head	list;
	struct net		*net;
	struct socket		*sk4;
	struct socket		*sk6;
	unsigned int		users;
	struct list_head	devs;
};

static LIST_HEAD(remu_ns_list);
static DEFINE_MUTEX(remu_ns_lock);

#define REMU_FLOW_LABEL_MASK	0x000fffffu

/* datagrams to 4791 that matched no remu device (no device to count on) */
static atomic64_t remu_rx_no_dev;

static struct remu_ns *remu_ns_find(struct net *net)
{
	struct remu_ns *ns;

	lockdep_assert_held(&remu_ns_lock);
	list_for_each_entry(ns, &remu_ns_list, list)
		if (ns->net == net)
			return ns;
	return NULL;
}

static int remu_udp_encap_rcv(struct sock *sk, struct sk_buff *skb);

static struct socket *remu_sock_create(struct remu_ns *ns, bool ipv6)
{
	struct udp_tunnel_sock_cfg tcfg = {
		.sk_user_data = ns,
		.encap_type = 1,
		.encap_rcv = remu_udp_encap_rcv,
	};
	struct udp_port_cfg cfg = {
		.family = ipv6 ? AF_INET6 : AF_INET,
		.local_udp_port = htons(REMU_ROCE_V2_PORT),
		/* RoCEv2 senders (rxe too) leave the UDP checksum 0 */
		.ipv6_v6only = ipv6,
	};
	struct socket *sock;
	int err;

	err = udp_sock_create(ns->net, &cfg, &sock);
	if (err)
		return ERR_PTR(err);
	setup_udp_tunnel_sock(ns->net, REMU_UDP_TUNNEL_SK(sock), &tcfg);
	return sock;
}

static void remu_ns_release_socks(struct remu_ns *ns)
{
	if (ns->sk4)
		udp_tunnel_sock_release(REMU_UDP_TUNNEL_SK(ns->sk4));
	if (ns->sk6)
		udp_tunnel_sock_release(REMU_UDP_TUNNEL_SK(ns->sk6));
	ns->sk4 = NULL;
	ns->sk6 = NULL;
}

/**
 * remu_net_dev_add - attach a new device to its namespace's sockets
 * @rdev: the device, not yet registered; rdev->ndev set
 *
 * Creates the namespace's 4791 sockets if it is the first remu device
 * there.  Until the device is registered the receive path finds it but
 * drops its packets (ib_device_try_get fails).
 *
 * Context: process context (newlink), may sleep.
 * Return: 0, -EADDRINUSE if port 4791 is taken in the namespace, or
 * another socket or allocation error.
 */
int remu_net_dev_add(struct remu_dev *rdev)
{
	struct net *net = dev_net(rdev->ndev);
	struct remu_ns *ns;
	int err = 0;

	mutex_lock(&remu_ns_lock);
	ns = remu_ns_find(net);
	if (!ns) {
		ns = kzalloc(sizeof(*ns), GFP_KERNEL);
		if (!ns) {
			err = -ENOMEM;
			goto out;
		}
		ns->net = net;
		INIT_LIST_HEAD(&ns->devs);
		ns->sk4 = remu_sock_create(ns, false);
		if (IS_ERR(ns->sk4)) {
			err = PTR_ERR(ns->sk4);
			ns->sk4 = NULL;
		} else if (IS_ENABLED(CONFIG_IPV6)) {
			ns->sk6 = remu_sock_create(ns, true);
			if (IS_ERR(ns->sk6)) {
				err = PTR_ERR(ns->sk6);
				ns->sk6 = NULL;
			}
		}
		if (err) {
			if (err == -EADDRINUSE)
				pr_warn("UDP port %d is already in use in the network namespace of %s (rdma_rxe binds it in the initial namespace)\n",
					REMU_ROCE_V2_PORT,
					netdev_name(rdev->ndev));
			else
				pr_warn("cannot open UDP port %d in the network namespace of %s: %d\n",
					REMU_ROCE_V2_PORT,
					netdev_name(rdev->ndev), err);
			remu_ns_release_socks(ns);
			kfree(ns);
			goto out;
		}
		list_add_tail(&ns->list, &remu_ns_list);
	}
	ns->users++;
	rdev->ns = ns;
	list_add_tail_rcu(&rdev->ns_node, &ns->devs);
out:
	mutex_unlock(&remu_ns_lock);
	return err;
}

/**
 * remu_net_dev_del - detach a device; the last one closes the sockets
 * @rdev: the device (never attached is fine)
 *
 * Waits for an RCU grace period, so that when it returns no receive path
 * still sees @rdev.
 *
 * Context: process context (dealloc_driver), may sleep.
 */
void remu_net_dev_del(struct remu_dev *rdev)
{
	struct remu_ns *ns = rdev->ns, *gone = NULL;

	if (!ns)
		return;
	mutex_lock(&remu_ns_lock);
	list_del_rcu(&rdev->ns_node);
	if (--ns->users == 0) {
		remu_ns_release_socks(ns);
		list_del(&ns->list);
		gone = ns;
	}
	mutex_unlock(&remu_ns_lock);
	rdev->ns = NULL;
	synchronize_rcu();
	kfree(gone);
}

/* a namespace is going away: its sockets go now, its devices soon */
static void __net_exit remu_net_ns_exit(struct net *net)
{
	struct remu_ns *ns;

	mutex_lock(&remu_ns_lock);
	ns = remu_ns_find(net);
	if (ns) {
		remu_ns_release_socks(ns);
		ns->net = NULL;
	}
	mutex_unlock(&remu_ns_lock);
}

static struct pernet_operations remu_net_ops = {
	.exit = remu_net_ns_exit,
};

/* ---- transmit ---------------------------------------------------------- */

/**
 * remu_av_from_attr - resolve an address handle's attributes for the wire
 * @rdev: the device
 * @attr: a RoCE AH attribute with a GRH and its source GID attribute (as
 *	  the core resolves them for RoCEv2, dmac included)
 * @src_qpn: the sending QP, for the UDP source port hash
 * @dst_qpn: the destination QP, same
 * @av: filled in
 *
 * Return: 0, or -EINVAL for an attribute that is not RoCEv2.
 */
int remu_av_from_attr(struct remu_dev *rdev, const struct rdma_ah_attr *attr,
		      u32 src_qpn, u32 dst_qpn, struct remu_av *av)
{
	const struct ib_global_route *grh;
	const struct ib_gid_attr *sgid;

	if (!(rdma_ah_get_ah_flags(attr) & IB_AH_GRH))
		return -EINVAL;
	grh = rdma_ah_read_grh(attr);
	sgid = grh->sgid_attr;
	if (!sgid || sgid->gid_type != IB_GID_TYPE_ROCE_UDP_ENCAP)
		return -EINVAL;

	memset(av, 0, sizeof(*av));
	memcpy(&av->saddr, sgid->gid.raw, sizeof(av->saddr));
	memcpy(&av->daddr, grh->dgid.raw, sizeof(av->daddr));
	if (rdma_gid_attr_network_type(sgid) == RDMA_NETWORK_IPV4) {
		if (!ipv6_addr_v4mapped(&av->daddr))
			return -EINVAL;
		av->family = AF_INET;
	} else {
		if (ipv6_addr_v4mapped(&av->daddr))
			return -EINVAL;
		av->family = AF_INET6;
	}
	av->tclass = grh->traffic_class;
	av->hop_limit = grh->hop_limit;
	av->flow_label = grh->flow_label & REMU_FLOW_LABEL_MASK;
	av->sport = cpu_to_be16(rdma_get_udp_sport(av->flow_label, src_qpn,
						   dst_qpn));
	ether_addr_copy(av->dmac, attr->roce.dmac);
	return 0;
}

/* the largest linear part whose data comes from a page fragment */
#define REMU_SKB_FRAG_MAX	512

/*
 * An skb with @len bytes of data room.  A small one takes its data area,
 * skb_shared_info included, from the networking core's per-CPU page
 * fragments and is built around it (build_skb()): one slab object (the
 * sk_buff) instead of two (sk_buff and kmalloc'ed head), which is most of
 * the cost of a small packet's allocation.  netdev_alloc_frag() serves
 * any context: with IRQs off from its own cache, else with BH off from
 * the NAPI one.  The page-fragment head is freed with the skb as any
 * head_frag skb's is; frags attached by reference later
 * (remu_net_alloc_skb_ref()) go into skb_shared_info as with alloc_skb().
 * Larger packets, or a failed fragment, take alloc_skb().
 */
static struct sk_buff *remu_net_skb(unsigned int len)
{
	unsigned int size;
	struct sk_buff *skb;
	void *data;

	if (len > REMU_SKB_FRAG_MAX)
		return alloc_skb(len, GFP_ATOMIC);
	size = SKB_DATA_ALIGN(len) +
	       SKB_DATA_ALIGN(sizeof(struct skb_shared_info));
	data = netdev_alloc_frag(size);
	if (!data)
		return alloc_skb(len, GFP_ATOMIC);
	skb = build_skb(data, size);
	if (!skb) {
		skb_free_frag(data);
		return alloc_skb(len, GFP_ATOMIC);
	}
	return skb;
}

/*
 * The packet of remu_net_alloc_skb(); with @by_ref, the payload, pad and
 * ICRC are left out of the linear part (remu_net_alloc_skb_ref()).
 */
static struct sk_buff *remu_net_alloc(struct remu_dev *rdev,
				      const struct remu_av *av,
				      unsigned int paylen,
				      struct remu_pkt *pkt, bool by_ref)
{
	const struct remu_opcode_info *info = &remu_opcode[pkt->opcode];
	struct net_device *ndev = rdev->ndev;
	unsigned int pad = -paylen & 3;
	unsigned int room, tail;
	struct sk_buff *skb;

	room = LL_RESERVED_SPACE(ndev) + sizeof(struct udphdr) +
	       (av->family == AF_INET ? sizeof(struct iphdr) :
					sizeof(struct ipv6hdr));
	tail = by_ref ? 0 : paylen + pad + REMU_ICRC_LEN;
	skb = remu_net_skb(room + info->length + tail + ndev->needed_tailroom);
	if (!skb)
		return NULL;
	skb_reserve(skb, room);
	memset(__skb_put(skb, info->length), 0, info->length);
	if (!by_ref) {
		__skb_put(skb, paylen);
		memset(__skb_put(skb, pad + REMU_ICRC_LEN), 0,
		       pad + REMU_ICRC_LEN);
	}
	skb->protocol = htons(av->family == AF_INET ? ETH_P_IP : ETH_P_IPV6);

	pkt->rdev = rdev;
	pkt->ndev = ndev;
	pkt->info = info;
	pkt->bth = (struct remu_bth *)skb->data;
	pkt->pad = pad;
	pkt->qpn = 0;
	pkt->psn = 0;
	pkt->hdr_len = info->length;
	pkt->paylen = paylen;
	pkt->net.family = av->family;
	pkt->net.tclass = av->tclass;
	pkt->net.hop_limit = av->hop_limit;
	pkt->net.sport = av->sport;
	pkt->net.flow_label = av->flow_label;
	pkt->net.saddr = av->saddr;
	pkt->net.daddr = av->daddr;

	remu_bth_set_opcode(pkt->bth, pkt->opcode);
	remu_bth_set_flags(pkt->bth, false, false, pad);
	remu_bth_set_pkey(pkt->bth, REMU_DEFAULT_PKEY);
	return skb;
}

/**
 * remu_net_alloc_skb - allocate a packet for the engines to fill
 * @rdev: the sending device
 * @av: where it goes (for the header room and the network fields of @pkt)
 * @paylen: payload bytes (the pad to a multiple of 4 is added here)
 * @pkt: in: @pkt->opcode, a valid opcode; out: every other field
 *
 * The skb's data starts at the BTH; it holds the BTH and extended headers
 * (zeroed, except opcode, PadCnt and TVer in the BTH and the default
 * P_Key), then @paylen bytes of payload for the caller to fill in full
 * (at skb->data + pkt->hdr_len; not initialised here), then the zeroed
 * pad and ICRC.  Room for IP, UDP and the link layer header is reserved.
 *
 * Context: any (GFP_ATOMIC).
 * Return: the skb, or NULL when out of memory.
 */
struct sk_buff *remu_net_alloc_skb(struct remu_dev *rdev,
				   const struct remu_av *av,
				   unsigned int paylen, struct remu_pkt *pkt)
{
	return remu_net_alloc(rdev, av, paylen, pkt, false);
}

/**
 * remu_net_alloc_skb_ref - allocate a packet whose payload goes by reference
 * @rdev, @av, @paylen, @pkt: as remu_net_alloc_skb()
 *
 * As remu_net_alloc_skb(), but the linear part ends with the headers: the
 * caller appends the @paylen bytes of payload as page frags
 * (remu_sge_frag_skb(), remu_mr_frag_skb()), then calls
 * remu_net_end_ref(), which appends the pad and the ICRC field.
 *
 * Context: any (GFP_ATOMIC).
 * Return: the skb, or NULL when out of memory.
 */
struct sk_buff *remu_net_alloc_skb_ref(struct remu_dev *rdev,
				       const struct remu_av *av,
				       unsigned int paylen,
				       struct remu_pkt *pkt)
{
	return remu_net_alloc(rdev, av, paylen, pkt, true);
}

/**
 * remu_net_end_ref - finish a packet of remu_net_alloc_skb_ref()
 * @skb: the packet, its payload attached in full
 * @pkt: as remu_net_alloc_skb_ref() filled it
 *
 * Appends the zeroed pad and ICRC field as one more frag, from the
 * networking core's per-CPU page fragments (no payload byte is copied).
 *
 * Context: any.
 * Return: 0, -ENOMEM, or -E2BIG if the skb has no frag slot left.
 */
int remu_net_end_ref(struct sk_buff *skb, const struct remu_pkt *pkt)
{
	unsigned int n = pkt->pad + REMU_ICRC_LEN, i;
	struct page *page;
	void *p;

	if (WARN_ON_ONCE(skb->len != pkt->hdr_len + pkt->paylen))
		return -EINVAL;
	i = skb_shinfo(skb)->nr_frags;
	if (i >= MAX_SKB_FRAGS)
		return -E2BIG;
	p = netdev_alloc_frag(n);
	if (!p)
		return -ENOMEM;
	memset(p, 0, n);
	page = virt_to_head_page(p);
	/* the frag's reference is the one netdev_alloc_frag() handed out */
	skb_fill_page_desc(skb, i, page, p - page_address(page), n);
	skb->len += n;
	skb->data_len += n;
	skb->truesize += SKB_DATA_ALIGN(n);
	return 0;
}

static struct dst_entry *remu_route4(struct net *net, struct net_device *ndev,
				     const struct remu_av *av)
{
	struct flowi4 fl4 = {
		.flowi4_oif = ndev->ifindex,
		.flowi4_proto = IPPROTO_UDP,
		REMU_FLOWI4_TOS(av->tclass),
		.saddr = av->saddr.s6_addr32[3],
		.daddr = av->daddr.s6_addr32[3],
	};
	struct rtable *rt;
	__be32 saddr;

	if (av->dcache) {
		local_bh_disable();
		rt = dst_cache_get_ip4(av->dcache, &saddr);
		local_bh_enable();
		if (rt)
			return &rt->dst;
	}
	rt = ip_route_output_key(net, &fl4);
	if (IS_ERR(rt))
		return ERR_CAST(rt);
	if (av->dcache) {
		local_bh_disable();
		dst_cache_set_ip4(av->dcache, &rt->dst, fl4.saddr);
		local_bh_enable();
	}
	return &rt->dst;
}

static struct dst_entry *remu_route6(struct net *net, struct net_device *ndev,
				     const struct remu_av *av)
{
#if IS_ENABLED(CONFIG_IPV6)
	struct flowi6 fl6 = {
		.flowi6_oif = ndev->ifindex,
		.flowi6_proto = IPPROTO_UDP,
		.flowlabel = ip6_make_flowinfo(av->tclass,
					       htonl(av->flow_label)),
		.saddr = av->saddr,
		.daddr = av->daddr,
	};
	struct dst_entry *dst;
	struct in6_addr saddr;

	if (av->dcache) {
		local_bh_disable();
		dst = dst_cache_get_ip6(av->dcache, &saddr);
		local_bh_enable();
		if (dst)
			return dst;
	}
	dst = ip6_dst_lookup_flow(net, NULL, &fl6, NULL);
	if (!IS_ERR(dst) && av->dcache) {
		local_bh_disable();
		dst_cache_set_ip6(av->dcache, dst, &fl6.saddr);
		local_bh_enable();
	}
	return dst;
#else
	return ERR_PTR(-EAFNOSUPPORT);
#endif
}

/*
 * The route of @av, referenced: from @av->dcache when it holds one that is
 * still valid (dst_cache checks the route's generation on every get), else
 * looked up, and then kept there.  The cache is per CPU: BH off around it.
 */
static struct dst_entry *remu_route(struct net *net, struct net_device *ndev,
				    const struct remu_av *av)
{
	if (av->family == AF_INET)
		return remu_route4(net, ndev, av);
	return remu_route6(net, ndev, av);
}

static bool remu_net_loopback(struct remu_dev *rdev,
			      const struct dst_entry *dst,
			      struct sk_buff *skb);

/* the UDP header in front of the BTH (no checksum, as RoCEv2 senders do) */
static void remu_net_push_udp(struct sk_buff *skb, const struct remu_av *av)
{
	struct udphdr *uh = skb_push(skb, sizeof(*uh));

	skb_reset_transport_header(skb);
	uh->source = av->sport;
	uh->dest = htons(REMU_ROCE_V2_PORT);
	uh->len = htons(skb->len);
	uh->check = 0;
}

/* the IPv4 header, DF set, its checksum left to the IP stack */
static void remu_net_push_ip4(struct net *net, struct sk_buff *skb,
			      const struct remu_av *av,
			      const struct dst_entry *dst)
{
	struct iphdr *iph = skb_push(skb, sizeof(*iph));

	skb_reset_network_header(skb);
	iph->version = 4;
	iph->ihl = sizeof(*iph) / 4;
	iph->tos = av->tclass;
	iph->tot_len = htons(skb->len);
	iph->frag_off = htons(IP_DF);
	iph->ttl = av->hop_limit ?: ip4_dst_hoplimit(dst);
	iph->protocol = IPPROTO_UDP;
	iph->check = 0;
	iph->saddr = av->saddr.s6_addr32[3];
	iph->daddr = av->daddr.s6_addr32[3];
	__ip_select_ident(net, iph, 1);
	skb->protocol = htons(ETH_P_IP);
	memset(IPCB(skb), 0, sizeof(*IPCB(skb)));
}

static void remu_net_push_ip6(struct sk_buff *skb, const struct remu_av *av,
			      struct dst_entry *dst)
{
	struct ipv6hdr *ip6h = skb_push(skb, sizeof(*ip6h));

	skb_reset_network_header(skb);
	ip6_flow_hdr(ip6h, av->tclass, htonl(av->flow_label));
	ip6h->payload_len = htons(skb->len - sizeof(*ip6h));
	ip6h->nexthdr = IPPROTO_UDP;
	ip6h->hop_limit = av->hop_limit ?: ip6_dst_hoplimit(dst);
	ip6h->saddr = av->saddr;
	ip6h->daddr = av->daddr;
	skb->protocol = htons(ETH_P_IPV6);
	memset(IP6CB(skb), 0, sizeof(*IP6CB(skb)));
}

/*
 * The finished packet (headers final: what the ICRC covers is on the wire
 * now) gets its ICRC and goes to the IP stack.  Return: 0 or an errno.
 */
static int remu_net_out(struct net *net, struct sk_buff *skb,
			const struct remu_bth *bth)
{
	__le32 icrc = cpu_to_le32(remu_icrc(skb, bth));
	int err;

	skb_store_bits(skb, skb->len - REMU_ICRC_LEN, &icrc, sizeof(icrc));
	if (skb->protocol == htons(ETH_P_IP))
		err = ip_local_out(net, skb->sk, skb);
	else
		err = ip6_local_out(net, skb->sk, skb);
	return net_xmit_eval(err);
}

/**
 * remu_net_xmit - send a packet built on remu_net_alloc_skb()
 * @rdev: the sending device
 * @av: the destination
 * @skb: the packet, data at the BTH, every header and the payload filled
 *	 in; the caller may have set skb->sk and a destructor (flow
 *	 control); the ICRC field is filled in here (left zero on the
 *	 loopback path)
 *
 * Routes in the netdev's namespace (bound to the netdev) and adds the UDP
 * and IP headers.  A packet to a local address of a remu device in the
 * same namespace (this one or another) goes straight to that device's
 * receive path with no ICRC (remu_net_loopback(), counted in
 * loopback_pkts too); any other gets the ICRC over the finished packet
 * and goes through the IP stack (netfilter, neighbour resolution, lo for
 * other local addresses).  Consumes @skb in every case.
 *
 * Context: any; does not sleep.
 * Return: 0, or a negative errno (no route, or the stack dropped it);
 * both are counted (sent_pkts, send_err).
 */
int remu_net_xmit(struct remu_dev *rdev, const struct remu_av *av,
		  struct sk_buff *skb)
{
	const struct remu_bth *bth = (const struct remu_bth *)skb->data;
	struct net *net = dev_net(rdev->ndev);
	struct dst_entry *dst;
	int err;

	if (skb_zcopy(skb))
		remu_count(rdev, REMU_CNT_TX_FRAG_PKTS);
	trace_remu_pkt_send(rdev, bth, skb->len);
	dst = remu_route(net, rdev->ndev, av);
	if (IS_ERR(dst)) {
		err = PTR_ERR(dst);
		remu_dbg_dev(rdev, "no route to %pI6c: %d\n", &av->daddr, err);
		kfree_skb(skb);
		goto err;
	}
	remu_net_push_udp(skb, av);
	if (av->family == AF_INET)
		remu_net_push_ip4(net, skb, av, dst);
	else
		remu_net_push_ip6(skb, av, dst);
	skb_dst_set(skb, dst);
	skb->dev = dst->dev;

	/* never on a wire: no ICRC to compute (remu_net_loopback()) */
	if (remu_net_loopback(rdev, dst, skb))
		return 0;
	/*
	 * Payload by reference is read by remu's own engines only: what
	 * leaves through the IP stack takes a copy first (remu_zc.c), which
	 * the ICRC then covers.  Taken back already: lost, as on a wire.
	 */
	if (skb_zcopy(skb)) {
		err = remu_zc_orphan(skb);
		if (err) {
			kfree_skb(skb);
			goto err;
		}
		remu_count(rdev, REMU_CNT_TX_FRAG_COPIED);
	}
	err = remu_net_out(net, skb, bth);
	if (err)
		goto err;
	remu_count(rdev, REMU_CNT_SENT_PKTS);
	return 0;
err:
	remu_count(rdev, REMU_CNT_SEND_ERR);
	return err;
}

/* ---- receive ----------------------------------------------------------- */

/* the remu device of @ns whose netdev holds @daddr; under RCU */
static struct remu_dev *remu_dev_by_addr4(struct remu_ns *ns, __be32 daddr)
{
	struct remu_dev *rdev;

	list_for_each_entry_rcu(rdev, &ns->devs, ns_node) {
		struct in_device *idev = __in_dev_get_rcu(rdev->ndev);
		const struct in_ifaddr *ifa;

		if (!idev)
			continue;
		in_dev_for_each_ifa_rcu(ifa, idev)
			if (ifa->ifa_local == daddr)
				return rdev;
	}
	return NULL;
}

static struct remu_dev *remu_dev_by_addr6(struct remu_ns *ns,
					  const struct in6_addr *daddr)
{
	struct remu_dev *rdev;

	if (!IS_ENABLED(CONFIG_IPV6))
		return NULL;
	list_for_each_entry_rcu(rdev, &ns->devs, ns_node)
		if (ipv6_chk_addr(dev_net(rdev->ndev), daddr, rdev->ndev, 0))
			return rdev;
	return NULL;
}

/* a packet to a local address came in on lo: whose address is it? */
static struct remu_dev *remu_rx_find_by_daddr(struct remu_ns *ns,
					      struct sk_buff *skb)
{
	if (ip_hdr(skb)->version == 4)
		return remu_dev_by_addr4(ns, ip_hdr(skb)->daddr);
	return remu_dev_by_addr6(ns, &ipv6_hdr(skb)->daddr);
}

static struct remu_dev *remu_rx_find_dev(struct remu_ns *ns,
					 struct sk_buff *skb)
{
	struct net_device *in = skb->dev;
	struct remu_dev *rdev;

	if (!in)
		return NULL;
	if (in->flags & IFF_LOOPBACK)
		return remu_rx_find_by_daddr(ns, skb);
	if (is_vlan_dev(in))
		in = vlan_dev_real_dev(in);
	list_for_each_entry_rcu(rdev, &ns->devs, ns_node)
		if (rdev->ndev == in)
			return rdev;
	return NULL;
}

/* the IP/UDP fields of @pkt, from the headers of @skb */
static void remu_rx_net(struct sk_buff *skb, struct remu_pkt *pkt)
{
	struct remu_pkt_net *n = &pkt->net;

	n->sport = udp_hdr(skb)->source;
	if (ip_hdr(skb)->version == 4) {
		const struct iphdr *iph = ip_hdr(skb);

		n->family = AF_INET;
		n->tclass = iph->tos;
		n->hop_limit = iph->ttl;
		n->flow_label = 0;
		ipv6_addr_set_v4mapped(iph->saddr, &n->saddr);
		ipv6_addr_set_v4mapped(iph->daddr, &n->daddr);
	} else {
		const struct ipv6hdr *ip6h = ipv6_hdr(skb);

		n->family = AF_INET6;
		n->tclass = ipv6_get_dsfield(ip6h);
		n->hop_limit = ip6h->hop_limit;
		n->flow_label = ntohl(ip6_flowlabel(ip6h));
		n->saddr = ip6h->saddr;
		n->daddr = ip6h->daddr;
	}
}

/**
 * struct remu_rx_check - a datagram going through remu_net_rx()'s checks
 * @skb:	the datagram, data at the UDP header, then at the BTH
 * @local:	from remu_net_loopback(): no ICRC to check
 * @why:	the drop counter of the check that failed
 * @info:	its opcode's entry, once the opcode is known valid
 * @rest:	payload and pad bytes, between the headers and the ICRC
 */
struct remu_rx_check {
	struct sk_buff *skb;
	bool local;
	enum remu_counter why;
	const struct remu_opcode_info *info;
	unsigned int rest;
};

/*
 * IP and UDP: RoCEv2 carries no IPv4 options or IPv6 extension headers,
 * and the UDP length must be the datagram's.  Leaves the data at the BTH.
 */
static bool remu_rx_check_udp(struct remu_rx_check *rx)
{
	struct sk_buff *skb = rx->skb;
	unsigned int iplen;

	iplen = skb_transport_header(skb) - skb_network_header(skb);
	rx->why = REMU_CNT_RCVD_IP_OPTIONS;
	if (iplen != (ip_hdr(skb)->version == 4 ? sizeof(struct iphdr) :
						  sizeof(struct ipv6hdr)))
		return false;
	rx->why = REMU_CNT_RCVD_BAD_LENGTH;
	if (ntohs(udp_hdr(skb)->len) != skb->len)
		return false;
	__skb_pull(skb, sizeof(struct udphdr));
	return true;
}

/*
 * The BTH and the ICRC, the least any packet has; the ICRC (nothing in a
 * corrupted packet can be trusted), then the BTH's version and opcode.
 */
static bool remu_rx_check_bth(struct remu_rx_check *rx)
{
	struct sk_buff *skb = rx->skb;
	struct remu_bth *bth;
	__le32 wire_icrc;

	rx->why = REMU_CNT_RCVD_TOO_SHORT;
	if (skb->len < sizeof(*bth) + REMU_ICRC_LEN ||
	    !pskb_may_pull(skb, sizeof(*bth)))
		return false;
	bth = (struct remu_bth *)skb->data;

	rx->why = REMU_CNT_RCVD_ICRC_ERR;
	if (!rx->local &&
	    (skb_copy_bits(skb, skb->len - REMU_ICRC_LEN, &wire_icrc,
			   sizeof(wire_icrc)) ||
	     le32_to_cpu(wire_icrc) != remu_icrc(skb, bth)))
		return false;

	rx->why = REMU_CNT_RCVD_BAD_VERSION;
	if (remu_bth_tver(bth) != REMU_BTH_TVER)
		return false;
	rx->why = REMU_CNT_RCVD_BAD_OPCODE;
	rx->info = &remu_opcode[remu_bth_opcode(bth)];
	return rx->info->flags & REMU_OP_VALID;
}

/* the opcode's headers, the payload and pad after them, the P_Key */
static bool remu_rx_check_hdrs(struct remu_rx_check *rx)
{
	const struct remu_opcode_info *info = rx->info;
	struct sk_buff *skb = rx->skb;
	struct remu_bth *bth;

	rx->why = REMU_CNT_RCVD_TOO_SHORT;
	if (skb->len < info->length + REMU_ICRC_LEN ||
	    !pskb_may_pull(skb, info->length))
		return false;
	bth = (struct remu_bth *)skb->data;	/* the head may have moved */

	/* payload + pad: what lies between the headers and the ICRC */
	rx->why = REMU_CNT_RCVD_BAD_LENGTH;
	rx->rest = skb->len - info->length - REMU_ICRC_LEN;
	if (remu_bth_pad(bth) > rx->rest || rx->rest % 4 ||
	    (!(info->flags & REMU_OP_PAYLOAD) && rx->rest))
		return false;

	/* one P_Key, 0xffff (full member): the low 15 bits must match */
	rx->why = REMU_CNT_RCVD_BAD_PKEY;
	return (remu_bth_pkey(bth) & 0x7fff) == (REMU_DEFAULT_PKEY & 0x7fff);
}

/* the engines' view of the checked packet */
static void remu_rx_parse(struct remu_dev *rdev, const struct remu_rx_check *rx,
			  struct remu_pkt *pkt)
{
	struct sk_buff *skb = rx->skb;
	struct remu_bth *bth = (struct remu_bth *)skb->data;

	pkt->rdev = rdev;
	pkt->ndev = skb->dev;
	pkt->info = rx->info;
	pkt->bth = bth;
	pkt->opcode = remu_bth_opcode(bth);
	pkt->pad = remu_bth_pad(bth);
	pkt->qpn = remu_bth_qpn(bth);
	pkt->psn = remu_bth_psn(bth);
	pkt->hdr_len = rx->info->length;
	pkt->paylen = rx->rest - pkt->pad;
	remu_rx_net(skb, pkt);
}

/*
 * Validate one RoCEv2 datagram for @rdev and deliver it.  skb->data is at
 * the UDP header; the UDP stack has checked the UDP length against the IP
 * length (and a non-zero UDP checksum).  The checks run in this order:
 * what the ICRC computation needs (plain IP header, BTH and ICRC present),
 * the ICRC (nothing in a corrupted packet can be trusted), then the BTH.
 * @local: the packet comes from remu_net_loopback(), built by remu's own
 * engines in this namespace and handed over in memory, never on a wire:
 * it carries no ICRC (its field is left zero) and none is checked;
 * every other check is made.  Every datagram from the UDP socket, the
 * packet fuzzer's among them, comes with @local false.
 */
static void remu_net_rx(struct remu_dev *rdev, struct sk_buff *skb,
			bool local)
{
	struct remu_rx_check rx = { .skb = skb, .local = local };
	struct remu_pkt pkt;

	if (!remu_rx_check_udp(&rx) || !remu_rx_check_bth(&rx) ||
	    !remu_rx_check_hdrs(&rx)) {
		remu_count(rdev, rx.why);
		kfree_skb(skb);
		return;
	}
	remu_rx_parse(rdev, &rx, &pkt);
	remu_count(rdev, REMU_CNT_RCVD_PKTS);
	trace_remu_pkt_recv(rdev, pkt.bth, skb->len);
	remu_rcv(rdev, skb, &pkt);
}

/*
 * hand @skb (data at the UDP header) to @rdev's checks (@local: from
 * remu_net_loopback(), see remu_net_rx()); under RCU, BH off
 */
static void remu_rx_deliver(struct remu_dev *rdev, struct sk_buff *skb,
			    bool local)
{
	if (!rdev || !ib_device_try_get(&rdev->ib_dev)) {
		atomic64_inc(&remu_rx_no_dev);
		kfree_skb(skb);
		return;
	}
	remu_net_rx(rdev, skb, local);
	ib_device_put(&rdev->ib_dev);
}

/* encap_rcv of the 4791 sockets; softirq, under rcu_read_lock */
static int remu_udp_encap_rcv(struct sock *sk, struct sk_buff *skb)
{
	struct remu_ns *ns = rcu_dereference_sk_user_data(sk);

	remu_rx_deliver(ns ? remu_rx_find_dev(ns, skb) : NULL, skb, false);
	return 0;
}

/* is @dst, the route of the finished packet @skb, one to a local address? */
static bool remu_dst_local(const struct dst_entry *dst,
			   const struct sk_buff *skb)
{
	if (skb->protocol == htons(ETH_P_IP))
		return container_of(dst, struct rtable, dst)->rt_type ==
		       RTN_LOCAL;
#if IS_ENABLED(CONFIG_IPV6)
	return !ipv6_addr_is_multicast(&ipv6_hdr(skb)->daddr) &&
	       (container_of(dst, struct rt6_info, dst)->rt6i_flags &
		RTF_LOCAL);
#else
	return false;
#endif
}

/*
 * The loopback path of remu_net_xmit().  @skb is finished for the wire
 * but for its ICRC (data at the IP header; IP, UDP, BTH... in place) and
 * @dst, its route, is attached.  When that route is to a local address
 * (never for multicast: the IP stack loops those back itself) and a remu
 * device of the sender's namespace holds the address, the packet is
 * handed to that device's receive path here, as lo and the UDP socket
 * would after the IP stack: it meets every receive check but the ICRC
 * (IP header, lengths, BTH) and is counted there as received or dropped,
 * then as sent (sent_pkts and loopback_pkts: counted once the packet
 * reached the receive path, for whoever matches sent and received
 * counts).  What is skipped: netfilter, the lo device and its softirq,
 * the UDP socket lookup (so the namespace's UDP MIB does not count these;
 * rdma_rxe's loopback skips the same), and the ICRC, neither computed nor
 * checked: the packet goes from memory to memory, so nothing can corrupt
 * it between the two, and only remu_net_xmit(), with a packet remu's own
 * engines built, ever reaches this path (every datagram from outside
 * arrives through the UDP socket and is checked; loopback_pkts counts
 * exactly the packets that skipped it).  A device in another namespace is
 * reached only through the IP stack (veth), so netem and netfilter on the
 * path between namespaces still see every packet, ICRC included.
 *
 * Context: as remu_net_xmit(); the receive path runs here with BH off and
 * under RCU, as in softirq.  It only queues the packet on a QP and queues
 * its work, so it never sends from here (no recursion).
 * Return: true if @skb was consumed; false (no such device) leaves @skb
 * as it was for the IP stack.
 */
static bool remu_net_loopback(struct remu_dev *rdev,
			      const struct dst_entry *dst,
			      struct sk_buff *skb)
{
	struct remu_dev *to;

	if (!remu_dst_local(dst, skb))
		return false;
	local_bh_disable();
	rcu_read_lock();
	to = remu_rx_find_by_daddr(rdev->ns, skb);
	if (!to) {
		rcu_read_unlock();
		local_bh_enable();
		return false;
	}
	/* what the IP stack and lo would have done on the way */
	if (skb->protocol == htons(ETH_P_IP))
		ip_send_check(ip_hdr(skb));
	skb_dst_drop(skb);
	skb_orphan(skb);
	skb->dev = to->ndev;
	skb->pkt_type = PACKET_HOST;
	/* payload by reference stays so: the receiver's engine reads it */
	__skb_pull(skb, skb_transport_offset(skb));

	remu_rx_deliver(to, skb, true);
	/* after the receive, as when lo's softirq runs inline in the send */
	remu_count(rdev, REMU_CNT_SENT_PKTS);
	remu_count(rdev, REMU_CNT_LOOPBACK_PKTS);
	rcu_read_unlock();
	local_bh_enable();
	return true;
}

/* ---- debugfs and module life ------------------------------------------ */

static int remu_wire_show(struct seq_file *s, void *unused)
{
	struct remu_ns *ns;

	seq_printf(s, "icrc_driver %s\n", remu_icrc_driver());
	seq_printf(s, "rx_no_device %lld\n", atomic64_read(&remu_rx_no_dev));
	mutex_lock(&remu_ns_lock);
	list_for_each_entry(ns, &remu_ns_list, list)
		seq_printf(s, "netns %u devices %u sockets%s%s\n",
			   ns->net ? ns->net->ns.inum : 0, ns->users,
			   ns->sk4 ? " ipv4" : "", ns->sk6 ? " ipv6" : "");
	mutex_unlock(&remu_ns_lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(remu_wire);

static int remu_icrc_driver_show(struct seq_file *s, void *unused)
{
	seq_printf(s, "%s\n", remu_icrc_driver());
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(remu_icrc_driver);

/**
 * remu_net_init - opcode table, ICRC transform, pernet hook, debugfs
 *
 * Context: module init, after remu_obj_init() (debugfs directory).
 * Return: 0 or an errno.
 */
int remu_net_init(void)
{
	int err;

	remu_opcode_init();
	err = remu_icrc_init();
	if (err)
		return err;
	err = register_pernet_subsys(&remu_net_ops);
	if (err) {
		remu_icrc_exit();
		return err;
	}
	debugfs_create_file("wire", 0444, remu_debugfs_root, NULL,
			    &remu_wire_fops);
	debugfs_create_file("icrc_driver", 0444, remu_debugfs_root, NULL,
			    &remu_icrc_driver_fops);
	return 0;
}

/* Context: module exit, after every device is gone. */
void remu_net_exit(void)
{
	unregister_pernet_subsys(&remu_net_ops);
	WARN_ON(!list_empty(&remu_ns_list));
	remu_icrc_exit();
}
