#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# remu_mckey_test.sh - RDMA CM multicast over remu with rdmacm-utils'
# unchanged mckey: rdma_join_multicast() on RoCEv2 makes the MGID from the
# IPv4 group (::ffff:a.b.c.d) and librdmacm attaches the QP
# (ibv_attach_mcast); the sender posts UD SEND_WITH_IMM to QPN 0xffffff.
#   - wire: two receiving QPs (mckey -c 2) in namespace peer on remu1
#     (10.77.0.2), the sender in the initial namespace on remu0
#     (10.77.0.1); v1 is a member of the IP group while they are joined
#     (the CM's membership and remu's) and not after
#   - loopback: receiver and sender both on remu0
#   - no_loopback: the same with the sender's QP created with
#     IBV_QP_CREATE_BLOCK_SELF_MCAST_LB (mckey -l): the receiver still
#     gets every message (the flag blocks the sender's own copy only)
# A test passes when both sides exit 0, the receiver printed that it
# joined the group and completed its transfers (mckey's receiver polls
# until it has -C completions per QP), and remu's counters moved by
# exactly the messages sent: rcvd_mcast_pkts once per message on the
# receiving device, rdma_recvs once per message and receiving QP.
# Finally every remu object count is back where it started.
#
# Usage (in the test VM, after scripts/remu-up):
#   remu_mckey_test.sh [FILTER]    run only the tests whose name contains FILTER
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$here/lib/remu_ktap_lib.sh"
. "$here/lib/remu_lib.sh"

filter=${1:-}
"$repo/scripts/remu-up" >/dev/null || echo "# remu-up failed"

N=20		# messages
SIZE=1000	# bytes each
base_objects=$(cat /sys/kernel/debug/remu/objects 2>/dev/null)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ns() { [ "$1" = init ] || echo "ip netns exec $1"; }
hw() { cat "/sys/class/infiniband/$1/ports/1/hw_counters/$2"; }

# igmp_users NS DEV GROUP: the users of IPv4 GROUP on DEV in NS (0: none)
igmp_users() {
	local hex a b c d
	# the kernel prints the __be32 group as %08X of a little-endian u32
	IFS=. read -r a b c d <<<"$3"
	hex=$(printf '%02X%02X%02X%02X' "$d" "$c" "$b" "$a")
	# shellcheck disable=SC2046
	$(ns "$1") cat /proc/net/igmp | awk -v d="$2" -v g="$hex" '
		/^[0-9]/ { cur = ($2 == d) }
		cur && $1 == g { u = $2 }
		END { print u + 0 }'
}

# the counters a lost message would show up in, for the diagnostics
counters() {
	local d c
	for d in remu0 remu1; do
		for c in sent_pkts send_err rcvd_pkts rcvd_no_qp rcvd_mcast_pkts \
			 rcvd_mcast_no_qp out_of_buffer rdma_sends rdma_recvs; do
			echo "$d $c $(hw $d $c)"
		done
	done
}

# mc NAME GROUP RNS RDEV RBIND "RECV OPTS" QPS SNS SBIND "SEND OPTS"
# The receiver (QPS QPs) joins GROUP in namespace RNS bound to RBIND on
# RDEV, the sender in SNS bound to SBIND once the receiver has joined.
mc() {
	local name=$1 group=$2 rns=$3 rdev=$4 rbind=$5 ropts=$6 qps=$7
	local sns=$8 sbind=$9 sopts=${10}
	local r=$tmp/recv s=$tmp/send rpid rc rs ok=1 t0=$SECONDS i
	local pkts recvs users rif

	rif=$([ "$rns" = peer ] && echo v1 || echo v0)

	[ -z "$filter" ] || [[ "$name" == *"$filter"* ]] || return 0
	pkts=$(hw "$rdev" rcvd_mcast_pkts)
	recvs=$(hw "$rdev" rdma_recvs)
	counters >"$tmp/c0"
	# shellcheck disable=SC2046,SC2086
	$(ns "$rns") timeout 120 stdbuf -oL mckey -m "$group" -b "$rbind" \
		-C $N -S $SIZE $ropts >"$r" 2>"$r.err" &
	rpid=$!
	for i in $(seq 300); do
		[ "$(grep -c "mckey: joined dgid: ::ffff:$group " "$r")" = "$qps" ] && break
		sleep 0.1
	done
	# the CM's membership of the netdev for each ID, and remu's (one
	# per device and group)
	users=$(igmp_users "$rns" "$rif" "$group")
	[ "$users" = $((qps + 1)) ] ||
		{ echo "# $group: $users users on $rif, $((qps + 1)) expected"; ok=0; }
	# shellcheck disable=SC2046,SC2086
	$(ns "$sns") timeout 120 mckey -m "$group" -b "$sbind" -s -C $N \
		-S $SIZE $sopts >"$s" 2>"$s.err"
	rc=$?
	wait "$rpid"
	rs=$?
	[ "$rc" = 0 ] && [ "$rs" = 0 ] || ok=0
	grep -q "^receiving data transfers" "$r" &&
		grep -q "^data transfers complete" "$r" &&
		grep -q "^return status 0" "$r" &&
		grep -q "^return status 0" "$s" || ok=0
	sleep 0.1	# the core caches hw counters for 10 ms
	pkts=$(( $(hw "$rdev" rcvd_mcast_pkts) - pkts ))
	recvs=$(( $(hw "$rdev" rdma_recvs) - recvs ))
	[ "$pkts" = $N ] || { echo "# $rdev rcvd_mcast_pkts +$pkts, +$N expected"; ok=0; }
	[ "$recvs" = $((N * qps)) ] ||
		{ echo "# $rdev rdma_recvs +$recvs, +$((N * qps)) expected"; ok=0; }
	[ "$ok" = 1 ] || counters | diff "$tmp/c0" - | sed -n 's/^> /# after: /p'
	users=$(igmp_users "$rns" "$rif" "$group")
	[ "$users" = 0 ] || { echo "# $group: still $users users after leaving"; ok=0; }
	remu_pair_report "$name" "$t0" "$ok" "mckey $ropts (receiver, namespace $rns)" \
		"$rs" "$r" "mckey -s $sopts (sender, namespace $sns)" "$rc" "$s"
}

count=0
for n in mckey.wire mckey.loopback mckey.no_loopback objects; do
	[ -z "$filter" ] || [[ "$n" == *"$filter"* ]] || continue
	count=$((count + 1))
done
ktap_header "$count"

mc mckey.wire 239.77.6.1 peer remu1 10.77.0.2 "-c 2" 2 init 10.77.0.1 ""
mc mckey.loopback 239.77.6.2 init remu0 10.77.0.1 "" 1 init 10.77.0.1 ""
mc mckey.no_loopback 239.77.6.3 init remu0 10.77.0.1 "" 1 init 10.77.0.1 "-l"

# every CM ID's QP, CQ, MR, AH, group and attachment is gone again
if [ -z "$filter" ] || [[ objects == *"$filter"* ]]; then
	remu_objects_ktap "$base_objects"
fi
ktap_finished
