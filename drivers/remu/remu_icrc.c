// SPDX-License-Identifier: GPL-2.0
/*
 * remu_icrc.c - the RoCEv2 invariant CRC (ICRC).
 *
 * Owns the module's one crc32 transform.  It is allocated by name
 * ("crc32") through the crypto API at module load, so the fastest
 * implementation the CPU allows binds (crc32-pclmul on x86 with PCLMULQDQ,
 * crc32-generic otherwise; from 6.14 always crc32-lib, over a library
 * crc32_le() that uses PCLMULQDQ itself when the CPU has it, which the
 * load log then adds); the driver's name is logged at load and shown in
 * debugfs (remu/icrc_driver).  The crypto API's "crc32" starts from a
 * seed of 0 and does not invert its result (it is crc32_le()); the seed of
 * all 1s the ICRC needs is set once as the transform's key.
 *
 * What the ICRC covers (IBA annex A17, RoCEv2), in order:
 *   8 bytes of 1s             stand-in for the masked LRH of native IB
 *   IP header                 IPv4: TOS, TTL, header checksum set to 1s;
 *                             IPv6: traffic class, flow label and hop
 *                             limit set to 1s
 *   UDP header                checksum set to 1s
 *   BTH                       Resv8a (byte 4: FECN, BECN, Resv6a) set to 1s
 *   extended headers, payload and pad, up to the ICRC itself
 * as a CRC-32 (IEEE 802.3 polynomial, reflected) seeded with all 1s; the
 * ICRC is the inverted result, least significant byte first on the wire.
 *
 * The masked copy of the IP/UDP/BTH headers is made on the stack; the rest
 * is read where it lies in the skb, linear part and page frags alike
 * (skb_seq_read), so it works on received skbs as they arrive and on
 * transmit skbs as the engines built them, never on data read back from
 * memory regions.
 *
 * Locking: none.  A crypto_shash transform may be used by any number of
 * callers at once; each call keeps its state in an on-stack descriptor.
 * Callable from softirq.
 */
#include <linux/crc32.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <crypto/hash.h>

#include "remu.h"
#include "remu_net.h"

static struct crypto_shash *remu_crc32;

/**
 * remu_icrc_init - bind the crc32 implementation
 *
 * Context: module init.
 * Return: 0 or the crypto API's error.
 */
int remu_icrc_init(void)
{
	__le32 seed = cpu_to_le32(~0u);
	int err;

	remu_crc32 = crypto_alloc_shash("crc32", 0, 0);
	if (IS_ERR(remu_crc32)) {
		err = PTR_ERR(remu_crc32);
		remu_crc32 = NULL;
		pr_err("no crc32 in the crypto API: %d\n", err);
		return err;
	}
	err = crypto_shash_setkey(remu_crc32, (const u8 *)&seed, sizeof(seed));
	if (err) {
		pr_err("cannot seed crc32 (%s): %d\n", remu_icrc_driver(), err);
		remu_icrc_exit();
		return err;
	}
	pr_info("ICRC computed by %s%s\n", remu_icrc_driver(),
		remu_crc32_lib_optimized() ?
		" (crc32_le optimized for this CPU)" : "");
	return 0;
}

void remu_icrc_exit(void)
{
	crypto_free_shash(remu_crc32);
	remu_crc32 = NULL;
}

/* the crypto driver that computes the ICRC, e.g. "crc32-pclmul" */
const char *remu_icrc_driver(void)
{
	return crypto_shash_driver_name(remu_crc32);
}

/*
 * Masked copy of everything from the IP header to the end of the BTH:
 * at most a 60-byte IPv4 header (with options), UDP and BTH.
 */
#define REMU_ICRC_MASKED_MAX	(60 + sizeof(struct udphdr) + \
				 sizeof(struct remu_bth))

static unsigned int remu_icrc_masked_hdrs(const struct sk_buff *skb,
					  const struct remu_bth *bth, u8 *buf)
{
	unsigned int iplen = skb_transport_header(skb) - skb_network_header(skb);
	struct remu_bth *b;
	struct udphdr *uh;

	memcpy(buf, skb_network_header(skb), iplen);
	if (ip_hdr(skb)->version == 4) {
		struct iphdr *ih = (struct iphdr *)buf;

		ih->tos = 0xff;
		ih->ttl = 0xff;
		ih->check = (__force __sum16)0xffff;
	} else {
		struct ipv6hdr *ih = (struct ipv6hdr *)buf;

		/* version:4 traffic class:8 flow label:20 */
		*(__be32 *)ih = htonl(0x6fffffff);
		ih->hop_limit = 0xff;
	}
	uh = (struct udphdr *)(buf + iplen);
	memcpy(uh, skb_transport_header(skb), sizeof(*uh));
	uh->check = (__force __sum16)0xffff;
	b = (struct remu_bth *)(uh + 1);
	memcpy(b, bth, sizeof(*b));
	b->qpn |= htonl(0xff000000);
	return iplen + sizeof(*uh) + sizeof(*b);
}

/**
 * remu_icrc - compute the ICRC of a packet
 * @skb: the packet; network and transport header offsets set, the IP,
 *	 UDP and BTH headers in the linear part; its last 4 bytes are the
 *	 ICRC field (not covered)
 * @bth: the BTH inside @skb
 *
 * The IP header must be an IPv4 header (any length) or a bare IPv6
 * header (the wire layer drops IPv6 packets with extension headers).
 *
 * Context: any, including softirq.
 * Return: the ICRC, to compare with or store as get/put_unaligned_le32()
 * of the field.
 */
u32 remu_icrc(struct sk_buff *skb, const struct remu_bth *bth)
{
	static const u8 pseudo_lrh[8] = {
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff
	};
	SHASH_DESC_ON_STACK(desc, remu_crc32);
	u8 hdrs[REMU_ICRC_MASKED_MAX] __aligned(8);
	struct skb_seq_state st;
	unsigned int from, to, consumed = 0, len;
	const u8 *data;
	u8 out[4];

	desc->tfm = remu_crc32;
	crypto_shash_init(desc);
	crypto_shash_update(desc, pseudo_lrh, sizeof(pseudo_lrh));
	crypto_shash_update(desc, hdrs, remu_icrc_masked_hdrs(skb, bth, hdrs));

	from = (const u8 *)(bth + 1) - skb->data;
	to = skb->len - REMU_ICRC_LEN;
	if (from < to) {
		/* skb_seq_read() hands out whole blocks, which may run past @to */
		skb_prepare_seq_read(skb, from, to, &st);
		while ((len = skb_seq_read(consumed, &data, &st)) != 0) {
			len = min(len, to - from - consumed);
			crypto_shash_update(desc, data, len);
			consumed += len;
			if (from + consumed == to) {
				skb_abort_seq_read(&st);
				break;
			}
		}
	}
	crypto_shash_final(desc, out);
	return ~get_unaligned_le32(out);
}
