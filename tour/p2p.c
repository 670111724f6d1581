// SPDX-License-Identifier: GPL-2.0
/*
 * tour/p2p.c - the tour's chapter on peer-to-peer memory: one device's
 * memory exported as a dma-buf and reached by another device, a program
 * written to be read (`make demo CHAPTER=p2p`).
 *
 * A GPU, an accelerator or another NIC can hand its own memory to an RDMA
 * NIC as a dma-buf, and the NIC's DMA engine then reads and writes it
 * across PCIe, peer to peer, with no stop in host memory.  On mlx5 (Linux
 * 7.x, rdma-core 62) a NIC's device memory can be the exporter too:
 * ibv_dm_export_dmabuf_fd().  Such a dma-buf has no struct page and no
 * CPU mapping, only addresses for the importer's DMA engine, and it can
 * be taken away (revoked) at any time: when its DM is freed, its process
 * exits or its device goes away (docs/dma-buf.md).
 *
 * Here remu0 (the peer of every chapter) exports a DM of its own, remu1
 * imports it, and remu0's QP writes into it through remu1: the bytes
 * leave remu0, cross the wire to remu1, and remu1's "DMA engine" puts
 * them into remu0's device memory.
 *
 * The story, in four lessons:
 *  1. Export: a DM on remu0 becomes a dma-buf (remu_dmabuf_export).
 *  2. Import by the other device: remu1 registers the dma-buf as an MR;
 *     as a peer-to-peer importer it gets a DMA address from remu0's
 *     exporter (remu_dmabuf_exp_attach, remu_dmabuf_exp_map) and maps
 *     that address, not a CPU mapping of the buffer (remu_dmabuf_p2p_map).
 *  3. An access: remu0 WRITEs through remu1's MR and finds the bytes in
 *     its own DM with ibv_memcpy_from_dm().
 *  4. Revoke: freeing the DM revokes the dma-buf; remu1 is told and
 *     drops its mapping (remu_dmabuf_exp_revoke, remu_dmabuf_move_notify),
 *     the next access fails (IBV_WC_REM_ACCESS_ERR, as on mlx5) while the
 *     MR stays; the pages go back to the pool only when the last user of
 *     the dma-buf lets go (remu_dmabuf_exp_release, remu_dm_free).
 */
#include "tour.h"
#include "remudv.h"

#define LEN	4096
#define IOVA	0x20000000ULL	/* where remu1's MR starts for remu0 */

int main(void)
{
	static const char hello[32] = "remu0 -> remu1 -> remu0's DM";
	struct ibv_alloc_dm_attr da = { .length = LEN };
	long long ino, addr, off, use0;
	char back[sizeof(hello)];
	const struct rt_ev *e;
	struct ibv_dm *dm;
	struct ibv_mr *mr;
	int fd, st;

	tour_start("p2p", PG);
	use0 = remu_read_num("/sys/class/infiniband/remu0/dm_in_use");

	/* ---------------------------------------------------------------- */
	lesson("1. Export: remu0's device memory becomes a dma-buf");
	dm = ibv_alloc_dm(t.a.ctx, &da);
	need(dm != NULL, "ibv_alloc_dm on remu0");
	trace_mark();
	fd = remudv_dm_export_dmabuf_fd(dm);
	need(fd >= 0, "remudv_dm_export_dmabuf_fd");
	read_events();
	show("remu_dmabuf_export", 1);
	e = find(0, "remu_dmabuf_export", "remu0", "ret", fd);
	ino = field(e, "ino");
	off = field(e, "mmap_off");
	expect(e && ino > 0 && field(e, "val") == LEN,
	       "remu0 exported the DM's page as a dma-buf (ret is the fd)");
	expect(counter("remu0", "dmabuf_exports") == 1,
	       "the counter dmabuf_exports is 1");

	/* ---------------------------------------------------------------- */
	lesson("2. Import by the other device, peer to peer");
	trace_mark();
	mr = ibv_reg_dmabuf_mr(t.b.pd, 0, LEN, IOVA, fd,
			       IBV_ACCESS_LOCAL_WRITE |
			       IBV_ACCESS_REMOTE_WRITE |
			       IBV_ACCESS_REMOTE_READ);
	need(mr != NULL, "ibv_reg_dmabuf_mr on remu1");
	read_events();
	show("remu_dmabuf_exp_attach", 1);
	show("remu_dmabuf_exp_map", 1);
	show("remu_dmabuf_p2p_map", 1);
	e = find(0, "remu_dmabuf_exp_attach", "remu0", "ino", ino);
	expect(field(e, "val") == 1 && field(e, "ret") == 0,
	       "remu1 attached as a peer-to-peer importer (val=1)");
	e = find(0, "remu_dmabuf_exp_map", "remu0", "ino", ino);
	addr = field(e, "val");
	expect(e && field(e, "ret") == 0 && addr > 0,
	       "remu0's exporter gave it a DMA address, no page, no vmap");
	e = find(0, "remu_dmabuf_p2p_map", "remu1", "ino", ino);
	expect(field(e, "addr") == addr && field(e, "ranges") == 1 &&
	       field(e, "iomem") == 0 && field(e, "ret") == 0,
	       "remu1's DMA engine reaches that address (one RAM range)");
	expect(counter("remu1", "dmabuf_p2p_mrs") == 1 &&
	       counter("remu0", "dmabuf_export_maps") == 1,
	       "counters: dmabuf_p2p_mrs on remu1, dmabuf_export_maps on remu0");

	/* ---------------------------------------------------------------- */
	lesson("3. remu0 writes through remu1 into its own device memory");
	memcpy(t.src, hello, sizeof(hello));
	need(peer_rdma(IBV_WR_RDMA_WRITE, 0, sizeof(hello), IOVA + 64,
		       mr->rkey) == IBV_WC_SUCCESS, "the WRITE");
	need(!ibv_memcpy_from_dm(back, dm, 64, sizeof(back)),
	     "ibv_memcpy_from_dm");
	printf("   remu0's DM at 64: \"%s\"\n", back);
	expect(!memcmp(back, hello, sizeof(hello)),
	       "the bytes are in remu0's DM (ibv_memcpy_from_dm)");
	memset(t.src, 0, sizeof(hello));
	need(peer_rdma(IBV_WR_RDMA_READ, 0, sizeof(hello), IOVA + 64,
		       mr->rkey) == IBV_WC_SUCCESS, "the READ");
	expect(!memcmp(t.src, hello, sizeof(hello)),
	       "and a READ through remu1 brings them back");

	/* ---------------------------------------------------------------- */
	lesson("4. Revoke: the DM is freed while remu1 has it");
	trace_mark();
	need(!ibv_free_dm(dm), "ibv_free_dm");
	read_events();
	show("remu_dmabuf_exp_revoke", 1);
	show("remu_dmabuf_move_notify", 1);
	e = find(0, "remu_dmabuf_exp_revoke", "remu0", "ino", ino);
	expect(e && field(e, "val") == 0,
	       "remu0 revoked the dma-buf; no mapping was left after it");
	e = find(0, "remu_dmabuf_move_notify", "remu1", "ino", ino);
	expect(field(e, "ret") == 1 && field(e, "key") == mr->rkey,
	       "remu1 was told and dropped its mapping (move_notify ret=1)");
	expect(count("remu_dmabuf_exp_unmap", "remu0", "ino", ino) == 1,
	       "and handed the DMA address back (remu_dmabuf_exp_unmap)");
	trace_mark();
	st = peer_rdma(IBV_WR_RDMA_WRITE, 0, 8, IOVA, mr->rkey);
	read_events();
	show("remu_dmabuf_remap", 1);
	printf("   the next WRITE: %s\n", ibv_wc_status_str(st));
	expect(st == IBV_WC_REM_ACCESS_ERR,
	       "the next access fails: IBV_WC_REM_ACCESS_ERR, as on mlx5");
	e = find(0, "remu_dmabuf_remap", "remu1", "ino", ino);
	expect(field(e, "ret") == -19,
	       "remu1 tried to map it again: ENODEV (-19), revoked");
	tour_reconnect();
	expect(remu_read_num("/sys/class/infiniband/remu0/dm_in_use") ==
	       use0 + LEN, "the page stays out of remu0's pool meanwhile");
	trace_mark();
	need(!ibv_dereg_mr(mr), "ibv_dereg_mr: the revoked MR is still one");
	close(fd);
	read_events();
	show("remu_dmabuf_exp_release", 1);
	show("remu_dm_free", 1);
	expect(count("remu_dmabuf_exp_release", "remu0", "ino", ino) == 1 &&
	       count("remu_dm_free", "remu0", "mmap_off", off) == 1,
	       "the MR and the fd gone, the page goes back (remu_dm_free)");
	expect(remu_read_num("/sys/class/infiniband/remu0/dm_in_use") == use0,
	       "remu0's dm_in_use is back where it was");
	return tour_end();
}
