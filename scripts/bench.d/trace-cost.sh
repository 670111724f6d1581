# SPDX-License-Identifier: GPL-2.0
# scripts/bench.d/trace-cost.sh - --trace-cost (sourced with perftest.sh)
#
# scripts/bench --trace-cost [--quick] [--reps N] [--out FILE] [FILTER]
# measures what remu's tracepoints (docs/tracing.md) cost: the same perftest
# set, remu0 -> remu1 across the veth pair only, in three phases of one
# boot: trace-off (remu.ko as built: tracepoints compiled in, every event
# off), trace-on (the same module, every remu event on, recording into the
# ring buffer) and notrace (remu.ko rebuilt on the host with -DNOTRACE into
# build/bench/notrace/: every tracepoint compiled out).  ratio = trace-off /
# notrace: the cost of tracepoints that are compiled in but off.  The whole
# set takes about three times as long as one phase of the default bench
# (about 20 minutes at 3 reps); a FILTER or --quick makes it shorter.

# shellcheck shell=bash disable=SC2154,SC2034 # shared globals

# --trace-cost, in the guest (remu is up): trace-off, trace-on, then notrace
trace_cost_phases() {
	local ev=/sys/kernel/tracing/events/remu/enable
	phase trace-off remu1 10.77.0.2 peer "$@"
	mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
	echo 1 >"$ev" || die "cannot switch the remu events on ($ev)"
	phase trace-on remu1 10.77.0.2 peer "$@"
	echo 0 >"$ev"
	scripts/remu-down >/dev/null || die "scripts/remu-down failed"
	REMU_KO_DIR=$REPO/build/bench/notrace scripts/remu-up >/dev/null ||
		die "scripts/remu-up of the notrace build failed"
	[ ! -e "$ev" ] || die "the notrace build has remu events"
	warmup remu0 10.77.0.1 ""
	phase notrace remu1 10.77.0.2 peer "$@"
	scripts/remu-down || { echo "$prog: scripts/remu-down failed" >&2; return 1; }
}

# --trace-cost, on the host: remu.ko with every tracepoint compiled out, in
# build/bench/notrace (a copy of the module's sources built with -DNOTRACE,
# which makes <linux/tracepoint.h> define every trace_*() as an empty inline)
build_notrace() {
	local d=$REPO/build/bench/notrace kdir
	kdir=$(scripts/kver --kdir) || die "no kernel build directory (scripts/kver)"
	{ rm -rf "$d" && mkdir -p "$d/scripts"; } || die "cannot make $d"
	{ cp -r Kbuild drivers uapi "$d/" && cp scripts/compat-probe "$d/scripts/"; } ||
		die "cannot copy the module's sources to $d"
	make -s -C "$kdir" M="$d" REMU_TEST_MODULES=n KCFLAGS=-DNOTRACE modules \
		>"$d/build.log" 2>&1 || die "the notrace build failed ($d/build.log)"
	! nm "$d/remu.ko" | grep -q __tracepoint_remu ||
		die "the notrace build still has remu tracepoints"
}
