// SPDX-License-Identifier: GPL-2.0
/*
 * remu_udp_bench - what the path beneath remu can move, for scripts/bench.
 *
 *   remu_udp_bench recv PORT [TIMEOUT_S]
 *	binds UDP PORT on every address, counts the datagrams larger than
 *	one byte until a one-byte datagram (the sender's end mark) arrives or
 *	nothing arrives for TIMEOUT_S seconds (default 5), then prints
 *	"udp_recv datagrams D bytes B usec U" (U: first to last datagram).
 *   remu_udp_bench send ADDR PORT SIZE SECONDS
 *	sends SIZE-byte datagrams to ADDR:PORT (IPv4) for SECONDS seconds,
 *	16 per sendmmsg(), then end marks; prints
 *	"udp_send datagrams D bytes B usec U".
 *   remu_udp_bench memcpy SIZE SECONDS
 *	copies SIZE bytes at a time through two 16 MiB buffers for SECONDS
 *	seconds; prints "memcpy copies N bytes B usec U".
 *
 * SIZE is the UDP payload of one RoCEv2 packet of remu at the path MTU
 * (BTH + MTU payload bytes + ICRC), so a datagram costs the stack what a
 * full-size remu packet costs it, minus remu's own work.  The receiver's
 * figures are the limit: datagrams the sender pushed beyond what the
 * receiver could take are dropped by the stack and do not count.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH		16
#define MAXSIZE		65507
#define COPY_BUF	(16u << 20)

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int usage(void)
{
	fprintf(stderr,
		"usage: remu_udp_bench recv PORT [TIMEOUT_S]\n"
		"       remu_udp_bench send ADDR PORT SIZE SECONDS\n"
		"       remu_udp_bench memcpy SIZE SECONDS\n");
	return 2;
}

static long num(const char *s, long lo, long hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < lo || v > hi) {
		fprintf(stderr, "remu_udp_bench: bad number '%s'\n", s);
		exit(2);
	}
	return v;
}

static int do_recv(int port, int timeout_s)
{
	static char bufs[BATCH][MAXSIZE + 1];
	struct mmsghdr msgs[BATCH];
	struct iovec iov[BATCH];
	struct sockaddr_in sin = {
		.sin_family = AF_INET,
		.sin_port = htons(port),
		.sin_addr.s_addr = htonl(INADDR_ANY),
	};
	uint64_t n = 0, bytes = 0, first = 0, last = 0;
	int sz = 32 << 20, fd, i, got;
	struct pollfd pfd;

	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof(sin))) {
		perror("remu_udp_bench: socket/bind");
		return 1;
	}
	/* best effort: the default buffer is what the stack offers */
	setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz));
	for (i = 0; i < BATCH; i++) {
		iov[i].iov_base = bufs[i];
		iov[i].iov_len = sizeof(bufs[i]);
		memset(&msgs[i], 0, sizeof(msgs[i]));
		msgs[i].msg_hdr.msg_iov = &iov[i];
		msgs[i].msg_hdr.msg_iovlen = 1;
	}
	printf("udp_recv listening %d\n", port);
	fflush(stdout);
	pfd.fd = fd;
	pfd.events = POLLIN;
	for (;;) {
		if (poll(&pfd, 1, timeout_s * 1000) <= 0)
			break;		/* no end mark: the figures so far */
		got = recvmmsg(fd, msgs, BATCH, MSG_DONTWAIT, NULL);
		if (got < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			perror("remu_udp_bench: recvmmsg");
			return 1;
		}
		for (i = 0; i < got; i++) {
			if (msgs[i].msg_len <= 1)
				goto done;
			if (!n)
				first = now_us();
			n++;
			bytes += msgs[i].msg_len;
		}
		last = now_us();
	}
done:
	printf("udp_recv datagrams %llu bytes %llu usec %llu\n",
	       (unsigned long long)n, (unsigned long long)bytes,
	       (unsigned long long)(last - first));
	close(fd);
	return n ? 0 : 1;
}

static int do_send(const char *addr, int port, int size, int secs)
{
	static char buf[MAXSIZE];
	struct mmsghdr msgs[BATCH];
	struct iovec iov = { .iov_base = buf, .iov_len = size };
	struct sockaddr_in sin = {
		.sin_family = AF_INET,
		.sin_port = htons(port),
	};
	uint64_t n = 0, start, end, t;
	int fd, i, sent;
	char mark = 0;

	if (inet_pton(AF_INET, addr, &sin.sin_addr) != 1) {
		fprintf(stderr, "remu_udp_bench: bad address %s\n", addr);
		return 2;
	}
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof(sin))) {
		perror("remu_udp_bench: socket/connect");
		return 1;
	}
	memset(buf, 0x5a, sizeof(buf));
	for (i = 0; i < BATCH; i++) {
		memset(&msgs[i], 0, sizeof(msgs[i]));
		msgs[i].msg_hdr.msg_iov = &iov;
		msgs[i].msg_hdr.msg_iovlen = 1;
	}
	start = now_us();
	end = start + (uint64_t)secs * 1000000;
	do {
		sent = sendmmsg(fd, msgs, BATCH, 0);
		if (sent < 0) {
			/* a full queue or an ICMP error: keep going */
			if (errno != ENOBUFS && errno != ECONNREFUSED &&
			    errno != EAGAIN && errno != EINTR) {
				perror("remu_udp_bench: sendmmsg");
				return 1;
			}
			sent = 0;
		}
		n += sent;
		t = now_us();
	} while (t < end);
	/* end marks, spaced, so that one of them gets through a full queue */
	iov.iov_base = &mark;
	iov.iov_len = 1;
	for (i = 0; i < 20; i++) {
		send(fd, &mark, 1, 0);
		usleep(10000);
	}
	printf("udp_send datagrams %llu bytes %llu usec %llu\n",
	       (unsigned long long)n, (unsigned long long)n * size,
	       (unsigned long long)(t - start));
	close(fd);
	return 0;
}

static int do_memcpy(int size, int secs)
{
	char *src = malloc(COPY_BUF), *dst = malloc(COPY_BUF);
	uint64_t n = 0, start, t, end;
	size_t off = 0;
	int i;

	if (!src || !dst) {
		fprintf(stderr, "remu_udp_bench: out of memory\n");
		return 1;
	}
	memset(src, 0x5a, COPY_BUF);
	memset(dst, 0, COPY_BUF);
	start = now_us();
	end = start + (uint64_t)secs * 1000000;
	do {
		for (i = 0; i < 64; i++) {
			if (off + size > COPY_BUF)
				off = 0;
			memcpy(dst + off, src + off, size);
			off += size;
		}
		n += 64;
		t = now_us();
	} while (t < end);
	/* the copies must not be optimised away */
	if (memcmp(dst, src, size)) {
		fprintf(stderr, "remu_udp_bench: memcpy check failed\n");
		return 1;
	}
	printf("memcpy copies %llu bytes %llu usec %llu\n",
	       (unsigned long long)n, (unsigned long long)n * size,
	       (unsigned long long)(t - start));
	free(src);
	free(dst);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 3 && !strcmp(argv[1], "recv"))
		return do_recv(num(argv[2], 1, 65535),
			       argc > 3 ? num(argv[3], 1, 600) : 5);
	if (argc == 6 && !strcmp(argv[1], "send"))
		return do_send(argv[2], num(argv[3], 1, 65535),
			       num(argv[4], 2, MAXSIZE), num(argv[5], 1, 600));
	if (argc == 4 && !strcmp(argv[1], "memcpy"))
		return do_memcpy(num(argv[2], 1, COPY_BUF),
				 num(argv[3], 1, 600));
	return usage();
}
