// SPDX-License-Identifier: GPL-2.0
/*
 * remu_getctx_leak - show an ib_core leak the uverbs fuzzer found: a
 * GET_CONTEXT ioctl that fails (here: a second one on a uverbs file that
 * has its context already, EINVAL) leaves a reference on the calling
 * task, so the task_struct, its signal struct and credentials are never
 * freed after the process exits.  Any RDMA device and any local user can
 * do it (docs/security.md, "An ib_core leak the fuzzer found").
 *
 * ib_alloc_ucontext() attaches the current task to the new context's
 * restrack entry (a task reference); UVERBS_METHOD_GET_CONTEXT frees the
 * context with kfree() when ib_init_ucontext() fails, without
 * rdma_restrack_put(), which the write() path's error path does call.
 *
 * Usage: remu_getctx_leak [-d DEV] [-n PROCS] [-c]
 *   Forks PROCS (default 100) processes; each opens DEV's uverbs file and
 *   asks for a context by ioctl twice (the second fails), then exits.
 *   With -c (control) each asks once.  Prints how many task_struct slab
 *   objects are in use before and after (root: /proc/slabinfo); on a
 *   kernel with the leak the count grows by about PROCS, on one without
 *   it does not.  Exit status 0 whatever the count: it shows, it does not
 *   judge.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/rdma_user_ioctl.h>

/* a GET_CONTEXT ioctl with no attribute (all of them are optional) */
static int get_context(int fd)
{
	struct ib_uverbs_ioctl_hdr h = {
		.length = sizeof(h),
		.object_id = UVERBS_OBJECT_DEVICE,
		.method_id = UVERBS_METHOD_GET_CONTEXT,
		.driver_id = RDMA_DRIVER_UNKNOWN,
	};

	return ioctl(fd, RDMA_VERBS_IOCTL, &h) ? -errno : 0;
}

/* active task_struct objects, or -1 */
static long tasks_in_use(void)
{
	char line[512];
	long n = -1;
	FILE *f = fopen("/proc/slabinfo", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "task_struct ", 12)) {
			n = strtol(line + 12, NULL, 10);
			break;
		}
	fclose(f);
	return n;
}

/* once all children are gone, freed tasks wait for an RCU grace period */
static long settled_tasks(void)
{
	long n = tasks_in_use(), prev;
	int i;

	for (i = 0; i < 20; i++) {
		usleep(100000);
		prev = n;
		n = tasks_in_use();
		if (n == prev && i >= 5)
			break;
	}
	return n;
}

int main(int argc, char **argv)
{
	const char *want = NULL;
	struct ibv_device **list;
	char path[300] = "";
	int nprocs = 100, control = 0, opt, i, first = 0, second = 0;
	int n, fails = 0;
	long before, after;

	while ((opt = getopt(argc, argv, "d:n:c")) != -1) {
		switch (opt) {
		case 'd':
			want = optarg;
			break;
		case 'n':
			nprocs = atoi(optarg);
			break;
		case 'c':
			control = 1;
			break;
		default:
			fprintf(stderr, "usage: %s [-d DEV] [-n PROCS] [-c]\n",
				argv[0]);
			return 2;
		}
	}
	list = ibv_get_device_list(&n);
	for (i = 0; list && i < n; i++)
		if (!want || !strcmp(ibv_get_device_name(list[i]), want)) {
			snprintf(path, sizeof(path), "/dev/infiniband/%s",
				 list[i]->dev_name);
			break;
		}
	if (!path[0]) {
		fprintf(stderr, "remu_getctx_leak: no device %s\n",
			want ? want : "");
		return 1;
	}
	ibv_free_device_list(list);

	before = settled_tasks();
	for (i = 0; i < nprocs; i++) {
		pid_t pid = fork();
		int st, fd, r1, r2 = 0;

		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (!pid) {
			fd = open(path, O_RDWR | O_CLOEXEC);
			if (fd < 0)
				_exit(100);
			r1 = get_context(fd);
			if (!control)
				r2 = get_context(fd);
			/* exit code: 1 when the first failed, 2 the second */
			_exit((r1 ? 1 : 0) | (r2 == -EINVAL ? 2 : 0));
		}
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
		    WEXITSTATUS(st) == 100 || (WEXITSTATUS(st) & 1)) {
			fails++;
			continue;
		}
		first++;
		if (WEXITSTATUS(st) & 2)
			second++;
	}
	after = settled_tasks();
	printf("remu_getctx_leak: %s, %d processes: %d contexts made, %d second GET_CONTEXT failed with EINVAL, %d failed otherwise\n",
	       path, nprocs, first, second, fails);
	if (before < 0 || after < 0)
		printf("remu_getctx_leak: /proc/slabinfo not readable (root?)\n");
	else
		printf("remu_getctx_leak: task_struct objects in use: %ld before, %ld after (%+ld)\n",
		       before, after, after - before);
	return 0;
}
