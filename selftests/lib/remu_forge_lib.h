/* SPDX-License-Identifier: GPL-2.0 */
/*
 * remu_forge_lib.h - forging RoCEv2 packets for the hostile-input tests: an
 * ordinary UDP socket, bound to any local address of any network
 * namespace, sends a transport packet (BTH, extended headers, payload,
 * pad) to UDP port 4791 with the ICRC computed over the IPv4 and UDP
 * headers the kernel will put in front of it.  So a test can play a third
 * host, or pretend to be a QP's real peer, with packets that pass every
 * check of the wire layer and reach the engines.
 *
 * The ICRC (IBA 17.3.3, RoCEv2 annex): CRC-32 (reflected, 0x04C11DB7)
 * seeded with 1s over 8 bytes of 1s, then the IPv4 header with TOS, TTL
 * and checksum set to 1s, the UDP header with its checksum set to 1s, the
 * BTH with its byte 4 set to 1s, and the rest; stored inverted, least
 * significant byte first.  The socket sets DF and is not connected, so
 * the kernel's IPv4 header carries ID 0 and no options: everything the
 * ICRC covers is known before sending.
 *
 * rf_layout() knows which extended headers each RC, UC and UD opcode
 * carries, so a fuzzer can build a valid-looking packet of any opcode
 * before it mutates it; remu_forge_send_icrc() can also send a wrong ICRC
 * or none.
 *
 * IPv4 only.  Header-only, like remu_lib.h.
 */
#ifndef REMU_FORGE_LIB_H
#define REMU_FORGE_LIB_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define REMU_ROCE_PORT	4791

/* BTH opcodes (IBA 9.2: transport << 5 | operation) */
enum {
	RF_RC = 0x00, RF_UC = 0x20, RF_UD = 0x60,
	RF_SEND_ONLY = 0x04,
	RF_WRITE_FIRST = 0x06,
	RF_WRITE_ONLY = 0x0a,
	RF_READ_REQ = 0x0c,
	RF_READ_RESP_FIRST = 0x0d,
	RF_READ_RESP_MIDDLE = 0x0e,
	RF_READ_RESP_LAST = 0x0f,
	RF_READ_RESP_ONLY = 0x10,
	RF_ACK = 0x11,
	RF_ATOMIC_ACK = 0x12,
	RF_CMP_SWAP = 0x13,
	RF_FETCH_ADD = 0x14,
	RF_SEND_ONLY_INV = 0x17,
	RF_FLUSH = 0x1c,
	RF_ATOMIC_WRITE = 0x1d,
};

/* FETH bits (IBA 1.5): placement type, selectivity << 4 */
enum {
	RF_FLUSH_GLOBAL = 1,
	RF_FLUSH_PERSISTENT = 2,
	RF_FLUSH_MR = 1 << 4,		/* the whole MR (else the range) */
};

/* AETH syndromes (IBA 9.7.5.2) */
enum {
	RF_AETH_ACK = 0x1f,		/* ACK, credits invalid */
	RF_AETH_NAK_SEQ = 0x60,
	RF_AETH_NAK_INV_REQ = 0x61,
	RF_AETH_NAK_REM_ACC = 0x62,
	RF_AETH_NAK_REM_OP = 0x63,
};

/* a sender of forged packets: a socket of some namespace, and where to */
struct remu_forge {
	int fd;
	struct sockaddr_in src;
	struct sockaddr_in dst;
};

/* a packet under construction: transport headers and payload only */
struct remu_fpkt {
	uint8_t b[9000];
	size_t len;
};

/* CRC-32 (reflected 0x04C11DB7) of @n bytes at @p, continuing @crc */
static inline uint32_t remu_crc32(uint32_t crc, const uint8_t *p, size_t n)
{
	static uint32_t table[256];
	uint32_t c;
	int i, k;

	if (!table[1])
		for (i = 0; i < 256; i++) {
			for (c = i, k = 0; k < 8; k++)
				c = (c >> 1) ^ (0xedb88320u & -(c & 1));
			table[i] = c;
		}
	while (n--)
		crc = (crc >> 8) ^ table[(crc ^ *p++) & 0xff];
	return crc;
}

/*
 * Open @f: a UDP socket in network namespace @netns (a name under
 * /run/netns, or NULL for the caller's), bound to @src, sending to
 * @dst:4791.  0, or -1 with errno set.
 */
static inline int remu_forge_open(struct remu_forge *f, const char *netns,
				  const char *src, const char *dst)
{
	int self = -1, ns = -1, one = 2;	/* IP_PMTUDISC_DO: DF set */
	socklen_t sl = sizeof(f->src);
	char path[128];

	memset(f, 0, sizeof(*f));
	f->fd = -1;
	if (netns) {
		snprintf(path, sizeof(path), "/run/netns/%s", netns);
		self = open("/proc/thread-self/ns/net", O_RDONLY);
		ns = open(path, O_RDONLY);
		if (self < 0 || ns < 0 || setns(ns, CLONE_NEWNET))
			goto out;
	}
	f->fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (netns && setns(self, CLONE_NEWNET)) {
		close(f->fd);
		f->fd = -1;
	}
out:
	if (ns >= 0)
		close(ns);
	if (self >= 0)
		close(self);
	if (f->fd < 0)
		return -1;
	f->src.sin_family = AF_INET;
	f->dst.sin_family = AF_INET;
	f->dst.sin_port = htons(REMU_ROCE_PORT);
	if (inet_pton(AF_INET, src, &f->src.sin_addr) != 1 ||
	    inet_pton(AF_INET, dst, &f->dst.sin_addr) != 1 ||
	    setsockopt(f->fd, IPPROTO_IP, IP_MTU_DISCOVER, &one, sizeof(one)) ||
	    bind(f->fd, (struct sockaddr *)&f->src, sizeof(f->src)) ||
	    getsockname(f->fd, (struct sockaddr *)&f->src, &sl)) {
		close(f->fd);
		f->fd = -1;
		return -1;
	}
	return 0;
}

static inline void remu_forge_close(struct remu_forge *f)
{
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
}

static inline void rf_put(struct remu_fpkt *p, const void *d, size_t n)
{
	memcpy(p->b + p->len, d, n);
	p->len += n;
}

static inline void rf_be32(struct remu_fpkt *p, uint32_t v)
{
	v = htonl(v);
	rf_put(p, &v, 4);
}

static inline void rf_be64(struct remu_fpkt *p, uint64_t v)
{
	rf_be32(p, v >> 32);
	rf_be32(p, (uint32_t)v);
}

/*
 * Start @p with a BTH: @opcode, to @qpn with @psn (AckReq set); the pad
 * count is set by rf_payload().  P_Key 0xffff, TVer 0.
 */
static inline void rf_bth(struct remu_fpkt *p, uint8_t opcode, uint32_t qpn,
			  uint32_t psn)
{
	p->len = 0;
	rf_put(p, &opcode, 1);
	rf_put(p, "\0\xff\xff", 3);
	rf_be32(p, qpn & 0xffffff);
	rf_be32(p, 1u << 31 | (psn & 0xffffff));
}

static inline void rf_reth(struct remu_fpkt *p, uint64_t va, uint32_t rkey,
			   uint32_t len)
{
	rf_be64(p, va);
	rf_be32(p, rkey);
	rf_be32(p, len);
}

static inline void rf_aeth(struct remu_fpkt *p, uint8_t syn, uint32_t msn)
{
	rf_be32(p, (uint32_t)syn << 24 | (msn & 0xffffff));
}

static inline void rf_deth(struct remu_fpkt *p, uint32_t qkey, uint32_t sqp)
{
	rf_be32(p, qkey);
	rf_be32(p, sqp & 0xffffff);
}

static inline void rf_atmeth(struct remu_fpkt *p, uint64_t va, uint32_t rkey,
			     uint64_t swap_add, uint64_t compare)
{
	rf_be64(p, va);
	rf_be32(p, rkey);
	rf_be64(p, swap_add);
	rf_be64(p, compare);
}

/*
 * The extended headers IBA gives each opcode, in the order they follow
 * the BTH (FETH, DETH, RETH, AETH, AtomicETH, AtomicAckETH, ImmDt, IETH),
 * and whether it carries a payload: for RC, UC and UD opcodes;
 * rf_layout() returns 0 for any other (RD, XRC, CNP, reserved).
 */
enum {
	RF_H_FETH = 1 << 0, RF_H_DETH = 1 << 1, RF_H_RETH = 1 << 2,
	RF_H_AETH = 1 << 3, RF_H_ATMETH = 1 << 4, RF_H_ATMACK = 1 << 5,
	RF_H_IMM = 1 << 6, RF_H_IETH = 1 << 7,
	RF_H_PAYLOAD = 1 << 8,
	RF_H_VALID = 1 << 9,
};

static inline unsigned int rf_layout(uint8_t opcode)
{
	static const uint16_t op[32] = {
		[0x00] = RF_H_PAYLOAD, [0x01] = RF_H_PAYLOAD,
		[0x02] = RF_H_PAYLOAD, [0x03] = RF_H_IMM | RF_H_PAYLOAD,
		[0x04] = RF_H_PAYLOAD, [0x05] = RF_H_IMM | RF_H_PAYLOAD,
		[0x06] = RF_H_RETH | RF_H_PAYLOAD, [0x07] = RF_H_PAYLOAD,
		[0x08] = RF_H_PAYLOAD, [0x09] = RF_H_IMM | RF_H_PAYLOAD,
		[0x0a] = RF_H_RETH | RF_H_PAYLOAD,
		[0x0b] = RF_H_RETH | RF_H_IMM | RF_H_PAYLOAD,
		[0x0c] = RF_H_RETH,
		[0x0d] = RF_H_AETH | RF_H_PAYLOAD, [0x0e] = RF_H_PAYLOAD,
		[0x0f] = RF_H_AETH | RF_H_PAYLOAD,
		[0x10] = RF_H_AETH | RF_H_PAYLOAD,
		[0x11] = RF_H_AETH, [0x12] = RF_H_AETH | RF_H_ATMACK,
		[0x13] = RF_H_ATMETH, [0x14] = RF_H_ATMETH,
		[0x16] = RF_H_IETH | RF_H_PAYLOAD,
		[0x17] = RF_H_IETH | RF_H_PAYLOAD,
		[0x1c] = RF_H_FETH | RF_H_RETH,
		[0x1d] = RF_H_RETH | RF_H_PAYLOAD,
	};
	unsigned int o = opcode & 0x1f, t = opcode & 0xe0;

	switch (t) {
	case RF_RC:
		if (o <= 0x14 || o == 0x16 || o == 0x17 || o == 0x1c ||
		    o == 0x1d)
			return op[o] | RF_H_VALID;
		return 0;
	case RF_UC:
		return o <= 0x0b ? op[o] | RF_H_VALID : 0;
	case RF_UD:
		return o == 0x04 || o == 0x05 ?
		       op[o] | RF_H_DETH | RF_H_VALID : 0;
	}
	return 0;
}

/* @n bytes of @d, then the pad to a multiple of 4 (PadCnt in the BTH) */
static inline void rf_payload(struct remu_fpkt *p, const void *d, size_t n)
{
	static const uint8_t zero[3];
	uint8_t pad = (4 - n % 4) % 4;

	rf_put(p, d, n);
	rf_put(p, zero, pad);
	p->b[1] = (p->b[1] & ~0x30) | pad << 4;
}

/* what remu_forge_send_icrc() puts after the packet */
enum rf_icrc {
	RF_ICRC_GOOD,		/* the ICRC over the packet */
	RF_ICRC_BAD,		/* that ICRC with a bit flipped */
	RF_ICRC_NONE,		/* nothing: the packet ends where @p does */
};

/*
 * Send @p followed by @how (@p is left as it is): 0, or -1 with errno
 * set (EMSGSIZE for a datagram larger than the path MTU).
 */
static inline int remu_forge_send_icrc(struct remu_forge *f,
				       const struct remu_fpkt *p,
				       enum rf_icrc how)
{
	size_t tail = how == RF_ICRC_NONE ? 0 : 4;
	uint16_t ulen = 8 + p->len + tail;
	uint8_t h[28], ones[8], icrc[4];
	struct iovec iov[2] = { { (void *)p->b, p->len }, { icrc, tail } };
	struct msghdr msg = { .msg_name = (void *)&f->dst,
			      .msg_namelen = sizeof(f->dst),
			      .msg_iov = iov, .msg_iovlen = 2 };
	uint32_t crc;

	memset(ones, 0xff, sizeof(ones));
	/* IPv4: version/IHL, TOS*, length, ID 0, DF, TTL*, UDP, checksum* */
	h[0] = 0x45;
	h[1] = 0xff;
	h[2] = (20 + ulen) >> 8;
	h[3] = (uint8_t)(20 + ulen);
	memcpy(h + 4, "\0\0\x40\0", 4);
	h[8] = 0xff;
	h[9] = IPPROTO_UDP;
	h[10] = h[11] = 0xff;
	memcpy(h + 12, &f->src.sin_addr, 4);
	memcpy(h + 16, &f->dst.sin_addr, 4);
	/* UDP: ports, length, checksum* */
	memcpy(h + 20, &f->src.sin_port, 2);
	memcpy(h + 22, &f->dst.sin_port, 2);
	h[24] = ulen >> 8;
	h[25] = (uint8_t)ulen;
	h[26] = h[27] = 0xff;
	crc = remu_crc32(0xffffffffu, ones, sizeof(ones));
	crc = remu_crc32(crc, h, sizeof(h));
	if (p->len >= 5) {
		crc = remu_crc32(crc, p->b, 4);
		crc = remu_crc32(crc, ones, 1);		/* BTH byte 4 */
		crc = remu_crc32(crc, p->b + 5, p->len - 5);
	} else {
		crc = remu_crc32(crc, p->b, p->len);
	}
	crc = ~crc;
	if (how == RF_ICRC_BAD)
		crc ^= 1u << (crc % 32);
	icrc[0] = crc;
	icrc[1] = crc >> 8;
	icrc[2] = crc >> 16;
	icrc[3] = crc >> 24;
	return sendmsg(f->fd, &msg, 0) == (ssize_t)(p->len + tail) ? 0 : -1;
}

/* Send @p with its ICRC (@p is left as it is): 0, or -1 */
static inline int remu_forge_send(struct remu_forge *f,
				  const struct remu_fpkt *p)
{
	return remu_forge_send_icrc(f, p, RF_ICRC_GOOD);
}

#endif /* REMU_FORGE_LIB_H */
