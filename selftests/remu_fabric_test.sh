#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# remu_fabric_test.sh - libfabric (Debian's 1.17, package libfabric-bin)
# over remu, unchanged: fi_info lists remu0 and remu1 as verbs domains;
# fi_pingpong with its default sizes (64 B to 1 MiB) and iterations and
# its data check (-c) runs
#   - RDM endpoints of verbs;ofi_rxm (message and tagged), server in
#     namespace peer on remu1 and client in the initial one on remu0, and
#     the other way;
#   - RDM endpoints on remu0 alone (loopback), and with no domain given
#     on the device libfabric picks first;
#   - MSG endpoints of the verbs provider itself (connected through the
#     RDMA CM), remu0 -> remu1.
# ofi_rxm opens one CQ for all its connections, sized for
# FI_UNIVERSE_SIZE peers (1024 by default): 262144 entries, which mlx5
# takes (max_cqe 4194303) and remu refused until its max_cqe became
# mlx5's (fi_enable() failed with EINVAL; docs/compatibility.md).
#
# Across the namespaces each side names its device (-d): both remu
# devices are visible in both namespaces, and the verbs provider's first
# choice in namespace peer is remu0, whose addresses live in the initial
# namespace (rdma_resolve_addr fails there, and fi_domain() with it).
#
# A run passes when both sides exit 0, the client printed the line of
# the last default size (1m), neither printed an error, and both devices'
# rcvd_pkts counters moved.  Every program runs under timeout so nothing
# can hang.  Runs in the test VM after scripts/remu-up.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$here/lib/remu_ktap_lib.sh"
. "$here/lib/remu_lib.sh"

ntests=8
ktap_header $ntests
"$repo/scripts/remu-up" >/dev/null || echo "# remu-up failed"

rcvd() { cat "/sys/class/infiniband/$1/ports/1/hw_counters/rcvd_pkts"; }

if ! command -v fi_pingpong >/dev/null || ! command -v fi_info >/dev/null; then
	echo "# fi_pingpong/fi_info missing: scripts/setup installs libfabric-bin"
	for _ in $(seq $ntests); do ktap_fail "libfabric-bin installed"; done
	ktap_finished
	exit 1
fi

info=$(timeout 60 fi_info -p verbs 2>&1)
if printf '%s\n' "$info" | grep -q "domain: remu0" &&
   printf '%s\n' "$info" | grep -q "domain: remu1"; then
	ktap_pass "fi_info -p verbs: domains remu0 and remu1"
else
	printf '%s\n' "$info" | head -20 | sed 's/^/# /'
	ktap_fail "fi_info -p verbs: domains remu0 and remu1"
fi

# libfabric's own pick with no -d: the first verbs domain it lists.  The
# order follows the kernel's device list, which the link delete/add of
# earlier tests changes, so the no-domain run goes to the namespace that
# device's address lives in.
first=$(printf '%s\n' "$info" | awk '/domain: remu[01]$/ { print $2; exit }')
first=${first:-remu0}

port=47600
# fp NAME SERVER_NS SERVER_DEV CLIENT_NS CLIENT_DEV ADDR -- FI_PINGPONG_ARGS...
# An empty SERVER_DEV/CLIENT_DEV gives no -d: libfabric chooses ($first).
fp() {
	local name=$1 sns=$2 sdev=$3 cns=$4 cdev=$5 addr=$6
	shift 7
	local sex=() cex=() sd=() cd=() sout cout spid rs rc s0 c0 ok=1
	local sx=${sdev:-$first} cx=${cdev:-$first}
	[ -n "$sns" ] && sex=(ip netns exec "$sns")
	[ -n "$cns" ] && cex=(ip netns exec "$cns")
	[ -n "$sdev" ] && sd=(-d "$sdev")
	[ -n "$cdev" ] && cd=(-d "$cdev")
	sout=$(mktemp) cout=$(mktemp)
	port=$((port + 1))
	s0=$(rcvd "$sx") c0=$(rcvd "$cx")
	"${sex[@]}" timeout 120 fi_pingpong -B "$port" "${sd[@]}" -c "$@" \
		>"$sout" 2>&1 &
	spid=$!
	remu_wait_listen "$spid" "$port"
	"${cex[@]}" timeout 100 fi_pingpong -P "$port" "${cd[@]}" -c "$@" \
		"$addr" >"$cout" 2>&1
	rc=$?
	wait "$spid"
	rs=$?
	[ "$rc" = 0 ] && [ "$rs" = 0 ] || ok=0
	grep -qE "^1m[[:space:]]+[0-9]+[[:space:]]+=[0-9]+" "$cout" || ok=0
	# fi_pingpong's own error lines, failed calls and -c mismatches
	grep -qE "^\[error\]|, ret=-|^Error at" "$sout" "$cout" && ok=0
	[ "$(rcvd "$sx")" -gt "$s0" ] && [ "$(rcvd "$cx")" -gt "$c0" ] || ok=0
	if [ "$ok" = 1 ]; then
		ktap_pass "$name"
	else
		echo "# rcvd_pkts $sx +$(($(rcvd "$sx") - s0)) $cx +$(($(rcvd "$cx") - c0))"
		echo "# server (exit $rs):"; tail -20 "$sout" | sed 's/^/#   /'
		echo "# client (exit $rc):"; tail -20 "$cout" | sed 's/^/#   /'
		ktap_fail "$name"
	fi
	rm -f "$sout" "$cout"
}

rxm=(-p "verbs;ofi_rxm" -e rdm)
fp "rdm (verbs;ofi_rxm) remu0 -> remu1" peer remu1 "" remu0 10.77.0.2 -- "${rxm[@]}"
fp "rdm tagged remu0 -> remu1" peer remu1 "" remu0 10.77.0.2 -- "${rxm[@]}" -m tagged
fp "rdm remu1 -> remu0" "" remu0 peer remu1 10.77.0.1 -- "${rxm[@]}"
fp "rdm loopback remu0" "" remu0 "" remu0 10.77.0.1 -- "${rxm[@]}"
echo "# libfabric's first verbs domain: $first"
if [ "$first" = remu1 ]; then
	fp "rdm loopback, no domain given" peer "" peer "" 10.77.0.2 -- "${rxm[@]}"
else
	fp "rdm loopback, no domain given" "" "" "" "" 10.77.0.1 -- "${rxm[@]}"
fi
fp "rdm tagged loopback remu0" "" remu0 "" remu0 10.77.0.1 -- "${rxm[@]}" -m tagged
fp "msg (verbs, RDMA CM) remu0 -> remu1" peer remu1 "" remu0 10.77.0.2 -- -p verbs -e msg
ktap_finished
