// SPDX-License-Identifier: GPL-2.0
/*
 * remu_obj.c - object accounting.
 *
 * Owns one atomic counter per object type.  Creation and destruction paths
 * call remu_obj_get()/remu_obj_put(); the counts are shown in debugfs as
 * remu/objects and checked at module unload, where any non-zero count is
 * reported as a leak (the test harness fails on that line).  Debian's
 * kernel has no kmemleak, so this is how leaks of remu's own objects are
 * seen.
 *
 * Locking: none needed; counters are atomic_t.
 */
#include <linux/atomic.h>
#include <linux/debugfs.h>
#include <linux/seq_file.h>

#include "remu.h"

static atomic_t remu_obj_count[REMU_OBJ_TYPE_COUNT];
struct dentry *remu_debugfs_root;	/* remu/ in debugfs, for every file */

static const char * const remu_obj_name[REMU_OBJ_TYPE_COUNT] = {
	[REMU_OBJ_DEV] = "dev",
	[REMU_OBJ_UCONTEXT] = "ucontext",
	[REMU_OBJ_PD] = "pd",
	[REMU_OBJ_MR] = "mr",
	[REMU_OBJ_CQ] = "cq",
	[REMU_OBJ_QP] = "qp",
	[REMU_OBJ_SRQ] = "srq",
	[REMU_OBJ_AH] = "ah",
	[REMU_OBJ_RING] = "ring",
	[REMU_OBJ_DM] = "dm",
	[REMU_OBJ_MW] = "mw",
	[REMU_OBJ_MCAST_GRP] = "mcast_grp",
	[REMU_OBJ_MCAST_ATTACH] = "mcast_attach",
	[REMU_OBJ_MKEY] = "mkey",
	[REMU_OBJ_ZC] = "zc",
};

void remu_obj_get(enum remu_obj_type type)
{
	atomic_inc(&remu_obj_count[type]);
}

void remu_obj_put(enum remu_obj_type type)
{
	WARN_ON_ONCE(atomic_dec_return(&remu_obj_count[type]) < 0);
}

static int remu_objects_show(struct seq_file *s, void *unused)
{
	int i;

	for (i = 0; i < REMU_OBJ_TYPE_COUNT; i++)
		seq_printf(s, "%s %d\n", remu_obj_name[i],
			   atomic_read(&remu_obj_count[i]));
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(remu_objects);

/**
 * remu_obj_init - create the debugfs view of the counters
 *
 * Context: module init.
 * Return: 0; debugfs failures are not fatal (debugfs may be absent).
 */
int remu_obj_init(void)
{
	remu_debugfs_root = debugfs_create_dir(KBUILD_MODNAME, NULL);
	debugfs_create_file("objects", 0444, remu_debugfs_root, NULL,
			    &remu_objects_fops);
	return 0;
}

/**
 * remu_obj_exit - remove the debugfs view and report leaked objects
 *
 * Context: module exit, after every device is gone.
 * Return: true if every count is zero.
 */
bool remu_obj_exit(void)
{
	bool clean = true;
	int i, n;

	debugfs_remove_recursive(remu_debugfs_root);
	for (i = 0; i < REMU_OBJ_TYPE_COUNT; i++) {
		n = atomic_read(&remu_obj_count[i]);
		if (n) {
			pr_err("leaked %d %s object(s)\n", n, remu_obj_name[i]);
			clean = false;
		}
	}
	return clean;
}
