// SPDX-License-Identifier: GPL-2.0
/*
 * remu_dmabuf_export.c - device memory exported as a dma-buf: the driver
 * method REMU_METHOD_DM_EXPORT_DMABUF of the DM object (what libremu's
 * ibv_dm_export_dmabuf_fd() and remudv_dm_export_dmabuf_fd() call) and
 * the dma-buf it creates.  Design and picture: docs/dma-buf.md.
 *
 * Why remu's own method and not the core's UVERBS_OBJECT_DMABUF (7.x):
 * that object builds the importer's table with dma_buf_phys_vec_to_sgt(),
 * which needs a p2pdma provider: the BAR of a PCI function registered
 * with the PCI P2P layer (pcim_p2pdma_provider()), and maps it with
 * DMA_ATTR_MMIO.  remu's device memory is ordinary RAM set aside by a
 * software device with no PCI function of its own, so no provider can
 * describe it; the method below does the same job with the generic DMA
 * API (dma_map_resource()) on every kernel, 6.1 to 7.x.
 *
 * The dma-buf behaves as the core's and VFIO's do:
 *  - attach refuses importers that do not take peer-to-peer addresses
 *    (-EOPNOTSUPP), and any importer once revoked (-ENODEV);
 *  - map hands the importer's device the DMA address of the allocation's
 *    pages (one entry: an allocation is physically contiguous) in a table
 *    with no struct page (device memory has none), and counts the
 *    mapping; unmap undoes both;
 *  - pin is refused where the dma-buf core leaves dynamic importers
 *    unpinned (7.x, or CONFIG_DMABUF_MOVE_NOTIFY): importers must take
 *    move_notify.  Where the core pins around every map by a dynamic
 *    importer (Debian's 6.1 and 6.12, REMU_DMABUF_PIN_ON_MAP), refusing
 *    would refuse every map, so pin is accepted there and counted; it
 *    does not stop a revoke;
 *  - revoke (remu_dmabuf_export_revoke(), from dealloc_dm: ibv_free_dm,
 *    process exit, device disassociation): under the reservation lock the
 *    buffer is marked revoked and every importer gets move_notify; later
 *    attaches and maps fail with -ENODEV.  There is no un-revoke: the DM
 *    is gone.
 *  - no CPU access: no vmap, no mmap (as the core's).
 *
 * Lifetime: the dma-buf holds the allocation's pages (remu_dm_export_*()
 * in remu_dm.c), the device's struct (get_device()) and, through
 * dma_buf_export(), this module, until its release, which comes after
 * every importer has detached and every fd is closed.  So an importer
 * that keeps a mapping past move_notify still reaches pages that belong
 * to nobody else, never freed memory; revoke does not wait for importers
 * to unmap.
 *
 * Locking: struct remu_dm_export's @revoked, @mapped and @pins are under
 * the dma-buf's reservation lock (the dma-buf core holds it around map,
 * unmap, pin and unpin; revoke takes it).  Its list entry is under the
 * DM's exp_lock, which is taken before the reservation lock.
 */
#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/file.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/uverbs_ioctl.h>
#define UVERBS_MODULE_NAME remu_ib
#include <rdma/uverbs_named_ioctl.h>

#include "remu.h"
#include "remu_trace.h"

REMU_IMPORT_NS(DMA_BUF);

/**
 * struct remu_dm_export - one dma-buf exported from a DM allocation
 * @dmabuf:	the dma-buf (its priv is this)
 * @rdev:	the device (its struct referenced: counters, trace events)
 * @dm:		the allocation (its pages held)
 * @node:	in the allocation's exports, until revoked or released
 * @phys:	physical address of the allocation
 * @size:	its bytes (whole pages)
 * @mmap_off:	the allocation's mmap offset (names it in the trace events)
 * @revoked:	the DM was freed: no attach, no map
 * @mapped:	importers' mappings now (map minus unmap)
 * @pins:	pins now (REMU_DMABUF_PIN_ON_MAP kernels only)
 */
struct remu_dm_export {
	struct dma_buf *dmabuf;
	struct remu_dev *rdev;
	struct remu_dm *dm;
	struct list_head node;
	phys_addr_t phys;
	size_t size;
	u64 mmap_off;
	bool revoked;
	unsigned int mapped;
	unsigned int pins;
};

static int remu_dmabuf_exp_attach(struct dma_buf *dmabuf,
				  struct dma_buf_attachment *attach)
{
	struct remu_dm_export *exp = dmabuf->priv;
	int err = 0;

	/* device memory has no struct page: peer-to-peer importers only */
	if (!attach->peer2peer)
		err = -EOPNOTSUPP;
	else if (READ_ONCE(exp->revoked))
		err = -ENODEV;
	trace_remu_dmabuf_exp_attach(&exp->rdev->ib_dev, dmabuf, exp->mmap_off,
				     attach->peer2peer, err);
	return err;
}

static int remu_dmabuf_exp_pin(struct dma_buf_attachment *attach)
{
	struct remu_dm_export *exp = attach->dmabuf->priv;

	dma_resv_assert_held(attach->dmabuf->resv);
	if (!REMU_DMABUF_PIN_ON_MAP)
		return -EOPNOTSUPP;
	if (exp->revoked)
		return -ENODEV;
	exp->pins++;
	return 0;
}

static void remu_dmabuf_exp_unpin(struct dma_buf_attachment *attach)
{
	struct remu_dm_export *exp = attach->dmabuf->priv;

	dma_resv_assert_held(attach->dmabuf->resv);
	exp->pins--;
}

/*
 * Can @dev address [phys, phys + size) at all?  Checked before the DMA
 * API is asked, which WARNs on a device without a mask or out of reach.
 * Conservative for a device behind an IOMMU (its mask limits IOVAs, not
 * physical addresses).
 */
static bool remu_dmabuf_exp_reachable(struct device *dev, phys_addr_t phys,
				      size_t size)
{
	u64 limit;

	if (!dev->dma_mask)
		return false;
	limit = min_not_zero(dma_get_mask(dev), dev->bus_dma_limit);
	return phys + size - 1 <= limit;
}

static struct sg_table *remu_dmabuf_exp_map(struct dma_buf_attachment *attach,
					    enum dma_data_direction dir)
{
	struct remu_dm_export *exp = attach->dmabuf->priv;
	struct sg_table *sgt;
	dma_addr_t addr = 0;
	int err;

	dma_resv_assert_held(attach->dmabuf->resv);
	if (exp->revoked) {
		err = -ENODEV;
		goto out;
	}
	if (!remu_dmabuf_exp_reachable(attach->dev, exp->phys, exp->size)) {
		err = -EOPNOTSUPP;
		goto out;
	}
	sgt = kzalloc(sizeof(*sgt), GFP_KERNEL);
	if (!sgt) {
		err = -ENOMEM;
		goto out;
	}
	/* one entry, DMA address only: no page, no CPU address */
	err = sg_alloc_table(sgt, 1, GFP_KERNEL);
	if (err)
		goto err_free;
	addr = dma_map_resource(attach->dev, exp->phys, exp->size, dir, 0);
	if (dma_mapping_error(attach->dev, addr)) {
		err = -EIO;
		goto err_table;
	}
	sg_dma_address(sgt->sgl) = addr;
	sg_dma_len(sgt->sgl) = exp->size;
	exp->mapped++;
	remu_count_add(exp->rdev, REMU_CNT_DMABUF_EXPORT_MAPS, 1);
	trace_remu_dmabuf_exp_map(&exp->rdev->ib_dev, attach->dmabuf,
				  exp->mmap_off, addr, 0);
	return sgt;

err_table:
	sg_free_table(sgt);
err_free:
	kfree(sgt);
out:
	trace_remu_dmabuf_exp_map(&exp->rdev->ib_dev, attach->dmabuf,
				  exp->mmap_off, 0, err);
	return ERR_PTR(err);
}

static void remu_dmabuf_exp_unmap(struct dma_buf_attachment *attach,
				  struct sg_table *sgt,
				  enum dma_data_direction dir)
{
	struct remu_dm_export *exp = attach->dmabuf->priv;
	dma_addr_t addr = sg_dma_address(sgt->sgl);

	dma_resv_assert_held(attach->dmabuf->resv);
	dma_unmap_resource(attach->dev, addr, exp->size, dir, 0);
	sg_free_table(sgt);
	kfree(sgt);
	exp->mapped--;
	remu_count_add(exp->rdev, REMU_CNT_DMABUF_EXPORT_MAPS, -1);
	trace_remu_dmabuf_exp_unmap(&exp->rdev->ib_dev, attach->dmabuf,
				    exp->mmap_off, addr, 0);
}

/* the last reference: every importer has detached, every fd is closed */
static void remu_dmabuf_exp_release(struct dma_buf *dmabuf)
{
	struct remu_dm_export *exp = dmabuf->priv;
	struct remu_dev *rdev = exp->rdev;

	trace_remu_dmabuf_exp_release(&rdev->ib_dev, dmabuf, exp->mmap_off,
				      exp->mapped, 0);
	if (exp->mapped || exp->pins)
		pr_warn("%s: exported dma-buf released with %u mapping(s), %u pin(s) left\n",
			dev_name(&rdev->ib_dev.dev), exp->mapped, exp->pins);
	remu_dm_export_drop(exp->dm, &exp->node);
	remu_count_add(rdev, REMU_CNT_DMABUF_EXPORTS, -1);
	kfree(exp);
	put_device(&rdev->ib_dev.dev);
}

static const struct dma_buf_ops remu_dmabuf_exp_ops = {
	.attach = remu_dmabuf_exp_attach,
	.pin = remu_dmabuf_exp_pin,
	.unpin = remu_dmabuf_exp_unpin,
	.map_dma_buf = remu_dmabuf_exp_map,
	.unmap_dma_buf = remu_dmabuf_exp_unmap,
	.release = remu_dmabuf_exp_release,
};

/**
 * remu_dmabuf_export_revoke - the DM of an export is being freed
 * @node: the export's entry, just taken off the DM's list
 *
 * Importers are told (move_notify) under the reservation lock and can
 * neither attach nor map from now on.  The pages stay held until the
 * dma-buf's release.
 * Context: remu_dealloc_dm(), the DM's exp_lock held; may sleep.
 */
void remu_dmabuf_export_revoke(struct list_head *node)
{
	struct remu_dm_export *exp = container_of(node, struct remu_dm_export,
						  node);
	struct dma_buf *dmabuf = exp->dmabuf;

	dma_resv_lock(dmabuf->resv, NULL);
	WRITE_ONCE(exp->revoked, true);
	dma_buf_move_notify(dmabuf);
	trace_remu_dmabuf_exp_revoke(&exp->rdev->ib_dev, dmabuf, exp->mmap_off,
				     exp->mapped, 0);
	dma_resv_unlock(dmabuf->resv);
	remu_count(exp->rdev, REMU_CNT_DMABUF_EXPORT_REVOKES);
}

/*
 * REMU_METHOD_DM_EXPORT_DMABUF: a new dma-buf over the whole allocation
 * of the DM named by its handle, installed as a new fd of the caller.
 * The uverbs object is locked for reading, so dealloc_dm cannot run
 * meanwhile.  Return: 0, or -ENOMEM, -EMFILE, -EFAULT (the fd number
 * could not be copied out; nothing is left behind).
 */
static int UVERBS_HANDLER(REMU_METHOD_DM_EXPORT_DMABUF)(
	struct uverbs_attr_bundle *attrs)
{
	struct ib_dm *ibdm = uverbs_attr_get_obj(attrs,
						 REMU_ATTR_EXPORT_DMABUF_DM_HANDLE);
	struct remu_dev *rdev = to_remu_dev(ibdm->device);
	DEFINE_DMA_BUF_EXPORT_INFO(info);
	struct remu_dm_export *exp;
	struct dma_buf *dmabuf;
	int fd, err;
	u32 ufd;

	exp = kzalloc(sizeof(*exp), GFP_KERNEL);
	if (!exp) {
		err = -ENOMEM;
		goto out;
	}
	INIT_LIST_HEAD(&exp->node);
	exp->rdev = rdev;
	get_device(&rdev->ib_dev.dev);	/* put at release */
	exp->dm = remu_dm_export_pages(ibdm, &exp->phys, &exp->size);
	exp->mmap_off = remu_dm_mmap_offset(exp->dm);
	remu_count_add(rdev, REMU_CNT_DMABUF_EXPORTS, 1);

	info.ops = &remu_dmabuf_exp_ops;
	info.size = exp->size;
	info.flags = O_RDWR | O_CLOEXEC;
	info.priv = exp;
	dmabuf = dma_buf_export(&info);
	if (IS_ERR(dmabuf)) {
		err = PTR_ERR(dmabuf);
		remu_dm_export_drop(exp->dm, &exp->node);
		remu_count_add(rdev, REMU_CNT_DMABUF_EXPORTS, -1);
		put_device(&rdev->ib_dev.dev);
		kfree(exp);
		goto out;
	}
	/* from here on dma_buf_put() undoes all (remu_dmabuf_exp_release) */
	exp->dmabuf = dmabuf;
	err = remu_dm_export_publish(exp->dm, &exp->node);
	if (err)
		goto err_put;
	fd = get_unused_fd_flags(O_CLOEXEC);
	if (fd < 0) {
		err = fd;
		goto err_put;	/* the release takes it off the list */
	}
	ufd = fd;
	err = uverbs_copy_to(attrs, REMU_ATTR_EXPORT_DMABUF_FD, &ufd,
			     sizeof(ufd));
	if (err) {
		put_unused_fd(fd);
		goto err_put;
	}
	/* nothing can fail after this: the fd is the caller's */
	fd_install(fd, dmabuf->file);
	trace_remu_dmabuf_export(&rdev->ib_dev, dmabuf, exp->mmap_off,
				 exp->size, fd);
	return 0;

err_put:
	trace_remu_dmabuf_export(&rdev->ib_dev, dmabuf, exp->mmap_off,
				 exp->size, err);
	dma_buf_put(dmabuf);
	return err;
out:
	trace_remu_dmabuf_export(&rdev->ib_dev, NULL, 0, 0, err);
	return err;
}

DECLARE_UVERBS_NAMED_METHOD(
	REMU_METHOD_DM_EXPORT_DMABUF,
	UVERBS_ATTR_IDR(REMU_ATTR_EXPORT_DMABUF_DM_HANDLE, UVERBS_OBJECT_DM,
			UVERBS_ACCESS_READ, UA_MANDATORY),
	UVERBS_ATTR_PTR_OUT(REMU_ATTR_EXPORT_DMABUF_FD,
			    UVERBS_ATTR_TYPE(u32), UA_MANDATORY));

ADD_UVERBS_METHODS(remu_dm_export_methods, UVERBS_OBJECT_DM,
		   &UVERBS_METHOD(REMU_METHOD_DM_EXPORT_DMABUF));

const struct uapi_definition remu_dmabuf_export_defs[] = {
	UAPI_DEF_CHAIN_OBJ_TREE(UVERBS_OBJECT_DM, &remu_dm_export_methods),
	{},
};
