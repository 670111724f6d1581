#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# remu_nvmeof_test.sh - NVMe over Fabrics with the kernel's RDMA transport
# (nvmet-rdma target, nvme-rdma host) over remu0 in loopback:
#   - the target is set up through nvmet's configfs: one subsystem whose
#     namespace is a file on tmpfs (so the test can read what the target
#     stored), one port with trtype rdma, adrfam ipv4, 10.77.0.1:4420
#   - `nvme connect -t rdma` finds the namespace; both the host's and the
#     target's QPs, CQs and fast-registration MRs live on remu0
#   - a random pattern written with dd (O_DIRECT) at an offset is in the
#     backing file byte for byte, and reads back the same through NVMe;
#     a pattern written into the backing file reads back through NVMe
#   - fio --verify=crc32c writes and verifies FIO_MB MiB (default 256)
#   - nvme disconnect and the target's removal return every remu object
#     count to where it was (but for ib_core's CQ pools, see
#     counts_back_but_pool), and nvme-rdma/nvmet-rdma unload
#   - the target with use_srq=1 (a kernel SRQ on remu0): 32 MiB of fio
#     random writes verified
#   - teardown under load: fio running against a connected namespace when
#     `nvme disconnect` runs, and again when `rdma link delete remu0`
#     runs (nvme-rdma's and nvmet-rdma's ib_client remove callbacks tear
#     their queues down); fio ends with I/O errors instead of hanging,
#     the counts return, and remu0 is added again for the tests after us
#
# On 6.12 nvme-rdma and nvmet-rdma create their RDMA CM IDs in the initial
# network namespace only, so everything runs on remu0 (v0, 10.77.0.1),
# host and target on the same device: RC loopback inside remu.
#
# Usage (in the test VM, after scripts/remu-up): remu_nvmeof_test.sh
# (the tests build on each other, so they always run all together).
# FIO_MB=N changes the size of the fio run.  On the debug kernel (make
# check-debug) NVMe-oF moves about 1.3 MiB/s instead of 20-30, so there
# the default is 32 MiB: 256 MiB took 195 s to write and ran out of the
# 300 s timeout while verifying.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$here/lib/remu_ktap_lib.sh"

if [[ "$(uname -r)" == *-remu-debug ]]; then
	FIO_MB=${FIO_MB:-32}
else
	FIO_MB=${FIO_MB:-256}
fi
ADDR=10.77.0.1
NQN=nqn.2026-11.io.remu:nvmeof-test
CFS=/sys/kernel/config/nvmet
SUB=$CFS/subsystems/$NQN
PORT=$CFS/ports/4420
BACK_DIR=$(mktemp -d)
BACK=$BACK_DIR/ns1.img
BACK_MB=320
tmp=$(mktemp -d)
trap 'cleanup; rm -rf "$tmp" "$BACK_DIR"' EXIT

"$repo/scripts/remu-up" >/dev/null || echo "# remu-up failed"

objects() { cat /sys/kernel/debug/remu/objects 2>/dev/null; }
base_objects=$(objects)

# run NAME FUNC: one KTAP test line for FUNC's status; its output as
# diagnostics
run() {
	local name=$1 out
	if out=$("$2" 2>&1); then
		[ -n "$out" ] && printf '%s\n' "$out" | sed 's/^/# /'
		ktap_pass "$name"
	else
		[ -n "$out" ] && printf '%s\n' "$out" | sed 's/^/# /'
		ktap_fail "$name"
	fi
}

target_up() {
	[ -d "$SUB" ] && return 0
	# the backing file lives in the VM's tmpfs (RAM)
	truncate -s "${BACK_MB}M" "$BACK" || return 1
	mkdir "$SUB" || return 1
	echo 1 > "$SUB/attr_allow_any_host" || return 1
	mkdir "$SUB/namespaces/1" || return 1
	echo -n "$BACK" > "$SUB/namespaces/1/device_path" || return 1
	# nvmet opens a file with O_DIRECT unless buffered_io is set, and
	# tmpfs has O_DIRECT only since 6.6: on 6.1 enabling fails (EINVAL)
	if ! echo 1 2>/dev/null > "$SUB/namespaces/1/enable"; then
		echo 1 > "$SUB/namespaces/1/buffered_io" &&
			echo 1 > "$SUB/namespaces/1/enable" || return 1
	fi
	mkdir "$PORT" || return 1
	echo rdma > "$PORT/addr_trtype" &&
		echo ipv4 > "$PORT/addr_adrfam" &&
		echo "$ADDR" > "$PORT/addr_traddr" &&
		echo 4420 > "$PORT/addr_trsvcid" || return 1
	ln -s "$SUB" "$PORT/subsystems/$NQN" || return 1
}

target_down() {
	[ -L "$PORT/subsystems/$NQN" ] && rm "$PORT/subsystems/$NQN"
	[ -d "$PORT" ] && rmdir "$PORT"
	if [ -d "$SUB" ]; then
		echo 0 > "$SUB/namespaces/1/enable"
		rmdir "$SUB/namespaces/1" && rmdir "$SUB"
	fi
	rm -f "$BACK"
	[ ! -d "$SUB" ] && [ ! -d "$PORT" ]
}

# the block device (nvmeXnY) of our subsystem, or nothing
ns_dev() {
	local c
	for c in /sys/class/nvme/nvme*; do
		[ -e "$c/subsysnqn" ] || continue
		[ "$(cat "$c/subsysnqn")" = "$NQN" ] || continue
		ls "$c" | grep -m1 '^nvme[0-9]*c*[0-9]*n[0-9]*$' |
			sed 's/c[0-9]*n/n/'
		return 0
	done
}

host_connect() {
	local i d
	timeout 60 nvme connect -t rdma -a "$ADDR" -s 4420 -n "$NQN" ||
		return 1
	for i in $(seq 100); do
		d=$(ns_dev)
		[ -n "$d" ] && [ -b "/dev/$d" ] && { echo "$d" > "$tmp/dev"; return 0; }
		sleep 0.1
	done
	echo "no namespace appeared"
	return 1
}

host_disconnect() {
	timeout 60 nvme disconnect -n "$NQN" >/dev/null
}

cleanup() {
	[ -n "$(ns_dev)" ] && host_disconnect
	target_down >/dev/null 2>&1
}

# modules: nvmet, nvmet-rdma, nvme-rdma present in the kernel
mods() {
	modprobe -a nvmet nvmet-rdma nvme-fabrics nvme-rdma || return 1
	mount | grep -q ' /sys/kernel/config ' ||
		mount -t configfs none /sys/kernel/config || return 1
	[ -d "$CFS" ]
}

connect() {
	target_up || { echo "target setup failed"; return 1; }
	host_connect || return 1
	local q
	q=$(rdma resource show qp link remu0/1 | grep -c "type RC")
	echo "$(cat "$tmp/dev"): $q RC QPs on remu0"
	# admin queue and at least one I/O queue on each side
	[ "$q" -ge 4 ]
}

# dd a random pattern through NVMe; compare with the backing file and
# with what NVMe reads back; then the other way round
dd_pattern() {
	local dev=/dev/$(cat "$tmp/dev")
	# 2 MiB at 3 MiB + 4 KiB, direct I/O: 512 writes of 4 KiB (each
	# one NVMe command; fio below moves the bulk)
	head -c 2M /dev/urandom > "$tmp/pat" || return 1
	dd if="$tmp/pat" of="$dev" bs=4k seek=769 oflag=direct status=none ||
		return 1
	cmp -n 2097152 "$tmp/pat" <(dd if="$BACK" bs=4k skip=769 count=512 \
		status=none) || { echo "backing file differs"; return 1; }
	dd if="$dev" of="$tmp/back" bs=4k skip=769 count=512 iflag=direct \
		status=none || return 1
	cmp "$tmp/pat" "$tmp/back" || { echo "read back through NVMe differs"; return 1; }
	# the other direction: into the backing file, read through NVMe
	head -c 1M /dev/urandom > "$tmp/pat2" || return 1
	dd if="$tmp/pat2" of="$BACK" bs=4k seek=4096 conv=notrunc status=none ||
		return 1
	dd if="$dev" of="$tmp/back2" bs=4k skip=4096 count=256 iflag=direct \
		status=none || return 1
	cmp "$tmp/pat2" "$tmp/back2" || { echo "NVMe read of the backing file differs"; return 1; }
}

fio_verify() {
	local dev=/dev/$(cat "$tmp/dev") t0 t1
	t0=$(date +%s)
	timeout 300 fio --name=remu-verify --filename="$dev" --direct=1 \
		--ioengine=libaio --rw=write --bs=128k --iodepth=16 \
		--size="${FIO_MB}M" --verify=crc32c --do_verify=1 --verify_state_save=0 \
		--verify_fatal=1 --output="$tmp/fio.out" ||
		{ tail -30 "$tmp/fio.out"; return 1; }
	t1=$(date +%s)
	grep -q "err= 0" "$tmp/fio.out" || { cat "$tmp/fio.out"; return 1; }
	grep -E "WRITE:|READ:" "$tmp/fio.out" | sed 's/^ *//'
	echo "$FIO_MB MiB written and verified in $((t1 - t0)) s"
}

counts_back() {
	local i
	for i in $(seq 50); do
		[ "$(objects)" = "$base_objects" ] && return 0
		sleep 0.1
	done
	diff <(echo "$base_objects") <(objects)
	return 1
}

# obj NAME [OBJECTS]: one count from the objects listing
obj() { echo "${2:-$(objects)}" | awk -v n="$1" '$1 == n { print $2 }'; }

# Both nvme-rdma (IB_POLL_SOFTIRQ) and nvmet-rdma (IB_POLL_WORKQUEUE) take
# their I/O queues' CQs from the core's per-device CQ pools
# (ib_cq_pool_get), and the core frees those only when the device is
# unregistered.  So after a disconnect every count is back except the
# pool's CQs (one per poll context, remu has one completion vector) and
# their rings: exactly the CQs on remu0 that ib_core owns and nobody uses.
# The exact baseline is checked after remu0 is deleted and added again.
pool_cqs() {
	rdma -j resource show cq | python3 -c '
import json, sys
n = 0
for cq in json.load(sys.stdin):
    if (cq.get("ifname") == "remu0" and cq.get("users") == 0 and
            cq.get("comm", "").strip("[]") == "ib_core"):
        n += 1
print(n)'
}

counts_back_but_pool() {
	local i cur pool t ok
	for i in $(seq 50); do
		cur=$(objects)
		pool=$(pool_cqs)
		ok=1
		for t in dev ucontext pd mr qp srq ah dm; do
			[ "$(obj $t "$cur")" = "$(obj $t "$base_objects")" ] || ok=0
		done
		[ "$(obj cq "$cur")" = $(( $(obj cq "$base_objects") + pool )) ] &&
			[ "$(obj ring "$cur")" = $(( $(obj ring "$base_objects") + pool )) ] ||
			ok=0
		[ $ok = 1 ] && [ "$pool" -le 2 ] && { echo "$pool CQs left in ib_core's CQ pools"; return 0; }
		sleep 0.1
	done
	diff <(echo "$base_objects") <(objects)
	rdma resource show cq
	return 1
}

disconnect_clean() {
	host_disconnect || { echo "nvme disconnect failed"; return 1; }
	[ -z "$(ns_dev)" ] || { echo "controller still there"; return 1; }
	target_down || { echo "target teardown failed"; return 1; }
	counts_back_but_pool || return 1
	modprobe -r nvme-rdma nvmet-rdma || { echo "cannot unload nvme-rdma/nvmet-rdma"; return 1; }
	modprobe -a nvmet-rdma nvme-rdma
}

# nvmet-rdma with use_srq=1: the target's queues receive through a kernel
# SRQ on remu0 (ib_create_srq, ib_post_srq_recv); 32 MiB written and
# verified through it
srq_fio() {
	local dev t0 t1
	modprobe -r nvmet-rdma && modprobe nvmet-rdma use_srq=1 || return 1
	connect >/dev/null || return 1
	[ "$(obj srq)" -ge 1 ] || { echo "no SRQ on remu0"; objects; return 1; }
	echo "$(obj srq) SRQ(s) on remu0"
	dev=/dev/$(cat "$tmp/dev")
	timeout 120 fio --name=remu-srq --filename="$dev" --direct=1 \
		--ioengine=libaio --rw=randwrite --bs=64k --iodepth=16 \
		--size=32M --verify=crc32c --do_verify=1 --verify_state_save=0 \
		--verify_fatal=1 --output="$tmp/fio-srq.out" ||
		{ tail -30 "$tmp/fio-srq.out"; return 1; }
	grep -q "err= 0" "$tmp/fio-srq.out" || { cat "$tmp/fio-srq.out"; return 1; }
	# the target drains each queue's QP (ib_drain_qp() waits for Last
	# WQE Reached) before the port can go: well under 15 s in all
	t0=$(date +%s)
	host_disconnect || return 1
	target_down || return 1
	t1=$(date +%s)
	echo "disconnect and target removal took $((t1 - t0)) s"
	[ $((t1 - t0)) -lt 15 ] || return 1
	counts_back_but_pool
}

# fio_bg SECONDS: fio writing and verifying in the background; its pid
# in fio_pid
fio_bg() {
	local dev=/dev/$(cat "$tmp/dev")
	timeout 120 fio --name=remu-load --filename="$dev" --direct=1 \
		--ioengine=libaio --rw=randwrite --bs=64k --iodepth=16 \
		--size=64M --time_based --runtime="$1" --verify=crc32c \
		--verify_state_save=0 \
		--output="$tmp/fio-bg.out" >/dev/null 2>&1 &
	fio_pid=$!
}

sent_pkts() { cat /sys/class/infiniband/remu0/ports/1/hw_counters/sent_pkts; }

# fio_running BASE: wait until remu0 sent 4000 packets more than BASE:
# fio is really moving data, past its first burst (polled: no fixed
# wait on top)
fio_running() {
	local i
	for i in $(seq 300); do
		[ "$(sent_pkts)" -gt $(($1 + 4000)) ] && return 0
		sleep 0.1
	done
	return 1
}

# nvme disconnect while fio is writing: fio ends (with I/O errors), no hang
disconnect_under_load() {
	local pid st p0
	connect >/dev/null || return 1
	p0=$(sent_pkts)
	fio_bg 60
	pid=$fio_pid
	fio_running "$p0" || { echo "fio moved no data"; kill "$pid"; return 1; }
	host_disconnect || { echo "nvme disconnect failed under load"; kill "$pid"; return 1; }
	wait "$pid"
	st=$?
	echo "fio exit status $st after the disconnect"
	[ "$st" -ne 124 ] || { echo "fio hung"; return 1; }
	[ -z "$(ns_dev)" ] || return 1
	target_down || return 1
	counts_back_but_pool
}

# rdma link delete remu0 while fio is writing: the ULPs' remove callbacks
# delete the host controller and the target's queues; the device goes
rdma_link_delete_under_load() {
	local pid st t0 t1 p0
	connect >/dev/null || return 1
	p0=$(sent_pkts)
	fio_bg 60
	pid=$fio_pid
	fio_running "$p0" || { echo "fio moved no data"; kill "$pid"; return 1; }
	t0=$(date +%s)
	timeout 60 rdma link delete remu0 || { echo "rdma link delete failed"; kill "$pid"; return 1; }
	t1=$(date +%s)
	echo "rdma link delete took $((t1 - t0)) s"
	wait "$pid"
	st=$?
	echo "fio exit status $st after the device went"
	[ "$st" -ne 124 ] || { echo "fio hung"; return 1; }
	for _ in $(seq 100); do
		[ -z "$(ns_dev)" ] && break
		sleep 0.2
	done
	[ -z "$(ns_dev)" ] || { echo "controller still there"; return 1; }
	[ "$(objects | awk '$1 == "dev" { print $2 }')" = 1 ] ||
		{ objects; return 1; }
	target_down || return 1
	"$repo/scripts/remu-up" >/dev/null || { echo "remu-up failed"; return 1; }
	counts_back || return 1
	modprobe -r nvme-rdma nvmet-rdma || { echo "cannot unload nvme-rdma/nvmet-rdma"; return 1; }
}

ktap_header 9
run modules mods
run connect connect
run dd.pattern dd_pattern
run fio.verify fio_verify
run disconnect.clean disconnect_clean
run srq.fio_verify srq_fio
run disconnect.under_load disconnect_under_load
run link_delete.under_load rdma_link_delete_under_load
run objects counts_back
ktap_finished
