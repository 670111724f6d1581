// SPDX-License-Identifier: GPL-2.0
/*
 * remu_test_mr.c - test module for remu's MR access layer.
 *
 * The data path that will call the access layer does not exist yet, so this
 * module calls it on behalf of selftests/remu_mr_test: a test registers
 * memory with ibv_reg_mr, hands the key and iova to this module through
 * /dev/remu_test_mr, and the module reads, writes, does atomics and walks
 * SGE lists through remu's exported functions (namespace REMU_TEST) exactly
 * as the engines will.  REMU_TMR_KERNEL runs an in-kernel scenario for what
 * only kernel consumers can do: DMA MRs, fast registration, invalidation,
 * and deregistration waiting for an access in flight.  REMU_TMR_ULP runs
 * one of the kernel consumer scenarios of remu_test_ulp.c: REG_MR,
 * LOCAL_INV and SEND_WITH_INV over a kernel RC QP pair.
 *
 * Loaded and unloaded by selftests/run_tests.sh around remu_mr_test only;
 * never part of a normal remu installation.
 *
 * Locking: each open file has its own device reference, set once under
 * its mutex; the access layer does its own locking.
 */
#include <linux/delay.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/scatterlist.h>
#include <linux/skbuff.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/workqueue.h>

#include "../../drivers/remu/remu.h"
#include "remu_test_mr.h"

REMU_IMPORT_NS(REMU_TEST);

struct tmr_file {
	struct mutex lock;
	struct ib_device *ibdev;	/* reference from ib_device_get_by_name */
	struct remu_dev *rdev;
};

static int tmr_open(struct inode *inode, struct file *file)
{
	struct tmr_file *f = kzalloc(sizeof(*f), GFP_KERNEL);

	if (!f)
		return -ENOMEM;
	mutex_init(&f->lock);
	file->private_data = f;
	return 0;
}

static int tmr_release(struct inode *inode, struct file *file)
{
	struct tmr_file *f = file->private_data;

	if (f->ibdev)
		ib_device_put(f->ibdev);
	mutex_destroy(&f->lock);
	kfree(f);
	return 0;
}

static int tmr_set_dev(struct tmr_file *f, void __user *arg)
{
	struct remu_tmr_dev d;
	struct ib_device *ibdev;
	int err = 0;

	if (copy_from_user(&d, arg, sizeof(d)))
		return -EFAULT;
	d.name[sizeof(d.name) - 1] = 0;
	ibdev = ib_device_get_by_name(d.name, RDMA_DRIVER_UNKNOWN);
	if (!ibdev)
		return -ENODEV;
	mutex_lock(&f->lock);
	if (f->ibdev) {
		err = -EBUSY;
	} else if (!remu_dev_of(ibdev)) {
		err = -ENODEV;
	} else {
		f->ibdev = ibdev;
		f->rdev = remu_dev_of(ibdev);
	}
	mutex_unlock(&f->lock);
	if (err)
		ib_device_put(ibdev);
	return err;
}

static struct remu_dev *tmr_rdev(struct tmr_file *f)
{
	struct remu_dev *rdev;

	mutex_lock(&f->lock);
	rdev = f->rdev;
	mutex_unlock(&f->lock);
	return rdev;
}

/*
 * The PD that pd_key selects: that of the MR named by pd_key, or @own
 * when pd_key is 0.  Only compared as a pointer, never dereferenced.
 */
static int tmr_pd(struct remu_dev *rdev, u32 pd_key, struct remu_pd *own,
		  struct remu_pd **pd)
{
	struct remu_mr *other;

	if (!pd_key) {
		*pd = own;
		return 0;
	}
	other = remu_mr_lookup(rdev, pd_key, REMU_LKEY);
	if (!other)
		return -ENOENT;
	*pd = other->pd;
	remu_mr_put(other);
	return 0;
}

/* An skb of @len bytes: 61 in the linear part, the rest in page frags. */
static struct sk_buff *tmr_alloc_skb(u64 len)
{
	unsigned int lin = min_t(u64, len, 61);
	struct sk_buff *skb;
	u64 rest = len - lin;
	int i = 0;

	skb = alloc_skb(lin, GFP_KERNEL);
	if (!skb)
		return NULL;
	skb_put(skb, lin);
	while (rest) {
		unsigned int off = i ? 0 : 3, n;
		struct page *page;

		if (i == MAX_SKB_FRAGS)
			goto err;
		page = alloc_page(GFP_KERNEL);
		if (!page)
			goto err;
		n = min_t(u64, rest, PAGE_SIZE - off);
		skb_fill_page_desc(skb, i, page, off, n);
		skb->len += n;
		skb->data_len += n;
		skb->truesize += PAGE_SIZE;
		rest -= n;
		i++;
	}
	return skb;
err:
	kfree_skb(skb);
	return NULL;
}

static int tmr_copy_skb(struct remu_mr *mr, struct remu_tmr_copy *c, u8 *buf)
{
	struct sk_buff *skb = tmr_alloc_skb(c->len);
	int err;

	if (!skb)
		return -E2BIG;
	if (c->dir == REMU_TMR_TO_MR) {
		err = skb_store_bits(skb, 0, buf, c->len);
		if (!err)
			err = remu_mr_copy_skb(mr, c->iova, skb, 0, c->len,
					       REMU_TO_MR);
	} else {
		err = remu_mr_copy_skb(mr, c->iova, skb, 0, c->len,
				       REMU_FROM_MR);
		if (!err)
			err = skb_copy_bits(skb, 0, buf, c->len);
	}
	kfree_skb(skb);
	return err;
}

static int tmr_copy(struct tmr_file *f, void __user *arg)
{
	struct remu_dev *rdev = tmr_rdev(f);
	struct remu_tmr_copy c;
	void __user *ubuf;
	struct remu_pd *pd;
	struct remu_mr *mr;
	u8 *buf = NULL;
	int err;

	if (!rdev)
		return -ENODEV;
	if (copy_from_user(&c, arg, sizeof(c)))
		return -EFAULT;
	if (c.len > REMU_TMR_MAX_LEN || c.dir > REMU_TMR_FROM_MR)
		return -EINVAL;
	ubuf = u64_to_user_ptr(c.buf);
	mr = remu_mr_lookup(rdev, c.key,
			    c.flags & REMU_TMR_RKEY ? REMU_RKEY : REMU_LKEY);
	if (!mr)
		return -ENOENT;
	err = tmr_pd(rdev, c.pd_key, mr->pd, &pd);
	if (!err && !(c.flags & REMU_TMR_NO_CHECK))
		err = remu_mr_check(mr, pd, c.iova, c.len, c.access);
	if (err)
		goto out;
	buf = kvmalloc(max_t(u64, c.len, 1), GFP_KERNEL);
	if (!buf) {
		err = -ENOMEM;
		goto out;
	}
	if (c.dir == REMU_TMR_TO_MR && copy_from_user(buf, ubuf, c.len)) {
		err = -EFAULT;
		goto out;
	}
	if (c.flags & REMU_TMR_SKB)
		err = tmr_copy_skb(mr, &c, buf);
	else
		err = remu_mr_copy(mr, c.iova, buf, c.len, c.dir);
	if (!err && c.dir == REMU_TMR_FROM_MR && copy_to_user(ubuf, buf, c.len))
		err = -EFAULT;
out:
	kvfree(buf);
	remu_mr_put(mr);
	return err;
}

static int tmr_atomic(struct tmr_file *f, void __user *arg)
{
	struct remu_dev *rdev = tmr_rdev(f);
	struct remu_tmr_atomic a;
	struct remu_pd *pd;
	struct remu_mr *mr;
	u64 orig = 0;
	int err;

	if (!rdev)
		return -ENODEV;
	if (copy_from_user(&a, arg, sizeof(a)))
		return -EFAULT;
	if (a.op > REMU_ATOMIC_FETCH_ADD)
		return -EINVAL;
	mr = remu_mr_lookup(rdev, a.key, REMU_RKEY);
	if (!mr)
		return -ENOENT;
	err = tmr_pd(rdev, a.pd_key, mr->pd, &pd);
	if (!err)
		err = remu_mr_check(mr, pd, a.iova, sizeof(u64), a.access);
	if (!err)
		err = remu_mr_atomic(mr, a.iova, a.op, a.a, a.b, &orig);
	remu_mr_put(mr);
	if (err)
		return err;
	a.orig = orig;
	return copy_to_user(arg, &a, sizeof(a)) ? -EFAULT : 0;
}

static int tmr_sge_copy(struct tmr_file *f, void __user *arg)
{
	struct remu_sge sges[REMU_TMR_MAX_SGE];
	struct remu_dev *rdev = tmr_rdev(f);
	struct remu_pd *pd = NULL;
	struct remu_tmr_sges s;
	void __user *ubuf;
	u8 *buf;
	int err, i;

	if (!rdev)
		return -ENODEV;
	if (copy_from_user(&s, arg, sizeof(s)))
		return -EFAULT;
	if (s.n > REMU_TMR_MAX_SGE || s.len > REMU_TMR_MAX_LEN ||
	    s.dir > REMU_TMR_FROM_MR)
		return -EINVAL;
	for (i = 0; i < s.n; i++) {
		sges[i].addr = s.sge[i].addr;
		sges[i].length = s.sge[i].length;
		sges[i].lkey = s.sge[i].lkey;
	}
	if (s.pd_key) {
		err = tmr_pd(rdev, s.pd_key, NULL, &pd);
		if (err)
			return err;
	}
	ubuf = u64_to_user_ptr(s.buf);
	buf = kvmalloc(max_t(u64, s.len, 1), GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	err = 0;
	if (s.dir == REMU_TMR_TO_MR && copy_from_user(buf, ubuf, s.len))
		err = -EFAULT;
	if (!err)
		err = remu_sge_copy(&(struct remu_sgl){
				.rdev = rdev, .pd = pd, .sges = sges,
				.num = s.n, .access = s.access,
			}, s.offset, buf, s.len, s.dir);
	if (!err && s.dir == REMU_TMR_FROM_MR && copy_to_user(ubuf, buf, s.len))
		err = -EFAULT;
	kvfree(buf);
	return err;
}

/* ---- in-kernel scenario ---- */

struct tmr_holder {
	struct delayed_work dw;
	struct remu_mr *mr;
	bool put_done;
};

static void tmr_holder_put(struct work_struct *w)
{
	struct tmr_holder *h = container_of(to_delayed_work(w),
					    struct tmr_holder, dw);

	WRITE_ONCE(h->put_done, true);
	remu_mr_put(h->mr);
}

static void tmr_fill(u8 *p, size_t len, u8 seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (u8)(i * 7 + seed + (i >> 9));
}

#define TMR_STEP(cond)				\
	do {					\
		step++;				\
		if (!(cond))			\
			goto fail;		\
	} while (0)

#define TMR_FR_PAGES	4

static int tmr_kernel(struct tmr_file *f, void __user *arg)
{
	struct page *pages[TMR_FR_PAGES] = {};
	struct scatterlist sg[TMR_FR_PAGES];
	struct remu_dev *rdev = tmr_rdev(f);
	struct ib_pd *pd = NULL, *pd2 = NULL;
	struct remu_tmr_kernel r = {};
	struct ib_mr *mr = NULL, *big;
	size_t len = 0, tlen = 4 * PAGE_SIZE;
	u8 *kbuf = NULL, *tmp = NULL, *p;
	struct remu_mr *rmr;
	struct tmr_holder h;
	u32 key, key2, oldkey;
	struct remu_sge sge;
	ktime_t t0;
	int step = 0, err = 0, i;

	if (!rdev)
		return -ENODEV;

	/* a kernel PD: the core gets its local_dma_lkey from get_dma_mr */
	pd = ib_alloc_pd(f->ibdev, 0);
	if (IS_ERR(pd)) {
		err = PTR_ERR(pd);
		pd = NULL;
	}
	TMR_STEP(pd);
	kbuf = kmalloc(tlen, GFP_KERNEL);
	tmp = kmalloc(tlen, GFP_KERNEL);
	TMR_STEP(kbuf && tmp);

	/* scatter into kernel memory through the DMA MR (unaligned) */
	tmr_fill(tmp, tlen, 1);
	sge.addr = (u64)(uintptr_t)kbuf + 5;
	sge.length = 2 * PAGE_SIZE + 100;
	sge.lkey = pd->local_dma_lkey;
	err = remu_sge_copy(&(struct remu_sgl){
			.rdev = rdev, .pd = to_remu_pd(pd), .sges = &sge,
			.num = 1, .access = IB_ACCESS_LOCAL_WRITE,
		}, 0, tmp, sge.length, REMU_TO_MR);
	TMR_STEP(!err && !memcmp(kbuf + 5, tmp, sge.length));

	/* gather back from an offset into the SGE */
	memset(tmp, 0, tlen);
	err = remu_sge_copy(&(struct remu_sgl){
			.rdev = rdev, .pd = to_remu_pd(pd), .sges = &sge,
			.num = 1,
		}, 7, tmp, 1000, REMU_FROM_MR);
	TMR_STEP(!err && !memcmp(tmp, kbuf + 5 + 7, 1000));

	/* the DMA MR grants no remote rights */
	rmr = remu_mr_lookup(rdev, pd->local_dma_lkey, REMU_RKEY);
	TMR_STEP(rmr);
	err = remu_mr_check(rmr, to_remu_pd(pd), sge.addr, 8,
			    IB_ACCESS_REMOTE_WRITE);
	remu_mr_put(rmr);
	TMR_STEP(err == -EACCES);

	/* alloc_mr; its key grants nothing before REG_MR */
	mr = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, 8);
	if (IS_ERR(mr)) {
		err = PTR_ERR(mr);
		mr = NULL;
	}
	TMR_STEP(mr);
	TMR_STEP(!remu_mr_lookup(rdev, mr->rkey, REMU_RKEY));

	/* more pages than the device offers is refused */
	big = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, REMU_MAX_FAST_REG_PAGES + 1);
	if (!IS_ERR(big))
		ib_dereg_mr(big);
	TMR_STEP(IS_ERR(big) && PTR_ERR(big) == -EINVAL);

	/* map four scattered pages: the tail of one, two whole, a head */
	for (i = 0; i < TMR_FR_PAGES; i++) {
		pages[i] = alloc_page(GFP_KERNEL);
		TMR_STEP(pages[i]);
	}
	sg_init_table(sg, TMR_FR_PAGES);
	sg_set_page(&sg[0], pages[0], PAGE_SIZE - 100, 100);
	sg_set_page(&sg[1], pages[1], PAGE_SIZE, 0);
	sg_set_page(&sg[2], pages[2], PAGE_SIZE, 0);
	sg_set_page(&sg[3], pages[3], 200, 0);
	len = (PAGE_SIZE - 100) + 2 * PAGE_SIZE + 200;
	/* as a ULP does; remu uses virtual DMA, so nothing to unmap */
	TMR_STEP(ib_dma_map_sg(f->ibdev, sg, TMR_FR_PAGES,
			       DMA_BIDIRECTIONAL) == TMR_FR_PAGES);
	err = ib_map_mr_sg(mr, sg, TMR_FR_PAGES, NULL, PAGE_SIZE);
	TMR_STEP(err == TMR_FR_PAGES && mr->length == len);

	/* REG_MR with a new tag: the old key misses, the new one hits */
	oldkey = mr->rkey;
	ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey) & 0xff);
	key = mr->rkey;
	err = remu_mr_fast_reg(to_remu_mr(mr), key, IB_ACCESS_LOCAL_WRITE |
			       IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ,
			       mr->iova, mr->length);
	TMR_STEP(!err && key != oldkey);
	TMR_STEP(!remu_mr_lookup(rdev, oldkey, REMU_RKEY));
	rmr = remu_mr_lookup(rdev, key, REMU_RKEY);
	TMR_STEP(rmr);

	/* write all of it, then look at the pages themselves */
	tmr_fill(tmp, len, 3);
	err = remu_mr_check(rmr, to_remu_pd(pd), mr->iova, len,
			    IB_ACCESS_REMOTE_WRITE);
	if (!err)
		err = remu_mr_copy(rmr, mr->iova, tmp, len, REMU_TO_MR);
	p = tmp;
	TMR_STEP(!err &&
		 !memcmp(page_address(pages[0]) + 100, p, PAGE_SIZE - 100) &&
		 !memcmp(page_address(pages[1]), p + PAGE_SIZE - 100,
			 PAGE_SIZE) &&
		 !memcmp(page_address(pages[2]), p + 2 * PAGE_SIZE - 100,
			 PAGE_SIZE) &&
		 !memcmp(page_address(pages[3]), p + 3 * PAGE_SIZE - 100,
			 200));
	/* bounds, rights */
	TMR_STEP(remu_mr_check(rmr, to_remu_pd(pd), mr->iova + len - 1, 2,
			       0) == -ERANGE);
	TMR_STEP(remu_mr_check(rmr, to_remu_pd(pd), mr->iova, 8,
			       IB_ACCESS_REMOTE_ATOMIC) == -EACCES);
	remu_mr_put(rmr);

	/* REG_MR on a valid MR, or with another MR's index, fails */
	TMR_STEP(remu_mr_fast_reg(to_remu_mr(mr), key, IB_ACCESS_LOCAL_WRITE,
				  mr->iova, 8) == -EINVAL);

	/* invalidation errors: other PD, a DMA MR, a wrong tag */
	pd2 = ib_alloc_pd(f->ibdev, 0);
	if (IS_ERR(pd2)) {
		err = PTR_ERR(pd2);
		pd2 = NULL;
	}
	TMR_STEP(pd2);
	TMR_STEP(remu_mr_invalidate(rdev, to_remu_pd(pd2), key) == -EPERM);
	TMR_STEP(remu_mr_invalidate(rdev, to_remu_pd(pd),
				    pd->local_dma_lkey) == -EACCES);
	TMR_STEP(remu_mr_invalidate(rdev, to_remu_pd(pd), key ^ 1) == -EINVAL);
	/* invalidate; the key then misses; again is fine */
	TMR_STEP(!remu_mr_invalidate(rdev, to_remu_pd(pd), key));
	TMR_STEP(!remu_mr_lookup(rdev, key, REMU_RKEY));
	TMR_STEP(!remu_mr_invalidate(rdev, to_remu_pd(pd), key));
	TMR_STEP(remu_mr_fast_reg(to_remu_mr(mr), key + 0x100, 0, mr->iova,
				  8) == -EINVAL);

	/* re-register read-only at another iova (as zero-based ULPs do) */
	ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey) & 0xff);
	key2 = mr->rkey;
	err = remu_mr_fast_reg(to_remu_mr(mr), key2, 0, 0x10000, len);
	TMR_STEP(!err && key2 != key);
	rmr = remu_mr_lookup(rdev, key2, REMU_RKEY);
	TMR_STEP(rmr);
	memset(kbuf, 0, tlen);
	err = remu_mr_check(rmr, to_remu_pd(pd), 0x10000 + 50, 5000, 0);
	if (!err)
		err = remu_mr_copy(rmr, 0x10000 + 50, kbuf, 5000,
				   REMU_FROM_MR);
	TMR_STEP(!err && !memcmp(kbuf, tmp + 50, 5000));
	TMR_STEP(remu_mr_check(rmr, to_remu_pd(pd), 0x10000, 1,
			       IB_ACCESS_LOCAL_WRITE) == -EACCES);
	TMR_STEP(remu_mr_check(rmr, to_remu_pd(pd), 0xffff, 1, 0) == -ERANGE);

	/* dereg waits until the access in flight (rmr's ref) is done */
	INIT_DELAYED_WORK_ONSTACK(&h.dw, tmr_holder_put);
	h.mr = rmr;
	h.put_done = false;
	schedule_delayed_work(&h.dw, msecs_to_jiffies(300));
	t0 = ktime_get();
	err = ib_dereg_mr(mr);
	mr = NULL;
	flush_delayed_work(&h.dw);
	destroy_delayed_work_on_stack(&h.dw);
	TMR_STEP(!err && READ_ONCE(h.put_done) &&
		 ktime_ms_delta(ktime_get(), t0) >= 250);
	TMR_STEP(!remu_mr_lookup(rdev, key2, REMU_RKEY));
	step = 0;
	err = 0;
fail:
	r.step = step;
	r.err = err;
	if (mr)
		ib_dereg_mr(mr);
	for (i = 0; i < TMR_FR_PAGES; i++)
		if (pages[i])
			__free_page(pages[i]);
	kfree(tmp);
	kfree(kbuf);
	if (pd2)
		ib_dealloc_pd(pd2);
	if (pd)
		ib_dealloc_pd(pd);
	return copy_to_user(arg, &r, sizeof(r)) ? -EFAULT : 0;
}

/* a kernel consumer scenario (remu_test_ulp.c) */
static int tmr_ulp(struct tmr_file *f, void __user *arg)
{
	struct remu_dev *rdev = tmr_rdev(f);
	struct remu_tmr_ulp r;

	if (!rdev)
		return -ENODEV;
	if (copy_from_user(&r, arg, sizeof(r)))
		return -EFAULT;
	if (!r.scenario || r.scenario > REMU_TMR_ULP_MAX)
		return -EINVAL;
	tmr_ulp_run(f->ibdev, rdev, &r);
	return copy_to_user(arg, &r, sizeof(r)) ? -EFAULT : 0;
}

static long tmr_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct tmr_file *f = file->private_data;
	void __user *uarg = (void __user *)arg;

	switch (cmd) {
	case REMU_TMR_SET_DEV:
		return tmr_set_dev(f, uarg);
	case REMU_TMR_COPY:
		return tmr_copy(f, uarg);
	case REMU_TMR_ATOMIC:
		return tmr_atomic(f, uarg);
	case REMU_TMR_SGE_COPY:
		return tmr_sge_copy(f, uarg);
	case REMU_TMR_KERNEL:
		return tmr_kernel(f, uarg);
	case REMU_TMR_ULP:
		return tmr_ulp(f, uarg);
	}
	return -ENOTTY;
}

static const struct file_operations tmr_fops = {
	.owner = THIS_MODULE,
	.open = tmr_open,
	.release = tmr_release,
	.unlocked_ioctl = tmr_ioctl,
};

static struct miscdevice tmr_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = REMU_TMR_DEVNAME,
	.fops = &tmr_fops,
	.mode = 0600,
};

module_misc_device(tmr_misc);

MODULE_AUTHOR("The remu developers");
MODULE_DESCRIPTION("remu selftest: drives the MR access layer from userspace");
MODULE_LICENSE("GPL");
