// SPDX-License-Identifier: GPL-2.0
/*
 * remu_opcode.c - the IBA opcode table (see remu_opcode.h).
 *
 * An opcode is a transport (top three bits: RC, UC, RD, UD, CNP, XRC)
 * plus an operation (low five bits).  The operations are described once,
 * in remu_ops[] below; remu_opcode_init() combines them with the
 * operations each transport defines into the 256-entry table, adds the
 * DETH for UD, and computes each header's offset and the total header
 * length from the headers' sizes and IBA's fixed header order.
 *
 * remu accepts RC, UC and UD.  RD, XRC and CNP opcodes are in the table
 * with their names (REMU_OP_DEFINED) but without REMU_OP_VALID, so the
 * wire layer drops them as unsupported.
 *
 * Locking: written once at module init, read-only afterwards.
 */
#include <linux/bits.h>
#include <linux/kernel.h>

#include "remu.h"
#include "remu_opcode.h"

struct remu_opcode_info remu_opcode[256];

static const u8 remu_hdr_size[REMU_HDR_COUNT] = {
	[REMU_HDR_FETH]		= sizeof(struct remu_feth),
	[REMU_HDR_DETH]		= sizeof(struct remu_deth),
	[REMU_HDR_RETH]		= sizeof(struct remu_reth),
	[REMU_HDR_AETH]		= sizeof(struct remu_aeth),
	[REMU_HDR_ATMETH]	= sizeof(struct remu_atmeth),
	[REMU_HDR_ATMACK]	= sizeof(struct remu_atmack),
	[REMU_HDR_IMMDT]	= sizeof(struct remu_immdt),
	[REMU_HDR_IETH]		= sizeof(struct remu_ieth),
};

#define H(x)	BIT(REMU_HDR_##x)
#define ONLY	(REMU_OP_FIRST | REMU_OP_LAST | REMU_OP_ONLY)

/* the operations (low five opcode bits) and what each one carries */
static const struct {
	const char	*name;
	u16		hdrs;
	u32		flags;
} remu_ops[32] = {
	[IB_OPCODE_SEND_FIRST] = { "SEND_FIRST", 0,
		REMU_OP_REQ | REMU_OP_SEND | REMU_OP_FIRST | REMU_OP_PAYLOAD },
	[IB_OPCODE_SEND_MIDDLE] = { "SEND_MIDDLE", 0,
		REMU_OP_REQ | REMU_OP_SEND | REMU_OP_MIDDLE | REMU_OP_PAYLOAD },
	[IB_OPCODE_SEND_LAST] = { "SEND_LAST", 0,
		REMU_OP_REQ | REMU_OP_SEND | REMU_OP_LAST | REMU_OP_PAYLOAD |
		REMU_OP_SE },
	[IB_OPCODE_SEND_LAST_WITH_IMMEDIATE] = {
		"SEND_LAST_WITH_IMMEDIATE", H(IMMDT),
		REMU_OP_REQ | REMU_OP_SEND | REMU_OP_LAST | REMU_OP_PAYLOAD |
		REMU_OP_IMM | REMU_OP_SE },
	[IB_OPCODE_SEND_ONLY] = { "SEND_ONLY", 0,
		REMU_OP_REQ | REMU_OP_SEND | ONLY | REMU_OP_PAYLOAD |
		REMU_OP_SE },
	[IB_OPCODE_SEND_ONLY_WITH_IMMEDIATE] = {
		"SEND_ONLY_WITH_IMMEDIATE", H(IMMDT),
		REMU_OP_REQ | REMU_OP_SEND | ONLY | REMU_OP_PAYLOAD |
		REMU_OP_IMM | REMU_OP_SE },
	[IB_OPCODE_RDMA_WRITE_FIRST] = { "RDMA_WRITE_FIRST", H(RETH),
		REMU_OP_REQ | REMU_OP_WRITE | REMU_OP_FIRST | REMU_OP_PAYLOAD },
	[IB_OPCODE_RDMA_WRITE_MIDDLE] = { "RDMA_WRITE_MIDDLE", 0,
		REMU_OP_REQ | REMU_OP_WRITE | REMU_OP_MIDDLE |
		REMU_OP_PAYLOAD },
	[IB_OPCODE_RDMA_WRITE_LAST] = { "RDMA_WRITE_LAST", 0,
		REMU_OP_REQ | REMU_OP_WRITE | REMU_OP_LAST | REMU_OP_PAYLOAD },
	[IB_OPCODE_RDMA_WRITE_LAST_WITH_IMMEDIATE] = {
		"RDMA_WRITE_LAST_WITH_IMMEDIATE", H(IMMDT),
		REMU_OP_REQ | REMU_OP_WRITE | REMU_OP_LAST | REMU_OP_PAYLOAD |
		REMU_OP_IMM | REMU_OP_SE },
	[IB_OPCODE_RDMA_WRITE_ONLY] = { "RDMA_WRITE_ONLY", H(RETH),
		REMU_OP_REQ | REMU_OP_WRITE | ONLY | REMU_OP_PAYLOAD },
	[IB_OPCODE_RDMA_WRITE_ONLY_WITH_IMMEDIATE] = {
		"RDMA_WRITE_ONLY_WITH_IMMEDIATE", H(RETH) | H(IMMDT),
		REMU_OP_REQ | REMU_OP_WRITE | ONLY | REMU_OP_PAYLOAD |
		REMU_OP_IMM | REMU_OP_SE },
	[IB_OPCODE_RDMA_READ_REQUEST] = { "RDMA_READ_REQUEST", H(RETH),
		REMU_OP_REQ | REMU_OP_READ | ONLY },
	[IB_OPCODE_RDMA_READ_RESPONSE_FIRST] = {
		"RDMA_READ_RESPONSE_FIRST", H(AETH),
		REMU_OP_RESP | REMU_OP_READ | REMU_OP_FIRST |
		REMU_OP_PAYLOAD },
	[IB_OPCODE_RDMA_READ_RESPONSE_MIDDLE] = {
		"RDMA_READ_RESPONSE_MIDDLE", 0,
		REMU_OP_RESP | REMU_OP_READ | REMU_OP_MIDDLE |
		REMU_OP_PAYLOAD },
	[IB_OPCODE_RDMA_READ_RESPONSE_LAST] = {
		"RDMA_READ_RESPONSE_LAST", H(AETH),
		REMU_OP_RESP | REMU_OP_READ | REMU_OP_LAST | REMU_OP_PAYLOAD },
	[IB_OPCODE_RDMA_READ_RESPONSE_ONLY] = {
		"RDMA_READ_RESPONSE_ONLY", H(AETH),
		REMU_OP_RESP | REMU_OP_READ | ONLY | REMU_OP_PAYLOAD },
	[IB_OPCODE_ACKNOWLEDGE] = { "ACKNOWLEDGE", H(AETH),
		REMU_OP_RESP | REMU_OP_ACK | ONLY },
	[IB_OPCODE_ATOMIC_ACKNOWLEDGE] = { "ATOMIC_ACKNOWLEDGE",
		H(AETH) | H(ATMACK),
		REMU_OP_RESP | REMU_OP_ACK | REMU_OP_ATOMIC | ONLY },
	[IB_OPCODE_COMPARE_SWAP] = { "COMPARE_SWAP", H(ATMETH),
		REMU_OP_REQ | REMU_OP_ATOMIC | ONLY },
	[IB_OPCODE_FETCH_ADD] = { "FETCH_ADD", H(ATMETH),
		REMU_OP_REQ | REMU_OP_ATOMIC | ONLY },
	[IB_OPCODE_SEND_LAST_WITH_INVALIDATE] = {
		"SEND_LAST_WITH_INVALIDATE", H(IETH),
		REMU_OP_REQ | REMU_OP_SEND | REMU_OP_LAST | REMU_OP_PAYLOAD |
		REMU_OP_INV | REMU_OP_SE },
	[IB_OPCODE_SEND_ONLY_WITH_INVALIDATE] = {
		"SEND_ONLY_WITH_INVALIDATE", H(IETH),
		REMU_OP_REQ | REMU_OP_SEND | ONLY | REMU_OP_PAYLOAD |
		REMU_OP_INV | REMU_OP_SE },
	[IB_OPCODE_FLUSH] = { "FLUSH", H(FETH) | H(RETH),
		REMU_OP_REQ | REMU_OP_FLUSH | ONLY },
	[IB_OPCODE_ATOMIC_WRITE] = { "ATOMIC_WRITE", H(RETH),
		REMU_OP_REQ | REMU_OP_ATOMIC_WRITE | ONLY | REMU_OP_PAYLOAD },
};

#undef ONLY

/* IBA 1.5's two operations, where the kernel has them (remu_compat.h) */
#define IBA15_OPS (REMU_HAVE_IBA15 ? \
		   BIT(IB_OPCODE_FLUSH) | BIT(IB_OPCODE_ATOMIC_WRITE) : 0)

/* the operations each transport defines (a bit per low-five-bit value) */
#define RC_OPS	(GENMASK(IB_OPCODE_FETCH_ADD, 0) | \
		 BIT(IB_OPCODE_SEND_LAST_WITH_INVALIDATE) | \
		 BIT(IB_OPCODE_SEND_ONLY_WITH_INVALIDATE) | IBA15_OPS)
#define UC_OPS	GENMASK(IB_OPCODE_RDMA_WRITE_ONLY_WITH_IMMEDIATE, 0)
#define RD_OPS	(GENMASK(IB_OPCODE_FETCH_ADD, 0) | BIT(IB_OPCODE_FLUSH))
#define UD_OPS	(BIT(IB_OPCODE_SEND_ONLY) | \
		 BIT(IB_OPCODE_SEND_ONLY_WITH_IMMEDIATE))
#define XRC_OPS	(GENMASK(IB_OPCODE_FETCH_ADD, 0) | \
		 BIT(IB_OPCODE_SEND_LAST_WITH_INVALIDATE) | \
		 BIT(IB_OPCODE_SEND_ONLY_WITH_INVALIDATE))

#define REMU_OPCODE_CNP		0x81	/* RoCEv2 congestion notification */

static const struct {
	const char	*prefix;
	u32		ops;
	u16		extra_hdrs;
	bool		valid;
} remu_transports[8] = {
	[REMU_TR_RC]	= { "RC", RC_OPS, 0, true },
	[REMU_TR_UC]	= { "UC", UC_OPS, 0, true },
	[REMU_TR_RD]	= { "RD", RD_OPS, 0, false },
	[REMU_TR_UD]	= { "UD", UD_OPS, H(DETH), true },
	[REMU_TR_XRC]	= { "XRC", XRC_OPS, 0, false },
};

/* names built at init ("RC_SEND_FIRST"...); at most 8 + 1 + 31 + 1 */
static char remu_opcode_names[256][40];

static void remu_opcode_fill(u8 opcode, const char *name, u16 hdrs, u32 flags)
{
	struct remu_opcode_info *info = &remu_opcode[opcode];
	unsigned int len = sizeof(struct remu_bth);
	int h;

	info->name = name;
	info->hdrs = hdrs;
	info->flags = flags | REMU_OP_DEFINED;
	info->transport = opcode >> 5;
	for (h = 0; h < REMU_HDR_COUNT; h++) {
		if (!(hdrs & BIT(h)))
			continue;
		info->offset[h] = len;
		len += remu_hdr_size[h];
	}
	info->length = len;
}

/**
 * remu_opcode_init - build the opcode table
 *
 * Context: module init, before any packet can arrive.
 */
void remu_opcode_init(void)
{
	unsigned int tr, op;
	u32 flags;
	u8 opc;

	for (opc = 0; ; opc++) {
		remu_opcode[opc].name = "UNDEFINED";
		remu_opcode[opc].transport = opc >> 5;
		remu_opcode[opc].length = sizeof(struct remu_bth);
		if (opc == 255)
			break;
	}

	for (tr = 0; tr < ARRAY_SIZE(remu_transports); tr++) {
		if (!remu_transports[tr].prefix)
			continue;
		for (op = 0; op < 32; op++) {
			if (!(remu_transports[tr].ops & BIT(op)))
				continue;
			opc = tr << 5 | op;
			flags = remu_ops[op].flags;
			if (remu_transports[tr].valid)
				flags |= REMU_OP_VALID;
			if (tr == REMU_TR_RC && (flags & REMU_OP_REQ))
				flags |= REMU_OP_NEEDS_ACK;
			snprintf(remu_opcode_names[opc],
				 sizeof(remu_opcode_names[opc]), "%s_%s",
				 remu_transports[tr].prefix, remu_ops[op].name);
			remu_opcode_fill(opc, remu_opcode_names[opc],
					 remu_ops[op].hdrs |
					 remu_transports[tr].extra_hdrs, flags);
		}
	}
	/* CNP: BTH + 16 reserved bytes; not supported */
	remu_opcode_fill(REMU_OPCODE_CNP, "CNP", 0, 0);
}

#undef H
