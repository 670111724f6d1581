/* SPDX-License-Identifier: GPL-2.0 */
/*
 * remu_eng.h - per-QP state of the data-path engines and their interface:
 *   remu_eng.c   scheduling: who runs the engines, when, for how long
 *   remu_req.c   requester: send WQEs -> request packets
 *   remu_resp.c  responder: request packets -> placement, receive
 *                completions, ACK/NAK/READ responses/atomic ACKs
 *   remu_comp.c  completer: responses -> send completions, retransmit
 *
 * The three run together, in rounds (remu_eng_run()), by one owner at a
 * time per QP (the QP's work item, or in RTS the doorbell's caller), so
 * struct remu_qp_eng needs no lock (remu_eng.c has the rules).  A run is
 * bounded: a READ's responses go out REMU_RESP_READ_BURST per round
 * (remu_qp_eng.rd), over as many runs as it takes.  The
 * receive softirq only queues skbs on eng.rxq.  The rings' consumer sides
 * are taken under their cons_locks (shared with the flush); no spinlock
 * is held across an MR copy.
 */
#ifndef REMU_ENG_H
#define REMU_ENG_H

#include <linux/bitmap.h>
#include <linux/hrtimer.h>
#include <linux/skbuff.h>
#include <linux/timer.h>
#include <net/dst_cache.h>
#include <rdma/remu-abi.h>

#include "remu_param.h"
#include "remu_opcode.h"
#include "remu_net.h"

struct ib_qp_attr;
struct remu_qp;
struct remu_mr;

/* receive queue bound, and the RC window of unacknowledged packets */
#define REMU_RXQ_MAX		1024
#define REMU_REQ_WINDOW		128
#define REMU_ACK_EVERY		32
/* READ responses placed out of order: at most this far beyond the first missing */
#define REMU_RD_MAP		256
/* responses placed beyond a gap before it counts as lost, not overtaken */
#define REMU_RD_GAP_THRESH	8

/* what the receive softirq leaves for the work item, in skb->cb */
struct remu_skb_cb {
	u32 psn;
	u32 paylen;
	u16 hdr_len;
	u8 opcode;
};

static inline struct remu_skb_cb *remu_cb(struct sk_buff *skb)
{
	return (struct remu_skb_cb *)skb->cb;
}

/**
 * struct remu_swqe - the requester's state of one send WQE (per SQ slot)
 * @valid:	the WQE has been copied into @copy and given PSNs
 * @rd:		a READ/atomic counted in remu_qp_eng.rd_out
 * @first_psn:	PSN of its first packet
 * @npkts:	packets (for READ: response packets expected)
 * @sent:	request packets sent so far
 * @rcvd:	READ: response packets placed in order (all before
 *		@first_psn + @rcvd); atomic: 1 once its ACK arrived.  A READ
 *		or atomic is finished when @rcvd == @npkts
 * @map:	READ: 1 + its entry in remu_qp_eng.maps (0: none)
 * @asked:	READ/atomic: @rcvd + 1 once the completer asked again for
 *		what is missing at @rcvd (0: not); once per gap, then the timer
 * @len:	message length
 * @copy:	its payload cannot go by reference (remu_sge_frag_skb()
 *		refused it once): every packet copies it
 */
struct remu_swqe {
	bool valid;
	bool rd;
	u32 first_psn;
	u32 npkts;
	u32 sent;
	u32 rcvd;
	u8 map;
	u32 asked;
	u32 len;
	bool copy;
};

/**
 * struct remu_rd_map - READ responses placed beyond the first missing one
 * @bits:	bit (k % REMU_RD_MAP) for response k, rcvd < k < rcvd + REMU_RD_MAP
 * @nset:	bits set
 * @later:	responses of later READs/atomics seen meanwhile
 * @seen_last:	the READ's last response has been placed
 * @beyond:	a response came from beyond the map (not placed)
 */
struct remu_rd_map {
	DECLARE_BITMAP(bits, REMU_RD_MAP);
	u16 nset;
	u16 later;
	bool seen_last;
	bool beyond;
};

/**
 * struct remu_rd_map_set - an RC QP's out-of-order READ response maps, one
 *	per outstanding READ up to min(max_rd_atomic, REMU_RD_MAPS): made by
 *	modify_qp on RTR -> RTS or a change of max_rd_atomic, handed to the
 *	work item through remu_qp_eng.maps_new
 * @n:		maps in @m
 * @m:		the maps
 */
struct remu_rd_map_set {
	u32 n;
	struct remu_rd_map m[];
};

/**
 * struct remu_kreg - a kernel consumer's IB_WR_REG_MR, beside its SQ slot
 * @mr:		the fast-reg MR (the consumer keeps it until the completion)
 * @key:	the new lkey == rkey
 * @access:	IB_ACCESS_* rights of the registration
 * @iova:	first iova, as ib_map_mr_sg() left it when the WR was posted
 * @length:	bytes, likewise
 *
 * The send WQE format (uapi/rdma/remu-abi.h) is shared with processes and
 * carries no kernel pointer or key material: a kernel QP keeps one of these
 * per SQ slot (remu_qp_eng.kreg), written by remu_post_send() before the
 * slot is produced and read by the requester when it executes the WQE
 * (the ring's release/acquire order covers it).  User QPs have none, so a
 * process cannot name a REG_MR.
 */
struct remu_kreg {
	struct remu_mr *mr;
	u32 key;
	u32 access;
	u64 iova;
	u64 length;
};

/* a UD WQE's destination, resolved at post time (remu_qp_eng.uav) */
struct remu_uav {
	struct remu_av av;
	int err;		/* the AH did not resolve: the WQE fails */
};

/**
 * struct remu_rd_res - a READ or atomic the responder executed, kept so
 *	that a duplicate of it is answered the way IBA asks (the responder
 *	resources of IBA 9.7.5.1.3), and nothing else is
 * @opcode:	the request's opcode; 0: the slot is free
 * @psn:	its PSN (a READ's: that of its first response)
 * @npkts:	PSNs it took: a READ's response count, else 1
 * @rkey, @va, @len: READ: what it read (a duplicate may ask again for a
 *		part, from one of its response PSNs on, never for more)
 * @orig:	atomic: the original value it returned (a duplicate gets it
 *		again: executing it twice would apply it twice)
 */
struct remu_rd_res {
	u8 opcode;
	u32 psn;
	u32 npkts;
	u32 rkey;
	u32 len;
	u64 va;
	u64 orig;
};

/**
 * struct remu_rd_res_set - an RC QP's responder resources, as many as its
 *	max_dest_rd_atomic (at least one): made by modify_qp when the QP
 *	enters RTR (empty) or changes max_dest_rd_atomic in SQD (@carry),
 *	handed to the work item through remu_qp_eng.res_new
 * @n:		entries in @r
 * @next:	the entry the next READ/atomic goes into
 * @carry:	take the newest entries of the set it replaces (up to @n)
 * @r:		the entries, a ring of the last @n READs/atomics executed
 */
struct remu_rd_res_set {
	u32 n;
	u32 next;
	bool carry;
	struct remu_rd_res r[];
};

/* READ responses one round may send (256 KiB at a 4096 MTU) */
#define REMU_RESP_READ_BURST	64

/**
 * struct remu_rd_cur - the READ whose responses the responder is sending
 *	(remu_resp.c): a READ, first executed or repeated for a duplicate,
 *	sends at most REMU_RESP_READ_BURST responses per round, and the
 *	owner's next round goes on with it before it takes a later request
 * @active:	responses are left to send
 * @replay:	a duplicate's repeat: an error ends it with no NAK
 * @copy:	the payload is copied, not attached by reference
 * @rkey:	its key; looked up again each round (no reference is held
 *		between rounds) and it must still name @gen
 * @gen:	what @rkey named when the READ was accepted (remu_rkey.gen)
 * @va:		address of the next response's payload
 * @left:	bytes left to send
 * @psn:	PSN of the next response
 * @i, @n:	index of the next response, of @n (its opcode)
 * @mtu:	the path MTU when it was accepted (payload per response)
 * @msn:	the MSN its responses carry
 */
struct remu_rd_cur {
	bool active;
	bool replay;
	bool copy;
	u32 rkey;
	u64 gen;
	u64 va;
	u32 left;
	u32 psn;
	u32 i;
	u32 n;
	u32 mtu;
	u32 msn;
};

/**
 * struct remu_pace - a QP's rate limit and its pacer (remu_pace.c)
 * @cfg:	the limit modify_qp set: rate in kbps in the low 32 bits (0:
 *		none), max_burst_sz in bytes in the high 32 (0: the default);
 *		written under qp->mutex with WRITE_ONCE(), read with
 *		READ_ONCE() by the owner and by rdma res
 * @typical:	the typical_pkt_sz given with it (shown by rdma res only)
 * @cur:	the @cfg the pacer runs with (the engines' owner)
 * @tat:	ns (CLOCK_MONOTONIC) at which the bytes sent so far would all
 *		have left at the rate: a packet may go when now >= @tat - @tau
 * @tau:	the burst as time: max_burst_sz at the rate, or the default
 * @held:	the requester holds a packet for the pacer (counted once)
 * @stopped:	the QP is being destroyed: the timer is not armed any more
 * @timer:	queues the QP's work when the held packet may go
 */
struct remu_pace {
	u64 cfg;
	u16 typical;
	u64 cur;
	u64 tat;
	u64 tau;
	bool held;
	bool stopped;
	struct hrtimer timer;
};

/**
 * struct remu_qp_eng - engine state of a QP (see the top comment)
 * @rxq:	packets queued by remu_rcv() (its own lock: softirq side)
 * @mtu:	path MTU in bytes
 * @st:		requester state per SQ slot
 * @copy:	kernel copy of each SQ slot, taken once before validation
 * @kreg:	kernel QPs: the REG_MR record of each SQ slot; NULL for user QPs
 * @head:	ring index of the next WQE to send (or continue)
 * @psn:	next request PSN
 * @sent_end:	RC: one past the last PSN a request used so far (a READ
 *		uses one per response); a response for a PSN at or after
 *		it answers nothing this QP sent and is dropped
 * @una:	oldest unacknowledged PSN (RC)
 * @rd_out:	outstanding READ/atomic WQEs
 * @maps:	RC: out-of-order response maps of up to @maps->n outstanding
 *		READs (one without a map places its responses in order only);
 *		NULL before the first RTS and for other transports, which send
 *		no READ.  Only the work item reads, replaces or frees it
 * @maps_new:	a set modify_qp made for @maps (remu_eng_set()); the work
 *		item takes it once no READ holds a map beyond its end
 * @rdmap_used:	bit i: @maps->m[i] belongs to a READ
 * @retries:	retransmissions left before RETRY_EXC_ERR
 * @rnr_left:	RNR retries left (7 = infinite)
 * @rnr_wait:	waiting for the RNR timer
 * @timer:	retransmit / RNR timer; queues the work
 * @ptimer:	probe timer (remu_comp.c): after a go-back, resend again
 *		if the hole is not filled within about two round trips
 * @timed_out:	which timer fired (REMU_ENG_TIMEOUT, REMU_ENG_PROBE bits)
 * @rtt_t:	RC: ktime (ns) at which @rtt_psn was first sent, 0: no
 *		round trip being timed
 * @rtt_psn:	the AckReq packet being timed
 * @srtt_us:	smoothed round trip (us; 0: not measured yet)
 * @rtt_min_us:	the least recent round trip (us), slowly aged upwards
 * @gb_t:	ktime (ns) of the last go-back (NAK, probe, timer)
 * @gb_psn:	the hole the go-back resends: the PSN it went back to,
 *		or that of a NAK judged stale since
 * @probing:	the probe timer covers the go-back to @gb_psn
 * @probes:	probes sent since the last go-back for another hole
 * @areq:	the packet @areq_psn, the first of a go-back's resend, is
 *		still to go out: it asks for an ACK (remu_req_go_back())
 * @pace:	the rate limit and its pacer (remu_pace.c)
 * @run:	REMU_ENG_RUNNING: someone owns the engines (remu_eng_run(),
 *		in the work item or the doorbell's caller); REMU_ENG_AGAIN:
 *		something for them came since the owner last looked (a
 *		packet on @rxq, remu_eng_kick(); a doorbell; the work item);
 *		REMU_ENG_RESET: modify_qp moved the QP to RESET and the
 *		owner's next round forgets what is in flight first
 *		(remu_eng_reset_mark())
 * @gen:	owners so far (remu_eng_release()), for remu_eng_wait_run()
 * @inl:	doorbells in flight in remu_eng_doorbell(), for
 *		remu_eng_fini()
 * @rpsn:	responder: expected PSN
 * @msn:	responder: message sequence number
 * @comm_est:	responder: IB_EVENT_COMM_EST raised since RTR was entered
 * @nak_sent:	responder: a sequence NAK is outstanding
 * @in_send, @in_write: a multi-packet message is in progress
 * @have_rwqe:	@rwqe holds a receive WQE taken from the RQ/SRQ
 * @rwqe_idx:	its RQ ring index (not SRQ: consumed when taken)
 * @rwqe, @rsge: the kernel copy of the receive WQE
 * @rext:	inline receive: the completion being built (remu_resp.c)
 * @roff:	bytes placed into it
 * @wr_va, @wr_rkey, @wr_len, @wr_off: the RDMA WRITE in progress
 * @wr_gen:	what its rkey named at its first packet (remu_rkey.gen):
 *		a later packet that finds another registration or bind
 *		under the key fails the message
 * @rd:		RC responder: the READ whose responses are being sent; while
 *		it is, request packets other than a duplicate READ wait on
 *		@rxq (remu_resp_read_waits()).  Nothing in it is a reference:
 *		reset, error and destroy only clear it
 * @rd_rest:	the READ a duplicate's repeat in @rd put off: it goes on
 *		after it (inactive if none)
 * @res:	RC responder: the last max_dest_rd_atomic READs and atomics
 *		(at least one), the only requests a duplicate may repeat;
 *		NULL until the QP first enters RTR, and for other transports.
 *		Only the work item reads, replaces or frees it
 * @res_new:	a set modify_qp made for @res (remu_eng_set()); the work
 *		item takes it with xchg() before it looks at a packet
 *		(remu_eng_take()), so modify_qp never frees a set that the
 *		responder may be using
 * @uav:	UD: the address vector of each SQ slot, resolved when the WQE
 *		was posted (remu_req_post_av()); NULL for other QPs
 * @dst_cache:	RC/UC: the route of the QP's path, per CPU (remu_net.c
 *		checks it is still valid on every use)
 * @dst_key:	the path @dst_cache holds routes for (family, tclass,
 *		addresses); remu_req_av() empties the cache when the QP's
 *		path is no longer that one
 * @av_next:	UD: ring index up to which @uav is filled; written by
 *		remu_req_post_av() under qp->sq.prod_lock with release order,
 *		read by the requester with acquire order
 */
struct remu_qp_eng {
	struct sk_buff_head rxq;
	u32 mtu;

	struct remu_swqe *st;
	u8 *copy;
	struct remu_kreg *kreg;
	u32 head;
	u32 psn;
	u32 sent_end;
	u32 una;
	u32 rd_out;
	struct remu_rd_map_set *maps;
	struct remu_rd_map_set *maps_new;
	u32 rdmap_used;
	u8 retries;
	u8 rnr_left;
	bool rnr_wait;
	struct timer_list timer;
	struct timer_list ptimer;
	unsigned long timed_out;
	u64 rtt_t;
	u32 rtt_psn;
	u32 srtt_us;
	u32 rtt_min_us;
	u64 gb_t;
	u32 gb_psn;
	bool probing;
	u8 probes;
	bool areq;
	u32 areq_psn;
	struct remu_pace pace;
	unsigned long run;
	unsigned long gen;
	atomic_t inl;

	u32 rpsn;
	u32 msn;
	bool comm_est;
	bool nak_sent;
	bool in_send;
	bool in_write;
	bool have_rwqe;
	u32 rwqe_idx;
	struct remu_recv_wqe rwqe;
	struct remu_sge rsge[REMU_MAX_SGE];
	struct remu_cqe_ext rext;
	u32 roff;
	u64 wr_va;
	u32 wr_rkey;
	u32 wr_len;
	u32 wr_off;
	u64 wr_gen;
	struct remu_rd_cur rd;
	struct remu_rd_cur rd_rest;
	struct remu_rd_res_set *res;
	struct remu_rd_res_set *res_new;
	struct remu_uav *uav;
	u32 av_next;
	struct dst_cache dst_cache;
	struct remu_dst_key {
		u8 family;
		u8 tclass;
		u32 flow_label;
		struct in6_addr saddr;
		struct in6_addr daddr;
	} dst_key;
};

/* extended header @h of a queued packet (skb->data at the BTH) */
static inline void *remu_pkt_hdr_of(struct sk_buff *skb,
				    const struct remu_opcode_info *info,
				    enum remu_hdr_type h)
{
	if (!remu_op_has(info, h))
		return NULL;
	return skb->data + info->offset[h];
}

static inline bool remu_psn_before(u32 a, u32 b)
{
	return (s32)((a - b) << 8) < 0;
}

static inline s32 remu_psn_diff(u32 a, u32 b)
{
	return (s32)((a - b) << 8) >> 8;
}

/* the out-of-order map of READ @sw, or NULL */
static inline struct remu_rd_map *remu_swqe_map(struct remu_qp_eng *e,
						struct remu_swqe *sw)
{
	return sw->map ? &e->maps->m[sw->map - 1] : NULL;
}

/*
 * The responses READ @sw still lacks first: [@sw->rcvd, returned index),
 * up to the first one placed out of order, or the end.
 */
static inline u32 remu_swqe_read_end(struct remu_qp_eng *e,
				     struct remu_swqe *sw)
{
	struct remu_rd_map *m = remu_swqe_map(e, sw);
	u32 k;

	if (!m || !m->nset)
		return sw->npkts;
	for (k = sw->rcvd + 1; k < sw->npkts && k < sw->rcvd + REMU_RD_MAP; k++)
		if (test_bit(k % REMU_RD_MAP, m->bits))
			return k;
	return sw->npkts;
}

/* remu_eng.c: scheduling and life cycle, called by remu_qp.c */
int remu_eng_init(struct remu_qp *qp);
void remu_eng_fini(struct remu_qp *qp);
void remu_eng_modify(struct remu_qp *qp, int cur, int next);
/**
 * struct remu_qp_change - a modify_qp, as remu_eng_alloc() looks at it
 * @attr, @mask: its attributes, already checked
 * @cur, @next: the state before and after it
 * @drv:	its driver data (zeroes when the command had none)
 */
struct remu_qp_change {
	const struct ib_qp_attr *attr;
	int mask;
	enum ib_qp_state cur;
	enum ib_qp_state next;
	const struct remu_modify_qp_cmd *drv;
};

/* what a modify_qp gives the engines (remu_eng_alloc(), remu_eng_set()) */
struct remu_eng_new {
	struct remu_rd_res_set *res;
	struct remu_rd_map_set *maps;
};

int remu_eng_alloc(struct remu_qp *qp, const struct remu_qp_change *c,
		   struct remu_eng_new *n);
void remu_eng_set(struct remu_qp *qp, struct remu_eng_new *n);
void remu_eng_run(struct remu_qp *qp, bool caller);
void remu_eng_doorbell(struct remu_qp *qp);
void remu_eng_wait_run(struct remu_qp *qp);
void remu_eng_kick(struct remu_qp *qp);
bool remu_eng_inline_ok(struct remu_qp *qp);

/* requester */
bool remu_req_run(struct remu_qp *qp, bool caller);
void remu_req_go_back(struct remu_qp *qp, u32 psn);
void remu_req_ask_again(struct remu_qp *qp, u32 idx);
void remu_req_post_av(struct remu_qp *qp);
void *remu_req_copy(struct remu_qp *qp, u32 idx);
int remu_req_av(struct remu_qp *qp, struct remu_av *av);

/* the pacer (remu_pace.c) */
void remu_pace_init(struct remu_qp *qp);
void remu_pace_fini(struct remu_qp *qp);
void remu_pace_reset(struct remu_qp *qp);
void remu_pace_clear(struct remu_qp *qp);
int remu_pace_check(struct remu_qp *qp, const struct remu_qp_change *c);
void remu_pace_set(struct remu_qp *qp, const struct remu_qp_change *c);
u32 remu_pace_wire_len(const struct remu_av *av, u32 hdr_len, u32 paylen);
u64 remu_pace_wait(struct remu_qp *qp);
void remu_pace_hold(struct remu_qp *qp, u64 when);
bool remu_pace_will_hold(struct remu_qp *qp, u32 wire);
void remu_pace_sent(struct remu_qp *qp, u32 wire);
void remu_pace_caps(struct remu_packet_pacing_caps *caps);
int remu_pace_fill_res(struct sk_buff *msg, struct remu_qp *qp);

/* responder */
void remu_resp_pkt(struct remu_qp *qp, struct sk_buff *skb);
void remu_resp_read_more(struct remu_qp *qp, int *budget);
bool remu_resp_read_waits(struct remu_qp *qp, struct sk_buff *skb);
void remu_resp_read_stop(struct remu_qp *qp);

/* completer */
void remu_comp_pkt(struct remu_qp *qp, struct sk_buff *skb);
void remu_comp_timeout(struct remu_qp *qp);
void remu_comp_probe(struct remu_qp *qp);
void remu_comp_rtt_start(struct remu_qp *qp, u32 psn);
void remu_comp_wqe(struct remu_qp *qp, u32 idx, int status);
void remu_comp_fail_wqe(struct remu_qp *qp, u32 idx, int status);
void remu_comp_arm(struct remu_qp *qp);
/* the RNR timer field (IBA table 45, low 5 bits of @t) in microseconds */
unsigned int remu_rnr_usecs(u8 t);

/* remu_qp.c */
void remu_qp_error(struct remu_qp *qp);
void remu_qp_err_work(struct remu_qp *qp);
bool remu_qp_error_begin(struct remu_qp *qp);
void remu_qp_error_end(struct remu_qp *qp, bool entered);
void remu_qp_event(struct remu_qp *qp, enum ib_event_type type);
u32 remu_wc_opcode(u32 wr_opcode);

#endif /* REMU_ENG_H */
