#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# remu_interop_test.sh - remu against upstream soft-RoCE (rdma_rxe), both
# directions, with unchanged programs.  remu0 is deleted from the initial
# namespace (rxe and remu both want UDP 4791 there), rxe0 is put on v0 in
# its place; remu1 stays on v1 in namespace peer.  Then, once with rxe0 as
# the client and remu1 as the server and once the other way round:
#   perftest  ib_{send,write,read}_bw RC at 1, 4095, 65536 and 1048576 B,
#             ib_{send,write,read}_lat RC at 4095 B, ib_send_bw UD,
#             ib_atomic_bw FETCH_AND_ADD and CMP_AND_SWAP, all with
#             perftest's defaults (128 outstanding READs/atomics)
#   data      ibv_rc_pingpong -c (4 KiB and 64 KiB messages),
#             ibv_ud_pingpong -c: any "invalid data" fails
#   rdma_cm   rping -v -C N (CM MADs over QP1 between the two stacks), every
#             ping line checked against the pattern rping's client writes
# and after each direction the counters of both devices: every packet one
# side sent was received by the other with a good ICRC (remu1's rcvd_pkts
# moved by exactly rxe0's sent_pkts, rxe0's rcvd_pkts - counted by rxe only
# after its ICRC check - by exactly remu1's sent_pkts), remu1's
# rcvd_icrc_err and the error/retransmission counters of both did not move.
# At the end rxe0 is removed and remu0 restored on v0, so later tests see
# the standard topology.  Runs in the test VM after scripts/remu-up.
#
# Usage: remu_interop_test.sh [FILTER]   only the tests whose name has FILTER
#        (the setup, counter and teardown checks always run)
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$here/lib/remu_ktap_lib.sh"
. "$here/lib/remu_lib.sh"

filter=${1:-}
minpkts=1000
[ -z "$filter" ] || minpkts=1
PINGS=20
A=10.77.0.1 B=10.77.0.2
GA=0000:0000:0000:0000:0000:ffff:0a4d:0001
GB=0000:0000:0000:0000:0000:ffff:0a4d:0002

"$repo/scripts/remu-up" >/dev/null || echo "# remu-up failed"

sizes=(1 4095 65536 1048576)
iters() {
	case "$1" in
		1048576) echo 5 ;;
		65536) echo 20 ;;
		*) echo 50 ;;
	esac
}
tests=()
# every run with perftest's defaults: each side's max_rd_atomic is the
# other side's max_qp_rd_atom, 128 on both rxe and remu
for p in send write read; do
	for s in "${sizes[@]}"; do
		tests+=("perf|ib_${p}_bw -s $s -n $(iters "$s")")
	done
done
for p in send write read; do
	tests+=("perf|ib_${p}_lat -s 4095 -n 50")
done
tests+=("perf|ib_send_bw -c UD -s 4095 -n 50")
tests+=("perf|ib_atomic_bw -A FETCH_AND_ADD -n 100" "perf|ib_atomic_bw -A CMP_AND_SWAP -n 100")
tests+=("pp|rc -s 4096 -n 100" "pp|rc -s 65536 -n 20" "pp|ud -s 2048 -n 100")
tests+=("rping|rping -v -C $PINGS")

sel=()
for dir in rxe2remu remu2rxe; do
	for t in "${tests[@]}"; do
		[ -z "$filter" ] || [[ "$dir: ${t#*|}" == *"$filter"* ]] || continue
		sel+=("$dir|$t")
	done
done
# setup + 2 counter checks + teardown
ktap_header $((${#sel[@]} + 4))

wait_gid() { # VAR DEV GID
	local _x
	_x=$(remu_wait_gid "$2" "$3" 2>&1) || { echo "$_x"; return 1; }
	printf -v "$1" %s "$_x"
}

# counters of DEV (NETNS "" or peer) as "name value" lines, from rdma -j
counters() {
	local ex=()
	[ -n "$2" ] && ex=(ip netns exec "$2")
	"${ex[@]}" rdma -j statistic show link "$1/1" | python3 -c '
import json, sys
for link in json.load(sys.stdin):
    for k, v in link.items():
        if isinstance(v, int) and k not in ("port", "ifindex"):
            print(k, v)'
}

RXE_IDX= REMU_IDX=
setup() {
	remu_rxe_in || return 1
	wait_gid RXE_IDX rxe0 "$GA" || return 1
	wait_gid REMU_IDX remu1 "$GB" || return 1
	echo "rxe0 GID index $RXE_IDX ($A), remu1 GID index $REMU_IDX ($B)"
}
# not through ktap_check: RXE_IDX/REMU_IDX must be set in this shell
setup_ok=0
out=$(mktemp)
setup >"$out" 2>&1 && setup_ok=1
sed 's/^/# /' "$out"
rm -f "$out"
if [ "$setup_ok" = 1 ]; then
	ktap_pass "setup: remu0 out, rxe0 on v0 (init), remu1 on v1 (peer)"
else
	ktap_fail "setup: remu0 out, rxe0 on v0 (init), remu1 on v1 (peer)"
fi

# side ROLE DIR: "NETNS DEV GIDX ADDR" of the server or client of DIR
side() {
	if { [ "$2" = rxe2remu ] && [ "$1" = server ]; } ||
	   { [ "$2" = remu2rxe ] && [ "$1" = client ]; }; then
		echo "peer remu1 $REMU_IDX $B"
	else
		echo "- rxe0 $RXE_IDX $A"
	fi
}
nsx() { [ "$1" = - ] || echo "ip netns exec $1"; }

# rxe_timer_kernel: this kernel's rxe has the misfiring retransmit timer
# (no rxe_sender; see counter_check below and docs/portability.md)
rxe_timer_kernel() {
	[[ "$(uname -r)" != *-remu-debug ]] && ! grep -qw rxe_sender /proc/kallsyms
}
rxe_retries() {
	counters rxe0 "" | awk '$1 == "completer_retry_err" { print $2 }'
}

port=19300
# run_pair NAME CHECK "SERVER CMD" "CLIENT CMD" SNS CNS WAIT: start the
# server, wait for it (WAIT: tcp or cm), run the client; both must exit 0
# and CHECK SOUT COUT must succeed.
# A second try, once, only on a kernel whose rxe timer misfires, and only
# when the pair failed, rxe resent during it (its completer_retry_err
# moved) and the rxe side is the one that never finished (timeout's 124):
# 6.1's rxe can lose track of a message it resent needlessly and wait for
# its completion forever while the remu side, which received and
# acknowledged everything, has finished (seen once in CI: ibv_rc_pingpong
# -s 65536 remu2rxe, rxe the server).  The first try's output is shown.
run_pair() {
	local name=$1 check=$2 scmd=$3 ccmd=$4 sns=$5 cns=$6 wait=$7
	local rx0 rxe_rc t0=$SECONDS
	rx0=$(rxe_retries)
	pair_try "$@"
	if [ "$pair_ok" = 0 ] && rxe_timer_kernel; then
		rxe_rc=$pair_rs
		[ "$sns" = - ] || rxe_rc=$pair_rc
		if [ "$rxe_rc" = 124 ] && [ "$(rxe_retries)" != "$rx0" ]; then
			remu_side_report server "$scmd" "$pair_rs" "$pair_sout"
			remu_side_report client "$ccmd" "$pair_rc" "$pair_cout"
			echo "# rxe timed out after its own resends" \
				"(completer_retry_err $rx0 -> $(rxe_retries)): once more"
			pair_clean
			pair_try "$@"
		fi
	fi
	remu_pair_report "$name" "$t0" "$pair_ok" "$scmd" "$pair_rs" \
		"$pair_sout" "$ccmd" "$pair_rc" "$pair_cout"
	pair_clean
}
pair_clean() {
	rm -f "$pair_sout" "$pair_cout" "$pair_sout.err" "$pair_cout.err"
}
# pair_try: one run of run_pair's arguments; sets pair_ok, the exit codes
# pair_rs/pair_rc and the output files pair_sout/pair_cout (+ .err)
pair_try() {
	local check=$2 scmd=$3 ccmd=$4 sns=$5 cns=$6 wait=$7 spid
	pair_ok=1
	pair_sout=$(mktemp) pair_cout=$(mktemp)
	# shellcheck disable=SC2046,SC2086
	$(nsx "$sns") timeout 60 $scmd >"$pair_sout" 2>"$pair_sout.err" &
	spid=$!
	if [ "$wait" = tcp ]; then
		remu_wait_listen "$spid" "$port" || echo "# server not listening on $port"
	else
		remu_wait_cm_listen "$port" || echo "# no rdma_cm listener on $port"
	fi
	# shellcheck disable=SC2046,SC2086
	$(nsx "$cns") timeout 60 $ccmd >"$pair_cout" 2>"$pair_cout.err"
	pair_rc=$?
	wait "$spid"
	pair_rs=$?
	[ "$pair_rc" = 0 ] && [ "$pair_rs" = 0 ] &&
		"$check" "$pair_sout" "$pair_cout" || pair_ok=0
}

check_perf() {
	grep -Eq '^ *[0-9]+ +[0-9]+ +[0-9.]+' "$2" || return 1
	grep -E '^ *[0-9]+ +[0-9]+ +[0-9.]+' "$2" | sed 's/^/#   /'
}
check_pp() { ! grep -qi "invalid data" "$1" "$1.err" "$2" "$2.err"; }
check_rping() {
	remu_rping_expect "$1" "server " "$PINGS" && remu_rping_expect "$2" "" "$PINGS"
}

one() { # DIR KIND ARGS
	local dir=$1 kind=$2 args=$3 sns sdev sidx saddr cns cdev cidx caddr
	read -r sns sdev sidx saddr <<<"$(side server "$dir")"
	read -r cns cdev cidx caddr <<<"$(side client "$dir")"
	port=$((port + 1))
	case "$kind" in
	perf)
		run_pair "$dir: $args" check_perf \
			"$args -d $sdev -x $sidx -F -p $port" \
			"$args -d $cdev -x $cidx -F -p $port $saddr" "$sns" "$cns" tcp ;;
	pp)
		local p=${args%% *} o=${args#* }
		run_pair "$dir: ibv_${p}_pingpong -c $o" check_pp \
			"ibv_${p}_pingpong -d $sdev -g $sidx -c -p $port $o" \
			"ibv_${p}_pingpong -d $cdev -g $cidx -c -p $port $o $saddr" \
			"$sns" "$cns" tcp ;;
	rping)
		run_pair "$dir: $args (rdma_cm)" check_rping \
			"$args -s -a $saddr -p $port" "$args -c -a $saddr -p $port" \
			"$sns" "$cns" cm ;;
	esac
}

# counter_check DIR BEFORE_RXE BEFORE_REMU: the packets of DIR's runs all
# arrived with a good ICRC, and nothing was retransmitted or in error.
# On the debug kernel (make check-debug: KASAN and lockdep make it several
# times slower) a requester's timer may expire before a slow response
# comes (perftest's QP timeout is 67 ms): timer resends, and the
# duplicates they make at the other end, are shown but allowed there;
# every packet must still arrive (the sent and received counts match).
# On a kernel whose rxe runs its completer only when a response comes or
# its timer fires (Linux 6.1: rxe_requester() and rxe_completer() are two
# tasklets; later kernels run both in one task, rxe_sender(), which is
# how this test tells them apart), rxe's retransmit timer misfires: a
# send arms it only when it is not pending, and only the completer pushes
# it back, so after an idle moment it expires a fixed time after an
# EARLIER send, while the current message's response is on its way, and
# rxe resends.  rxe against itself does the same there (docs/
# portability.md, "6.1's rxe and its retransmit timer").  rxe's timer
# resends (its completer_retry_err) and, when there were some, what they
# make at remu (duplicates; out-of-sequence packets and the NAK remu
# sends for them) are shown but allowed there; remu's own retry counters
# must still stay at zero.
counter_check() {
	local ar ab allow=none
	ar=$(mktemp) ab=$(mktemp)
	counters rxe0 "" >"$ar"
	counters remu1 peer >"$ab"
	if [[ "$(uname -r)" == *-remu-debug ]]; then
		allow=debug
	elif rxe_timer_kernel; then
		allow=rxe-timer
	fi
	python3 - "$2" "$ar" "$3" "$ab" "$minpkts" "$allow" <<'EOF'
import sys
def load(p):
    return {k: int(v) for k, v in (l.split() for l in open(p))}
r0, r1, m0, m1 = (load(p) for p in sys.argv[1:5])
dr = {k: r1[k] - r0.get(k, 0) for k in r1}
dm = {k: m1[k] - m0.get(k, 0) for k in m1}
print("# rxe0:  " + " ".join("%s=%d" % kv for kv in sorted(dr.items()) if kv[1]))
print("# remu1: " + " ".join("%s=%d" % kv for kv in sorted(dm.items()) if kv[1]))
bad = []
allowed = {
    "none": (),
    "debug": (("rxe0", dr, "completer_retry_err"),
              ("remu1", dm, "completer_retry_err"),
              ("rxe0", dr, "duplicate_request"),
              ("remu1", dm, "duplicate_request")),
    # rxe's resends, and only when rxe did resend: the duplicates they
    # make at remu, and the out-of-sequence packets of a go-back in the
    # middle of a message with the sequence NAK remu answers them with
    "rxe-timer": (("rxe0", dr, "completer_retry_err"),
                  ("remu1", dm, "duplicate_request"),
                  ("remu1", dm, "out_of_seq_request"),
                  ("rxe0", dr, "rcvd_seq_err"),
                  # its resends after the remu side finished and
                  # destroyed its QP (run_pair's second try)
                  ("remu1", dm, "rcvd_no_qp"))
                 if dr.get("completer_retry_err", 0) else (),
}[sys.argv[6]]
why = {"debug": "on the debug kernel",
       "rxe-timer": "with this kernel's rxe (no rxe_sender: its timer misfires)"}
for who, d, k in allowed:
    if d.get(k, 0):
        print("# %s %s +%d: allowed %s" % (who, k, d[k], why[sys.argv[6]]))
        d[k] = 0
if dm["rcvd_pkts"] != dr["sent_pkts"]:
    bad.append("remu1 rcvd_pkts +%d but rxe0 sent_pkts +%d"
               % (dm["rcvd_pkts"], dr["sent_pkts"]))
if dr["rcvd_pkts"] != dm["sent_pkts"]:
    bad.append("rxe0 rcvd_pkts +%d (after its ICRC check) but remu1 sent_pkts +%d"
               % (dr["rcvd_pkts"], dm["sent_pkts"]))
if dr["sent_pkts"] < int(sys.argv[5]) or dm["sent_pkts"] < int(sys.argv[5]):
    bad.append("too few packets to mean anything")
for k in ("duplicate_request", "out_of_seq_request", "rcvd_rnr_err",
          "rcvd_seq_err", "retry_exceeded_err", "retry_rnr_exceeded_err",
          "completer_retry_err", "send_err", "link_downed"):
    if dr.get(k, 0):
        bad.append("rxe0 %s +%d" % (k, dr[k]))
for k, v in dm.items():
    if v and k.startswith("rcvd_") and k != "rcvd_pkts" or \
       v and k in ("duplicate_request", "out_of_seq_request", "send_err",
                   "retry_exceeded_err", "retry_rnr_exceeded_err",
                   "completer_retry_err"):
        bad.append("remu1 %s +%d" % (k, v))
for b in bad:
    print("# " + b)
sys.exit(1 if bad else 0)
EOF
	local st=$?
	rm -f "$ar" "$ab"
	return $st
}

for dir in rxe2remu remu2rxe; do
	br=$(mktemp) bm=$(mktemp)
	if [ "$setup_ok" = 1 ]; then
		counters rxe0 "" >"$br"
		counters remu1 peer >"$bm"
	fi
	for x in "${sel[@]}"; do
		[ "${x%%|*}" = "$dir" ] || continue
		x=${x#*|}
		if [ "$setup_ok" = 1 ]; then
			one "$dir" "${x%%|*}" "${x#*|}"
		else
			ktap_fail "$dir: ${x#*|} (no setup)"
		fi
	done
	name="$dir: counters: every packet received with a good ICRC, no error or retransmission"
	if [ "$setup_ok" = 1 ] && counter_check "$dir" "$br" "$bm"; then
		ktap_pass "$name"
	else
		ktap_fail "$name"
	fi
	rm -f "$br" "$bm"
done

ktap_check "teardown: rxe0 out, remu0 back on v0" remu_rxe_out

ktap_finished
