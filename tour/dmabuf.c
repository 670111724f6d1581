// SPDX-License-Identifier: GPL-2.0
/*
 * tour/dmabuf.c - the tour's chapter on dma-buf import, a program written
 * to be read (`make demo CHAPTER=dmabuf`; it needs the test exporter
 * remu_test_dmabuf.ko, which scripts/demo loads for it).
 *
 * A dma-buf is memory that belongs to another driver (a GPU's VRAM, a
 * camera's buffer), handed around as a file descriptor.  An RDMA NIC can
 * register it as an MR (ibv_reg_dmabuf_mr: the fd, an offset, a length)
 * and let the peer read and write it directly: GPUDirect RDMA without
 * pinning.  The exporter stays the owner: it may move the buffer (to
 * make room in VRAM, say) whenever it likes, and then tells every
 * importer through move_notify.  A "dynamic importer" such as remu
 * drops its mapping then and maps the buffer again at its next access,
 * wherever the buffer is by then (docs/dma-buf.md).
 *
 * The story, in three lessons:
 *  1. Import: remu attaches to the dma-buf as a dynamic importer and
 *     registers it (remu_dmabuf_attach, remu_mr_reg kind=dmabuf); the
 *     peer writes into it.
 *  2. A move: the test exporter copies the buffer to new pages and calls
 *     move_notify; remu drops its mapping (remu_dmabuf_move_notify ret=1,
 *     counter dmabuf_moves).
 *  3. The next access maps it again (remu_dmabuf_remap, counter
 *     dmabuf_remaps), and the peer's WRITE lands in the new pages, as
 *     the exporter itself reads them back.
 */
#include "tour.h"
#include "remu_dmabuf_lib.h"

#define LEN	(64 << 10)
#define IOVA	0x10000000ULL	/* where the MR starts for the peer */

int main(void)
{
	long long moves0, remaps0, ino;
	struct remu_tdb_info info;
	struct ibv_mr *mr;
	const struct rt_ev *e;
	uint8_t *back;
	int ctl, fd;

	tour_start("dmabuf", PG);
	ctl = open(TDB_PATH, O_RDWR | O_CLOEXEC);
	need(ctl >= 0, "opening " TDB_PATH " (remu_test_dmabuf.ko loaded?)");
	back = malloc(LEN);
	need(back != NULL, "malloc");

	/* ---------------------------------------------------------------- */
	lesson("1. Import: a dma-buf of another driver becomes an MR");
	fd = tdb_create(ctl, LEN, 0);
	need(fd >= 0, "creating a dma-buf with the test exporter");
	trace_mark();
	mr = ibv_reg_dmabuf_mr(t.b.pd, 0, LEN, IOVA, fd,
			       IBV_ACCESS_LOCAL_WRITE |
			       IBV_ACCESS_REMOTE_WRITE |
			       IBV_ACCESS_REMOTE_READ);
	need(mr != NULL, "ibv_reg_dmabuf_mr");
	read_events();
	show("remu_dmabuf_attach", 1);
	show("remu_mr_reg", 1);
	e = find(0, "remu_dmabuf_attach", "remu1", NULL, 0);
	ino = field(e, "ino");
	expect(e && ino > 0 && field(e, "size") == LEN,
	       "remu attached to the dma-buf (ino names it, size=65536)");
	e = find(0, "remu_mr_reg", "remu1", "key", mr->rkey);
	expect(field_is(e, "kind", "dmabuf") && field(e, "iova") == IOVA,
	       "and registered it: kind=dmabuf, at the iova asked for");
	memset(t.src, 0x11, PG);
	need(peer_rdma(IBV_WR_RDMA_WRITE, 0, PG, IOVA, mr->rkey) ==
	     IBV_WC_SUCCESS, "the peer's WRITE");
	need(!tdb_rw(ctl, fd, 0, 0, back, PG), "reading the dma-buf");
	expect(remu_cmp(t.src, back, PG) == -1,
	       "the peer's WRITE is in the dma-buf (the exporter reads it)");

	/* ---------------------------------------------------------------- */
	lesson("2. The exporter moves the buffer");
	moves0 = counter("remu1", "dmabuf_moves");
	remaps0 = counter("remu1", "dmabuf_remaps");
	trace_mark();
	need(!tdb_move(ctl, fd, 0), "the move");
	read_events();
	show("remu_dmabuf_move_notify", 2);
	e = find(0, "remu_dmabuf_move_notify", "remu1", "ino", ino);
	expect(count("remu_dmabuf_move_notify", "remu1", "ino", ino) == 1 &&
	       field(e, "ret") == 1 && field(e, "key") == mr->rkey,
	       "move_notify reached remu, which dropped its mapping (ret=1)");
	expect(counter("remu1", "dmabuf_moves") == moves0 + 1,
	       "the counter dmabuf_moves went up by 1");
	expect(count("remu_dmabuf_remap", NULL, NULL, 0) == 0,
	       "nothing mapped it again yet: no remu_dmabuf_remap");

	/* ---------------------------------------------------------------- */
	lesson("3. The next access maps the buffer again, where it is now");
	memset(t.src, 0x22, PG);
	trace_mark();
	need(peer_rdma(IBV_WR_RDMA_WRITE, 0, PG, IOVA + PG, mr->rkey) ==
	     IBV_WC_SUCCESS, "the peer's WRITE");
	read_events();
	show("remu_dmabuf_remap", 1);
	e = find(0, "remu_dmabuf_remap", "remu1", "ino", ino);
	expect(count("remu_dmabuf_remap", "remu1", "ino", ino) == 1 &&
	       field(e, "ret") == 0,
	       "the WRITE made remu map the buffer again (remu_dmabuf_remap)");
	expect(counter("remu1", "dmabuf_remaps") == remaps0 + 1,
	       "the counter dmabuf_remaps went up by 1");
	info = tdb_info(ctl, fd);
	need(!tdb_rw(ctl, fd, 0, 0, back, 2 * PG), "reading the dma-buf");
	expect(info.moves == 1 && remu_cmp(t.src, back + PG, PG) == -1,
	       "the exporter, which moved it once, reads the new WRITE");
	memset(t.src, 0x11, PG);
	expect(remu_cmp(t.src, back, PG) == -1,
	       "and the first WRITE, which the move copied");

	ibv_dereg_mr(mr);
	close(fd);
	close(ctl);
	free(back);
	return tour_end();
}
