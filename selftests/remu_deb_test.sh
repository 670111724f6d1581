#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# remu_deb_test.sh - the Debian packages as a user installs them on a
# machine without remu (`make deb` builds them into build/deb/):
#   - `dpkg -i` of remu-dkms and libremu: DKMS builds the module for the
#     running kernel in remu-dkms's postinst;
#   - `rdma link add` loads that module by itself (no modprobe);
#   - ibv_devinfo shows remu0 through the packaged provider (the library
#     in /usr/lib/MULTIARCH/libibverbs, named by the package's
#     /etc/libibverbs.d/remu.driver);
#   - ibv_rc_pingpong -c passes between remu0 and remu1 (namespace peer);
#   - a kernel update: DKMS's kernel postinst hook builds remu for another
#     installed kernel with headers (6.1 from a 6.12 guest, or the other
#     way round);
#   - `dpkg --purge` removes the modules of both kernels, the source, the
#     provider and its driver file.
# The guest's system directories are read-only 9p from the host, so tmpfs
# overlays go over the ones dpkg and DKMS write; at the end they are
# removed and scripts/remu-up brings the checkout's remu back.
# Not in the default list of run_tests.sh: DKMS compiles the module in
# the guest (twice), which takes minutes under TCG.  Run it with
#     make deb
#     scripts/vm --timeout 2400 -- selftests/run_tests.sh remu_deb_test.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$here/lib/remu_ktap_lib.sh"
. "$here/lib/remu_lib.sh"

ktap_header 7

ver=$(uname -r)
arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
libdir=/usr/lib/$multiarch/libibverbs
pkgver=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$repo/dkms.conf")
debs=("$repo/build/deb/remu-dkms_${pkgver}_all.deb"
      "$repo/build/deb/libremu_${pkgver}_$arch.deb")
ovl=$(mktemp -d /tmp/remu-deb.XXXXXX)
REMU_OVL=$ovl
# another kernel with headers: what a kernel update would install
other=$(remu_other_kernel "$ver")

links_down() {
	rdma link delete remu0 2>/dev/null
	ip netns exec peer rdma link delete remu1 2>/dev/null
	! grep -q '^remu ' /proc/modules || rmmod remu
}

cleanup() {
	links_down
	remu_overlays_down
	# back to the checkout's provider and module, for the tests after us
	[ -f "$ovl/remu.driver" ] && cp "$ovl/remu.driver" /etc/libibverbs.d/remu.driver
	"$repo/scripts/remu-up" >/dev/null 2>&1 || echo "# remu-up after the test failed"
	rm -rf "$ovl"
}
trap cleanup EXIT

setup_overlays() {
	local d
	for d in "${debs[@]}"; do
		[ -f "$d" ] || { echo "# $d missing: run make deb"; return 1; }
	done
	# remu-up's driver file (the checkout's provider) makes way for the
	# package's, which dpkg installs as a conffile
	mv /etc/libibverbs.d/remu.driver "$ovl/remu.driver" || return 1
	for d in /var/lib/dpkg /var/log /var/lib/dkms /usr/src /usr/share \
		 "$libdir" /usr/include/infiniband "/lib/modules/$ver" \
		 ${other:+"/lib/modules/$other"}; do
		remu_overlay "$d" || return 1
	done
}
ktap_check "deb: writable overlays over the system directories" setup_overlays

install_debs() {
	local t0=$SECONDS
	links_down || return 1
	dpkg -i "${debs[@]}" >"$ovl/dpkg.log" 2>&1 ||
		{ tail -n 30 "$ovl/dpkg.log"; return 1; }
	echo "# dpkg -i (DKMS build for $ver included): $((SECONDS - t0)) s"
	dkms status "remu/$pkgver" -k "$ver" | grep -q installed || return 1
	modinfo -n remu | grep -q "^/lib/modules/$ver/updates/dkms/remu.ko" || return 1
	[ -f "$libdir/libremu-rdmav34.so" ] &&
		grep -qx "driver remu" /etc/libibverbs.d/remu.driver
}
ktap_check "deb: dpkg -i installs both packages, DKMS builds remu for $ver" install_debs

ktap_check "deb: rdma link add loads the DKMS-built module by itself" remu_link_autoload "$ver"

devinfo() {
	local out=$ovl/devinfo
	LD_DEBUG=files ibv_devinfo -d remu0 >"$out" 2>"$out.ld" ||
		{ cat "$out" "$out.ld" | grep -v '^ *[0-9]*:' | tail; return 1; }
	grep -q "hca_id:[[:space:]]*remu0" "$out" &&
		grep -q "state:[[:space:]]*PORT_ACTIVE" "$out" &&
		grep -q "file=$libdir/libremu-rdmav34.so " "$out.ld" ||
		{ cat "$out"; return 1; }
}
ktap_check "deb: ibv_devinfo shows remu0 through the packaged provider" devinfo

pingpong() {
	# the links are new: wait for their RoCE v2 GIDs (index 1)
	remu_wait_gid remu0 0000:0000:0000:0000:0000:ffff:0a4d:0001 >/dev/null &&
		remu_wait_gid remu1 0000:0000:0000:0000:0000:ffff:0a4d:0002 >/dev/null ||
		return 1
	remu_pingpong rc 18900 peer remu1 "" remu0 10.77.0.2
}
ktap_check "deb: ibv_rc_pingpong -c remu0 -> remu1" pingpong

remu_dkms_update_step deb "$ovl" "$pkgver" "$other"

purge() {
	local k
	links_down || return 1
	dpkg --purge libremu remu-dkms >"$ovl/purge.log" 2>&1 ||
		{ tail -n 20 "$ovl/purge.log"; return 1; }
	for k in "$ver" $other; do
		! ls "/lib/modules/$k/updates/dkms/"remu.ko* >/dev/null 2>&1 ||
			{ echo "# remu.ko left for $k"; return 1; }
	done
	[ -z "$(dkms status remu 2>/dev/null)" ] &&
		[ ! -e "/usr/src/remu-$pkgver" ] &&
		[ ! -e "$libdir/libremu-rdmav34.so" ] &&
		[ ! -e /etc/libibverbs.d/remu.driver ] &&
		! dpkg -s libremu >/dev/null 2>&1 && ! dpkg -s remu-dkms >/dev/null 2>&1
}
ktap_check "deb: dpkg --purge removes the modules, the source and the provider" purge

ktap_finished
