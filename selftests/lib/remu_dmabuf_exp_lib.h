/* SPDX-License-Identifier: GPL-2.0 */
/*
 * remu_dmabuf_exp_lib.h - dma-bufs from the stock exporters (udmabuf, dma-heap
 * system heap, vgem with PRIME) with the exporter's own view of them, for
 * every test that registers dma-buf MRs (remu_dmabuf_lib.h includes it;
 * remu_umr_test uses it alone).  Header-only, like remu_lib.h.
 */
#ifndef REMU_DMABUF_EXP_LIB_H
#define REMU_DMABUF_EXP_LIB_H

#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <linux/dma-buf.h>
#include <linux/dma-heap.h>
#include <linux/udmabuf.h>
/*
 * The DRM uapi comes from the kernel's own include/uapi (selftests/Makefile,
 * no libdrm or installed drm headers here); headers_install would strip
 * the __user annotations that the source tree still has.
 */
#define __user
#include <drm/drm.h>
#include <drm/drm_mode.h>
#undef __user

#include "remu_lib.h"

/* ---- exporters ---- */

enum exporter { EXP_UDMABUF, EXP_HEAP, EXP_VGEM };

/**
 * struct dbuf - a dma-buf from a stock exporter and the exporter's view
 * @fd:		the dma-buf
 * @memfd:	udmabuf: the memfd behind it
 * @card:	vgem: the DRM device
 * @size:	bytes
 * @view:	@size bytes: the memfd (udmabuf) or the dma-buf mapped
 */
struct dbuf {
	int fd, memfd, card;
	size_t size;
	uint8_t *view;
};

/* the vgem card, found by driver name; -1 if none */
static inline int vgem_open(void)
{
	char path[64], name[32];
	int i, fd;

	remu_sh("modprobe vgem 2>/dev/null");
	for (i = 0; i < 16; i++) {
		struct drm_version v = { .name = name,
					 .name_len = sizeof(name) - 1 };

		snprintf(path, sizeof(path), "/dev/dri/card%d", i);
		fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			continue;
		memset(name, 0, sizeof(name));
		if (!ioctl(fd, DRM_IOCTL_VERSION, &v) && !strcmp(name, "vgem"))
			return fd;
		close(fd);
	}
	return -1;
}

/*
 * Why the running kernel has no exporter @e (its device node is missing:
 * Debian's 6.1 builds neither udmabuf nor the dma-heaps), or NULL.
 * docs/portability.md.
 */
static inline const char *dbuf_exporter_missing(enum exporter e)
{
	if (e == EXP_UDMABUF && access("/dev/udmabuf", F_OK))
		return "this kernel has no udmabuf (/dev/udmabuf; CONFIG_UDMABUF off in Debian 6.1)";
	if (e == EXP_HEAP && access("/dev/dma_heap/system", F_OK))
		return "this kernel has no dma-heap system heap (/dev/dma_heap/system; CONFIG_DMABUF_HEAPS off in Debian 6.1)";
	return NULL;
}

static inline int dbuf_create(struct dbuf *d, enum exporter e, size_t size)
{
	int mfd = -1;

	d->fd = d->memfd = d->card = -1;
	d->size = size;
	d->view = NULL;
	if (e == EXP_UDMABUF) {
		struct udmabuf_create c = { .flags = UDMABUF_FLAGS_CLOEXEC,
					    .size = size };
		int u = open("/dev/udmabuf", O_RDWR | O_CLOEXEC);

		d->memfd = memfd_create("remu-dmabuf", MFD_ALLOW_SEALING);
		if (u < 0 || d->memfd < 0 || ftruncate(d->memfd, size) ||
		    fcntl(d->memfd, F_ADD_SEALS, F_SEAL_SHRINK)) {
			if (u >= 0)
				close(u);
			return -1;
		}
		c.memfd = d->memfd;
		d->fd = ioctl(u, UDMABUF_CREATE, &c);
		close(u);
		mfd = d->memfd;
	} else if (e == EXP_HEAP) {
		struct dma_heap_allocation_data a = {
			.len = size, .fd_flags = O_RDWR | O_CLOEXEC };
		int h = open("/dev/dma_heap/system", O_RDONLY | O_CLOEXEC);

		if (h < 0)
			return -1;
		if (!ioctl(h, DMA_HEAP_IOCTL_ALLOC, &a))
			d->fd = a.fd;
		close(h);
		mfd = d->fd;
	} else {
		struct drm_mode_create_dumb c = { .width = 1024, .bpp = 32,
						  .height = size / 4096 };
		struct drm_prime_handle p = { .flags = DRM_CLOEXEC | DRM_RDWR };
		struct drm_gem_close gc = {};

		d->card = vgem_open();
		if (d->card < 0 ||
		    ioctl(d->card, DRM_IOCTL_MODE_CREATE_DUMB, &c) ||
		    c.size < size)
			return -1;
		p.handle = c.handle;
		if (!ioctl(d->card, DRM_IOCTL_PRIME_HANDLE_TO_FD, &p))
			d->fd = p.fd;
		/* the dma-buf keeps the object alive */
		gc.handle = c.handle;
		ioctl(d->card, DRM_IOCTL_GEM_CLOSE, &gc);
		mfd = d->fd;
	}
	if (d->fd < 0)
		return -1;
	d->view = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED,
		       mfd, 0);
	if (d->view == MAP_FAILED) {
		d->view = NULL;
		return -1;
	}
	return 0;
}

static inline void dbuf_destroy(struct dbuf *d)
{
	if (d->view)
		munmap(d->view, d->size);
	if (d->fd >= 0)
		close(d->fd);
	if (d->memfd >= 0)
		close(d->memfd);
	if (d->card >= 0)
		close(d->card);
}

/* bracket CPU access to the view as the dma-buf API asks */
static inline void dbuf_sync(struct dbuf *d, int end)
{
	struct dma_buf_sync s = {
		.flags = DMA_BUF_SYNC_RW |
			 (end ? DMA_BUF_SYNC_END : DMA_BUF_SYNC_START) };

	ioctl(d->fd, DMA_BUF_IOCTL_SYNC, &s);
}

#endif /* REMU_DMABUF_EXP_LIB_H */
