#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# remu_rdmacore_test.sh - rdma-core's own test suite on remu0: the tests/
# directory that Debian's python3-pyverbs installs in
# /usr/share/doc/rdma-core/tests (rdma-core 44, the release of the
# installed libibverbs and pyverbs), copied to a temporary directory and
# unpacked there (the package gzips the larger files), then run whole by
# remu_rdmacore_run.py, which prints one KTAP line per test.
#
# The suite builds both ends of every test on the one device it is given
# (--dev remu0, --gid the RoCE v2 GID of 10.77.0.1): two sets of
# resources looping back through remu0, two processes for the RDMA CM
# tests (connecting to remu0's own IPv4 address).  It has no option for a
# second device, so remu0<->remu1 is not part of it.  For the RDMA CM
# tests the runner finds the device's netdev as rdma-core 46 does (`rdma
# link show`); rdma-core 44 looks only under the device's parent device,
# which a device on a veth lacks (remu_rdmacore_run.py).
#
# Every test passes, or is skipped for a reason listed in
# remu_rdmacore_skips (and in docs/compatibility.md, "rdma-core's test
# suite"): hardware remu does not emulate (mlx5 direct verbs, EFA, GPUs,
# tag matching), verbs remu does not offer (XRC, raw packet QPs and flow
# steering, parent domains, object import).  A test that fails, or skips
# without being listed there, is "not ok".  Huge pages (8 x 2 MiB) are
# reserved for the run (the ODP over hugetlbfs tests) and given back
# after it.
#
# The whole suite (273 tests) takes under a minute in the TCG guest
# (52 s measured).
# Runs in the test VM after scripts/remu-up; extra arguments are test
# names as run_tests.py takes them (e.g. tests.test_cq).
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$here/lib/remu_ktap_lib.sh"
. "$here/lib/remu_lib.sh"

suite=/usr/share/doc/rdma-core/tests
dev=remu0
gid4=0000:0000:0000:0000:0000:ffff:0a4d:0001	# ::ffff:10.77.0.1

"$repo/scripts/remu-up" >/dev/null || echo "# remu-up failed"

fail_setup() {
	ktap_header 1
	ktap_fail "rdma-core test suite: $1"
	ktap_finished
	exit 1
}

[ -f "$suite/run_tests.py" ] ||
	fail_setup "$suite missing (python3-pyverbs, scripts/setup)"
echo "# python3-pyverbs $(dpkg-query -W -f '${Version}' python3-pyverbs 2>/dev/null)"
gid=$(remu_wait_gid "$dev" "$gid4") || fail_setup "no RoCE v2 GID of 10.77.0.1 on $dev"

work=$(mktemp -d)
hp=/proc/sys/vm/nr_hugepages
hp0=$(cat "$hp")
cleanup() {
	echo "$hp0" >"$hp"
	rm -rf "$work"
}
trap cleanup EXIT
cp -r "$suite" "$work/tests" && gunzip "$work"/tests/*.gz ||
	fail_setup "cannot unpack the suite into $work"
echo $((hp0 + 8)) >"$hp"

# What this kernel lacks (/sys/class/infiniband/DEV/absent: FLUSH and
# ATOMIC_WRITE on 6.1, which has no IBA 1.5) makes the suite's tests of
# it skip (the provider refuses their QP flags, as mlx5): listed skips
skips=$work/skips
cp "$here/remu_rdmacore_skips" "$skips" || fail_setup "cannot copy the skip list"
if grep -qw atomic_write "/sys/class/infiniband/$dev/absent" 2>/dev/null; then
	printf '%s\t%s\n' 'tests.test_qpex.QpExTestCase.test_qp_ex_rc_atomic_write' \
		"ATOMIC_WRITE absent on this kernel ($(uname -r): no IBA 1.5 in ib_core)" >>"$skips"
fi

# KTAP lines pass; everything else the suite or its child processes
# print becomes a "# " diagnostic
start=$SECONDS
set -o pipefail
(cd "$work" && timeout -k 10 900 python3 -W ignore::DeprecationWarning \
	"$here/remu_rdmacore_run.py" "$work/tests" "$skips" \
	--dev "$dev" --gid "$gid" "$@" 2>&1) |
	sed -E '/^(TAP version|1\.\.|ok |not ok |# )/!s/^/# /'
rc=$?
echo "# rdma-core test suite: exit status $rc after $((SECONDS - start)) s"
# 1: some test is "not ok"; anything else but 0 (a timeout, a crash)
# cut the run short
[ "$rc" -gt 1 ] && echo "not ok 1 rdma-core test suite: the run ended with status $rc"
exit $rc
