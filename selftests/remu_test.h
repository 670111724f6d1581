/* SPDX-License-Identifier: GPL-2.0 */
/*
 * remu_test.h - helpers shared by the remu selftests: finding and opening
 * a device by name, reading remu's object counters from debugfs, and
 * running a shell command from a test; the verbs helpers are in
 * remu_verbs_lib.h, included from here.  Header-only so each test binary
 * stays a single .c file.
 */
#ifndef REMU_TEST_H
#define REMU_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <infiniband/verbs.h>

#define REMU_DEBUGFS_OBJECTS "/sys/kernel/debug/remu/objects"

/* Open the RDMA device called @name, or return NULL. */
static inline struct ibv_context *remu_open(const char *name)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int i, n;

	list = ibv_get_device_list(&n);
	if (!list)
		return NULL;
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	return ctx;
}

/* Is @name in the device list at all? */
static inline int remu_device_listed(const char *name)
{
	struct ibv_device **list;
	int i, n, found = 0;

	list = ibv_get_device_list(&n);
	if (!list)
		return 0;
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			found = 1;
	ibv_free_device_list(list);
	return found;
}

/* The live count of remu objects of @type ("dev", "pd"...), or -1. */
static inline int remu_obj_count(const char *type)
{
	char line[128], name[64];
	FILE *f = fopen(REMU_DEBUGFS_OBJECTS, "r");
	int n, ret = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%63s %d", name, &n) == 2 &&
		    !strcmp(name, type))
			ret = n;
	fclose(f);
	return ret;
}

/* Run @cmd with sh -c; return its exit status (or -1). */
static inline int remu_sh(const char *cmd)
{
	int st = system(cmd);

	if (st == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/* Is libremu mapped into this process (did our provider open the device)? */
static inline int remu_provider_loaded(void)
{
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");
	int found = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "libremu-rdmav34.so"))
			found = 1;
	fclose(f);
	return found;
}

#include "remu_verbs_lib.h"

/* REMU_TIMEOUT_SCALE: 4 on the debug kernel (scripts/check-debug), else 1 */
static inline int remu_timeout_scale(void)
{
	const char *env = getenv("REMU_TIMEOUT_SCALE");
	int scale = env ? atoi(env) : 1;

	return scale > 1 ? scale : 1;
}

#ifdef __KSELFTEST_HARNESS_H
/*
 * The harness gives every test 30 s.  REMU_TIMEOUT_SCALE=N multiplies
 * each test's limit; scripts/check-debug sets 4, since the debug kernel
 * (KASAN, lockdep, kmemleak) runs remu 5-20 times slower, more on a slow
 * CI host.  Runs after the harness's constructors registered the tests.
 */
static void __attribute__((constructor(KSELFTEST_PRIO_XFAIL + 1)))
remu_scale_timeouts(void)
{
	int scale = remu_timeout_scale();
	struct __fixture_metadata *f;
	struct __test_metadata *t;

	if (scale <= 1)
		return;
	for (f = __fixture_list; f; f = f->next)
		for (t = f->tests; t; t = t->next)
			t->timeout *= scale;
}
#endif

#endif /* REMU_TEST_H */
