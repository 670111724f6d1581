#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# remu_wire_test.sh - the RoCEv2 wire layer: the ICRC driver the crypto API
# bound, crafted valid and hostile datagrams and the counter each one must
# move, loopback through lo, the per-namespace UDP sockets, and interop on
# the receive path with upstream rxe (rxe0 in the initial namespace sends
# real UD and RC packets to remu1; every one must be counted as received
# with no ICRC error).  Runs in the test VM after scripts/remu-up; leaves
# remu0 and remu1 as it found them.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$here/lib/remu_ktap_lib.sh"
. "$here/lib/remu_lib.sh"
py=("python3" "$here/remu_wire.py")

ktap_header 38

# earlier tests may have taken v0/v1 down and up, which drops their IPv6
# addresses: restore the standard topology (idempotent)
"$repo/scripts/remu-up" >/dev/null || echo "# remu-up failed"

# counters of remu1, as "name value" lines (rdma prints "link remu1/1
# NAME VALUE..."); shell builtins after the one rdma: in the TCG guest
# every process start costs a tenth of a second or more
stats() {
	local out t i
	out=$(rdma statistic show link remu1/1) || return 1
	read -rd '' -a t <<<"$out"
	for ((i = 2; i + 1 < ${#t[@]}; i += 2)); do echo "${t[i]} ${t[i + 1]}"; done
}
has4791() { # NETNS-or-"" FAMILY(4|6): is UDP 4791 bound there?
	local ex=() out
	[ -n "$1" ] && ex=(ip netns exec "$1")
	out=$("${ex[@]}" ss -Huln -"$2" 'sport = :4791') && [ -n "$out" ]
}

# batch_case NAME ARGS...: a case for the next py_batch: KTAP line NAME,
# ARGS its line to remu_wire.py
b_names=() b_lines=()
batch_case() { b_names+=("$1"); shift; b_lines+=("$*"); }
# py_batch CMD...: run `remu_wire.py CMD` once for the cases queued by
# batch_case (one python start: up to a second in the TCG guest), then
# print their KTAP lines in order, with its diagnostics for a failed one
# (remu_wire.py's docstring: the protocol); the queue is empty after
py_batch() {
	local out i tag n rest
	local -A res=() diag=()
	out=$(printf '%s\n' "${b_lines[@]}" | timeout 300 "${py[@]}" "$@" 2>&1)
	while IFS= read -r rest; do
		read -r tag n _ <<<"$rest"
		case $tag in
		ok | fail) res[$n]=$tag ;;
		diag) diag[$n]+="# ${rest#diag "$n" }"$'\n' ;;
		*) diag[0]+="# $rest"$'\n' ;;	# python's own complaint
		esac
	done <<<"$out"
	for i in "${!b_names[@]}"; do
		n=$((i + 1))
		if [ "${res[$n]:-}" = ok ]; then
			ktap_pass "${b_names[$i]}"
			continue
		fi
		printf '%s' "${diag[$n]:-}"
		if [ -z "${res[$n]:-}" ]; then
			printf '%s' "${diag[0]:-}"
			echo "# remu_wire.py gave no answer for this case"
		fi
		ktap_fail "${b_names[$i]}"
	done
	b_names=() b_lines=()
}

# 1. the ICRC's CRC-32 is the accelerated driver: crc32-pclmul, or from
#    6.14 crc32-lib over a crc32_le() that uses PCLMULQDQ (the load log
#    says so: remu asks crc32_optimizations())
icrc_driver() {
	local d c
	c=$(awk '/^name/ { n = $3 } /^driver/ && n == "crc32" { print $3 }' /proc/crypto)
	echo "/proc/crypto: $c"
	d=$(cat /sys/kernel/debug/remu/icrc_driver) || return 1
	echo "remu: $d"
	case $d in
	crc32-pclmul)
		echo "$c" | grep -qx crc32-pclmul &&
			dmesg | grep -q "remu: ICRC computed by crc32-pclmul$" ;;
	crc32-lib)
		echo "$c" | grep -qx crc32-lib &&
			dmesg | grep -q "remu: ICRC computed by crc32-lib (crc32_le optimized for this CPU)$" ;;
	*)	return 1 ;;
	esac
}
ktap_check "icrc: an accelerated crc32 bound (/proc/crypto, debugfs, load log)" icrc_driver

counters_listed() {
	local n s
	s=$'\n'$(stats)
	for n in sent_pkts rcvd_pkts rcvd_icrc_err rcvd_too_short rcvd_ip_options \
		rcvd_bad_opcode rcvd_bad_version rcvd_bad_pkey rcvd_bad_length \
		rcvd_no_qp send_err duplicate_request out_of_seq_request \
		rcvd_rnr_err send_rnr_err rcvd_seq_err ack_deferred \
		retry_exceeded_err retry_rnr_exceeded_err completer_retry_err \
		rdma_sends rdma_recvs out_of_buffer rcvd_bad_path rcvd_bad_resp_psn \
		rcvd_bad_resp_len rcvd_stale_dup rcvd_rxq_full rcvd_bad_qkey \
		rcvd_bad_op_seq rcvd_uc_bad_write rcvd_dup_resp rcvd_resp_ahead \
		rcvd_bad_resp_op rcvd_no_mem rcvd_mad_too_long \
		resp_remote_access_errors \
		resp_invalid_request resp_remote_op_errors; do
		[[ $s == *$'\n'"$n "* ]] || { echo "no counter $n"; return 1; }
	done
}
ktap_check "counters: rdma statistic shows every remu1/1 counter" counters_listed

sockets() {
	has4791 peer 4 && has4791 peer 6 && has4791 "" 4 && has4791 "" 6
}
ktap_check "netns: UDP 4791 (IPv4 and IPv6) open in init and peer" sockets

# 2. crafted packets from the initial namespace to remu1, one datagram a
# case: exactly the EXPECTed counters of remu1 move.  The cases of 2. and
# 3. run in one remu_wire.py process, the KTAP lines come after it.
# batch_case NAME CASE SRC DST NETNS-or-"-" EXPECT...
A=10.77.0.1 B=10.77.0.2 A6=fd77::1 B6=fd77::2
batch_case "rx: valid UD SEND with pad -> rcvd_pkts, rcvd_no_qp" \
	valid_ud $A $B - rcvd_pkts=1 rcvd_no_qp=1
batch_case "rx: valid RC ACK -> rcvd_pkts, rcvd_no_qp" \
	valid_ack $A $B - rcvd_pkts=1 rcvd_no_qp=1
batch_case "rx: valid UD SEND over IPv6 -> rcvd_pkts" \
	valid_ud $A6 $B6 - rcvd_pkts=1 rcvd_no_qp=1
batch_case "rx: shorter than BTH + ICRC -> rcvd_too_short" \
	too_short $A $B - rcvd_too_short=1
batch_case "rx: wrong ICRC -> rcvd_icrc_err" \
	bad_icrc $A $B - rcvd_icrc_err=1
batch_case "rx: wrong ICRC over IPv6 -> rcvd_icrc_err" \
	bad_icrc $A6 $B6 - rcvd_icrc_err=1
batch_case "rx: BTH TVer 1 -> rcvd_bad_version" \
	bad_version $A $B - rcvd_bad_version=1
batch_case "rx: reserved opcode 0x15 -> rcvd_bad_opcode" \
	unknown_opcode $A $B - rcvd_bad_opcode=1
batch_case "rx: RD opcode (unsupported) -> rcvd_bad_opcode" \
	rd_opcode $A $B - rcvd_bad_opcode=1
batch_case "rx: CNP (unsupported) -> rcvd_bad_opcode" \
	cnp_opcode $A $B - rcvd_bad_opcode=1
batch_case "rx: XRC opcode (unsupported) -> rcvd_bad_opcode" \
	xrc_opcode $A $B - rcvd_bad_opcode=1
batch_case "rx: RDMA WRITE ONLY with truncated RETH -> rcvd_too_short" \
	truncated_reth $A $B - rcvd_too_short=1
batch_case "rx: UD SEND with truncated DETH -> rcvd_too_short" \
	truncated_deth $A $B - rcvd_too_short=1
batch_case "rx: pad count larger than the payload -> rcvd_bad_length" \
	huge_pad $A $B - rcvd_bad_length=1
batch_case "rx: payload + pad not a multiple of 4 -> rcvd_bad_length" \
	unaligned_payload $A $B - rcvd_bad_length=1
batch_case "rx: ACK carrying payload -> rcvd_bad_length" \
	ack_with_payload $A $B - rcvd_bad_length=1
batch_case "rx: P_Key 0x1234 -> rcvd_bad_pkey" \
	bad_pkey $A $B - rcvd_bad_pkey=1
batch_case "rx: IPv4 options -> rcvd_ip_options" \
	ip_options $A $B - rcvd_ip_options=1

# 3. loopback: to remu1's own address from inside peer: in through lo
batch_case "rx: to own IPv4 address via lo -> found by address, rcvd_pkts" \
	valid_ud $B $B peer rcvd_pkts=1 rcvd_no_qp=1
batch_case "rx: to own IPv6 address via lo -> found by address, rcvd_pkts" \
	valid_ud $B6 $B6 peer rcvd_pkts=1 rcvd_no_qp=1
# remu's own loopback packets carry no ICRC (remu_net_loopback()); one that
# comes to a local address from outside remu, through lo, is still checked
batch_case "rx: wrong ICRC to own IPv4 address via lo -> rcvd_icrc_err" \
	bad_icrc $B $B peer rcvd_icrc_err=1
batch_case "rx: wrong ICRC to own IPv6 address via lo -> rcvd_icrc_err" \
	bad_icrc $B6 $B6 peer rcvd_icrc_err=1
py_batch cases remu1

no_kernel_complaint() {
	! dmesg | grep -E "WARNING:|BUG:|Oops|general protection"
}
ktap_check "rx: hostile packets leave no kernel complaint" no_kernel_complaint

# 4. the loopback path: a packet to a local address of a remu device in
# the sender's namespace goes straight to that device's receive path (no
# IP stack, so UDP InDatagrams does not move), counted in loopback_pkts;
# one to another namespace goes through the veth and the UDP socket
hwc() { local v; read -r v <"/sys/class/infiniband/$1/ports/1/hw_counters/$2"; echo "$v"; }
udp_in() { # NETNS-or-"": UDP InDatagrams there
	local ex=()
	[ -n "$1" ] && ex=(ip netns exec "$1")
	"${ex[@]}" awk '$1 == "Udp:" && $2 ~ /^[0-9]+$/ { print $2 }' /proc/net/snmp
}
lb_port=18600
# loop_case PROG [OPT...]: PROG_pingpong in loopback on remu0, every packet
# through the loopback path: sent, loopback and received counts all equal
loop_case() {
	local s0 l0 r0 u0 s l r u
	s0=$(hwc remu0 sent_pkts) l0=$(hwc remu0 loopback_pkts)
	r0=$(hwc remu0 rcvd_pkts) u0=$(udp_in "")
	lb_port=$((lb_port + 1))
	remu_pingpong "$1" "$lb_port" "" remu0 "" remu0 10.77.0.1 "${@:2}" || return 1
	# a last ACK may still be on its way: until the counts agree (or 3 s)
	for _ in $(seq 30); do
		s=$(($(hwc remu0 sent_pkts) - s0)) l=$(($(hwc remu0 loopback_pkts) - l0))
		r=$(($(hwc remu0 rcvd_pkts) - r0)) u=$(($(udp_in "") - u0))
		[ "$s" -ge 400 ] && [ "$l" = "$s" ] && [ "$r" = "$s" ] && [ "$u" = 0 ] &&
			break
		sleep 0.1
	done
	echo "remu0: sent_pkts +$s loopback_pkts +$l rcvd_pkts +$r; UDP InDatagrams +$u"
	[ "$s" -ge 400 ] && [ "$l" = "$s" ] && [ "$r" = "$s" ] && [ "$u" = 0 ]
}
ktap_check "loopback: rc_pingpong on remu0 all through the loopback path" loop_case rc
ktap_check "loopback: ud_pingpong on remu0 all through the loopback path" loop_case ud
# the same over IPv6: the RoCE GID fd77::1 (the TCP exchange stays IPv4)
loop6() {
	local i
	i=$(remu_gid_index remu0 fd77:0000:0000:0000:0000:0000:0000:0001) ||
		{ echo "remu0 has no RoCE v2 GID fd77::1"; return 1; }
	loop_case rc -g "$i"
}
ktap_check "loopback: rc_pingpong on remu0 over IPv6 all through the loopback path" loop6
# remu0 -> remu1 crosses the veth: the IP stack and peer's UDP socket
wire_case() {
	local s0 l0 l10 r0 u0 s l l1 r u
	s0=$(hwc remu0 sent_pkts) l0=$(hwc remu0 loopback_pkts)
	l10=$(hwc remu1 loopback_pkts) r0=$(hwc remu1 rcvd_pkts)
	u0=$(udp_in peer)
	lb_port=$((lb_port + 1))
	remu_pingpong rc "$lb_port" peer remu1 "" remu0 10.77.0.2 || return 1
	for _ in $(seq 30); do	# as in loop_case
		s=$(($(hwc remu0 sent_pkts) - s0)) l=$(($(hwc remu0 loopback_pkts) - l0))
		l1=$(($(hwc remu1 loopback_pkts) - l10))
		r=$(($(hwc remu1 rcvd_pkts) - r0)) u=$(($(udp_in peer) - u0))
		[ "$s" -ge 200 ] && [ "$l" = 0 ] && [ "$l1" = 0 ] && [ "$r" = "$s" ] &&
			[ "$u" = "$s" ] && break
		sleep 0.1
	done
	echo "remu0: sent_pkts +$s loopback_pkts +$l; remu1: rcvd_pkts +$r loopback_pkts +$l1; peer UDP InDatagrams +$u"
	[ "$s" -ge 200 ] && [ "$l" = 0 ] && [ "$l1" = 0 ] && [ "$r" = "$s" ] &&
		[ "$u" = "$s" ]
}
ktap_check "loopback: rc_pingpong remu0 -> remu1 (another namespace) through the veth and UDP" wire_case

# 5. sockets follow the devices of each namespace
ip netns add wirens
ip link add wa type veth peer name wb netns wirens
ip link set wa up
ip -n wirens link set wb up
ip -n wirens link set lo up
ns_socket_follows() {
	has4791 wirens 4 && { echo "4791 open before any device"; return 1; }
	ip netns exec wirens rdma link add remu2 type remu netdev wb || return 1
	has4791 wirens 4 && has4791 wirens 6 || { echo "no 4791 with remu2"; return 1; }
	ip netns exec wirens rdma link delete remu2 || return 1
	remu_wait_gone remu2 || return 1
	! has4791 wirens 4 && ! has4791 wirens 6 || { echo "4791 still open"; return 1; }
	has4791 peer 4 || { echo "peer lost its socket"; return 1; }
}
ktap_check "netns: 4791 open in a namespace only while it has a remu device" \
	ns_socket_follows
ns_dies_first() {
	ip netns exec wirens rdma link add remu2 type remu netdev wb || return 1
	grep -c "^netns" /sys/kernel/debug/remu/wire
	ip netns del wirens || return 1
	remu_wait_gone remu2 || return 1
	for _ in $(seq 30); do
		[ "$(grep -c "^netns" /sys/kernel/debug/remu/wire)" = 2 ] && return 0
		sleep 0.1
	done
	cat /sys/kernel/debug/remu/wire
	return 1
}
ktap_check "netns: deleting a namespace that holds a remu device" ns_dies_first
ip netns del wirens 2>/dev/null
ip link del wa 2>/dev/null

# 6. upstream rxe in the initial namespace, remu1 in peer
rxe_in() {
	rdma link delete remu0 || return 1
	remu_wait_gone remu0 || return 1
	! has4791 "" 4 || { echo "init still has 4791 without remu0"; return 1; }
	has4791 peer 4 || return 1
	modprobe rdma_rxe || return 1
	rdma link add rxe0 type rxe netdev v0 || return 1
	has4791 "" 4
}
ktap_check "rxe: remu0 out, rxe0 in on v0 (init), remu1 keeps peer's 4791" rxe_in

ip link add vt0 type veth peer name vt1
ip link set vt0 up
eaddrinuse() {
	local out
	if out=$(rdma link add remu7 type remu netdev vt0 2>&1); then
		echo "remu7 created next to rxe's socket"; rdma link delete remu7; return 1
	fi
	echo "$out"
	grep -qi "address already in use" <<<"$out" && ! remu_present remu7 &&
		dmesg | grep -q "UDP port 4791 is already in use in the network namespace of vt0"
}
ktap_check "rxe: remu device in init ns next to rdma_rxe fails with EADDRINUSE" eaddrinuse
ip link del vt0

# rxe0 sends (remu_wire.py rxe-interop: KIND SGID DGID MINPKTS), v1 in
# peer captures; remu1 must count exactly the captured packets as
# received, none as bad.  One python process for the three.
v4g=0000:0000:0000:0000:0000:ffff:0a4d
v6g=fd77:0000:0000:0000:0000:0000:0000
batch_case "rxe interop: UD SENDs (0..1000 B, imm) over IPv4 all received, ICRC good" \
	ud $v4g:0001 $v4g:0002 5
batch_case "rxe interop: UD SENDs over IPv6 all received, ICRC good" \
	ud $v6g:0001 $v6g:0002 5
batch_case "rxe interop: RC WRITE/SEND+imm/READ/atomic requests and retries received" \
	rc $v4g:0001 $v4g:0002 7
py_batch rxe-interop rxe0 v1 peer remu1

rxe_out() {
	rdma link delete rxe0 || return 1
	remu_wait_gone rxe0 || return 1
	modprobe -r rdma_rxe || return 1
	rdma link add remu0 type remu netdev v0 || return 1
	has4791 "" 4 && ibv_devinfo -d remu0 | grep -q PORT_ACTIVE
}
ktap_check "rxe: rxe0 out, remu0 back on v0" rxe_out

ktap_finished
