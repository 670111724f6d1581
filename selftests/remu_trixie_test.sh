#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# remu_trixie_test.sh - libremu on Debian 13 (libibverbs 56), as a Debian
# 13 user builds and installs it, on this Debian 12 (libibverbs 44) host:
#   on the host, in a Debian 13 root (scripts/trixie-root: mmdebstrap,
#   cached), chroot, with an overlay over the cached root
#   (build/trixie/root, removed at the end):
#     - `make deb` of a copy of the checkout: fetch-rdma-core --system
#       picks rdma-core 56.x, the release of the root's libibverbs1, and
#       libremu is built there, depending on libibverbs1's 56 line;
#     - dpkg refuses this host's libremu (`make deb` here: built for
#       libibverbs1 44), and apt on this host refuses the root's (a
#       simulation: the host is not touched);
#     - dpkg -i installs the root's libremu;
#   in the test VM (run_tests.sh, the standard topology; REMU_IN_VM=1 runs
#   that part), every program from the root (chroot, /dev, /proc and that
#   namespace's /sys bound in a mount namespace of its own):
#     - ibv_devinfo -d remu0: trixie's libibverbs 56 loads the packaged
#       libremu (LD_DEBUG=files);
#     - ibv_rc_pingpong -c between remu0 and remu1 (namespace peer);
#     - this host's libremu built in rdma-core 44 (build/provider, when
#       REMU_RDMA_CORE_GIT gave it the 44 tree), bound over the root's:
#       libibverbs 56 loads it and libremu refuses, saying why;
#   and, with this host's libibverbs 44, the libremu of this host's 56.1
#   tree (build/rdma-core) loads (a later tree than the library is fine).
# Not in run_tests.sh's default list (it starts the VM itself, and builds
# libremu in the root: about a minute and a half once the root is cached,
# a minute or two more the first time).  Run it on the host, as root:
#     selftests/remu_trixie_test.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$here/lib/remu_ktap_lib.sh"
. "$here/lib/remu_lib.sh"

work=$repo/build/trixie
root=$work/root
arch=$(dpkg --print-architecture)
pkgver=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$repo/dkms.conf")
deb=libremu_${pkgver}_$arch.deb

multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
libdir=/usr/lib/$multiarch/libibverbs
# copies of the libremu built on this host in rdma-core 44 (the system
# provider, when built there) and in 56 (the test tree's: the root's
# libremu wants trixie's glibc, Debian 12's cannot load it at all)
lib44=$work/libremu-44.so
lib56=$work/libremu-56.so

# in_root CMD...: CMD from the root, in a mount namespace of its own where
# /dev, /proc and this network namespace's /sys are bound in (and
# REMU_ROOT_PROVIDER, when set, over the root's libremu)
in_root() {
	unshare -m --propagation private sh -c '
		r=$1 lib=$2; shift 2
		for d in dev proc sys; do mount --rbind "/$d" "$r/$d" || exit 1; done
		if [ -n "${REMU_ROOT_PROVIDER-}" ]; then
			mount --bind "$REMU_ROOT_PROVIDER" "$r$lib/libremu-rdmav34.so" || exit 1
		fi
		exec chroot "$r" "$@"' in_root "$root" "$libdir" "$@"
}

if [ "${1-}" = --in-root ]; then
	shift
	in_root "$@"
	exit
fi

# ---- in the VM ----------------------------------------------------------

if [ "${REMU_IN_VM-}" = 1 ]; then
	ktap_header 4
	[ -x "$root/usr/bin/ibv_devinfo" ] ||
		echo "# no $root: run this script on the host, not through run_tests.sh"

	devinfo() {
		local out
		out=$(mktemp) || return 1
		in_root env LD_DEBUG=files ibv_devinfo -d remu0 >"$out" 2>"$out.ld" ||
			{ grep -v '^ *[0-9]*:' "$out" "$out.ld" | tail; rm -f "$out" "$out.ld"; return 1; }
		echo "# libibverbs.so.1 -> $(in_root readlink -f "${libdir%/*}/libibverbs.so.1")"
		echo "# $(grep -o "file=$libdir/libremu-rdmav34.so " "$out.ld" | head -n 1)"
		grep -q "hca_id:[[:space:]]*remu0" "$out" &&
			grep -q "state:[[:space:]]*PORT_ACTIVE" "$out" &&
			grep -q "file=$libdir/libremu-rdmav34.so " "$out.ld" &&
			# the root's libibverbs, the 56 line
			[ "$(in_root dpkg-query -W -f='${Version}' libibverbs1 | cut -d. -f1)" = 56 ] ||
			{ cat "$out"; rm -f "$out" "$out.ld"; return 1; }
		rm -f "$out" "$out.ld"
	}
	ktap_check "trixie: ibv_devinfo -d remu0 loads the packaged libremu into libibverbs 56" devinfo

	# remu_pingpong's server runs under `ip netns exec peer`, which has
	# its own mount namespace and the namespace's /sys: in_root binds that
	# shellcheck disable=SC2034 # read by remu_pingpong (remu_lib.sh)
	REMU_PINGPONG_PREFIX=("$0" --in-root)
	ktap_check "trixie: ibv_rc_pingpong -c remu0 -> remu1 with libibverbs 56" \
		remu_pingpong rc 18910 peer remu1 "" remu0 10.77.0.2

	# this host's libremu, built in rdma-core 44, in the root's place:
	# libibverbs 56 loads it (same private ABI), libremu refuses
	refuse44() {
		local out err
		out=$(mktemp) err=$(mktemp) || return 1
		if REMU_ROOT_PROVIDER=$lib44 in_root ibv_devinfo -d remu0 >"$out" 2>"$err"; then
			cat "$out"; rm -f "$out" "$err"; return 1
		fi
		sed 's/^/# /' "$err"
		# for the host part's diagnostics
		cp "$err" "$work/refuse44.log"
		grep -q "^libremu: built in rdma-core 44\.[0-9]* but loaded by libibverbs 56 " "$err" &&
			! grep -q "hca_id:" "$out"
		local rc=$?
		rm -f "$out" "$err"
		return $rc
	}
	if [ -f "$lib44" ]; then
		ktap_check "trixie: a libremu built in rdma-core 44 refuses libibverbs 56, saying why" refuse44
	else
		ktap_skip "trixie: a libremu built in rdma-core 44 refuses libibverbs 56" \
			"build/provider was not built in rdma-core 44 (REMU_RDMA_CORE_GIT)"
	fi

	# the other way: this host's libibverbs 44 and a libremu built in
	# rdma-core 56 (over the checkout's, which scripts/remu-up's driver
	# file names): a later tree than the library is fine
	load56() {
		local out
		out=$(mktemp) || return 1
		unshare -m --propagation private sh -c '
			mount --bind "$1" "$2/build/provider/libremu-rdmav34.so" &&
			cmp -s "$1" "$2/build/provider/libremu-rdmav34.so" &&
			exec env LD_DEBUG=files ibv_devinfo -d remu0' load56 \
			"$lib56" "$repo" >"$out" 2>"$out.ld" ||
			{ grep -v '^ *[0-9]*:' "$out" "$out.ld" | tail; rm -f "$out" "$out.ld"; return 1; }
		grep -q "state:[[:space:]]*PORT_ACTIVE" "$out" &&
			grep -q "file=$repo/build/provider/libremu-rdmav34.so " "$out.ld" &&
			! grep -q "^libremu:" "$out.ld" &&
			[ "$(dpkg-query -W -f='${Version}' libibverbs1 | cut -d. -f1)" = 44 ]
		local rc=$?
		rm -f "$out" "$out.ld"
		return $rc
	}
	if [ -f "$lib56" ]; then
		ktap_check "trixie: this host's libibverbs 44 loads a libremu built in rdma-core 56" load56
	else
		ktap_skip "trixie: this host's libibverbs 44 loads a libremu built in rdma-core 56" \
			"no build/rdma-core 56 tree"
	fi
	ktap_finished
	exit
fi

# ---- on the host --------------------------------------------------------

ktap_header 6
[ "$(id -u)" = 0 ] || { echo "# run as root (chroot, mount)"; exit 1; }

cleanup() {
	umount "$root" 2>/dev/null
	rm -rf "$work/upper" "$work/ovl-work"
}
trap cleanup EXIT

root_ready() {
	local lower v
	lower=$("$repo/scripts/trixie-root" --quiet) || return 1
	cleanup
	mkdir -p "$root" "$work/upper" "$work/ovl-work" || return 1
	mount -t overlay overlay \
		-o "lowerdir=$lower,upperdir=$work/upper,workdir=$work/ovl-work" "$root" ||
		return 1
	v=$(chroot "$root" dpkg-query -W -f='${Version}' libibverbs1) || return 1
	echo "# $lower: libibverbs1 $v"
	[[ $v == 56.* ]]
}
ktap_check "trixie: Debian 13 root (scripts/trixie-root) with libibverbs1 56.x" root_ready

# the files of the checkout as they are (committed or not), in the root
copy_checkout() {
	mkdir -p "$root/root/remu" || return 1
	git -C "$repo" ls-files -z --cached --others --exclude-standard |
		while IFS= read -r -d '' f; do
			[ -e "$repo/$f" ] && printf '%s\0' "$f"
		done | tar -C "$repo" --null -T - -cf - | tar -C "$root/root/remu" -xf - &&
		git -C "$root/root/remu" init -q
}

build_deb() {
	local log=$work/make-deb.log dep
	copy_checkout || return 1
	in_root bash -c 'cd /root/remu && make deb' >"$log" 2>&1 ||
		{ tail -n 30 "$log"; return 1; }
	grep -E '^(fetch-rdma-core|build-provider): ' "$log" | sed 's/^/# /'
	grep -q "^build-provider: built build/provider/libremu-rdmav34.so in rdma-core 56\.[0-9]* for libibverbs1 56\." "$log" ||
		return 1
	dep=$(dpkg-deb -f "$root/root/remu/build/deb/$deb" Depends) || return 1
	echo "# Depends: $dep"
	[[ $dep == *"libibverbs1 (>= 56."*"libibverbs1 (<< 57~)"* ]]
}
ktap_check "trixie: make deb in the root builds libremu in rdma-core 56.x" build_deb

# dpkg -i of bookworm's libremu in the root: refused, and nothing of it
# stays configured
refuse_host_deb() {
	local hostdeb=$repo/build/deb/$deb out
	if [ ! -f "$hostdeb" ]; then
		make -C "$repo" deb >"$work/host-deb.log" 2>&1 ||
			{ tail -n 20 "$work/host-deb.log"; return 1; }
	fi
	echo "# host libremu Depends: $(dpkg-deb -f "$hostdeb" Depends)"
	mkdir -p "$root/tmp/host" && cp "$hostdeb" "$root/tmp/host/" || return 1
	if out=$(in_root dpkg -i "/tmp/host/$deb" 2>&1); then
		echo "$out"; echo "# dpkg installed it"; return 1
	fi
	echo "$out" | grep -E 'depends on|Version of' | sed 's/^/# /'
	echo "$out" | grep -q "libremu:$arch depends on libibverbs1 (<< 45~)" || return 1
	[ "$(in_root dpkg-query -W -f='${db:Status-Abbrev}' libremu)" != "ii " ] &&
		in_root dpkg --purge libremu >/dev/null
}
ktap_check "trixie: dpkg refuses this host's libremu (built for libibverbs1 44)" refuse_host_deb

# apt-get --simulate on this host: no change to it
refuse_root_deb() {
	local out
	if out=$(apt-get -s install "$root/root/remu/build/deb/$deb" 2>&1); then
		echo "$out"; echo "# apt would install it"; return 1
	fi
	echo "$out" | grep 'Depends:' | sed 's/^/# /'
	echo "$out" | grep -q "Depends: libibverbs1 (>= 56\.[0-9]*) but 44\."
}
ktap_check "trixie: apt refuses the root's libremu on this host (libibverbs1 44)" refuse_root_deb

# this host's providers, for the VM part's checks across releases
copy_libs() {
	rm -f "$lib44" "$lib56" "$work/refuse44.log"
	"$repo/scripts/build-provider" >"$work/build-provider.log" 2>&1 ||
		{ tail -n 20 "$work/build-provider.log"; return 1; }
	if [[ $(cat "$repo/build/provider/rdma-core-version" 2>/dev/null) == 44.* ]]; then
		cp "$repo/build/provider/libremu-rdmav34.so" "$lib44" || return 1
	fi
	grep -q '^set(PACKAGE_VERSION "56\.' "$repo/build/rdma-core/CMakeLists.txt" &&
		cp "$repo/build/rdma-core/build/lib/libremu-rdmav34.so" "$lib56"
}

install_deb() {
	copy_libs || return 1
	local out
	out=$(in_root dpkg -i "/root/remu/build/deb/$deb" 2>&1) || { echo "$out"; return 1; }
	[ "$(in_root dpkg-query -W -f='${db:Status-Abbrev}' libremu)" = "ii " ] &&
		grep -qx "driver remu" "$root/etc/libibverbs.d/remu.driver"
}
ktap_check "trixie: dpkg -i installs the root's libremu there" install_deb

# the VM part: build/trixie/root is under the checkout, which the guest
# shares read-write
vm_part() {
	local log=$work/vm.log rc=0
	"$repo/scripts/vm" --timeout 600 -- selftests/run_tests.sh remu_trixie_test.sh \
		>"$log" 2>&1 || rc=$?
	sed -n '/^# ---- remu_trixie_test.sh$/,/^# ---- remu_trixie_test.sh:/p' "$log" |
		sed '1d;$d' | sed 's/^/    /'
	grep -E '^(not ok|ok) 1 (setup|teardown)|remu_trixie_test.sh: [0-9]+ s' "$log" | sed 's/^/# /'
	[ -f "$work/refuse44.log" ] && sed 's/^/# libibverbs 56 and the 44 libremu: /' "$work/refuse44.log"
	[ "$rc" = 0 ] || { tail -n 20 "$log" | sed 's/^/# /'; echo "# scripts/vm: exit $rc"; }
	return "$rc"
}
if out=$(vm_part); then
	printf '%s\n' "$out"
	ktap_pass "trixie: the VM part (ibv_devinfo, ibv_rc_pingpong -c from the root)"
else
	printf '%s\n' "$out"
	ktap_fail "trixie: the VM part (ibv_devinfo, ibv_rc_pingpong -c from the root)"
fi
ktap_finished
