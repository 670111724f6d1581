#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# remu_pingpong_test.sh - rdma-core's example programs over remu, unchanged:
# ibv_{rc,uc,ud,srq}_pingpong with -c between remu0 (initial namespace) and
# remu1 (namespace peer), in both directions, and on remu0 alone
# (loopback).  ibv_rc_pingpong also runs with -o (explicit ODP MR), -O
# (implicit ODP MR) and -o -P (ODP with ibv_advise_mr prefetch), and with
# -j, whose buffer is device memory (ibv_alloc_dm + ibv_reg_dm_mr, filled
# and checked with ibv_memcpy_to/from_dm), and with -t (completion
# timestamps: an ibv_create_cq_ex() CQ polled with ibv_start_poll()),
# the same three ways each; a
# "Couldn't prefetch" line fails the run.  A run passes when both sides
# exit 0 and neither prints an "invalid data" line (-c only prints on a
# mismatch).  Every program runs
# under timeout so nothing can hang.  Runs in the test VM after
# scripts/remu-up.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$here/lib/remu_ktap_lib.sh"
. "$here/lib/remu_lib.sh"

progs=(rc uc ud srq)
odp_opts=(-o -O "-o -P")
ktap_header $(((${#progs[@]} + ${#odp_opts[@]}) * 3 + 6))
"$repo/scripts/remu-up" >/dev/null || echo "# remu-up failed"

port=18515
# pp NAME PROG SERVER_NS SERVER_DEV CLIENT_NS CLIENT_DEV SERVER_ADDR [OPT...]
pp() {
	local name=$1
	shift
	port=$((port + 1))
	if remu_pingpong "$1" "$port" "${@:2}"; then
		ktap_pass "$name"
	else
		ktap_fail "$name"
	fi
}

for p in "${progs[@]}"; do
	pp "${p}_pingpong remu0 -> remu1" "$p" peer remu1 "" remu0 10.77.0.2
	pp "${p}_pingpong remu1 -> remu0" "$p" "" remu0 peer remu1 10.77.0.1
	pp "${p}_pingpong loopback remu0" "$p" "" remu0 "" remu0 10.77.0.1
done
for o in "${odp_opts[@]}"; do
	# $o unquoted: "-o -P" is two options
	pp "rc_pingpong $o remu0 -> remu1" rc peer remu1 "" remu0 10.77.0.2 $o
	pp "rc_pingpong $o remu1 -> remu0" rc "" remu0 peer remu1 10.77.0.1 $o
	pp "rc_pingpong $o loopback remu0" rc "" remu0 "" remu0 10.77.0.1 $o
done
pp "rc_pingpong -j (device memory) remu0 -> remu1" rc peer remu1 "" remu0 10.77.0.2 -j
pp "rc_pingpong -j (device memory) remu1 -> remu0" rc "" remu0 peer remu1 10.77.0.1 -j
pp "rc_pingpong -j (device memory) loopback remu0" rc "" remu0 "" remu0 10.77.0.1 -j
pp "rc_pingpong -t (timestamps) remu0 -> remu1" rc peer remu1 "" remu0 10.77.0.2 -t
pp "rc_pingpong -t (timestamps) remu1 -> remu0" rc "" remu0 peer remu1 10.77.0.1 -t
pp "rc_pingpong -t (timestamps) loopback remu0" rc "" remu0 "" remu0 10.77.0.1 -t
ktap_finished
