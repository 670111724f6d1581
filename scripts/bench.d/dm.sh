# SPDX-License-Identifier: GPL-2.0
# scripts/bench.d/dm.sh - --dm and --umr (sourced by scripts/bench)
#
# scripts/bench --dm [--reps N] [--iters N] [--out FILE] is a different
# benchmark, of the project's own (perftest has no device memory option):
# tools/remu_dm_bench, remu0 -> remu1 across the veth pair, measures the
# post-and-poll round trip of an 8-byte RDMA WRITE, a FETCH_ADD and a
# CMP_SWP into a DM MR on remu1 and into a host MR on remu1, --reps runs
# (default 5, --quick 3) of --iters round trips each (default 2000, --quick
# 300), alternating DM and host; it prints the median of the run medians
# for each and the ratio DM / host.  Every run checks the data it moved.
# Its output goes to build/bench/dm-last.txt (and --out FILE).
#
# scripts/bench --umr [--reps N] [--iters N] [--out FILE]: scatter through
# an indirect memory key (docs/indirect-keys.md) with tools/remu_umr_bench,
# remu0 -> remu1 across the veth pair: the post-and-poll round trip of one
# RDMA WRITE of N pieces of 1 KiB into an indirect key over them against
# N WRITEs of 1 KiB into N MRs posted as one chain (N = 1, 4, 16), --reps
# runs (default 5, --quick 3) of --iters round trips each (default 2000,
# --quick 300), alternating; the median of the run medians and the ratio
# key / MRs.  Every run checks the data it moved.  Output:
# build/bench/umr-last.txt (and --out FILE).

# shellcheck shell=bash disable=SC2154,SC2034 # shared globals

# --dm, --umr (@1: dm or umr), in the guest: tools/remu_@1_bench
# remu0 -> remu1, its output in $raw
dm_guest() {
	[ -n "${REMU_IN_VM-}" ] || die "--guest runs inside the test VM (use scripts/bench on the host)"
	[ -n "$raw" ] || die "--guest wants --raw FILE"
	cd "$REPO" || exit 2
	local rc tool=remu_${1}_bench
	scripts/remu-up >/dev/null || die "scripts/remu-up failed"
	{
		echo "guest: $(uname -r), $(nproc) CPUs"
		echo "command: tools/$tool -c remu0 -s remu1 -n $iters -r $reps"
		"tools/$tool" -c remu0 -s remu1 -n "$iters" -r "$reps"
	} >"$raw" 2>&1
	rc=$?
	cat "$raw"
	scripts/remu-down || { echo "$prog: scripts/remu-down failed" >&2; return 1; }
	return "$rc"
}

# --dm, --umr (@1: dm or umr), on the host
dm_host() {
	local stamp rc log mode=$1
	cd "$REPO" || exit 2
	{ [ -f remu.ko ] && [ -f build/provider/libremu-rdmav34.so ] &&
		[ -x "tools/remu_${mode}_bench" ]; } || die "build first (make)"
	mkdir -p build/bench
	stamp=$(date -u +%Y%m%d-%H%M%S)
	raw=$REPO/build/bench/$mode-raw-$stamp.txt
	scripts/vm --timeout 900 -- scripts/bench --guest "--$mode" --reps "$reps" \
		--iters "$iters" --raw "$raw" >/dev/null
	rc=$?
	[ -s "$raw" ] || die "the guest wrote no results (scripts/vm exit $rc)"
	log=build/bench/$mode-last.txt
	{
		echo "scripts/bench $(printf '%q ' "${orig_args[@]}")"
		echo "  host_date:     $(date -u '+%Y-%m-%d %H:%M UTC')"
		echo "  host_cpu:      $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1) ($(nproc) cores)"
		echo "  vm:            scripts/vm defaults: -accel tcg,${REMU_VM_TCG:-thread=multi} -cpu max -smp 2 -m 2048"
		echo "  commit:        $(git describe --always --dirty 2>/dev/null)"
		sed 's/^/  /' "$raw"
		echo
		echo "usec: median of the run medians of one post-and-poll round trip;"
		if [ "$mode" = dm ]; then
			echo "dm/host below 1 means device memory is faster."
		else
			echo "mkey/mrs below 1 means one WRITE through the key is faster."
		fi
	} >"$log"
	cat "$log"
	[ -z "$out" ] || cp "$log" "$out"
	[ "$rc" = 0 ] || { echo "$prog: the VM run failed (scripts/vm exit $rc)" >&2; return 1; }
	return 0
}
