#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# remu_perftest_test.sh - the perftest suite over remu, unchanged binaries,
# every program and option once at least, between remu1 (namespace peer,
# server) and remu0 (client) on the wire or all on remu0 (loopback):
#   RC   ib_{send,write,read}_{bw,lat}: each op at 1 byte (inline for
#        SEND and WRITE: perftest's lat programs inline small messages)
#        and 1 MiB on the wire, 4095 bytes (one packet at the 4096 MTU of
#        the 9000-byte veth) and 64 KiB (16 packets) in loopback; each
#        program on the wire and in loopback
#   UD   ib_send_lat at 1 byte on the wire, ib_send_bw at 4095 bytes (one
#        MTU, UD's largest) in loopback
#   RC   ib_atomic_bw (8 bytes by design): fetch-and-add on the wire,
#        compare-and-swap in loopback
#   RC   --odp (ODP MRs on both sides) at 64 KiB: ib_write_bw and
#        ib_read_bw on the wire, ib_send_bw in loopback
# Each run starts two processes and a TCP exchange (seconds under TCG),
# so the other combinations are left to the tests that already cover
# them, byte for byte: remu_datapath_test (RC SEND/WRITE/READ at 1, 4095,
# 4097, 65537 and 1 MiB, atomics and UD, remu0_remu1 and loopback),
# remu_interop_test.sh (ib_{send,write,read}_bw at all four sizes, the
# lat programs at 4095, UD ib_send_bw and both atomics, remu1 against
# rxe both ways), remu_pingpong_test.sh (ibv_rc_pingpong -o/-O/-P: ODP;
# UD loopback), remu_netem_test.sh (1 MiB READs one after the other),
# remu_cm_test.sh (perftest -R).  Each run uses a small iteration count:
# this proves that the runs complete, not how fast (scripts/bench
# measures).  A run passes when both sides exit 0 and the client printed
# its result line.  Every program runs under timeout so nothing can hang.
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

# WHERE|PROGRAM ARGS: 1 MiB 5 times (1280 packets), 64 KiB 20 times,
# small sizes 100 times for bw (more than the send queue) and 20 round
# trips for lat
tests=()
for p in send write read; do
	tests+=("wire|ib_${p}_lat -s 1 -n 20" "wire|ib_${p}_bw -s 1048576 -n 5"
		"loopback|ib_${p}_lat -s 4095 -n 20"
		"loopback|ib_${p}_bw -s 65536 -n 20")
done
tests+=("wire|ib_send_lat -c UD -s 1 -n 20"
	"loopback|ib_send_bw -c UD -s 4095 -n 100")
tests+=("wire|ib_atomic_bw -A FETCH_AND_ADD -n 100"
	"loopback|ib_atomic_bw -A CMP_AND_SWAP -n 100")
# on-demand paging: both sides register their buffers with
# IBV_ACCESS_ON_DEMAND (nothing pinned, every page faulted in by remu)
tests+=("wire|ib_write_bw --odp -s 65536 -n 20"
	"wire|ib_read_bw --odp -s 65536 -n 20"
	"loopback|ib_send_bw --odp -s 65536 -n 20")

sel=()
for t in "${tests[@]}"; do
	[ -z "$filter" ] || [[ "${t#*|} ${t%%|*}" == *"$filter"* ]] || continue
	sel+=("$t")
done
ktap_header ${#sel[@]}

port=19000
# pt WHERE PROG ARGS...
pt() {
	local where=$1 sex=() sdev=remu1 addr=10.77.0.2 sout cout spid rc rs t0
	shift
	if [ "$where" = loopback ]; then
		sdev=remu0 addr=10.77.0.1
	else
		sex=(ip netns exec peer)
	fi
	port=$((port + 1))
	sout=$(mktemp) cout=$(mktemp)
	t0=${EPOCHREALTIME/./}
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
		t0=$(((${EPOCHREALTIME/./} - t0) / 100000))
		ktap_diag "  $((t0 / 10)).$((t0 % 10)) s"
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
