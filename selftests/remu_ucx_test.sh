#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# remu_ucx_test.sh - UCX (Debian's 1.13, packages ucx-utils and libucx0)
# over remu, unchanged: ucx_info -d lists remu0:1 with the rc_verbs and
# ud_verbs transports; ucx_perftest servers in namespace peer on remu1 and
# clients in the initial namespace on remu0 run tag_lat, tag_bw (1 MiB:
# rendezvous), ucp_put_bw and ucp_get (64 KiB) with UCX choosing among
# the IB transports itself, tag_lat and tag_bw with UCX_TLS=rc (rc_verbs,
# wired up over ud_verbs) and UCX_TLS=ud (ud_verbs alone: every message in
# UD datagrams); tag_lat the other way (server on remu0, client in peer);
# and tag_lat and tag_bw with both processes on remu0 (loopback).
#
# UCX reads the network header type of a UD receive from wc.sl, as mlx5
# reports it (docs/compatibility.md); with sl 0 it took every IPv4
# datagram's GRH area for IPv6, found no GID of its own there and dropped
# it, so UD (and with it the wire-up of RC) never got anywhere.
#
# Two settings differ from UCX's defaults, both because the two processes
# share one VM:
#  - UCX_TLS=^sm,tcp (or rc, ud): UCX sees one host and would take shared
#    memory (sysv, posix, cma) between the processes, which carries a
#    tag_lat run with next to nothing on remu; without sm and tcp UCX
#    still chooses the transports and lanes itself among rc_verbs and
#    ud_verbs.
#  - UCX_NET_DEVICES: both remu devices are visible in both namespaces,
#    and UCX uses all it sees (multi-rail: lanes on remu0:1 and remu1:1 on
#    each side), so part of the data would go from remu1 to remu1 inside
#    namespace peer and never cross the veth.  Each side is given the
#    device of its namespace: remu1:1 for the server, remu0:1 for the
#    client (remu0:1 for both in loopback).
#
# A run passes when both sides exit 0, the client prints its "Final:"
# line, neither prints a UCX ERROR, the endpoint configuration UCX logs
# (UCX_LOG_LEVEL=info, "ep_cfg[...]") names the expected transport on
# each side's device and no other device, and both devices' rcvd_pkts
# counters moved (traffic went both ways through remu).  Every program
# runs under timeout so nothing can hang.  Runs in the test VM after
# scripts/remu-up.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$here/lib/remu_ktap_lib.sh"
. "$here/lib/remu_lib.sh"

ktap_header 14
"$repo/scripts/remu-up" >/dev/null || echo "# remu-up failed"

rcvd() { cat "/sys/class/infiniband/$1/ports/1/hw_counters/rcvd_pkts"; }

if ! command -v ucx_perftest >/dev/null || ! command -v ucx_info >/dev/null; then
	echo "# ucx_perftest/ucx_info missing: scripts/setup installs ucx-utils"
	for _ in $(seq 14); do ktap_fail "ucx-utils installed"; done
	ktap_finished
	exit 1
fi

info=$(timeout 60 ucx_info -d 2>&1)
if printf '%s\n' "$info" | grep -A1 -E "Transport: rc_verbs" | grep -q "Device: remu0:1" &&
   printf '%s\n' "$info" | grep -A1 -E "Transport: ud_verbs" | grep -q "Device: remu0:1"; then
	ktap_pass "ucx_info -d: rc_verbs and ud_verbs on remu0:1"
else
	printf '%s\n' "$info" | grep -E "Transport|Device" | sed 's/^/# /'
	ktap_fail "ucx_info -d: rc_verbs and ud_verbs on remu0:1"
fi

port=13400
# up NAME SERVER_NS SERVER_DEV CLIENT_NS CLIENT_DEV ADDR TLS TL -- ARGS...
# TL: the transport the ep_cfg lines must show on each side's device
up() {
	local name=$1 sns=$2 sdev=$3 cns=$4 cdev=$5 addr=$6 tls=$7 tl=$8
	shift 9
	local sex=() cex=() sout cout spid rs rc s0 c0 ok=1 f d
	[ -n "$sns" ] && sex=(ip netns exec "$sns")
	[ -n "$cns" ] && cex=(ip netns exec "$cns")
	sout=$(mktemp) cout=$(mktemp)
	port=$((port + 1))
	s0=$(rcvd "$sdev") c0=$(rcvd "$cdev")
	"${sex[@]}" env UCX_TLS="$tls" UCX_NET_DEVICES="$sdev:1" \
		UCX_LOG_LEVEL=info timeout 120 ucx_perftest -p "$port" \
		>"$sout" 2>&1 &
	spid=$!
	remu_wait_listen "$spid" "$port"
	"${cex[@]}" env UCX_TLS="$tls" UCX_NET_DEVICES="$cdev:1" \
		UCX_LOG_LEVEL=info timeout 100 ucx_perftest "$addr" -p "$port" \
		-w 10 "$@" >"$cout" 2>&1
	rc=$?
	wait "$spid"
	rs=$?
	[ "$rc" = 0 ] && [ "$rs" = 0 ] || ok=0
	grep -q "^Final:" "$cout" || ok=0
	grep -q "UCX  ERROR" "$sout" "$cout" && ok=0
	for f in "$sout:$sdev" "$cout:$cdev"; do
		d=${f##*:}
		# TL on the side's own device, and no lane on another device
		grep "ep_cfg\[" "${f%:*}" | grep -q "$tl/$d:1" || ok=0
		grep "ep_cfg\[" "${f%:*}" | grep -oE "[a-z_]+/remu[0-9]+:1" |
			grep -qv "/$d:1" && ok=0
	done
	[ "$(rcvd "$sdev")" -gt "$s0" ] && [ "$(rcvd "$cdev")" -gt "$c0" ] || ok=0
	if [ "$ok" = 1 ]; then
		ktap_pass "$name"
	else
		echo "# rcvd_pkts $sdev +$(($(rcvd "$sdev") - s0)) $cdev +$(($(rcvd "$cdev") - c0))"
		echo "# server (exit $rs):"
		grep -vE "UCX  (INFO|DEBUG)" "$sout" | tail -20 | sed 's/^/#   /'
		grep "ep_cfg" "$sout" | sed 's/^/#   /'
		echo "# client (exit $rc):"
		grep -vE "UCX  (INFO|DEBUG)" "$cout" | tail -20 | sed 's/^/#   /'
		grep "ep_cfg" "$cout" | sed 's/^/#   /'
		ktap_fail "$name"
	fi
	rm -f "$sout" "$cout"
}

# server in namespace peer on remu1, client in the initial one on remu0
x=(peer remu1 "" remu0 10.77.0.2)
up "tag_lat remu0 -> remu1, UCX's choice" "${x[@]}" "^sm,tcp" rc_verbs -- -t tag_lat -n 2000
up "tag_bw 1 MiB remu0 -> remu1, UCX's choice" "${x[@]}" "^sm,tcp" rc_verbs -- -t tag_bw -s 1048576 -n 20
up "ucp_put_bw 64 KiB remu0 -> remu1, UCX's choice" "${x[@]}" "^sm,tcp" rc_verbs -- -t ucp_put_bw -s 65536 -n 200
up "ucp_get 64 KiB remu0 -> remu1, UCX's choice" "${x[@]}" "^sm,tcp" rc_verbs -- -t ucp_get -s 65536 -n 200
up "tag_lat remu0 -> remu1, rc (wire-up over ud)" "${x[@]}" rc rc_verbs -- -t tag_lat -n 2000
up "tag_bw 1 MiB remu0 -> remu1, rc (wire-up over ud)" "${x[@]}" rc rc_verbs -- -t tag_bw -s 1048576 -n 20
up "tag_lat remu0 -> remu1, ud" "${x[@]}" ud ud_verbs -- -t tag_lat -n 2000
up "tag_bw 1 MiB remu0 -> remu1, ud" "${x[@]}" ud ud_verbs -- -t tag_bw -s 1048576 -n 20
# the other way: server in the initial namespace on remu0
x=("" remu0 peer remu1 10.77.0.1)
up "tag_lat remu1 -> remu0, UCX's choice" "${x[@]}" "^sm,tcp" rc_verbs -- -t tag_lat -n 2000
up "tag_lat remu1 -> remu0, ud" "${x[@]}" ud ud_verbs -- -t tag_lat -n 2000
# loopback: both on remu0
x=("" remu0 "" remu0 10.77.0.1)
up "tag_lat loopback remu0, UCX's choice" "${x[@]}" "^sm,tcp" rc_verbs -- -t tag_lat -n 2000
up "tag_bw 1 MiB loopback remu0, rc" "${x[@]}" rc rc_verbs -- -t tag_bw -s 1048576 -n 20
up "tag_bw 64 KiB loopback remu0, ud" "${x[@]}" ud ud_verbs -- -t tag_bw -s 65536 -n 50
ktap_finished
