// SPDX-License-Identifier: GPL-2.0
/*
 * remu_mcast.c - UD multicast (docs/multicast.md).
 *
 * Owns struct remu_mcast, one per device: a hash table of groups (struct
 * remu_mcg, by MGID), each with its attached QPs (struct remu_mca).  The
 * first attach creates a group and makes the netdev a member of the IP
 * group the MGID names (IPv4-mapped: IGMP, else MLD), counted with the
 * netdev's other users of it; the last detach leaves it and frees the
 * group.  The rules are mlx5's: UD QPs and multicast MGIDs only (EINVAL),
 * the REMU_MAX_MCAST_* limits (ENOMEM), a second attach of a QP counts
 * (the core detaches each one), a stray detach is EINVAL.
 *
 * Receive: remu_mcast_rcv() hands a packet to QPN 0xffffff for a group's
 * address to each attached QP (skb_clone, the last QP gets the original)
 * through remu_rcv_qp(), except to a QP created with
 * IB_QP_CREATE_BLOCK_MULTICAST_LOOPBACK that sent it.
 *
 * Locking:
 *   mc->lock (mutex)  attach and detach: the table, the lists' writers
 *                     and the counts (teardown, at dealloc_driver, runs
 *                     alone).  rtnl_lock nests inside it (the IP join
 *                     and leave); neither is taken under qp->mutex.
 *   RCU               the receive path (softirq, inside the UDP stack's
 *                     rcu_read_lock) walks the table and the lists; a
 *                     detach waits for a grace period before it returns,
 *                     so no receive path still holds a detached QP when
 *                     the core destroys it; the hand-off takes qp->ref.
 */
#include <linux/hashtable.h>
#include <linux/igmp.h>
#include <linux/inetdevice.h>
#include <linux/rtnetlink.h>
#include <net/addrconf.h>
#include <net/ipv6.h>
#include <rdma/ib_addr.h>

#include "remu_qp.h"
#include "remu_net.h"

#define REMU_MCAST_HASH_BITS	6

/**
 * struct remu_mcast - a device's multicast groups
 * @lock:	see the top comment
 * @groups:	struct remu_mcg by MGID (RCU readers)
 * @ngroups:	groups, under @lock
 * @nattach:	attachments of all groups, under @lock
 */
struct remu_mcast {
	struct mutex lock;	/* attach and detach (top comment) */
	DECLARE_HASHTABLE(groups, REMU_MCAST_HASH_BITS);
	unsigned int ngroups;
	unsigned int nattach;
};

/**
 * struct remu_mcg - one multicast group with at least one QP attached
 * @node:	in remu_mcast.groups
 * @mgid:	the MGID, which is also the IP group's address (IPv4-mapped
 *		or IPv6)
 * @qps:	struct remu_mca (RCU readers)
 * @nqps:	attached QPs, under remu_mcast.lock
 */
struct remu_mcg {
	struct hlist_node node;
	struct in6_addr mgid;
	struct list_head qps;
	unsigned int nqps;
};

/**
 * struct remu_mca - one QP attached to one group
 * @node:	in remu_mcg.qps
 * @qp:		the QP; the core keeps it alive while attached
 *		(qp->usecnt)
 * @refs:	successful attaches not detached yet, under remu_mcast.lock:
 *		the core counts each in qp->usecnt and detaches each once
 *		(uverbs keys a process's attachments by MGID and MLID, so
 *		one QP may attach one group under two MLIDs)
 */
struct remu_mca {
	struct list_head node;
	struct remu_qp *qp;
	unsigned int refs;
};

/**
 * remu_mcast_dev_init - a new device has no groups; its multicast limits
 * @rdev: the device, before registration (after remu_init_attr())
 *
 * Return: 0 or -ENOMEM.
 */
int remu_mcast_dev_init(struct remu_dev *rdev)
{
	struct remu_mcast *mc = kzalloc(sizeof(*mc), GFP_KERNEL);
	struct ib_device_attr *a = &rdev->attr;

	if (!mc)
		return -ENOMEM;
	mutex_init(&mc->lock);
	hash_init(mc->groups);
	rdev->mcast = mc;
	a->max_mcast_grp = REMU_MAX_MCAST_GRP;
	a->max_mcast_qp_attach = REMU_MAX_MCAST_QP_ATTACH;
	a->max_total_mcast_qp_attach = REMU_MAX_TOTAL_MCAST_QP_ATTACH;
	a->kernel_cap_flags |= IBK_BLOCK_MULTICAST_LOOPBACK;
	return 0;
}

/* the group @mgid of @mc, or NULL; under mc->lock or rcu_read_lock */
static struct remu_mcg *remu_mcg_find(struct remu_mcast *mc,
				      const struct in6_addr *mgid)
{
	struct remu_mcg *g;

	hash_for_each_possible_rcu(mc->groups, g, node, ipv6_addr_hash(mgid),
				   lockdep_is_held(&mc->lock))
		if (ipv6_addr_equal(&g->mgid, mgid))
			return g;
	return NULL;
}

/* @qp's attachment to @g, or NULL; under mc->lock */
static struct remu_mca *remu_mcg_mca(struct remu_mcast *mc, struct remu_mcg *g,
				     struct remu_qp *qp)
{
	struct remu_mca *a;

	lockdep_assert_held(&mc->lock);
	list_for_each_entry(a, &g->qps, node)
		if (a->qp == qp)
			return a;
	return NULL;
}

/*
 * Make @rdev's netdev a member of the IP group @mgid names.  Process
 * context, under mc->lock; takes rtnl_lock (IPv4 always needs it, and so
 * does IPv6 on 6.1, whose MLD code asserts it: 6.12 has a lock of its
 * own there, which nests inside rtnl_lock as it does for addrconf).
 */
static int remu_mcg_join(struct remu_dev *rdev, const struct in6_addr *mgid)
{
	struct in_device *idev;
	int err = 0;

	lockdep_assert_held(&rdev->mcast->lock);
	rtnl_lock();
	if (!ipv6_addr_v4mapped(mgid)) {
		err = ipv6_dev_mc_inc(rdev->ndev, mgid);
		/* -EINVAL: the netdev has no IPv6 */
		if (err == -EINVAL)
			err = -ENODEV;
	} else {
		idev = __in_dev_get_rtnl(rdev->ndev);
		if (idev)
			ip_mc_inc_group(idev, mgid->s6_addr32[3]);
		else
			err = -ENODEV;
	}
	rtnl_unlock();
	return err;
}

/* Undo remu_mcg_join(); nothing to do if the netdev lost its IP state. */
static void remu_mcg_leave(struct remu_dev *rdev, const struct in6_addr *mgid)
{
	struct in_device *idev;

	rtnl_lock();
	if (!ipv6_addr_v4mapped(mgid)) {
		ipv6_dev_mc_dec(rdev->ndev, mgid);
	} else {
		idev = __in_dev_get_rtnl(rdev->ndev);
		if (idev)
			ip_mc_dec_group(idev, mgid->s6_addr32[3]);
	}
	rtnl_unlock();
}

/* May one more QP attach to @g (NULL: a new group)?  Under mc->lock. */
static bool remu_mcast_room(struct remu_mcast *mc, struct remu_mcg *g)
{
	lockdep_assert_held(&mc->lock);
	if (mc->nattach >= REMU_MAX_TOTAL_MCAST_QP_ATTACH)
		return false;
	if (g)
		return g->nqps < REMU_MAX_MCAST_QP_ATTACH;
	return mc->ngroups < REMU_MAX_MCAST_GRP;
}

/*
 * A new group @mgid, its IP membership taken, not in the table yet; or
 * an ERR_PTR.  Under mc->lock.
 */
static struct remu_mcg *remu_mcg_new(struct remu_dev *rdev,
				     const struct in6_addr *mgid)
{
	struct remu_mcg *g = kzalloc(sizeof(*g), GFP_KERNEL);
	int err;

	if (!g)
		return ERR_PTR(-ENOMEM);
	g->mgid = *mgid;
	INIT_LIST_HEAD(&g->qps);
	err = remu_mcg_join(rdev, mgid);
	if (err) {
		kfree(g);
		return ERR_PTR(err);
	}
	return g;
}

/*
 * Attach @a to @g; @g is also added to the table when it is @new.
 * Under mc->lock.
 */
static void remu_mcg_add(struct remu_mcast *mc, struct remu_mcg *g,
			 struct remu_mca *a, bool new)
{
	lockdep_assert_held(&mc->lock);
	/* a new group is complete before readers can find it */
	list_add_tail_rcu(&a->node, &g->qps);
	g->nqps++;
	mc->nattach++;
	remu_obj_get(REMU_OBJ_MCAST_ATTACH);
	if (new) {
		hash_add_rcu(mc->groups, &g->node, ipv6_addr_hash(&g->mgid));
		mc->ngroups++;
		remu_obj_get(REMU_OBJ_MCAST_GRP);
	}
}

/**
 * remu_attach_mcast - attach a UD QP to the multicast group @gid
 * @ibqp: the QP
 * @gid: the MGID
 * @lid: the MLID, unused on RoCE (the core accepts any)
 *
 * Context: process context; may sleep (rtnl_lock).
 * Return: 0 (also when @ibqp is attached already: counted, see struct
 * remu_mca), -EINVAL for a QP that
 * is not UD or an MGID that is not multicast, -ENOMEM at a limit or out
 * of memory, -ENODEV when the netdev has no IP state of the MGID's
 * family.
 */
int remu_attach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid)
{
	struct remu_qp *qp = to_remu_qp(ibqp);
	struct remu_dev *rdev = qp->rdev;
	struct remu_mcast *mc = rdev->mcast;
	struct in6_addr *mgid = (struct in6_addr *)gid->raw;
	struct remu_mca *a, *old;
	struct remu_mcg *g;
	int err = 0;

	if (ibqp->qp_type != IB_QPT_UD || !rdma_is_multicast_addr(mgid))
		return -EINVAL;
	a = kzalloc(sizeof(*a), GFP_KERNEL);
	if (!a)
		return -ENOMEM;
	a->qp = qp;
	a->refs = 1;

	mutex_lock(&mc->lock);
	g = remu_mcg_find(mc, mgid);
	old = g ? remu_mcg_mca(mc, g, qp) : NULL;
	if (old) {				/* attached already */
		old->refs++;
		goto out_free;
	}
	if (!remu_mcast_room(mc, g)) {
		err = -ENOMEM;
		goto out_free;
	}
	if (g) {
		remu_mcg_add(mc, g, a, false);
	} else {
		g = remu_mcg_new(rdev, mgid);
		if (IS_ERR(g)) {
			err = PTR_ERR(g);
			goto out_free;
		}
		remu_mcg_add(mc, g, a, true);
	}
	mutex_unlock(&mc->lock);
	return 0;

out_free:
	mutex_unlock(&mc->lock);
	kfree(a);
	return err;
}

/**
 * remu_detach_mcast - detach a QP from the multicast group @gid
 * @ibqp: the QP
 * @gid: the MGID
 * @lid: unused on RoCE
 *
 * When this returns, no receive path delivers to @ibqp for the group
 * any more (packets already queued on the QP are still processed).
 * Context: process context; may sleep (rtnl_lock, an RCU grace period).
 * Return: 0 (the QP stays attached if it was attached more than once),
 * or -EINVAL if @ibqp is not attached to @gid.
 */
int remu_detach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid)
{
	struct remu_qp *qp = to_remu_qp(ibqp);
	struct remu_dev *rdev = qp->rdev;
	struct remu_mcast *mc = rdev->mcast;
	struct in6_addr *mgid = (struct in6_addr *)gid->raw;
	struct remu_mca *a = NULL;
	struct remu_mcg *g;
	bool last;

	mutex_lock(&mc->lock);
	g = remu_mcg_find(mc, mgid);
	if (g)
		a = remu_mcg_mca(mc, g, qp);
	if (!a) {
		mutex_unlock(&mc->lock);
		return -EINVAL;
	}
	if (--a->refs) {		/* attached more than once */
		mutex_unlock(&mc->lock);
		return 0;
	}
	list_del_rcu(&a->node);
	mc->nattach--;
	last = --g->nqps == 0;
	if (last) {
		hash_del_rcu(&g->node);
		mc->ngroups--;
		remu_mcg_leave(rdev, mgid);
	}
	mutex_unlock(&mc->lock);

	synchronize_rcu();
	kfree(a);
	remu_obj_put(REMU_OBJ_MCAST_ATTACH);
	if (last) {	/* the group is unreachable too */
		kfree(g);
		remu_obj_put(REMU_OBJ_MCAST_GRP);
	}
	return 0;
}

/**
 * remu_mcast_dev_fini - free what is left of a device's groups
 * @rdev: the device, unregistered and off the receive path (after
 *	  remu_net_dev_del()), its netdev still held
 *
 * Every QP has been detached by now (the core detaches before it
 * destroys), so this normally frees only the table; a group that is
 * still there leaves its IP group and goes.
 */
void remu_mcast_dev_fini(struct remu_dev *rdev)
{
	struct remu_mcast *mc = rdev->mcast;
	struct remu_mca *a, *an;
	struct hlist_node *tmp;
	struct remu_mcg *g;
	int bkt;

	if (!mc)
		return;
	hash_for_each_safe(mc->groups, bkt, tmp, g, node) {
		hash_del(&g->node);
		remu_mcg_leave(rdev, &g->mgid);
		list_for_each_entry_safe(a, an, &g->qps, node) {
			list_del(&a->node);
			kfree(a);
			remu_obj_put(REMU_OBJ_MCAST_ATTACH);
		}
		kfree(g);
		remu_obj_put(REMU_OBJ_MCAST_GRP);
	}
	mutex_destroy(&mc->lock);
	kfree(mc);
	rdev->mcast = NULL;
}

/**
 * remu_mcast_rcv - deliver a packet to the multicast QPN
 * @rdev: the device it arrived on
 * @skb: the packet; consumed
 * @pkt: its parsed view (pkt->qpn is IB_MULTICAST_QPN)
 *
 * Context: softirq, under rcu_read_lock, as remu_rcv().
 */
void remu_mcast_rcv(struct remu_dev *rdev, struct sk_buff *skb,
		    struct remu_pkt *pkt)
{
	struct remu_qp *qp, *last = NULL;
	u32 self = IB_MULTICAST_QPN;	/* no QP has this number */
	struct remu_deth *deth;
	struct sk_buff *copy;
	struct remu_mca *a;
	struct remu_mcg *g;

	RCU_LOCKDEP_WARN(!rcu_read_lock_held(),
			 "multicast receive without rcu_read_lock");

	if (!rdma_is_multicast_addr(&pkt->net.daddr)) {
		/* QPN 0xffffff to a unicast address: no such QP */
		remu_count(rdev, REMU_CNT_RCVD_NO_QP);
		kfree_skb(skb);
		return;
	}
	g = remu_mcg_find(rdev->mcast, &pkt->net.daddr);
	if (!g) {
		remu_count(rdev, REMU_CNT_RCVD_MCAST_NO_QP);
		kfree_skb(skb);
		return;
	}
	remu_count(rdev, REMU_CNT_RCVD_MCAST_PKTS);
	/* looped back by the IP stack: sent by a QP of this device */
	if (skb->pkt_type == PACKET_LOOPBACK) {
		deth = remu_pkt_hdr(pkt, REMU_HDR_DETH);
		if (deth)
			self = remu_deth_sqp(deth);
	}
	list_for_each_entry_rcu(a, &g->qps, node) {
		qp = a->qp;
		if (qp->mcast_no_self && qp->ib_qp.qp_num == self)
			continue;
		if (!refcount_inc_not_zero(&qp->ref))
			continue;
		if (last) {
			copy = skb_clone(skb, GFP_ATOMIC);
			if (copy)
				remu_rcv_qp(last, copy, pkt);
			else
				remu_count(rdev, REMU_CNT_RCVD_NO_MEM);
			remu_qp_put(last);
		}
		last = qp;
	}
	if (!last) {
		kfree_skb(skb);
		return;
	}
	remu_rcv_qp(last, skb, pkt);
	remu_qp_put(last);
}
