#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# remu_trace_tools_test.sh - the recipes of docs/tracing.md with the real
# tools (Debian's trace-cmd, linux-perf and bpftrace, from scripts/setup)
# over remu's tracepoints, the workload being the tour's ODP chapter
# (tour/odp), which must pass on its own too.  That chapter makes exactly
# 21 device page faults on remu1 (16 first-touch faults, 4 after
# MADV_DONTNEED, 1 prefetch piece), so each tool must count 21:
#   - chapter:   tour/odp exits 0 (it saw everything it teaches)
#   - trace_cmd: trace-cmd start -e remu, the chapter, stop, extract,
#                reset (docs/tracing.md says why not record); the
#                report has 21 remu_odp_fault
#                of dev=remu1 and the chapter's invalidation (event=clear)
#                (the recording is scripts/timeline's, which runs those
#                very commands: one run of the chapter for both cases)
#   - perf_stat: perf stat -e remu:remu_odp_fault counts 21
#   - perf_trace: perf trace -e 'remu:*' prints 21 remu:remu_odp_fault
#   - bpftrace:  the fault-latency histogram one-liner prints a histogram
#                for remu1, and a count() beside it reads 21
#   - timeline:  scripts/timeline draws the chapter (a PNG), and the
#                report it keeps beside it has the 21 faults
#
# Usage (in the test VM): remu_trace_tools_test.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$here/lib/remu_ktap_lib.sh"
. "$here/lib/remu_lib.sh"

"$repo/scripts/remu-up" >/dev/null || echo "# remu-up failed"
chapter=$repo/tour/odp
FAULTS=21
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; echo 0 > /sys/kernel/tracing/events/remu/enable 2>/dev/null' EXIT
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing

ktap_header 6

# Debian 12's trace-cmd (3.1.6) on its own 6.1 kernel loses events of a
# run, with record and with extract alike (a CPU's last events, or some
# in the middle; docs/tracing.md): the two cases that read remu's events
# through trace-cmd are skipped there.  perf and bpftrace, below, count
# every event on 6.1 too, and the tour reads them from tracefs itself.
tc_lossy=
case $(uname -r) in
6.1.*) tc_lossy="trace-cmd 3.1.6 loses events on $(uname -r) (docs/tracing.md); perf and bpftrace count them here" ;;
esac

# the chapter alone
if "$chapter" > "$tmp/chapter.out" 2>&1; then
	ktap_pass "chapter: tour/odp saw everything it teaches"
else
	sed 's/^/# /' "$tmp/chapter.out"
	ktap_fail "chapter: tour/odp failed"
fi

# trace-cmd start -e remu, the chapter, stop, extract, reset, then report
# (not record: docs/tracing.md, Recipes).  scripts/timeline records with
# exactly these commands and keeps the report beside its PNG, so one run
# of it makes the report this case reads and the picture the timeline
# case checks (each trace-cmd run costs seconds under TCG).  Without
# gnuplot the recipe runs here by hand.
tc_run() {
	local rc
	trace-cmd start -e remu || return 1
	"$chapter"
	rc=$?
	trace-cmd stop
	trace-cmd extract -o "$tmp/t.dat" || rc=1
	trace-cmd reset
	[ $rc = 0 ] && trace-cmd report -i "$tmp/t.dat" > "$tmp/odp.report"
}
tl_rc=
tc_ok=
if command -v trace-cmd >/dev/null && [ -z "$tc_lossy" ]; then
	if command -v gnuplot >/dev/null; then
		"$repo/scripts/timeline" -o "$tmp/odp.png" -- "$chapter" \
			> "$tmp/tl.out" 2>&1
		tl_rc=$?
		[ "$tl_rc" = 0 ] && tc_ok=1
	else
		(cd "$tmp" && tc_run > "$tmp/tl.out" 2>&1) && tc_ok=1
	fi
fi
if ! command -v trace-cmd >/dev/null; then
	ktap_skip trace_cmd "trace-cmd not installed (scripts/setup)"
elif [ -n "$tc_lossy" ]; then
	ktap_skip trace_cmd "$tc_lossy"
elif [ -n "$tc_ok" ]; then
	n=$(grep -c 'remu_odp_fault: *dev=remu1 ' "$tmp/odp.report")
	inv=$(grep -c 'remu_odp_invalidate: *dev=remu1 .*pages=4 event=clear' "$tmp/odp.report")
	if [ "$n" = "$FAULTS" ] && [ "$inv" = 1 ]; then
		ktap_pass "trace_cmd: $n remu_odp_fault, the clear invalidation"
	else
		grep remu_odp "$tmp/odp.report" | head -30 | sed 's/^/# /'
		ktap_fail "trace_cmd: $n remu_odp_fault (want $FAULTS), $inv clear invalidations (want 1)"
	fi
else
	sed 's/^/# /' "$tmp/tl.out" "$tmp/odp.report" 2>/dev/null | tail -20
	ktap_fail "trace_cmd: start, the chapter, extract or report failed"
fi

# perf stat on the tracepoint
if ! command -v perf >/dev/null; then
	ktap_skip perf_stat "perf not installed (linux-perf, scripts/setup)"
elif perf stat -a -x, -e remu:remu_odp_fault -o "$tmp/perf.csv" "$chapter" \
	> "$tmp/perf.out" 2>&1; then
	n=$(awk -F, '/remu:remu_odp_fault/ { print $1 }' "$tmp/perf.csv")
	if [ "$n" = "$FAULTS" ]; then
		ktap_pass "perf_stat: remu:remu_odp_fault counted $n"
	else
		sed 's/^/# /' "$tmp/perf.csv"
		ktap_fail "perf_stat: remu:remu_odp_fault counted '$n' (want $FAULTS)"
	fi
else
	sed 's/^/# /' "$tmp/perf.out" | tail -20
	ktap_fail "perf_stat: perf stat failed"
fi

# perf trace, live
if ! command -v perf >/dev/null; then
	ktap_skip perf_trace "perf not installed (linux-perf, scripts/setup)"
elif perf trace -a -e 'remu:*' -o "$tmp/ptrace.out" -- "$chapter" \
	> "$tmp/ptrace.log" 2>&1; then
	n=$(grep -c 'remu:remu_odp_fault(dev: "remu1"' "$tmp/ptrace.out")
	if [ "$n" = "$FAULTS" ]; then
		ktap_pass "perf_trace: $n remu:remu_odp_fault lines"
	else
		grep remu_odp_fault "$tmp/ptrace.out" | head -5 | sed 's/^/# /'
		ktap_fail "perf_trace: $n remu:remu_odp_fault lines (want $FAULTS)"
	fi
else
	sed 's/^/# /' "$tmp/ptrace.log" | tail -20
	ktap_fail "perf_trace: perf trace failed"
fi

# bpftrace: the latency histogram of docs/tracing.md, plus a count
if ! command -v bpftrace >/dev/null; then
	ktap_skip bpftrace "bpftrace not installed (scripts/setup)"
elif timeout 300 bpftrace -e 'tracepoint:remu:remu_odp_fault /args->err == 0/ { @us[args->dev] = hist(args->ns / 1000); @n = count(); }' \
	-c "$chapter" > "$tmp/bt.out" 2>&1; then
	n=$(awk '/^@n:/ { print $2 }' "$tmp/bt.out")
	if [ "$n" = "$FAULTS" ] && grep -q '^@us\[remu1\]:' "$tmp/bt.out" &&
	   grep -q '^\[[0-9]' "$tmp/bt.out"; then
		ktap_pass "bpftrace: fault-latency histogram for remu1, $n faults"
	else
		sed 's/^/# /' "$tmp/bt.out" | tail -30
		ktap_fail "bpftrace: count '$n' (want $FAULTS) or no histogram"
	fi
else
	sed 's/^/# /' "$tmp/bt.out" | tail -20
	ktap_fail "bpftrace: failed"
fi

# scripts/timeline: the picture of the chapter, and the report beside it
# (the run above)
if ! command -v trace-cmd >/dev/null || ! command -v gnuplot >/dev/null; then
	ktap_skip timeline "trace-cmd or gnuplot not installed (scripts/setup)"
elif [ -n "$tc_lossy" ]; then
	ktap_skip timeline "$tc_lossy"
elif [ "$tl_rc" = 0 ]; then
	n=$(grep -c 'remu_odp_fault: *dev=remu1 ' "$tmp/odp.report")
	if [ "$n" = "$FAULTS" ] &&
	   [ "$(head -c 8 "$tmp/odp.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; then
		ktap_pass "timeline: a PNG of tour/odp, $n faults in its report"
	else
		sed 's/^/# /' "$tmp/tl.out" | tail -20
		ktap_fail "timeline: $n faults in the report (want $FAULTS), or no PNG"
	fi
else
	sed 's/^/# /' "$tmp/tl.out" | tail -20
	ktap_fail "timeline: scripts/timeline failed"
fi

ktap_finished
