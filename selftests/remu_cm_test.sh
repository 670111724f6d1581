#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# remu_cm_test.sh - the GSI QP (QP1) and the RDMA connection manager over
# remu, with unchanged rdma-core and perftest programs:
#   - ib_mad's QP1 exists on both devices (QPN 1, type GSI, RTS) and the
#     port advertises CM support
#   - rping -v -V -C 1000 over the wire (100 in loopback and over IPv6):
#     every "ping data" line the client and the server print carries the
#     exact pattern the client wrote (checked here too)
#   - ucmatose (RC connections) and udaddy (UD, SIDR) complete
#   - rdma_server / rdma_client (librdmacm's rdma_create_ep example: one
#     16-byte SEND each way) both report "end 0"
#   - ib_{send,write,read}_bw -R (perftest over rdma_cm)
#   - rdma link delete takes QP1 and everything ib_mad set up for it away
#     (ib_mad destroys them), and a new device gets a new QP1
# each between remu0 (initial namespace, client) and remu1 (namespace
# peer, server) and in loopback on remu0; rping also over IPv6.  Then the
# user RDMA CM follows the process's network namespace: two rping servers
# listen on the same port, one in each namespace, and each serves the
# client that connects to its namespace's address.  Finally every remu
# object count is back where it started.
#
# Every program runs under timeout; a test passes when both sides exit 0
# and their output says what it must; otherwise both outputs are shown.
#
# Usage (in the test VM, after scripts/remu-up):
#   remu_cm_test.sh [FILTER]    run only the tests whose name contains FILTER
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$here/lib/remu_ktap_lib.sh"
. "$here/lib/remu_lib.sh"

filter=${1:-}
"$repo/scripts/remu-up" >/dev/null || echo "# remu-up failed"

PINGS=100
WIRE_PINGS=1000
objects() { cat /sys/kernel/debug/remu/objects 2>/dev/null; }
base_objects=$(objects)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ns NAME: the command prefix that runs in namespace NAME ("init": none)
ns() { [ "$1" = init ] || echo "ip netns exec $1"; }

# pair NAME PORT SNS "SERVER CMD" CNS "CLIENT CMD" [CHECK]
# The server starts in namespace SNS, the client (once the server listens
# on PORT) in CNS; both must exit 0, then CHECK (a function given the
# server and client output files) must succeed.
pair() {
	local name=$1 port=$2 sns=$3 scmd=$4 cns=$5 ccmd=$6 check=${7:-}
	local sout=$tmp/server cout=$tmp/client spid rc rs ok=1 t0=$SECONDS

	[ -z "$filter" ] || [[ "$name" == *"$filter"* ]] || return 0
	# shellcheck disable=SC2046,SC2086
	$(ns "$sns") timeout 120 $scmd >"$sout" 2>"$sout.err" &
	spid=$!
	if ! remu_wait_cm_listen "$port"; then
		echo "# no rdma_cm listener on port $port"
		ok=0
	fi
	# shellcheck disable=SC2046,SC2086
	$(ns "$cns") timeout 120 $ccmd >"$cout" 2>"$cout.err"
	rc=$?
	wait "$spid"
	rs=$?
	[ "$rc" = 0 ] && [ "$rs" = 0 ] || ok=0
	if [ "$ok" = 1 ] && [ -n "$check" ] && ! "$check" "$sout" "$cout"; then
		ok=0
	fi
	remu_pair_report "$name" "$t0" "$ok" "$scmd (namespace $sns)" "$rs" \
		"$sout" "$ccmd (namespace $cns)" "$rc" "$cout"
}

check_rping() {
	remu_rping_expect "$1" "server " "$PINGS" &&
		remu_rping_expect "$2" "" "$PINGS"
}
check_rping_wire() {
	remu_rping_expect "$1" "server " "$WIRE_PINGS" &&
		remu_rping_expect "$2" "" "$WIRE_PINGS"
}
# rdma_server/rdma_client print "NAME: end 0" when all went well
check_end0() {
	grep -qx "rdma_server: end 0" "$1" && grep -qx "rdma_client: end 0" "$2"
}
check_done() { grep -q "test complete" "$1" && grep -q "test complete" "$2"; }
# perftest: the client's result line (size, iterations, numbers)
check_perf() { grep -Eq '^ *[0-9]+ +[0-9]+ +[0-9.]+' "$2"; }

count=0
for n in qp1 rping.wire rping.loopback rping.ipv6 rping.netns ucmatose.wire \
	 ucmatose.loopback udaddy.wire udaddy.loopback \
	 rdma_server.wire rdma_server.loopback \
	 ib_send_bw.wire ib_send_bw.loopback ib_write_bw.wire \
	 ib_write_bw.loopback ib_read_bw.wire ib_read_bw.loopback objects \
	 qp1.unregister; do
	[ -z "$filter" ] || [[ "$n" == *"$filter"* ]] || continue
	count=$((count + 1))
done
ktap_header "$count"

# QP1: created by ib_mad on each device; the port says CM is supported
qp1() {
	local d ok=0 cap
	for d in remu0 remu1; do
		rdma resource show qp link "$d/1" lqpn 1 |
			grep -q "type GSI state RTS" || { echo "# $d: no GSI QP 1 in RTS"; ok=1; }
		cap=$(cat "/sys/class/infiniband/$d/ports/1/cap_mask")
		(( (cap >> 16) & 1 )) || { echo "# $d: cap_mask $cap without CM_SUP"; ok=1; }
	done
	rdma resource show qp | grep GSI | sed 's/^/# /'
	return $ok
}
if [ -z "$filter" ] || [[ qp1 == *"$filter"* ]]; then
	if qp1; then ktap_pass qp1; else ktap_fail qp1; fi
fi

rp="rping -v -V -C $PINGS"
rpw="rping -v -V -C $WIRE_PINGS"
pair rping.wire 19101 peer "$rpw -s -a 10.77.0.2 -p 19101" \
	init "$rpw -c -a 10.77.0.2 -p 19101" check_rping_wire
pair rping.loopback 19102 init "$rp -s -a 10.77.0.1 -p 19102" \
	init "$rp -c -a 10.77.0.1 -p 19102" check_rping
pair rping.ipv6 19103 peer "$rp -s -a fd77::2 -p 19103" \
	init "$rp -c -a fd77::2 -p 19103" check_rping

# rdma_cm follows the network namespace: the same port is free in each
# namespace, and a client reaches the listener of the namespace that owns
# the address it connects to.
rping_netns() {
	local s0=$tmp/s0 s1=$tmp/s1 c0=$tmp/c0 c1=$tmp/c1 p0 p1 r0 r1 r2 r3 ok=0
	local srv="rping -v -V -C 10 -s -a 0.0.0.0 -p 19104"

	# shellcheck disable=SC2086
	timeout 120 $srv >"$s0" 2>"$s0.err" &
	p0=$!
	# shellcheck disable=SC2086
	ip netns exec peer timeout 120 $srv >"$s1" 2>"$s1.err" &
	p1=$!
	sleep 0.5
	for _ in $(seq 100); do
		[ "$(rdma resource show cm_id | grep -c 'state LISTEN .*comm rping src-addr 0.0.0.0:19104 ')" -ge 2 ] && break
		sleep 0.2
	done
	rdma resource show cm_id | grep 19104 | sed 's/^/# /'
	timeout 120 rping -v -V -C 10 -c -a 10.77.0.2 -p 19104 >"$c0" 2>"$c0.err"
	r0=$?
	echo "# client init->peer done at $((SECONDS - t0)) s"
	ip netns exec peer timeout 120 rping -v -V -C 10 -c -a 10.77.0.1 \
		-p 19104 >"$c1" 2>"$c1.err"
	r1=$?
	echo "# client peer->init done at $((SECONDS - t0)) s"
	wait "$p0"
	r2=$?
	wait "$p1"
	r3=$?
	echo "# servers done at $((SECONDS - t0)) s"
	echo "# exits: client init->peer $r0, client peer->init $r1, server init $r2, server peer $r3"
	[ "$r0$r1$r2$r3" = 0000 ] || ok=1
	# the peer's server served the client from init, and the other way round
	remu_rping_expect "$c0" "" 10 &&
		remu_rping_expect "$s1" "server " 10 &&
		remu_rping_expect "$c1" "" 10 &&
		remu_rping_expect "$s0" "server " 10 || ok=1
	if [ "$ok" != 0 ]; then
		for f in s0 s1 c0 c1; do
			echo "# $f:"; tail -5 "$tmp/$f" | sed 's/^/#   /'
			[ ! -f "$tmp/$f.err" ] ||
				tail -5 "$tmp/$f.err" | sed 's/^/#   stderr: /'
		done
	fi
	return $ok
}
if [ -z "$filter" ] || [[ rping.netns == *"$filter"* ]]; then
	t0=$SECONDS
	if rping_netns; then
		ktap_pass "rping.netns ($((SECONDS - t0)) s)"
	else
		ktap_fail rping.netns
	fi
fi

pair ucmatose.wire 19105 peer "ucmatose -p 19105 -C 20" \
	init "ucmatose -s 10.77.0.2 -p 19105 -C 20" check_done
pair ucmatose.loopback 19106 init "ucmatose -b 10.77.0.1 -p 19106 -C 20" \
	init "ucmatose -s 10.77.0.1 -p 19106 -C 20" check_done
# udaddy's port is fixed (7174)
pair udaddy.wire 7174 peer "udaddy -C 20" \
	init "udaddy -s 10.77.0.2 -C 20" check_done
pair udaddy.loopback 7174 init "udaddy -b 10.77.0.1 -C 20" \
	init "udaddy -s 10.77.0.1 -C 20" check_done
pair rdma_server.wire 19120 peer "rdma_server -s 10.77.0.2 -p 19120" \
	init "rdma_client -s 10.77.0.2 -p 19120" check_end0
pair rdma_server.loopback 19121 init "rdma_server -s 10.77.0.1 -p 19121" \
	init "rdma_client -s 10.77.0.1 -p 19121" check_end0

port=19110
for p in send write read; do
	port=$((port + 1))
	pair "ib_${p}_bw.wire" "$port" \
		peer "ib_${p}_bw -R -d remu1 -F -p $port -s 65536 -n 40" \
		init "ib_${p}_bw -R -d remu0 -F -p $port -s 65536 -n 40 10.77.0.2" \
		check_perf
	port=$((port + 1))
	pair "ib_${p}_bw.loopback" "$port" \
		init "ib_${p}_bw -R -d remu0 -F -p $port -s 65536 -n 40" \
		init "ib_${p}_bw -R -d remu0 -F -p $port -s 65536 -n 40 10.77.0.1" \
		check_perf
done

# every CM AH, QP, CQ, MR ... is gone again (the CM may hold IDs in time
# wait for a moment)
if [ -z "$filter" ] || [[ objects == *"$filter"* ]]; then
	remu_objects_ktap "$base_objects"
fi

# obj NAME [OBJECTS]: one count from the objects listing
obj() { echo "${2:-$(objects)}" | awk -v n="$1" '$1 == n { print $2 }'; }

# Deleting remu0 with QP1 (and ib_mad's PD, DMA MR and CQ) present: the
# counts fall by exactly one device's set, then remu-up adds remu0 again
# and it has a QP1 in RTS once more.
qp1_unregister() {
	local before after t d ok=0
	before=$(objects)
	rdma link delete remu0 || return 1
	after=$(objects)
	# dev, ib_mad's pd + DMA mr + cq + QP1, and the rings (QP1's SQ and RQ,
	# the CQ): nothing else was live
	for t in dev:1 pd:1 mr:1 cq:1 qp:1 ring:3 ah:0 srq:0 ucontext:0; do
		d=$(( $(obj "${t%%:*}" "$before") - $(obj "${t%%:*}" "$after") ))
		[ "$d" = "${t#*:}" ] || { echo "# ${t%%:*}: $d gone, ${t#*:} expected"; ok=1; }
	done
	"$repo/scripts/remu-up" >/dev/null || { echo "# remu-up failed"; return 1; }
	rdma resource show qp link remu0/1 lqpn 1 | grep -q "type GSI state RTS" ||
		{ echo "# the new remu0 has no QP1 in RTS"; ok=1; }
	[ "$(objects)" = "$before" ] || { echo "# objects differ after re-adding remu0"; ok=1; }
	return $ok
}
if [ -z "$filter" ] || [[ qp1.unregister == *"$filter"* ]]; then
	if qp1_unregister; then
		ktap_pass qp1.unregister
	else
		ktap_fail qp1.unregister
	fi
fi
ktap_finished
