/* SPDX-License-Identifier: GPL-2.0 */
/*
 * remu_lib.h - helpers shared by the remu selftests: finding and opening
 * a device by name, reading remu's object counters from debugfs,
 * running a shell command from a test, and counting a child's system
 * calls with ptrace (the fast-path tests); the verbs helpers are in
 * remu_verbs_lib.h, included from here.  Header-only so each test binary
 * stays a single .c file.
 */
#ifndef REMU_LIB_H
#define REMU_LIB_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
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

/*
 * remu_obj_counts_back - wait up to @secs seconds for the live counts of
 * the @n object types @types to be back at @base (read earlier with
 * remu_obj_count()).  Return: -1 when they all are, otherwise the index
 * of the first type that is not.
 */
static inline int remu_obj_counts_back(const char *const *types,
				       unsigned int n, const int *base,
				       unsigned int secs)
{
	unsigned int i, tries;

	for (tries = 0; tries < secs * 20; tries++) {
		for (i = 0; i < n; i++)
			if (remu_obj_count(types[i]) != base[i])
				break;
		if (i == n)
			return -1;
		usleep(50000);
	}
	return i;
}

/*
 * The fuzzers' randomness: xorshift64*, one state per thread, seeded with
 * remu_rnd_seed() (a thread that never seeds it draws zeros)
 */
static __thread uint64_t remu_rnd_state;

static inline void remu_rnd_seed(uint64_t seed)
{
	remu_rnd_state = seed | 1;
}

static inline uint64_t remu_rnd(void)
{
	remu_rnd_state ^= remu_rnd_state >> 12;
	remu_rnd_state ^= remu_rnd_state << 25;
	remu_rnd_state ^= remu_rnd_state >> 27;
	return remu_rnd_state * 0x2545f4914f6cdd1dull;
}

/* a number below @n (0 for 0) */
static inline uint32_t remu_rnd_n(uint32_t n)
{
	return n ? remu_rnd() % n : 0;
}

/* true @pct times in 100 */
static inline bool remu_chance(unsigned int pct)
{
	return remu_rnd_n(100) < pct;
}

/* the number in environment variable @name (0x... allowed), or @def */
static inline long remu_env_long(const char *name, long def)
{
	const char *v = getenv(name);

	return v && *v ? strtol(v, NULL, 0) : def;
}

/*
 * remu's module parameter @name (/sys/module/remu/parameters/), or -1;
 * with @set >= 0, first write @set there (the value before is returned).
 */
static inline long remu_param(const char *name, long set)
{
	char path[128];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/module/remu/parameters/%s", name);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%ld", &v) != 1)
		v = -1;
	fclose(f);
	if (set >= 0) {
		f = fopen(path, "w");
		if (!f)
			return -1;
		fprintf(f, "%ld\n", set);
		if (fclose(f))
			return -1;
	}
	return v;
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

/*
 * System calls counted with ptrace: remu_count_syscalls() runs @child in
 * a traced child process, which brackets each measured window with two
 * remu_mark() calls (getppid(), not counted); every other system call in
 * window i is counted in @calls[i], the write()s among them (libremu's
 * doorbell, the verbs commands) in @writes[i] too.  Both arrays have
 * @max entries, zeroed by the caller.  Return: the number of windows, or
 * -1 when the tracing failed, the child did not exit with status 0 (its
 * wait status in *@status) or opened more than @max windows.
 */
static inline void remu_mark(void)
{
	syscall(SYS_getppid);
}

static inline int remu_count_syscalls(int (*child)(void), int max,
				      long *calls, long *writes, int *status)
{
	int in_sys = 0, win = -1, nwin = 0;
	struct user_regs_struct regs;
	pid_t pid;

	*status = -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (!pid) {
		if (ptrace(PTRACE_TRACEME, 0, NULL, NULL))
			_exit(100);
		raise(SIGSTOP);
		_exit(child());
	}
	if (waitpid(pid, status, 0) != pid || !WIFSTOPPED(*status) ||
	    ptrace(PTRACE_SETOPTIONS, pid, NULL,
		   (void *)(PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL)))
		goto kill;
	for (;;) {
		if (ptrace(PTRACE_SYSCALL, pid, NULL, NULL) ||
		    waitpid(pid, status, 0) != pid)
			goto kill;
		if (WIFEXITED(*status) || WIFSIGNALED(*status))
			break;
		if (!WIFSTOPPED(*status) || WSTOPSIG(*status) != (SIGTRAP | 0x80))
			continue;
		in_sys = !in_sys;
		if (!in_sys)	/* syscall exit */
			continue;
		if (ptrace(PTRACE_GETREGS, pid, NULL, &regs))
			goto kill;
		if (regs.orig_rax == SYS_getppid) {
			if (win >= 0) {
				win = -1;
			} else {
				if (nwin == max)
					goto kill;
				win = nwin++;
			}
			continue;
		}
		if (win >= 0) {
			calls[win]++;
			writes[win] += regs.orig_rax == SYS_write;
		}
	}
	if (!WIFEXITED(*status) || WEXITSTATUS(*status))
		return -1;
	return nwin;
kill:
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
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

#endif /* REMU_LIB_H */
