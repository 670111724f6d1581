#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# remu_netem_test.sh - RC between remu0 and remu1 over a lossy link: netem
# on both veth ends (v0, and v1 in namespace peer) delays every packet by
# 1 ms, drops 5%, sends 10% out of order and duplicates 2%.  Over that:
#   - the patterned byte-for-byte transfers of remu_datapath_test
#     (send_recv, rdma_write, rdma_read, atomics, atomics_concurrent:
#     every old value of a shared counter returned exactly once, which a
#     re-executed duplicate atomic would break), rnr_stream: RNR NAKs
#     from a receiver that posts late, with the loss on top, and
#     read_1m_short_timeout: 1 MiB READs one after the other on a 16.8 ms
#     timeout, with lost responses asked for again and replayed, and
#     read_storm_rd_atomic: READs and atomics 16 at a time with 1, 16, 128
#     and 2 responder resources, duplicates answered from those
#   - perftest ib_{send,write,read}_bw at 1048576 bytes, ten messages
#     (2560 packets) in flight, and ib_atomic_bw fetch-and-add, 100
#     atomics in flight (compare-and-swap under loss: the atomics tests
#     above, value for value)
# Every run must complete (both sides exit 0), then the counters of both
# ports must show the recovery at work: retransmissions by the timer or
# after a sequence NAK, duplicate requests seen by the responders, and
# the requester's recovery beyond plain go-back-N (docs/reliability.md):
# a hole resent again by the probe timer (retry_probe) or a sequence NAK
# found stale, answered without going back (stale_seq_nak).
# (That line counts random events: the perftest runs are ten messages
# each, not five, so that at the measured 3 to 6 per run of five a run
# without any stays out of reach.)
# Then ACK coalescing on a link that duplicates every packet: the
# responder must not answer each duplicate (ack_deferred).
# The qdiscs are removed at the end (and on any exit).  Then, on a clean
# link, remu_datapath_test's outage tests (REMU_DP_OUTAGE=1): the timer
# alone across a 300 ms total outage, RETRY_EXC_ERR with QP to ERR and
# the rest flushed when the wire stays cut, a resend answered although
# its last packets never arrive (the first packet of a go-back asks for
# an ACK), and a duplicate atomic (its ACK dropped) after RESET answered
# with the new connection's result.
#
# Usage (in the test VM): remu_netem_test.sh [FILTER]
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$here/lib/remu_ktap_lib.sh"
. "$here/lib/remu_lib.sh"

filter=${1:-}
netem="delay 1ms loss 5% reorder 10% duplicate 2%"
"$repo/scripts/remu-up" >/dev/null || echo "# remu-up failed"

dp_tests=(send_recv rdma_write rdma_read atomics atomics_concurrent rnr_stream
	  read_1m_short_timeout read_storm_rd_atomic)
outage_tests=(outage_timer retry_exceeded resend_asks_ack atomic_replay_after_reset)
pt_tests=("ib_send_bw -s 1048576 -n 10" "ib_write_bw -s 1048576 -n 10"
	  "ib_read_bw -s 1048576 -n 10" "ib_atomic_bw -A FETCH_AND_ADD -n 100")
sel_dp=() sel_pt=() sel_out=()
for t in "${dp_tests[@]}"; do
	[ -z "$filter" ] || [[ "$t" == *"$filter"* ]] && sel_dp+=("$t")
done
for t in "${pt_tests[@]}"; do
	[ -z "$filter" ] || [[ "$t" == *"$filter"* ]] && sel_pt+=("$t")
done
for t in "${outage_tests[@]}"; do
	[ -z "$filter" ] || [[ "$t" == *"$filter"* ]] && sel_out+=("$t")
done
sel_dup=0
[ -z "$filter" ] || [[ "ack_coalescing" == *"$filter"* ]] && sel_dup=1
# setup + each run + the three counter checks + teardown + the duplicated
# link (a run and its check) + outage tests
ktap_header $((1 + ${#sel_dp[@]} + ${#sel_pt[@]} + 4 + 2 * sel_dup + \
	${#sel_out[@]}))

# dp TEST LABEL [VAR=VALUE...]: one remu_datapath_test test on remu0_remu1
dp() {
	local out rc

	out=$(timeout 200 env "${@:3}" "$here/remu_datapath_test" \
		-r "dp.remu0_remu1.$1" 2>&1)
	rc=$?
	if [ "$rc" = 0 ] && ! grep -q "# SKIP" <<<"$out"; then
		ktap_pass "$2: dp.remu0_remu1.$1"
	else
		printf '%s\n' "$out" | tail -30 | sed 's/^/#   /'
		ktap_fail "$2: dp.remu0_remu1.$1 (exit $rc)"
	fi
}

qdisc_del() {
	tc qdisc del dev v0 root 2>/dev/null
	ip netns exec peer tc qdisc del dev v1 root 2>/dev/null
}
trap qdisc_del EXIT

# snap ARRAY: every port counter of remu0 (init netns) and remu1 (peer)
# into the associative array ARRAY, as ARRAY[DEV.NAME], with one `rdma
# statistic` call a device (a call costs about a second under TCG)
snap() {
	local -n arr=$1
	local d ex tok prev

	for d in remu0 remu1; do
		ex=() prev=
		[ "$d" = remu1 ] && ex=(ip netns exec peer)
		for tok in $("${ex[@]}" rdma statistic show link "$d/1"); do
			# shellcheck disable=SC2034 # a name for the caller's array
			[ -n "$prev" ] && arr[$d.$prev]=$tok
			prev=$tok
		done
	done
}
names="completer_retry_err rcvd_seq_err duplicate_request out_of_seq_request
       retry_probe stale_seq_nak"
declare -A before after

# shellcheck disable=SC2086
if modprobe sch_netem && tc qdisc add dev v0 root netem $netem &&
   ip netns exec peer tc qdisc add dev v1 root netem $netem; then
	ktap_pass "setup: netem $netem on v0 and v1"
else
	ktap_fail "setup: netem $netem on v0 and v1"
fi
snap before

for t in "${sel_dp[@]}"; do
	dp "$t" "datapath under loss"
done

# pt PERFTEST LABEL: one perftest run, server remu1 (peer), client remu0
port=19500
pt() {
	local sout cout spid rc rs

	port=$((port + 1))
	sout=$(mktemp) cout=$(mktemp)
	# shellcheck disable=SC2086
	ip netns exec peer timeout 120 $1 -d remu1 -x 1 -F -p "$port" \
		>"$sout" 2>&1 &
	spid=$!
	# the TCP exchange crosses the lossy link too: start once listening
	remu_wait_listen "$spid" "$port"
	# shellcheck disable=SC2086
	timeout 120 $1 -d remu0 -x 1 -F -p "$port" 10.77.0.2 >"$cout" 2>&1
	rc=$?
	wait "$spid"
	rs=$?
	if [ "$rc" = 0 ] && [ "$rs" = 0 ] &&
	   grep -Eq '^ *[0-9]+ +[0-9]+ +[0-9.]+' "$cout"; then
		ktap_pass "$2: $1"
		grep -E '^ *[0-9]+ +[0-9]+ +[0-9.]+' "$cout" | sed 's/^/#   /'
	else
		echo "# server (exit $rs):"; tail -15 "$sout" | sed 's/^/#   /'
		echo "# client (exit $rc):"; tail -15 "$cout" | sed 's/^/#   /'
		ktap_fail "$2: $1"
	fi
	rm -f "$sout" "$cout"
}

for t in "${sel_pt[@]}"; do
	pt "$t" "perftest under loss"
done

# what each side counted during the runs
declare -A delta
snap after
for d in remu0 remu1; do
	line=""
	for n in $names; do
		delta[$d.$n]=$((${after[$d.$n]:-0} - ${before[$d.$n]:-0}))
		line+=" $n=${delta[$d.$n]}"
	done
	ktap_diag "$d:$line"
done
# requesters retransmitted (timer or NAK), responders saw duplicates
retx=0 dup=0
for d in remu0 remu1; do
	retx=$((retx + delta[$d.completer_retry_err] + delta[$d.rcvd_seq_err]))
	dup=$((dup + delta[$d.duplicate_request]))
done
if [ "$retx" -gt 0 ]; then
	ktap_pass "counters: retransmissions ($retx timer/NAK go-backs)"
else
	ktap_fail "counters: retransmissions ($retx timer/NAK go-backs)"
fi
if [ "$dup" -gt 0 ]; then
	ktap_pass "counters: duplicate requests seen by the responders ($dup)"
else
	ktap_fail "counters: duplicate requests seen by the responders ($dup)"
fi
probe=0 stale=0
for d in remu0 remu1; do
	probe=$((probe + delta[$d.retry_probe]))
	stale=$((stale + delta[$d.stale_seq_nak]))
done
if [ $((probe + stale)) -gt 0 ]; then
	ktap_pass "counters: recovery beyond go-back-N ($probe probes, $stale stale NAKs)"
else
	ktap_fail "counters: recovery beyond go-back-N ($probe probes, $stale stale NAKs)"
fi

qdisc_del
trap - EXIT
if ! tc qdisc show dev v0 | grep -q netem &&
   ! ip netns exec peer tc qdisc show dev v1 | grep -q netem; then
	ktap_pass "teardown: netem removed from v0 and v1"
else
	ktap_fail "teardown: netem removed from v0 and v1"
fi

# ACK coalescing: every packet remu0 sends arrives twice (netem duplicate
# 100% on v0, nothing else).  remu1 sees each copy as a duplicate but
# ACKs only those with AckReq set (the last packet of a message and every
# 32nd PSN), so it sends a small fraction of one packet per duplicate and
# counts the rest as ack_deferred.
if [ "$sel_dup" = 1 ]; then
	before=() after=()
	snap before
	tc qdisc add dev v0 root netem duplicate 100%
	pt "ib_write_bw -s 1048576 -n 10" "every packet duplicated"
	tc qdisc del dev v0 root
	snap after
	sent=$((${after[remu1.sent_pkts]:-0} - ${before[remu1.sent_pkts]:-0}))
	dup=$((${after[remu1.duplicate_request]:-0} - ${before[remu1.duplicate_request]:-0}))
	def=$((${after[remu1.ack_deferred]:-0} - ${before[remu1.ack_deferred]:-0}))
	ktap_diag "remu1: duplicate_request=$dup sent_pkts=$sent ack_deferred=$def"
	if [ "$dup" -ge 2000 ] && [ $((sent * 4)) -lt "$dup" ] &&
	   [ $((def * 2)) -ge "$dup" ]; then
		ktap_pass "ACK coalescing: $dup duplicates, $sent packets sent back, $def ACKs deferred"
	else
		ktap_fail "ACK coalescing: $dup duplicates (>= 2000), $sent packets sent back (< 1/4), $def ACKs deferred (>= 1/2)"
	fi
fi

for t in "${sel_out[@]}"; do
	dp "$t" "outage" REMU_DP_OUTAGE=1
done
qdisc_del
ktap_finished
