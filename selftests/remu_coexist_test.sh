#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# remu_coexist_test.sh - libremu installed next to another vendor's
# device and provider, the way CI machines with a real NIC will have it.
# remu0 is replaced by upstream soft-RoCE rxe0 on v0 (initial namespace);
# remu1 stays on v1 (namespace peer).  Then, for every way a user makes
# libibverbs load libremu, in both provider orders:
#   conf        /etc/libibverbs.d names rxe and libremu (by path)
#   env-path    RDMAV_DRIVERS=<path>/libremu: remu is tried first (this
#               crashed every program with a device of another vendor)
#   env-rxe-1st RDMAV_DRIVERS=rxe:<path>/libremu
#   env-name    RDMAV_DRIVERS=remu, libremu installed in the system's
#               provider directory, no remu.driver
#   conf-name   remu.driver saying "driver remu", libremu installed
#   remu-only   rxe's driver file gone: rxe0 has no provider and must
#               simply not be listed (from the driver file, and again
#               with RDMAV_DRIVERS)
# each configuration runs ibv_devices and ibv_devinfo -l (exit 0, the
# right devices listed), ibv_devinfo -d on every listed device, and
# remu_coexist_test: each device served by its own provider, and one
# process moving data both ways between rxe0 and remu1.  At the end the
# configuration and the standard topology are restored.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$here/lib/remu_ktap_lib.sh"
. "$here/lib/remu_lib.sh"

lib=$repo/build/provider/libremu
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
libdir=/usr/lib/$multiarch/libibverbs
conf=/etc/libibverbs.d
GA=0000:0000:0000:0000:0000:ffff:0a4d:0001
save=$(mktemp -d /tmp/remu-coexist.XXXXXX)

# name | driver files (remu: path or name; rxe: yes/no) | RDMAV_DRIVERS | expectation
configs=(
	"conf|path yes||rxe0=rxe remu1=remu"
	"env-path|none yes|$lib|rxe0=rxe remu1=remu"
	"env-rxe-1st|none yes|rxe:$lib|rxe0=rxe remu1=remu"
	"env-remu-1st|none yes|$lib:rxe|rxe0=rxe remu1=remu"
	"env-name|none yes|remu|rxe0=rxe remu1=remu"
	"conf-name|name yes||rxe0=rxe remu1=remu"
	"remu-only|path no||rxe0=- remu1=remu"
	"remu-only-env|none no|$lib|rxe0=- remu1=remu"
)
ktap_header $((2 + ${#configs[@]} * 2))

cleanup() {
	rm -f "$conf"/*
	cp -a "$save/conf/." "$conf/"
	# setup ran in a subshell (ktap_check): ask the mount table
	grep -q " $libdir " /proc/self/mounts && umount "$libdir"
	rm -rf "$save"
}
trap cleanup EXIT

# libremu beside the system's providers, for loading by name: a copy of
# the provider directory with it, bound over the (read-only) original
setup() {
	# remu-up put a tmpfs over it: never touch the host's own
	[ "$(stat -f -c %T "$conf")" = tmpfs ] || return 1
	mkdir -p "$save/conf" "$save/libdir" &&
	cp -a "$conf/." "$save/conf/" &&
	cp -a "$libdir/." "$save/libdir/" &&
	cp "$lib-rdmav34.so" "$save/libdir/" &&
	mount --bind "$save/libdir" "$libdir" &&
	remu_rxe_in && remu_wait_gid rxe0 "$GA" >/dev/null
}
ktap_check "setup: rxe0 on v0 (init), remu1 on v1 (peer), libremu in $libdir" setup

# use_conf REMU RXE: the driver files of the saved configuration, with
# remu.driver naming the provider by path or name (none: no file) and
# rxe.driver kept or not
use_conf() {
	rm -f "$conf"/*
	cp -a "$save/conf/." "$conf/"
	rm -f "$conf/remu.driver"
	case "$1" in
	path) echo "driver $lib" >"$conf/remu.driver" ;;
	name) echo "driver remu" >"$conf/remu.driver" ;;
	esac
	[ "$2" = yes ] || rm -f "$conf/rxe.driver"
}

# listing EXPECT: ibv_devices and ibv_devinfo -l succeed and list exactly
# the devices EXPECT says are served; ibv_devinfo -d works on each
listing() {
	local e dev want out rc
	for cmd in ibv_devices "ibv_devinfo -l"; do
		out=$($cmd 2>&1)
		rc=$?
		echo "$cmd (exit $rc):"
		printf '%s\n' "$out" | sed 's/^/  /'
		[ "$rc" = 0 ] || return 1
		for e in $1; do
			dev=${e%=*} want=${e#*=}
			if [ "$want" = - ]; then
				! grep -qw "$dev" <<<"$out" || return 1
			else
				grep -qw "$dev" <<<"$out" || return 1
			fi
		done
	done
	for e in $1; do
		dev=${e%=*} want=${e#*=}
		[ "$want" = - ] && continue
		ibv_devinfo -d "$dev" | grep -q PORT_ACTIVE || return 1
	done
}

for c in "${configs[@]}"; do
	IFS='|' read -r name files env expect <<<"$c"
	read -r remu rxe <<<"$files"
	use_conf "$remu" "$rxe"
	if [ -n "$env" ]; then
		export RDMAV_DRIVERS=$env
	else
		unset RDMAV_DRIVERS
	fi
	export REMU_COEXIST_EXPECT=$expect
	echo "# $name: remu.driver $remu, rxe.driver $rxe, RDMAV_DRIVERS='$env'"
	ktap_check "$name: ibv_devices, ibv_devinfo list $expect" listing "$expect"
	out=$("$here/remu_coexist_test" 2>&1)
	rc=$?
	printf '%s\n' "$out" | sed 's/^/# /'
	if [ "$rc" = 0 ]; then
		ktap_pass "$name: remu_coexist_test"
	else
		ktap_fail "$name: remu_coexist_test (exit $rc)"
	fi
done
unset RDMAV_DRIVERS REMU_COEXIST_EXPECT
use_conf path yes

ktap_check "teardown: rxe0 out, remu0 back on v0" remu_rxe_out
ktap_finished
