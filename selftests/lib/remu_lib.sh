# SPDX-License-Identifier: GPL-2.0
# remu_lib.sh - helpers shared by the shell tests and scripts/bench
# (sourced).

# remu_wait_listen PID PORT: wait (up to 10 s) until process PID has a TCP
# socket listening on PORT.  Reads the process's own /proc/PID/net, so it
# works for a server in another network namespace too.  Returns 1 if the
# process exits or never listens.
remu_wait_listen() {
	local hex f addr st _n
	hex=$(printf '%04X' "$2")
	for _n in $(seq 200); do
		kill -0 "$1" 2>/dev/null || return 1
		for f in /proc/"$1"/net/tcp /proc/"$1"/net/tcp6; do
			# sl local_address rem_address st ...
			while read -r _ addr _ st _; do
				[ "$st" = 0A ] && [ "${addr##*:}" = "$hex" ] && return 0
			done <"$f" 2>/dev/null
		done
		sleep 0.05
	done
	return 1
}

# remu_rping_expect FILE PREFIX N: FILE holds exactly the N lines
# "PREFIXping data: rdma-ping-I: PATTERN" that `rping -v` prints for the
# 64-byte buffer its client fills (PREFIX "server " for the server's side)
remu_rping_expect() {
	python3 - "$@" <<'PYEOF'
import sys
path, prefix, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
want = []
first = ord("A")
for i in range(n):
    line = "rdma-ping-%d: " % i
    c = first
    while len(line) < 63:
        line += chr(c)
        c = ord("A") if c >= ord("z") else c + 1
    first = ord("A") if first >= ord("z") else first + 1
    want.append(prefix + "ping data: " + line)
got = [l.rstrip("\n") for l in open(path, errors="replace")
       if l.startswith(prefix + "ping data: ")]
if got != want:
    at = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w),
              min(len(got), len(want)))
    print("# %d ping lines, %d wanted; first difference at line %d"
          % (len(got), n, at))
    if at < len(got):
        print("#   got:  " + got[at])
    if at < len(want):
        print("#   want: " + want[at])
    sys.exit(1)
PYEOF
}

# remu_wait_cm_listen PORT: wait (up to 20 s) until an RDMA CM ID listens
# on PORT (in any namespace: `rdma resource` shows them all)
remu_wait_cm_listen() {
	local i
	for i in $(seq 100); do
		rdma resource show cm_id 2>/dev/null |
			grep -q "state LISTEN .*src-addr [^ ]*:$1 " && return 0
		sleep 0.2
	done
	return 1
}

# remu_present DEV: the RDMA device DEV exists
remu_present() { [ -e "/sys/class/infiniband/$1" ]; }

# remu_wait_gone DEV: wait (up to 5 s) until DEV is gone
remu_wait_gone() {
	local i
	for i in $(seq 50); do remu_present "$1" || return 0; sleep 0.1; done
	echo "$1 still present"; return 1
}

# remu_reload [PARAM...]: unload remu (checking that the unload was clean:
# the unload message and no "leaked" line) and load it again with the
# module parameters PARAM, re-creating remu0 on v0 and remu1 on v1 in
# namespace peer as scripts/remu-up makes them; the .ko comes from
# REMU_KO_DIR or the checkout.  Clears the kernel log.
remu_reload() {
	local repo
	repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
	dmesg -C
	rmmod remu || return 1
	remu_present remu0 && { echo "remu0 still there"; return 1; }
	dmesg | grep -q -- "remu: unloaded" || { echo "no unload message"; return 1; }
	if dmesg | grep -q -- "remu: leaked"; then dmesg | grep leaked; return 1; fi
	insmod "${REMU_KO_DIR:-$repo}/remu.ko" "$@" || return 1
	rdma link add remu0 type remu netdev v0 || return 1
	ip netns exec peer rdma link add remu1 type remu netdev v1 || return 1
	ibv_devinfo -d remu0 | grep -q PORT_ACTIVE
}

# remu_gid_index DEV GID: the index of the RoCE v2 GID GID in DEV's table
# (read with builtins: rxe's table has 1024 entries, in glob order its
# index 2 comes after 136 others, and a cat each took 40 s in the TCG guest)
remu_gid_index() {
	local g i v
	for g in /sys/class/infiniband/"$1"/ports/1/gids/*; do
		i=${g##*/}
		v=
		read -r v 2>/dev/null <"$g"
		[ "$v" = "$2" ] || continue
		v=
		read -r v 2>/dev/null </sys/class/infiniband/"$1"/ports/1/gid_attrs/types/"$i"
		[ "$v" = "RoCE v2" ] || continue
		echo "$i"; return 0
	done
	return 1
}

# remu_wait_gid DEV GID: wait (up to 5 s) for the RoCE v2 GID GID in DEV's
# table and print its index
remu_wait_gid() {
	local i
	for i in $(seq 50); do
		remu_gid_index "$1" "$2" && return 0
		sleep 0.1
	done
	echo "$1 has no RoCE v2 GID $2" >&2
	return 1
}

# remu_pair_report NAME T0 OK SCMD RS SOUT CCMD RC COUT: the KTAP line of
# a server/client run started at $SECONDS T0 ("NAME (N s)" when OK is 1);
# on failure each side's command, exit code and the tails of its output
# (the files SOUT/COUT and SOUT.err/COUT.err)
remu_pair_report() {
	if [ "$3" = 1 ]; then
		ktap_pass "$1 ($((SECONDS - $2)) s)"
		return
	fi
	remu_side_report server "$4" "$5" "$6"
	remu_side_report client "$7" "$8" "$9"
	ktap_fail "$1"
}
remu_side_report() { # SIDE CMD EXIT FILE
	echo "# $1: $2 (exit $3)"
	tail -15 "$4" | sed 's/^/#   /'
	tail -10 "$4.err" 2>/dev/null | sed 's/^/#   stderr: /'
}

# remu_rxe_in: replace remu0 on v0 (initial namespace) by upstream
# soft-RoCE rxe0; both want UDP 4791 there.  remu1 stays in namespace
# peer.  Undone by remu_rxe_out.
remu_rxe_in() {
	if remu_present remu0; then
		rdma link delete remu0 || return 1
		remu_wait_gone remu0 || return 1
	fi
	modprobe rdma_rxe || return 1
	remu_present rxe0 || rdma link add rxe0 type rxe netdev v0
}

# remu_rxe_out: rxe0 and rdma_rxe gone, remu0 back on v0 and active
remu_rxe_out() {
	if remu_present rxe0; then
		rdma link delete rxe0 || return 1
		remu_wait_gone rxe0 || return 1
	fi
	modprobe -r rdma_rxe || return 1
	remu_present remu0 || rdma link add remu0 type remu netdev v0 || return 1
	ibv_devinfo -d remu0 | grep -q PORT_ACTIVE
}

# remu_objects_ktap BASE: the KTAP line "objects", passing when every
# remu object count is back at BASE (an earlier `cat
# /sys/kernel/debug/remu/objects`) within 10 s (the CM may hold IDs in
# time wait for a moment); otherwise the difference is shown
remu_objects_ktap() {
	local now
	for _ in $(seq 50); do
		now=$(cat /sys/kernel/debug/remu/objects 2>/dev/null)
		[ "$now" = "$1" ] && break
		sleep 0.2
	done
	if [ "$now" = "$1" ]; then
		ktap_pass objects
	else
		diff <(echo "$1") <(echo "$now") | sed 's/^/# /'
		ktap_fail objects
	fi
}

# remu_overlay DIR: make DIR writable for a test, the changes kept in a
# tmpfs: the guest's system directories are read-only 9p from the host.
# The layers go under $REMU_OVL (the test's own mktemp -d directory);
# remu_overlays_down unmounts every overlay whose layers are there, the
# last one first.  The mount table is the record (ktap_check runs its
# command in a subshell, whose variables die with it).  For the tests
# that install remu (remu_install_test.sh, remu_dkms_test.sh,
# remu_deb_test.sh).
# remu_overlay DIR LOWER: the same, but what DIR shows below the changes
# is LOWER's content instead of its own.
remu_overlay() {
	local d=$1 lower=${2:-$1} n
	mkdir -p "$d" || return 1
	n=$(mktemp -d "$REMU_OVL/layer.XXXXXX") || return 1
	mkdir -p "$n/u" "$n/w"
	mount -t overlay overlay \
		-o "lowerdir=$lower,upperdir=$n/u,workdir=$n/w" "$d"
}

remu_overlays_down() {
	local d
	awk -v ovl="upperdir=$REMU_OVL/" \
		'$3 == "overlay" && index($4, ovl) { print $2 }' /proc/self/mounts |
		tac | while read -r d; do
			umount "$d" || umount -l "$d"
		done
}

# remu_pingpong PROG PORT SERVER_NS SERVER_DEV CLIENT_NS CLIENT_DEV
#     SERVER_ADDR [OPT...]: one run of rdma-core's ibv_PROG_pingpong -c
# (200 iterations, GID index 1, under timeout), the server in SERVER_NS
# ("" for the initial namespace).  Succeeds when both sides exit 0 and
# neither prints an "invalid data" (-c) or "Couldn't prefetch" line;
# otherwise prints both outputs as KTAP diagnostics.  The array
# REMU_PINGPONG_PREFIX, when set, is a command both sides run under
# (remu_trixie_test.sh: the programs of a Debian 13 root, in a chroot).
remu_pingpong() {
	local prog=$1 port=$2 sns=$3 sdev=$4 cns=$5 cdev=$6 addr=$7
	shift 7
	local sex=() cex=() sout cout spid rs rc
	local pre=("${REMU_PINGPONG_PREFIX[@]}")
	[ -n "$sns" ] && sex=(ip netns exec "$sns")
	[ -n "$cns" ] && cex=(ip netns exec "$cns")
	sout=$(mktemp) cout=$(mktemp)
	"${sex[@]}" timeout 60 "${pre[@]}" "ibv_${prog}_pingpong" -d "$sdev" -g 1 -c \
		-p "$port" -n 200 "$@" >"$sout" 2>&1 &
	spid=$!
	remu_wait_listen "$spid" "$port"
	"${cex[@]}" timeout 60 "${pre[@]}" "ibv_${prog}_pingpong" -d "$cdev" -g 1 -c \
		-p "$port" -n 200 "$@" "$addr" >"$cout" 2>&1
	rc=$?
	wait "$spid"
	rs=$?
	if [ "$rc" = 0 ] && [ "$rs" = 0 ] &&
	   ! grep -qi -e "invalid data" -e "couldn't prefetch" "$sout" "$cout"; then
		rm -f "$sout" "$cout"
		return 0
	fi
	echo "# server (exit $rs):"; sed 's/^/#   /' "$sout"
	echo "# client (exit $rc):"; sed 's/^/#   /' "$cout"
	rm -f "$sout" "$cout"
	return 1
}

# remu_other_kernel VER: another installed kernel with headers than VER
# (what a kernel update would bring), or nothing
remu_other_kernel() {
	local d k other=""

	for d in /lib/modules/*/build; do
		k=${d#/lib/modules/}
		k=${k%/build}
		[ "$k" != "$1" ] && [ -f "$d/Makefile" ] && other=$k
	done
	echo "$other"
}

# remu_dkms_hook OVL PKGVER KVER: what installing kernel KVER's package
# runs, DKMS's postinst hook: remu/PKGVER built and installed for KVER
# (the hook's log in OVL/hook.log)
remu_dkms_hook() {
	/etc/kernel/postinst.d/dkms "$3" >"$1/hook.log" 2>&1 ||
		{ tail -n 20 "$1/hook.log"; return 1; }
	dkms status "remu/$2" -k "$3" | grep -q installed || return 1
	ls "/lib/modules/$3/updates/dkms/"remu.ko* >/dev/null
}

# remu_dkms_update_step WHAT OVL PKGVER KVER: the KTAP step "WHAT: a
# kernel update rebuilds remu" (remu_dkms_hook for KVER); skipped without
# another kernel (KVER empty) or with REMU_KERNEL_UPDATE=0 (a second
# module build in the guest: about 12 minutes under TCG)
remu_dkms_update_step() {
	if [ "${REMU_KERNEL_UPDATE:-1}" = 0 ]; then
		ktap_skip "$1: a kernel update rebuilds remu" "REMU_KERNEL_UPDATE=0"
	elif [ -n "$4" ]; then
		ktap_check "$1: a kernel update ($4) rebuilds remu by DKMS's hook" \
			remu_dkms_hook "$2" "$3" "$4"
	else
		ktap_skip "$1: a kernel update rebuilds remu" \
			"no other kernel with headers installed"
	fi
}

# remu_link_autoload VER: remu not loaded, `rdma link add` of remu0 (on
# v0) loads it by itself, the module loaded is built for kernel VER, and
# remu1 goes on v1 in namespace peer (the install, DKMS and package tests)
remu_link_autoload() {
	grep -q '^remu ' /proc/modules && { echo "remu still loaded"; return 1; }
	rdma link add remu0 type remu netdev v0 || return 1
	grep -q '^remu ' /proc/modules || return 1
	modinfo -F vermagic "$(modinfo -n remu)" | grep -q "^$1 " || return 1
	ip netns exec peer rdma link add remu1 type remu netdev v1
}
