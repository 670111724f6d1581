/* SPDX-License-Identifier: GPL-2.0 */
/*
 * remu_trace_lib.h - remu's trace events through tracefs, for the tests
 * (remu_trace_test) and the programs that show them (the tour): mount
 * tracefs if need be, make a trace instance of our own (its own buffer
 * and event switches, so that trace-cmd or another tool recording the
 * main buffer at the same time is not disturbed), switch the "remu"
 * events on, empty the buffer, read what was recorded as a list of
 * events, and pick fields out of an event's text.  Every remu event
 * prints "dev=NAME" then space-separated key=value pairs
 * (docs/tracing.md).  Header-only, like remu_lib.h; one instance per
 * process.
 */
#ifndef REMU_TRACE_LIB_H
#define REMU_TRACE_LIB_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define RT_DIR		"/sys/kernel/tracing"
#define RT_NAME_LEN	40
#define RT_TEXT_LEN	400

/* the instance's directory (RT_DIR/instances/NAME) once rt_setup() ran */
static char rt_base[200] = RT_DIR;

/* write @val to file @rel of the instance: 0 or -errno */
static inline int rt_write(const char *rel, const char *val)
{
	char path[256];
	int fd, ret = 0;

	snprintf(path, sizeof(path), "%s/%s", rt_base, rel);
	fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, val, strlen(val)) != (ssize_t)strlen(val))
		ret = -errno;
	close(fd);
	return ret;
}

/*
 * Mount tracefs (when it is not mounted yet), make the instance @name
 * (kept if it exists), give each CPU @kb KiB of its buffer, switch every
 * remu event on (@on) or off there, empty the buffer.
 * Return: 0 or -errno (-ENOENT: the module's events are not there).
 */
static inline int rt_setup(const char *name, int kb, int on)
{
	char num[16];
	struct stat st;
	int err;

	if (stat(RT_DIR "/trace", &st) &&
	    mount("nodev", RT_DIR, "tracefs", 0, NULL) && errno != EBUSY)
		return -errno;
	if (stat(RT_DIR "/events/remu/enable", &st))
		return -ENOENT;
	snprintf(rt_base, sizeof(rt_base), "%s/instances/%s", RT_DIR, name);
	if (mkdir(rt_base, 0700) && errno != EEXIST)
		return -errno;
	snprintf(num, sizeof(num), "%d", kb);
	err = rt_write("buffer_size_kb", num);
	err = err ?: rt_write("events/remu/enable", on ? "1" : "0");
	err = err ?: rt_write("tracing_on", "1");
	err = err ?: rt_write("trace", "");
	return err;
}

/* empty the trace buffer: 0 or -errno */
static inline int rt_clear(void)
{
	return rt_write("trace", "");
}

/* switch the events off and remove the instance (its buffer goes too) */
static inline void rt_close(void)
{
	rt_write("events/remu/enable", "0");
	if (strcmp(rt_base, RT_DIR))
		rmdir(rt_base);
	snprintf(rt_base, sizeof(rt_base), "%s", RT_DIR);
}

/* one recorded event: its name ("remu_odp_fault") and its text */
struct rt_ev {
	char name[RT_NAME_LEN];
	char text[RT_TEXT_LEN];
};

/*
 * The remu events in the buffer, oldest first, in a malloc'ed array
 * (*@evs, free() it); their number, or -errno.  The buffer is not
 * consumed.
 */
static inline int rt_read(struct rt_ev **evs)
{
	struct rt_ev *v = NULL;
	int n = 0, cap = 0;
	char line[1024], path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/trace", rt_base);
	f = fopen(path, "r");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char *name, *end;

		if (line[0] == '#')
			continue;
		/* "  task-pid  [cpu] flags  ts: remu_x: dev=remu0 ..." */
		name = strstr(line, ": remu_");
		if (!name)
			continue;
		name += 2;
		end = strstr(name, ": ");
		if (!end || end - name >= RT_NAME_LEN)
			continue;
		if (n == cap) {
			struct rt_ev *nv;

			cap = cap ? 2 * cap : 256;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				free(v);
				fclose(f);
				return -ENOMEM;
			}
			v = nv;
		}
		memcpy(v[n].name, name, end - name);
		v[n].name[end - name] = '\0';
		snprintf(v[n].text, RT_TEXT_LEN, "%s", end + 2);
		v[n].text[strcspn(v[n].text, "\n")] = '\0';
		n++;
	}
	fclose(f);
	*evs = v;
	return n;
}

/*
 * The value of @key in @ev's text into @buf (@len bytes): 0, or -1 when
 * the event has no such field.
 */
static inline int rt_str(const struct rt_ev *ev, const char *key, char *buf,
			 size_t len)
{
	size_t kl = strlen(key);
	const char *p = ev->text;

	while (p && *p) {
		if (!strncmp(p, key, kl) && p[kl] == '=') {
			size_t vl = strcspn(p + kl + 1, " ");

			if (vl >= len)
				vl = len - 1;
			memcpy(buf, p + kl + 1, vl);
			buf[vl] = '\0';
			return 0;
		}
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	return -1;
}

/* the number in field @key of @ev (0x... is hex, -N negative), or @dflt */
static inline long long rt_num(const struct rt_ev *ev, const char *key,
			       long long dflt)
{
	char buf[64];

	if (rt_str(ev, key, buf, sizeof(buf)))
		return dflt;
	return (long long)strtoull(buf, NULL, 0);
}

/* does field @key of @ev read @val? */
static inline int rt_is(const struct rt_ev *ev, const char *key,
			const char *val)
{
	char buf[64];

	return !rt_str(ev, key, buf, sizeof(buf)) && !strcmp(buf, val);
}

/*
 * Does @ev have name @name, device @dev (NULL: any) and, when @key is not
 * NULL, the number @val in field @key?
 */
static inline int rt_match(const struct rt_ev *ev, const char *name,
			   const char *dev, const char *key, long long val)
{
	if (strcmp(ev->name, name))
		return 0;
	if (dev && !rt_is(ev, "dev", dev))
		return 0;
	return !key || rt_num(ev, key, ~val) == val;
}

/* how many of the @n events match (as rt_match()) */
static inline int rt_count(const struct rt_ev *evs, int n, const char *name,
			   const char *dev, const char *key, long long val)
{
	int i, c = 0;

	for (i = 0; i < n; i++)
		c += rt_match(&evs[i], name, dev, key, val);
	return c;
}

/* the index of the @nth (0: first) matching event after @from, or -1 */
static inline int rt_find(const struct rt_ev *evs, int n, int from, int nth,
			  const char *name, const char *dev, const char *key,
			  long long val)
{
	int i;

	for (i = from < 0 ? 0 : from; i < n; i++)
		if (rt_match(&evs[i], name, dev, key, val) && !nth--)
			return i;
	return -1;
}

#endif /* REMU_TRACE_LIB_H */
