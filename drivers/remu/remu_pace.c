// SPDX-License-Identifier: GPL-2.0
/*
 * remu_pace.c - per-QP rate limits (packet pacing), as mlx5 offers them
 * (ibv_modify_qp_rate_limit(), IB_QP_RATE_LIMIT, packet_pacing_caps), kept
 * exactly by the requester.
 *
 * Owns: the rules of a rate limit in modify_qp (remu_pace_check(): the
 * transitions and QP types that take one, the range of the device's
 * packet_pacing_caps, the burst), the limit it leaves for the engines
 * (eng.pace.cfg), what a QP shows of it (rdma res), and the pacer: a token
 * bucket in bytes of wire packets (remu_pace_wire_len()) kept as a
 * virtual time, consulted by the requester before each request packet
 * (remu_pace_wait()), charged after it (remu_pace_sent()), and its
 * hrtimer, which queues the QP's work when a held packet may go.
 *
 * The bucket (GCRA): sending S bytes moves the theoretical time
 * tat = max(tat, now) + S / rate, and a packet may go when
 * now >= tat - tau, tau being the burst as time (max_burst_sz / rate, or
 * REMU_PACE_BURST_NS).  Over any interval T at most rate * T + burst
 * bytes and one packet leave, and a held packet may go at exactly
 * tat - tau: the timer (absolute, CLOCK_MONOTONIC) fires then and queues
 * the work, whose run sends it.  A late wake-up is made up from the
 * burst; nothing ever waits by spinning.  The limit covers the packets
 * the requester sends (first sendings and resends); the responses of the
 * QP's responder (ACKs, READ responses) are not paced.
 *
 * Locking: eng.pace.cfg and .typical are written by modify_qp under
 * qp->mutex (WRITE_ONCE()) and read with READ_ONCE(); the rest of struct
 * remu_pace belongs to the engines' owner (remu_eng.c), but the timer,
 * which anyone may cancel and whose callback only queues the work, and
 * .stopped, which destroy sets before it waits for the owner.
 */
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/math64.h>
#include <linux/udp.h>
#include <net/netlink.h>
#include <rdma/rdma_netlink.h>
#include <rdma/restrack.h>

#include "remu_qp.h"
#include "remu_trace.h"

/* the default burst, as time: what a late wake-up can make up */
#define REMU_PACE_BURST_NS	(2 * NSEC_PER_MSEC)

/* the QP types a rate limit applies to (packet_pacing_caps.supported_qpts) */
#define REMU_PACE_QPTS		(BIT(IB_QPT_RC) | BIT(IB_QPT_UC) | \
				 BIT(IB_QPT_UD))

/* ns that @bytes take at @kbps (bytes below 2^32: no overflow) */
static u64 remu_pace_ns(u64 bytes, u32 kbps)
{
	return div_u64(bytes * 8 * USEC_PER_SEC, kbps);
}

static enum hrtimer_restart remu_pace_timer(struct hrtimer *t)
{
	struct remu_qp *qp = container_of(t, struct remu_qp, eng.pace.timer);

	queue_work(remu_wq, &qp->send_work);
	return HRTIMER_NORESTART;
}

void remu_pace_init(struct remu_qp *qp)
{
	hrtimer_setup(&qp->eng.pace.timer, remu_pace_timer, CLOCK_MONOTONIC,
		      HRTIMER_MODE_ABS);
}

/*
 * Destroy, from remu_eng_fini(), once no doorbell is in flight and the
 * work is cancelled: an owner may have armed the timer before it ended,
 * and the timer may have queued the work again; after .stopped (set by
 * remu_eng_fini() before it waited for them) no run arms it again.
 */
void remu_pace_fini(struct remu_qp *qp)
{
	hrtimer_cancel(&qp->eng.pace.timer);
	cancel_work_sync(&qp->send_work);
}

/* RESET, by the engines' owner (remu_eng_reset()): the pacer starts anew */
void remu_pace_reset(struct remu_qp *qp)
{
	struct remu_pace *p = &qp->eng.pace;

	hrtimer_cancel(&p->timer);
	p->cur = 0;
	p->tat = 0;
	p->held = false;
}

/*
 * The QP entered RESET or ERR (remu_eng_modify(), under qp->mutex): its
 * rate limit is gone, as mlx5 drops a send queue's when it leaves the
 * ready state.  The timer, if armed, only queues the work.
 */
void remu_pace_clear(struct remu_qp *qp)
{
	lockdep_assert_held(&qp->mutex);
	WRITE_ONCE(qp->eng.pace.cfg, 0);
	WRITE_ONCE(qp->eng.pace.typical, 0);
	qp->attr.rate_limit = 0;
	hrtimer_try_to_cancel(&qp->eng.pace.timer);
}

/**
 * remu_pace_check - the rate limit of a modify_qp, before anything changes
 * @qp: the QP
 * @c: the modify_qp, its driver data in @c->drv
 *
 * mlx5's rules (ib_modify_qp_is_ok() lets IB_QP_RATE_LIMIT through only
 * RTR->RTS and RTS->RTS; a burst needs a rate; a rate out of the range of
 * packet_pacing_caps fails), for the QP types of REMU_PACE_QPTS, where
 * mlx5 has its raw packet QPs.  The burst fields are read only with the
 * flag, as mlx5 reads them.
 *
 * Context: modify_qp, under qp->mutex.
 * Return: 0, or -EINVAL.
 */
int remu_pace_check(struct remu_qp *qp, const struct remu_qp_change *c)
{
	u32 rate = c->attr->rate_limit;

	lockdep_assert_held(&qp->mutex);
	if (!(c->mask & IB_QP_RATE_LIMIT))
		return 0;
	if (c->next != IB_QPS_RTS ||
	    (c->cur != IB_QPS_RTR && c->cur != IB_QPS_RTS))
		return -EINVAL;
	if (!(REMU_PACE_QPTS & BIT(qp->ib_qp.qp_type)))
		return -EINVAL;
	if (!rate && (c->drv->max_burst_sz || c->drv->typical_pkt_sz))
		return -EINVAL;
	if (rate && (rate < REMU_RATE_LIMIT_MIN || rate > REMU_RATE_LIMIT_MAX))
		return -EINVAL;
	return 0;
}

/*
 * The rate limit of a modify_qp that remu_pace_check() passed, once
 * nothing can fail any more; the requester takes it before its next
 * packet (remu_pace_wait()).  Under qp->mutex.
 */
void remu_pace_set(struct remu_qp *qp, const struct remu_qp_change *c)
{
	u32 rate = c->attr->rate_limit;
	u32 burst = rate ? c->drv->max_burst_sz : 0;

	lockdep_assert_held(&qp->mutex);
	if (!(c->mask & IB_QP_RATE_LIMIT))
		return;
	qp->attr.rate_limit = rate;
	WRITE_ONCE(qp->eng.pace.typical, rate ? c->drv->typical_pkt_sz : 0);
	WRITE_ONCE(qp->eng.pace.cfg, rate | (u64)burst << 32);
	trace_remu_rate_limit(qp, rate, burst);
}

/**
 * remu_pace_wire_len - the bytes a request packet takes on the wire, as the
 *	rate limit counts them
 * @av: where it goes (its IP version)
 * @hdr_len: BTH and extended headers
 * @paylen: payload
 *
 * The Ethernet frame without its FCS: Ethernet header, IPv4 or IPv6
 * header, UDP header, the headers, the payload and its pad, the ICRC.
 */
u32 remu_pace_wire_len(const struct remu_av *av, u32 hdr_len, u32 paylen)
{
	u32 ip = av->family == AF_INET ? sizeof(struct iphdr) :
					 sizeof(struct ipv6hdr);

	return ETH_HLEN + ip + sizeof(struct udphdr) + hdr_len + paylen +
	       (-paylen & 3) + REMU_ICRC_LEN;
}

/**
 * remu_pace_wait - may the requester send a packet now?
 * @qp: the QP, in RTS
 *
 * Takes a rate limit modify_qp set since the last call (a new burst; a
 * slower rate does not inherit the debt of a faster one beyond now).
 *
 * Context: the engines' owner.
 * Return: 0 if a packet may go now (no limit, or the bucket has room),
 * else the ns (CLOCK_MONOTONIC) from which it may.
 */
u64 remu_pace_wait(struct remu_qp *qp)
{
	struct remu_pace *p = &qp->eng.pace;
	u64 cfg = READ_ONCE(p->cfg);
	u32 rate = lower_32_bits(cfg);
	u32 burst = upper_32_bits(cfg);
	u64 now;

	if (!rate) {
		p->cur = 0;
		return 0;
	}
	now = ktime_get_ns();
	if (cfg != p->cur) {
		p->cur = cfg;
		p->tau = burst ? remu_pace_ns(burst, rate) : REMU_PACE_BURST_NS;
		p->tat = min(p->tat, now);
	}
	if (now + p->tau >= p->tat)
		return 0;
	return p->tat - p->tau;
}

/*
 * The requester holds its next packet until @when (remu_pace_wait()): the
 * timer queues the work then.  Each held packet is counted once.
 */
void remu_pace_hold(struct remu_qp *qp, u64 when)
{
	struct remu_pace *p = &qp->eng.pace;

	if (!p->held) {
		p->held = true;
		remu_count(qp->rdev, REMU_CNT_PACED_PKTS);
		trace_remu_pace_hold(qp, lower_32_bits(p->cur),
				     when - ktime_get_ns());
	}
	if (!READ_ONCE(p->stopped))
		hrtimer_start(&p->timer, ns_to_ktime(when), HRTIMER_MODE_ABS);
}

/*
 * Will the packet after one of @wire bytes, sent now, have to wait?  The
 * requester then has this one ask for an ACK (RC), so that the hold finds
 * nothing unacknowledged.  After remu_pace_wait() said it may go.
 */
bool remu_pace_will_hold(struct remu_qp *qp, u32 wire)
{
	struct remu_pace *p = &qp->eng.pace;
	u64 now;

	if (!p->cur)
		return false;
	now = ktime_get_ns();
	return max(p->tat, now) + remu_pace_ns(wire, lower_32_bits(p->cur)) >
	       now + p->tau;
}

/* a packet of @wire bytes went out: charge the bucket */
void remu_pace_sent(struct remu_qp *qp, u32 wire)
{
	struct remu_pace *p = &qp->eng.pace;

	p->held = false;
	if (!p->cur)
		return;
	p->tat = max(p->tat, ktime_get_ns()) +
		 remu_pace_ns(wire, lower_32_bits(p->cur));
}

/* the device's packet_pacing_caps (query_device) */
void remu_pace_caps(struct remu_packet_pacing_caps *caps)
{
	caps->qp_rate_limit_min = REMU_RATE_LIMIT_MIN;
	caps->qp_rate_limit_max = REMU_RATE_LIMIT_MAX;
	caps->supported_qpts = REMU_PACE_QPTS;
}

/*
 * `rdma resource show qp -dd`: the QP's rate limit (kbps), its burst and
 * typical packet size as given (0: the default / none), when it has one,
 * in the driver's table (RDMA_NLDEV_ATTR_DRIVER), where rdma(8) looks.
 */
int remu_pace_fill_res(struct sk_buff *msg, struct remu_qp *qp)
{
	u64 cfg = READ_ONCE(qp->eng.pace.cfg);
	struct nlattr *table;

	if (!lower_32_bits(cfg))
		return 0;
	table = nla_nest_start(msg, RDMA_NLDEV_ATTR_DRIVER);
	if (!table)
		return -EMSGSIZE;
	if (rdma_nl_put_driver_u32(msg, "rate_limit_kbps", lower_32_bits(cfg)) ||
	    rdma_nl_put_driver_u32(msg, "max_burst_sz", upper_32_bits(cfg)) ||
	    rdma_nl_put_driver_u32(msg, "typical_pkt_sz",
				   READ_ONCE(qp->eng.pace.typical))) {
		nla_nest_cancel(msg, table);
		return -EMSGSIZE;
	}
	nla_nest_end(msg, table);
	return 0;
}
