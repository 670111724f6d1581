#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# remu_dm_pool_test.sh - the device memory pool under other values of the
# module parameter dm_pool_kb.  For each value the module is reloaded
# (remu0 on v0, remu1 on v1 in namespace peer, as scripts/remu-up makes
# them), both devices' pools are checked in sysfs, and
# `remu_dm_test -f dmpool` checks max_dm_size, the largest allocation
# (one chunk; one byte more is ENOMEM), and one allocation per chunk
# filling the pool exactly, each allocation (one per chunk) keeping its
# data and reachable from remu1 through a DM MR (WRITE and READ).  Values: several 4 MiB chunks plus a remainder that is
# not a multiple of the chunk (10252 KiB = 4 + 4 + 2 MiB + 8 + 4 KiB), one
# KiB (rounded up to a page), the documented maximum (65536) and a value
# above it (capped, with a warning), and 0 (no device memory).  Every
# unload must be clean (no "leaked" line), and an unprivileged user
# reads the same dm_* statistics as root.  Runs in the test VM after
# scripts/remu-up; ends with the module reloaded with its defaults and
# remu0/remu1 re-created, so later tests see the normal setup.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$here/lib/remu_ktap_lib.sh"
. "$here/lib/remu_lib.sh"

ktap_header 8

dmesg_has() { dmesg | grep -q -- "$1"; }
reload() { remu_reload "$@"; }

# pool KB EXPECT_BYTES [PARAM_KB]: reload with dm_pool_kb=PARAM_KB (KB by
# default), check the parameter and both devices' sysfs, run the dmpool
# tests with REMU_DM_POOL_KB=KB
pool() {
	local kb=$1 bytes=$2 param=${3:-$1} d out
	reload dm_pool_kb="$param" || return 1
	[ "$(cat /sys/module/remu/parameters/dm_pool_kb)" = "$param" ] || return 1
	for d in remu0 remu1; do
		[ "$(cat /sys/class/infiniband/$d/dm_size)" = "$bytes" ] ||
			{ echo "$d dm_size $(cat /sys/class/infiniband/$d/dm_size), want $bytes"; return 1; }
		[ "$(cat /sys/class/infiniband/$d/dm_in_use)" = 0 ] || return 1
	done
	ibv_devinfo -v -d remu0 | grep -i "max_dm_size" || true
	out=$(REMU_DM_POOL_KB=$kb "$here/remu_dm_test" -f dmpool 2>&1)
	local rc=$?
	echo "$out" | grep -E "^(ok|not ok|#.*(pool|refused|FAIL|Totals))" 
	return $rc
}

ktap_check "pool: dm_pool_kb=10252: 4+4+2 MiB+8+4 KiB chunks, largest one chunk" \
	pool 10252 10498048
ktap_check "pool: dm_pool_kb=1: one page" pool 1 4096
ktap_check "pool: dm_pool_kb=65536 (the maximum): 16 chunks of 4 MiB on each device" \
	pool 65536 67108864
over() {
	pool 65536 67108864 70000 || return 1
	dmesg_has "dm_pool_kb=70000 is above the maximum, 65536 KiB used"
}
ktap_check "pool: dm_pool_kb=70000 is capped at the maximum, with a warning" over
ktap_check "pool: dm_pool_kb=0: max_dm_size 0, ibv_alloc_dm fails with EOPNOTSUPP" \
	pool 0 0

defaults() {
	reload || return 1
	[ "$(cat /sys/module/remu/parameters/dm_pool_kb)" = 1024 ] &&
		[ "$(cat /sys/class/infiniband/remu0/dm_size)" = 1048576 ] &&
		[ "$(cat /sys/class/infiniband/remu1/dm_size)" = 1048576 ]
}
ktap_check "pool: reloaded with the defaults (1 MiB), unload before it clean" defaults
default_pool() {
	REMU_DM_POOL_KB=1024 "$here/remu_dm_test" -f dmpool 2>&1 |
		grep -E "^(ok|not ok|# Totals)"
	[ "${PIPESTATUS[0]}" = 0 ]
}
ktap_check "pool: the default pool passes the dmpool tests too" default_pool

# the statistics are for everyone: an unprivileged user reads them too
user_reads() {
	local f a b
	for f in dm_size dm_in_use dm_allocs dm_largest_free; do
		a=$(cat "/sys/class/infiniband/remu0/$f") || return 1
		b=$(setpriv --reuid=65534 --regid=65534 --clear-groups \
			cat "/sys/class/infiniband/remu0/$f") || return 1
		echo "$f: $b"
		[ -n "$b" ] && [ "$a" = "$b" ] || return 1
	done
}
ktap_check "pool: the dm_* statistics are readable by an unprivileged user" user_reads

ktap_finished
