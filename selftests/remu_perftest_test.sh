#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# remu_perftest_test.sh - the perftest suite over remu, unchanged binaries:
#   RC   ib_{send,write,read}_{bw,lat} at 1, 4095, 65536 and 1048576 bytes
#   UD   ib_send_bw and ib_send_lat at 1 and 4095 bytes (one MTU at most)
#   RC   ib_atomic_bw (8 bytes by design), fetch-and-add and compare-and-swap
#   RC   ib_{write,read,send}_bw --odp (ODP MRs on both sides) at 65536 bytes
# first between remu1 (namespace peer, server) and remu0 (client), then all
# on remu0 (loopback).  Each run uses a small fixed iteration count: this
# proves that the runs complete, not how fast (scripts/bench measures).
# A run passes when both sides exit 0 and the client printed its result
# line.  Every program runs under timeout so nothing can hang.
#
# Usage (in the test VM, after scripts/remu-up):
#   remu_perftest_test.sh [FILTER]    run only the tests whose name contains FILTER
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$here/lib/remu_ktap_lib.sh"
. "$here/lib/remu_lib.sh"

filter=${1:-}
"$repo/scripts/remu-up" >/dev/null || echo "# remu-up failed"

sizes=(1 4095 65536 1048576)
# iterations per size: enough packets to exercise the window, few enough
# for a slow TCG guest
iters() {
	case "$1" in
		1048576) echo 8 ;;
		65536) echo 40 ;;
		*) echo 100 ;;
	esac
}

tests=()
for p in send write read; do
	for k in bw lat; do
		for s in "${sizes[@]}"; do
			tests+=("ib_${p}_$k -s $s -n $(iters "$s")")
		done
	done
done
for k in bw lat; do
	for s in 1 4095; do
		tests+=("ib_send_$k -c UD -s $s -n 100")
	done
done
tests+=("ib_atomic_bw -A FETCH_AND_ADD -n 200" "ib_atomic_bw -A CMP_AND_SWAP -n 200")
# on-demand paging: both sides register their buffers with
# IBV_ACCESS_ON_DEMAND (nothing pinned, every page faulted in by remu)
for p in write read send; do
	tests+=("ib_${p}_bw --odp -s 65536 -n 40")
done

sel=()
for t in "${tests[@]}"; do
	for where in wire loopback; do
		[ -z "$filter" ] || [[ "$t $where" == *"$filter"* ]] || continue
		sel+=("$where|$t")
	done
done
ktap_header ${#sel[@]}

port=19000
# pt WHERE PROG ARGS...
pt() {
	local where=$1 sex=() sdev=remu1 addr=10.77.0.2 sout cout spid rc rs
	shift
	if [ "$where" = loopback ]; then
		sdev=remu0 addr=10.77.0.1
	else
		sex=(ip netns exec peer)
	fi
	port=$((port + 1))
	sout=$(mktemp) cout=$(mktemp)
	"${sex[@]}" timeout 60 "$@" -d "$sdev" -x 1 -F -p "$port" \
		>"$sout" 2>&1 &
	spid=$!
	remu_wait_listen "$spid" "$port"
	timeout 60 "$@" -d remu0 -x 1 -F -p "$port" "$addr" >"$cout" 2>&1
	rc=$?
	wait "$spid"
	rs=$?
	# the result line: the size, then numbers (bw: iterations, BW..., lat:
	# iterations, t_min...)
	if [ "$rc" = 0 ] && [ "$rs" = 0 ] &&
	   grep -Eq '^ *[0-9]+ +[0-9]+ +[0-9.]+' "$cout"; then
		ktap_pass "$where: $*"
		grep -E '^ *[0-9]+ +[0-9]+ +[0-9.]+' "$cout" | sed 's/^/#   /'
	else
		# perftest's errors go to stderr, unbuffered, so above the
		# tail of its buffered stdout: show them first
		echo "# server (exit $rs):"
		grep -iE 'error|fail|status|couldn' "$sout" | head -n 5 | sed 's/^/#   ! /'
		tail -15 "$sout" | sed 's/^/#   /'
		echo "# client (exit $rc):"
		grep -iE 'error|fail|status|couldn' "$cout" | head -n 5 | sed 's/^/#   ! /'
		tail -15 "$cout" | sed 's/^/#   /'
		ktap_fail "$where: $*"
	fi
	rm -f "$sout" "$cout"
}

for x in "${sel[@]}"; do
	# shellcheck disable=SC2086
	pt "${x%%|*}" ${x#*|}
done
ktap_finished
