#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# remu_dkms_test.sh - DKMS as a user would use it: `make dkms-install`
# (source into /usr/src/remu-VER, dkms add, build, install for the running
# kernel), then `rdma link add` loads the DKMS-built module by itself; and
# a kernel update: DKMS's kernel postinst hook builds and installs remu
# for another installed kernel with headers (6.1 from a 6.12 guest, or
# the other way round).  The guest's system directories are read-only 9p
# from the host, so tmpfs-backed overlays go over the ones DKMS writes.
# Not in the default list of run_tests.sh: DKMS compiles the module in the
# guest (twice), which takes minutes under TCG.  Run it with
#     scripts/vm --timeout 2400 -- selftests/run_tests.sh remu_dkms_test.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$here/lib/remu_ktap_lib.sh"
. "$here/lib/remu_lib.sh"

ktap_header 4

ver=$(uname -r)
pkgver=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$repo/dkms.conf")
ovl=$(mktemp -d /tmp/remu-dkms.XXXXXX)
REMU_OVL=$ovl
# another kernel with headers: what a kernel update would install
other=$(remu_other_kernel "$ver")

cleanup() {
	remu_overlays_down
	rm -rf "$ovl"
}
trap cleanup EXIT

setup_overlays() {
	remu_overlay /usr/src && remu_overlay /var/lib/dkms &&
		remu_overlay "/lib/modules/$ver" &&
		{ [ -z "$other" ] || remu_overlay "/lib/modules/$other"; }
}
ktap_check "dkms: writable overlays over the system directories" setup_overlays

dkms_install() {
	rdma link delete remu0 2>/dev/null
	ip netns exec peer rdma link delete remu1 2>/dev/null
	rmmod remu || return 1
	make -C "$repo" KVER="$ver" dkms-install >"$ovl/dkms.log" 2>&1 ||
		{ tail -n 20 "$ovl/dkms.log"; return 1; }
	dkms status "remu/$pkgver" -k "$ver" | grep -q installed || return 1
	modinfo -n remu | grep -q "/lib/modules/$ver/updates/dkms/"
}
ktap_check "dkms: make dkms-install builds and installs remu for $ver" dkms_install

ktap_check "dkms: rdma link add loads the DKMS-built module by itself" remu_link_autoload "$ver"

remu_dkms_update_step dkms "$ovl" "$pkgver" "$other"

ktap_finished
