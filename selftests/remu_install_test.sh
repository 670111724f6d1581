#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# remu_install_test.sh - `make install` as a user would run it, then
# `rdma link add` with no explicit modprobe: the link type must load the
# installed module by itself, and libibverbs must find the installed
# provider.  The guest's system directories are read-only 9p from the
# host, so the test puts tmpfs-backed overlays over the ones `make install`
# writes (/lib/modules/VER, the provider directory, /etc/libibverbs.d) and
# removes them at the end.  Runs in the test VM after scripts/remu-up.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$here/lib/remu_ktap_lib.sh"
. "$here/lib/remu_lib.sh"

ktap_header 4

ver=$(uname -r)
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
libdir=/usr/lib/$multiarch/libibverbs
ovl=$(mktemp -d /tmp/remu-install.XXXXXX)
REMU_OVL=$ovl

cleanup() {
	[ -n "${holder:-}" ] && kill "$holder" 2>/dev/null
	remu_overlays_down
	# back to the provider from the build tree that remu-up registered
	[ -f "$ovl/remu.driver" ] && cp "$ovl/remu.driver" /etc/libibverbs.d/remu.driver
	rm -rf "$ovl"
}
trap cleanup EXIT

# The module tree `make install` writes into holds the kernel's build
# link, its lists of built-in modules and, of the modules, only remu's
# dependencies (their closure; all loaded already): `depmod -a` over
# the guest's whole tree, 4230 modules read over 9p, took 123 of this
# test's 208 s under TCG.  make install, depmod and the autoload run as
# on any machine; only the tree they see is smaller.
mini_tree() {
	local src=/lib/modules/$ver dst=$ovl/tree seen=" " todo m f
	mkdir -p "$dst" || return 1
	cp -a "$src"/modules.builtin* "$src"/modules.order "$dst"/ || return 1
	[ ! -e "$src/build" ] || cp -a "$src/build" "$dst"/ || return 1
	todo=$(modinfo -F depends "$repo/remu.ko" | tr , ' ')
	while [ -n "${todo// /}" ]; do
		read -r m todo <<<"$todo"
		[[ "$seen" == *" $m "* ]] && continue
		seen+="$m "
		f=$(modinfo -n "$m") || return 1
		[[ "$f" == "$src"/* ]] || continue	# built in
		mkdir -p "$dst/$(dirname "${f#"$src"/}")" &&
			cp "$f" "$dst/${f#"$src"/}" || return 1
		todo+=" $(modinfo -F depends "$m" | tr , ' ')"
	done
	echo "module tree: ${seen# }"
}

setup_overlays() {
	cp /etc/libibverbs.d/remu.driver "$ovl/remu.driver" && mini_tree &&
	remu_overlay "/lib/modules/$ver" "$ovl/tree" &&
	remu_overlay "$libdir" && remu_overlay /usr/include/infiniband
}
ktap_check "install: writable overlays over the system directories" setup_overlays

install() {
	rdma link delete remu0 2>/dev/null
	ip netns exec peer rdma link delete remu1 2>/dev/null
	rmmod remu || return 1
	make -C "$repo" KVER="$ver" install || return 1
	modinfo -n remu | grep -q "/lib/modules/$ver/updates/" || return 1
	[ -f "$libdir/libremu-rdmav34.so" ] &&
		grep -qx "driver remu" /etc/libibverbs.d/remu.driver &&
		cmp -s "$repo/userspace-provider/remu/remudv.h" \
			/usr/include/infiniband/remudv.h
}
ktap_check "install: make install puts the module and the provider in place" install

autoload() {
	grep -q '^remu ' /proc/modules && { echo "remu still loaded"; return 1; }
	rdma link add remu0 type remu netdev v0 || return 1
	grep -q '^remu ' /proc/modules || return 1
	ip netns exec peer rdma link add remu1 type remu netdev v1
}
ktap_check "install: rdma link add loads the installed module by itself" autoload

installed_provider() {
	local i
	"$here/remu_hold" remu0 > "$ovl/hold.out" &
	holder=$!
	for i in $(seq 50); do grep -q ready "$ovl/hold.out" && break; sleep 0.1; done
	grep -q "$libdir/libremu-rdmav34.so" "/proc/$holder/maps" || return 1
	kill -TERM "$holder"
	wait "$holder"
	i=$?
	holder=
	[ $i -eq 0 ]
}
ktap_check "install: libibverbs opens remu0 through the installed provider" installed_provider

ktap_finished
