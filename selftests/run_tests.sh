#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# run_tests.sh - the in-VM part of `make check`: brings up the standard
# topology with scripts/remu-up, runs every selftest (each prints KTAP),
# and takes the topology down.  Usage, from the host:
#     scripts/vm -- selftests/run_tests.sh [TEST...]
# With TEST names (remu_device_test, remu_link_test.sh, ...) only those run;
# extra arguments after "--" go to a kselftest binary (e.g. -r dev.remu0.query_port).
# run_tests.sh --list prints the test names.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
cd "$repo"

# one a line, in the order they run
all_tests=(
	remu_device_test
	remu_mr_test
	remu_queue_test
	remu_datapath_test
	remu_odp_test
	remu_rereg_test
	remu_inline_test
	remu_dmabuf_test
	remu_p2p_test
	remu_disassoc_test
	remu_teardown_test
	remu_mcast_test
	remu_storm_test
	remu_dm_test
	remu_mw_test
	remu_umr_test
	remu_ex_test
	remu_flush_test
	remu_hostile_test
	remu_pktfuzz_test
	remu_uverbsfuzz_test
	remu_trace_test
	remu_trace_tools_test.sh
	remu_tour_test.sh
	remu_dm_pool_test.sh
	remu_limits_test.sh
	remu_link_test.sh
	remu_wire_test.sh
	remu_interop_test.sh
	remu_coexist_test.sh
	remu_pingpong_test.sh
	remu_perftest_test.sh
	remu_ucx_test.sh
	remu_fabric_test.sh
	remu_rdmacore_test.sh
	remu_netem_test.sh
	remu_cm_test.sh
	remu_mckey_test.sh
	remu_nvmeof_test.sh
	remu_install_test.sh
)
# --list: print the names of all tests, one a line, and run nothing.
if [ "${1:-}" = --list ]; then
	printf '%s\n' "${all_tests[@]}"
	exit 0
fi
tests=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do tests+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
[ ${#tests[@]} -eq 0 ] && tests=("${all_tests[@]}")

status=0
if scripts/remu-up; then
	echo "ok 1 setup: scripts/remu-up brought up remu0 and remu1"
else
	echo "not ok 1 setup: scripts/remu-up failed"
	exit 1
fi

# remu_mr_test drives the MR access layer through the test module
# remu_test_mr.ko, which is loaded for that test only (it pins remu).
# The .ko files come from the checkout, or from REMU_KO_DIR when set
# (make check-debug: modules built for the debug kernel).
ko_dir=${REMU_KO_DIR:-$repo}
tmr_load() {
	[ -d /sys/module/remu_test_mr ] && return 0
	if insmod "$ko_dir/remu_test_mr.ko"; then
		echo "ok 1 setup: remu_test_mr.ko loaded"
	else
		echo "not ok 1 setup: cannot load remu_test_mr.ko"
		status=1
	fi
}
tmr_unload() {
	[ -d /sys/module/remu_test_mr ] || return 0
	rmmod remu_test_mr || { echo "not ok 1 teardown: rmmod remu_test_mr failed"; status=1; }
}

# remu_dmabuf_test, remu_p2p_test, remu_storm_test and remu_trace_test need
# remu_test_dmabuf.ko, the test exporter whose dma-bufs move on command (and
# its test importer); loaded for those tests only.
tdb_load() {
	[ -d /sys/module/remu_test_dmabuf ] && return 0
	if insmod "$ko_dir/remu_test_dmabuf.ko"; then
		echo "ok 1 setup: remu_test_dmabuf.ko loaded"
	else
		echo "not ok 1 setup: cannot load remu_test_dmabuf.ko"
		status=1
	fi
}
tdb_unload() {
	[ -d /sys/module/remu_test_dmabuf ] || return 0
	rmmod remu_test_dmabuf || { echo "not ok 1 teardown: rmmod remu_test_dmabuf failed"; status=1; }
}

# each test's time goes to the log (docs/testing.md keeps the budget)
for t in "${tests[@]}"; do
	echo "# ---- $t"
	t0=$SECONDS
	if [ ! -x "$here/$t" ]; then
		# not built (make selftests): a failure, not a silent gap
		echo "not ok 1 $t: $here/$t is not built (run make)"
		status=1
		continue
	fi
	[ "$t" = remu_mr_test ] && tmr_load
	case $t in remu_dmabuf_test | remu_p2p_test | remu_storm_test | remu_trace_test) tdb_load ;; esac
	"$here/$t" "$@" || status=1
	[ "$t" = remu_mr_test ] && tmr_unload
	case $t in remu_dmabuf_test | remu_p2p_test | remu_storm_test | remu_trace_test) tdb_unload ;; esac
	echo "# ---- $t: $((SECONDS - t0)) s"
done

if scripts/remu-down; then
	echo "ok 1 teardown: scripts/remu-down removed everything and unloaded remu"
else
	echo "not ok 1 teardown: scripts/remu-down failed"
	status=1
fi
exit $status
