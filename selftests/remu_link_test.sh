#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# remu_link_test.sh - device life cycle through `rdma link`, bad input to
# newlink, netdev removal, and module unload/reload with and without live
# users.  Runs in the test VM after scripts/remu-up; leaves remu0 and remu1
# in place (re-created) when it ends.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$here/lib/remu_ktap_lib.sh"
. "$here/lib/remu_lib.sh"

ktap_header 14

# add_fails NAME NETDEV ERRTEXT: newlink must fail with ERRTEXT
add_fails() {
	local out
	if out=$(rdma link add "$1" type remu netdev "$2" 2>&1); then
		echo "rdma link add $1 on $2 succeeded"; rdma link delete "$1"; return 1
	fi
	echo "$out"
	grep -qi "$3" <<<"$out" && ! remu_present "$1"
}
dmesg_has() { dmesg | grep -q -- "$1"; }
objects() { cat /sys/kernel/debug/remu/objects 2>/dev/null; }

ip link add vt0 type veth peer name vt1
ip link set vt0 up
ip link set vt1 up
ip addr add 10.78.0.1/24 dev vt0
trap 'ip link del vt0 2>/dev/null' EXIT

ktap_check "link: unknown netdev is refused (ENODEV)" \
	add_fails remu7 nosuchdev "no such device"
lo_refused() {
	add_fails remu7 lo "invalid argument" &&
		dmesg_has "netdev lo is not an Ethernet device"
}
ktap_check "link: non-Ethernet netdev (lo) is refused (EINVAL)" lo_refused
dup_name() {
	local out
	if out=$(rdma link add remu0 type remu netdev vt0 2>&1); then
		echo "second remu0 created"; return 1
	fi
	echo "$out"
	grep -qi "file exists" <<<"$out" &&
		[ "$(cat /sys/class/infiniband/remu0/parent)" = v0 ]
}
ktap_check "link: duplicate device name is refused (EEXIST)" dup_name
ktap_check "link: second device on one netdev is refused (EEXIST)" \
	add_fails remu7 v0 "file exists"
ktap_check "link: a name other providers would claim is refused (EINVAL)" \
	add_fails myrxe0 vt0 "invalid argument"

add_delete() {
	local before
	before=$(objects | awk '$1 == "dev" { print $2 }')
	rdma link add remu7 type remu netdev vt0 || return 1
	rdma link show | grep -q "remu7/1 state ACTIVE" || { rdma link show; return 1; }
	ibv_devinfo -d remu7 | grep -q PORT_ACTIVE || return 1
	[ "$(cat /sys/class/infiniband/remu7/hca_type)" = remu ] || return 1
	[ "$(cat /sys/class/infiniband/remu7/parent)" = vt0 ] || return 1
	rdma link delete remu7 || return 1
	remu_wait_gone remu7 || return 1
	[ "$(objects | awk '$1 == "dev" { print $2 }')" = "$before" ]
}
ktap_check "link: add, use and delete a device on another netdev" add_delete

any_name() {
	rdma link add lab_nic type remu netdev vt0 || return 1
	ibv_devinfo -d lab_nic | grep -q "transport:.*InfiniBand" || return 1
	rdma link delete lab_nic && remu_wait_gone lab_nic
}
ktap_check "link: provider matches a device of any name" any_name

cycle() {
	local i
	for i in $(seq 20); do
		rdma link add remu7 type remu netdev vt0 || return 1
		rdma link delete remu7 || return 1
	done
	remu_wait_gone remu7
}
ktap_check "link: 20 add/delete cycles" cycle

netdev_gone() {
	rdma link add remu7 type remu netdev vt0 || return 1
	ip link del vt0 || return 1
	remu_wait_gone remu7
}
ktap_check "link: deleting the netdev removes the device" netdev_gone

busy() {
	local pid out st
	"$here/remu_hold" remu0 > /tmp/remu_hold.out &
	pid=$!
	for _ in $(seq 50); do grep -q ready /tmp/remu_hold.out && break; sleep 0.1; done
	grep -q ready /tmp/remu_hold.out || { kill $pid; return 1; }
	if out=$(rmmod remu 2>&1); then
		echo "rmmod succeeded with a live user"; kill $pid; return 1
	fi
	echo "$out"
	ibv_devinfo -d remu0 | grep -q PORT_ACTIVE || { kill $pid; return 1; }
	kill -TERM $pid
	wait $pid
	st=$?
	[ $st -eq 0 ] || { echo "holder exited $st"; return 1; }
}
ktap_check "module: rmmod with a live user fails and leaves the device working" busy

unload() {
	dmesg -C
	rmmod remu || return 1
	remu_present remu0 && return 1
	remu_present remu1 && return 1
	dmesg_has "remu: unloaded" || return 1
	! dmesg_has "remu: leaked"
}
ktap_check "module: unload with live devices removes them, nothing leaked" unload

reload() {
	insmod "${REMU_KO_DIR:-$repo}/remu.ko" || return 1
	rdma link add remu0 type remu netdev v0 || return 1
	ip netns exec peer rdma link add remu1 type remu netdev v1 || return 1
	ibv_devinfo -d remu0 | grep -q PORT_ACTIVE &&
		ibv_devinfo -d remu1 | grep -q PORT_ACTIVE
}
ktap_check "module: reload and re-create remu0 and remu1" reload

kernel_name() {
	local line
	line=$(ibv_devinfo -d remu0 | grep fw_ver) || return 1
	echo "$line"
	grep -q "0.1.0" <<<"$line" &&
		[ "$(cat /sys/module/remu/version)" = "0.1.0" ]
}
ktap_check "module: version in modinfo, sysfs and fw_ver" kernel_name

gid_after_reload() {
	ibv_devinfo -v -d remu0 | grep -q "::ffff:10.77.0.1" ||
		{ ibv_devinfo -v -d remu0; return 1; }
}
ktap_check "module: GIDs are there after reload" gid_after_reload

ktap_finished
