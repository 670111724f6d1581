/* SPDX-License-Identifier: GPL-2.0 */
/*
 * remu_opcode.h - the IBA opcode table: for each of the 256 BTH opcode
 * values, its name, the extended headers it carries (and where each one
 * sits after the BTH), its total header length and what kind of packet it
 * is.  The wire layer rejects opcodes whose entry is not REMU_OP_VALID;
 * the engines only ever look at the flags, never at opcode bits.
 *
 * Locking: the table is filled once at module init (remu_opcode_init())
 * and read-only afterwards.
 */
#ifndef REMU_OPCODE_H
#define REMU_OPCODE_H

#include <linux/types.h>
#include <rdma/ib_pack.h>

#include "remu_hdr.h"

/* extended headers, in the order IBA places them after the BTH */
enum remu_hdr_type {
	REMU_HDR_FETH,		/* RDMA FLUSH: before the RETH */
	REMU_HDR_DETH,
	REMU_HDR_RETH,
	REMU_HDR_AETH,
	REMU_HDR_ATMETH,
	REMU_HDR_ATMACK,
	REMU_HDR_IMMDT,
	REMU_HDR_IETH,
	REMU_HDR_COUNT
};

/* transports, from the top three bits of the opcode */
enum remu_transport {
	REMU_TR_RC,
	REMU_TR_UC,
	REMU_TR_RD,
	REMU_TR_UD,
	REMU_TR_CNP,
	REMU_TR_XRC,
	REMU_TR_RSVD6,
	REMU_TR_MSP,
};

/* flags of an opcode */
enum {
	REMU_OP_VALID	= BIT(0),	/* remu accepts it (RC, UC, UD) */
	REMU_OP_DEFINED	= BIT(1),	/* IBA defines it, supported or not */
	REMU_OP_REQ	= BIT(2),	/* a request (requester -> responder) */
	REMU_OP_RESP	= BIT(3),	/* a response (READ response, ACK...) */
	REMU_OP_ACK	= BIT(4),	/* ACKNOWLEDGE or ATOMIC ACKNOWLEDGE */
	REMU_OP_FIRST	= BIT(5),
	REMU_OP_MIDDLE	= BIT(6),
	REMU_OP_LAST	= BIT(7),
	REMU_OP_ONLY	= BIT(8),	/* first and last of its message */
	REMU_OP_PAYLOAD	= BIT(9),	/* may carry payload */
	REMU_OP_IMM	= BIT(10),	/* carries ImmDt */
	REMU_OP_INV	= BIT(11),	/* carries IETH */
	REMU_OP_SE	= BIT(12),	/* solicited event bit meaningful */
	REMU_OP_NEEDS_ACK = BIT(13),	/* RC request: the responder answers */
	REMU_OP_SEND	= BIT(14),
	REMU_OP_WRITE	= BIT(15),
	REMU_OP_READ	= BIT(16),	/* READ request or response */
	REMU_OP_ATOMIC	= BIT(17),	/* CmpSwap, FetchAdd (and their ACK) */
	REMU_OP_FLUSH	= BIT(18),
	REMU_OP_ATOMIC_WRITE = BIT(19),
	REMU_OP_CONSUMES_RECV = BIT(20), /* uses a receive WQE at the responder */
};

/**
 * struct remu_opcode_info - one table entry
 * @name:	IBA name, e.g. "RC_SEND_FIRST"
 * @flags:	REMU_OP_*
 * @hdrs:	bitmap of BIT(enum remu_hdr_type) carried after the BTH
 * @length:	BTH plus every extended header, in bytes
 * @offset:	offset of each carried header from the start of the BTH
 *		(meaningful only for those in @hdrs)
 * @transport:	enum remu_transport
 */
struct remu_opcode_info {
	const char	*name;
	u32		flags;
	u16		hdrs;
	u8		length;
	u8		offset[REMU_HDR_COUNT];
	u8		transport;
};

extern struct remu_opcode_info remu_opcode[256];

void remu_opcode_init(void);

static inline bool remu_op_has(const struct remu_opcode_info *info,
			       enum remu_hdr_type h)
{
	return info->hdrs & BIT(h);
}

/* pointer to extended header @h of @pkt; NULL if its opcode has none */
static inline void *remu_pkt_hdr(const struct remu_pkt *pkt,
				 enum remu_hdr_type h)
{
	if (!remu_op_has(pkt->info, h))
		return NULL;
	return (u8 *)pkt->bth + pkt->info->offset[h];
}

#endif /* REMU_OPCODE_H */
