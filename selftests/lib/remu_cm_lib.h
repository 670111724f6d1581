/* SPDX-License-Identifier: GPL-2.0 */
/*
 * remu_cm_lib.h - RDMA CM connection cycles through librdmacm's synchronous
 * calls, shared by remu_storm_test (cm_cycles) and tools/remu_scale_bench
 * (the connection rate of scripts/bench --scale).
 *
 * remu_cm_cycles() forks a server and a client process (librdmacm keeps
 * its contexts open, so neither end lives in the caller).  The server,
 * in a network namespace of its own if asked, listens on an address and
 * takes @n connections one after the other: rdma_get_request (which makes
 * its QP), a receive posted, rdma_accept, "cycle N" received and checked,
 * "reply N" sent back, disconnect, everything destroyed.  The client, in
 * the caller's namespace, makes each connection from scratch: its endpoint
 * and QP (rdma_create_ep: address and route resolution, QP creation), a
 * receive posted, rdma_connect, "cycle N" sent and "reply N" received and
 * checked, disconnect and destroy.  It times each step and hands the sums
 * back through a pipe.
 *
 * Header-only; needs -lrdmacm.  The calls return 0, or a nonzero step
 * number saying what failed (see remu_cm_cycles()).
 */
#ifndef REMU_CM_LIB_H
#define REMU_CM_LIB_H

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "remu_verbs_lib.h"	/* remu_now() */

#define REMU_CM_MSG	64
/*
 * The longest one connection of the client may take: the synchronous
 * calls have no timeout of their own, and a message lost for good would
 * leave rdma_get_recv_comp() waiting forever (the CM's own retries of a
 * lost REQ take seconds each).
 */
#define REMU_CM_CONN_SECS	30

/*
 * What the client of remu_cm_cycles() measured: @done connections made
 * and checked in @secs seconds; the seconds spent in each step, summed
 * over the connections: @ep (rdma_create_ep: resolve address and route,
 * create the QP), @conn (rdma_connect: REQ, REP, RTU), @xfer (one SEND
 * each way), @down (disconnect, deregister, destroy).
 */
struct remu_cm_stats {
	long done;
	double secs, ep, conn, xfer, down;
};

/* enter the network namespace @name (/run/netns/@name): 0 or -1 */
static inline int remu_enter_netns(const char *name)
{
	char path[128];
	int fd, ret;

	snprintf(path, sizeof(path), "/run/netns/%s", name);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	ret = setns(fd, CLONE_NEWNET);
	close(fd);
	return ret;
}

/* the capacities of both ends' QPs: one message each way */
static inline struct ibv_qp_init_attr remu_cm_qp_attr(void)
{
	return (struct ibv_qp_init_attr){
		.cap = { .max_send_wr = 1, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.sq_sig_all = 1,
	};
}

/*
 * The server: listen on @addr:@port (in namespace @ns unless NULL), write
 * one byte to @ready, then serve @n connections.  0, or the step that
 * failed (1 setup, 2 request, 3 accept, 4 receive, 5 message, 6 reply).
 */
static inline int remu_cm_server(const char *ns, const char *addr,
				 const char *port, long n, int ready)
{
	struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE,
				       .ai_port_space = RDMA_PS_TCP }, *res;
	struct ibv_qp_init_attr attr = remu_cm_qp_attr();
	char rbuf[REMU_CM_MSG], sbuf[REMU_CM_MSG], want[REMU_CM_MSG];
	struct rdma_cm_id *listen_id, *id;
	struct ibv_mr *rmr, *smr;
	struct ibv_wc wc;
	long i;

	if ((ns && remu_enter_netns(ns)) ||
	    rdma_getaddrinfo(addr, port, &hints, &res) ||
	    rdma_create_ep(&listen_id, res, NULL, &attr) ||
	    rdma_listen(listen_id, 16))
		return 1;
	if (write(ready, "r", 1) != 1)
		return 1;
	for (i = 0; i < n; i++) {
		if (rdma_get_request(listen_id, &id))
			return 2;
		rmr = rdma_reg_msgs(id, rbuf, sizeof(rbuf));
		smr = rdma_reg_msgs(id, sbuf, sizeof(sbuf));
		if (!rmr || !smr ||
		    rdma_post_recv(id, NULL, rbuf, sizeof(rbuf), rmr) ||
		    rdma_accept(id, NULL))
			return 3;
		if (rdma_get_recv_comp(id, &wc) != 1 || wc.status)
			return 4;
		snprintf(want, sizeof(want), "cycle %ld", i);
		if (strcmp(rbuf, want))
			return 5;
		snprintf(sbuf, sizeof(sbuf), "reply %ld", i);
		if (rdma_post_send(id, NULL, sbuf, sizeof(sbuf), smr, 0) ||
		    rdma_get_send_comp(id, &wc) != 1 || wc.status)
			return 6;
		rdma_disconnect(id);
		rdma_dereg_mr(rmr);
		rdma_dereg_mr(smr);
		rdma_destroy_ep(id);
	}
	rdma_destroy_ep(listen_id);
	rdma_freeaddrinfo(res);
	return 0;
}

/*
 * One client connection, number @i, towards @res, its steps timed into
 * @st: 0, or the step that failed (10 endpoint, 11 receive, 12 connect,
 * 13 send, 14 reply).
 */
static inline int remu_cm_client_once(struct rdma_addrinfo *res, long i,
				      struct remu_cm_stats *st)
{
	struct ibv_qp_init_attr attr = remu_cm_qp_attr();
	char rbuf[REMU_CM_MSG], sbuf[REMU_CM_MSG], want[REMU_CM_MSG];
	struct ibv_mr *rmr = NULL, *smr = NULL;
	struct rdma_cm_id *id;
	double t0 = remu_now(), t1, t2, t3;
	struct ibv_wc wc;
	int ret = 0;

	if (rdma_create_ep(&id, res, NULL, &attr))
		return 10;
	t1 = remu_now();
	t2 = t3 = t1;
	rmr = rdma_reg_msgs(id, rbuf, sizeof(rbuf));
	smr = rdma_reg_msgs(id, sbuf, sizeof(sbuf));
	memset(rbuf, 0, sizeof(rbuf));
	snprintf(sbuf, sizeof(sbuf), "cycle %ld", i);
	snprintf(want, sizeof(want), "reply %ld", i);
	if (!rmr || !smr ||
	    rdma_post_recv(id, NULL, rbuf, sizeof(rbuf), rmr))
		ret = 11;
	else if (t1 = remu_now(), rdma_connect(id, NULL))
		ret = 12;
	else if (t2 = remu_now(),
		 rdma_post_send(id, NULL, sbuf, sizeof(sbuf), smr, 0) ||
		 rdma_get_send_comp(id, &wc) != 1 || wc.status)
		ret = 13;
	else if (rdma_get_recv_comp(id, &wc) != 1 || wc.status ||
		 strcmp(rbuf, want))
		ret = 14;
	t3 = remu_now();
	if (ret != 11 && ret != 12)
		rdma_disconnect(id);
	if (rmr)
		rdma_dereg_mr(rmr);
	if (smr)
		rdma_dereg_mr(smr);
	rdma_destroy_ep(id);
	st->ep += t1 - t0;
	st->conn += t2 - t1;
	st->xfer += t3 - t2;
	st->down += remu_now() - t3;
	return ret;
}

/* The client: @n connections to @addr:@port, one after the other. */
static inline int remu_cm_client(const char *addr, const char *port, long n,
				 struct remu_cm_stats *st)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *res;
	double t0 = remu_now();
	int err = 0;

	memset(st, 0, sizeof(*st));
	if (rdma_getaddrinfo(addr, port, &hints, &res))
		return 9;
	while (st->done < n && !err) {
		/* a connection that hangs kills the client (SIGALRM) */
		alarm(REMU_CM_CONN_SECS);
		if (!(err = remu_cm_client_once(res, st->done, st)))
			st->done++;
	}
	alarm(0);
	st->secs = remu_now() - t0;
	rdma_freeaddrinfo(res);
	return err;
}

/*
 * remu_cm_cycles - @n connections from a client in the caller's namespace
 * to a server listening on @addr in namespace @ns (NULL: the caller's),
 * each process forked for the run; the client's figures into @st.
 * Return: 0; 1 (fork, pipe); 100 + the client's failed step (199: the
 * client was killed, e.g. by the REMU_CM_CONN_SECS alarm); or 200 + the
 * server's failed step (with a failed client, the server is killed and
 * only the client's step is returned).
 */
static inline int remu_cm_cycles(const char *ns, const char *addr, long n,
				 struct remu_cm_stats *st)
{
	static unsigned int run;
	int rp[2], sp[2], st_srv, st_cli;
	pid_t srv, cli;
	char port[16], c;

	memset(st, 0, sizeof(*st));
	/* a port of its own for every run of the process */
	snprintf(port, sizeof(port), "%u",
		 20000 + ((unsigned int)getpid() * 16 + run++) % 20000);
	if (pipe(rp))
		return 1;
	fflush(stdout);
	srv = fork();
	if (srv < 0)
		return 1;
	if (!srv)
		_exit(remu_cm_server(ns, addr, port, n, rp[1]));
	close(rp[1]);
	if (read(rp[0], &c, 1) != 1 || pipe(sp)) {
		close(rp[0]);
		waitpid(srv, &st_srv, 0);
		return WIFEXITED(st_srv) && WEXITSTATUS(st_srv) ?
		       200 + WEXITSTATUS(st_srv) : 1;
	}
	close(rp[0]);
	cli = fork();
	if (!cli) {
		int err = remu_cm_client(addr, port, n, st);

		_exit(write(sp[1], st, sizeof(*st)) == sizeof(*st) ?
		      err : 98);
	}
	close(sp[1]);
	if (cli < 0 || read(sp[0], st, sizeof(*st)) != sizeof(*st))
		memset(st, 0, sizeof(*st));
	close(sp[0]);
	if (cli < 0 || waitpid(cli, &st_cli, 0) != cli ||
	    !WIFEXITED(st_cli) || WEXITSTATUS(st_cli)) {
		kill(srv, SIGKILL);
		waitpid(srv, &st_srv, 0);
		return cli < 0 ? 1 : 100 + (WIFEXITED(st_cli) ?
					    WEXITSTATUS(st_cli) : 99);
	}
	if (waitpid(srv, &st_srv, 0) != srv || !WIFEXITED(st_srv))
		return 299;
	return WEXITSTATUS(st_srv) ? 200 + WEXITSTATUS(st_srv) : 0;
}

#endif /* REMU_CM_LIB_H */
