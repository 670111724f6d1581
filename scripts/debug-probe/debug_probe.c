// SPDX-License-Identifier: GPL-2.0
/*
 * debug_probe: throwaway module for scripts/check-debug.  Loading it commits
 * one bug of each kind the debug kernel must report, so that the run proves
 * scripts/vm's log scan sees those reports:
 *   - an out-of-bounds read of a kmalloc'ed buffer          (KASAN)
 *   - a mutex taken inside a spinlock                        (DEBUG_ATOMIC_SLEEP)
 *   - two mutexes taken in both orders                       (lockdep)
 *   - a kmalloc'ed buffer nobody points to any more          (kmemleak)
 * Never load it anywhere but in the test VM.
 */
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>

static DEFINE_MUTEX(probe_a);
static DEFINE_MUTEX(probe_b);
static DEFINE_MUTEX(probe_c);
static DEFINE_SPINLOCK(probe_lock);

/* Keeps the compiler from proving the read out of bounds at build time. */
static size_t probe_len = 24;
module_param(probe_len, ulong, 0444);

static noinline void probe_oob_read(void)
{
	char *buf = kmalloc(probe_len, GFP_KERNEL);

	if (!buf)
		return;
	pr_info("debug_probe: out-of-bounds read %d\n",
		READ_ONCE(buf[probe_len + 8]));
	kfree(buf);
}

static noinline void probe_sleep_in_atomic(void)
{
	spin_lock(&probe_lock);
	mutex_lock(&probe_c);
	mutex_unlock(&probe_c);
	spin_unlock(&probe_lock);
}

static noinline void probe_lock_inversion(void)
{
	mutex_lock(&probe_a);
	mutex_lock(&probe_b);
	mutex_unlock(&probe_b);
	mutex_unlock(&probe_a);

	mutex_lock(&probe_b);
	mutex_lock(&probe_a);
	mutex_unlock(&probe_a);
	mutex_unlock(&probe_b);
}

/*
 * Many objects, not one: a stale copy of a pointer (on a cached kernel
 * stack, say) hides that object from kmemleak, and only the last few
 * can have such copies.
 */
static noinline void probe_leak(void)
{
	unsigned long *p;
	int i;

	for (i = 0; i < 32; i++) {
		p = kzalloc(200, GFP_KERNEL);
		if (p)
			WRITE_ONCE(*p, i);
	}
	pr_info("debug_probe: leaked 32 objects of 200 bytes\n");
}

/*
 * Lockdep first: any taint (each of the other reports adds one) turns lock
 * debugging off for good.
 */
static int __init debug_probe_init(void)
{
	probe_lock_inversion();
	probe_sleep_in_atomic();
	probe_oob_read();
	probe_leak();
	return 0;
}

static void __exit debug_probe_exit(void)
{
}

module_init(debug_probe_init);
module_exit(debug_probe_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("scripts/check-debug: injected KASAN, lockdep, atomic-sleep and kmemleak reports");
