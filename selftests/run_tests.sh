#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# run_tests.sh - the in-VM part of `make check`: brings up the standard
# topology with scripts/remu-up, runs every selftest (each prints KTAP),
# and takes the topology down.  Usage, from the host:
#     scripts/vm -- selftests/run_tests.sh [TEST...]
# With TEST names (remu_device_test, remu_link_test.sh, ...) only those run;
# extra arguments after "--" go to a kselftest binary (e.g. -r dev.remu0.query_port).
# run_tests.sh --list prints the test names; tests.list says what each
# covers; docs/testing.md is the guide.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
cd "$repo"

# What runs, in what order, and which test modules each program needs
# come from tests.list, the one list (the Makefile builds from it):
# by default its TEST_GEN_PROGS, then its TEST_PROGS (kselftest's order),
# each in the list's order.  Any other program of selftests/ runs when
# named (TEST_PROGS_EXTENDED: remu_deb_test.sh...).
gen_progs=()
progs=()
declare -A test_modules=()
while read -r name kind modules _; do
	case $name in '' | '#'*) continue ;; esac
	case $kind in
		TEST_GEN_PROGS) gen_progs+=("$name") ;;
		TEST_PROGS) progs+=("$name") ;;
	esac
	[ "$modules" = - ] || test_modules[$name]=${modules//,/ }
done <"$here/tests.list"
all_tests=("${gen_progs[@]}" "${progs[@]}")
case ${1:-} in
--list)	# the names of all tests, one a line, in their order; nothing runs
	printf '%s\n' "${all_tests[@]}"
	exit 0
	;;
-h | --help)
	sed -n '4,/^set -u/{/^set -u/d;s/^# \{0,1\}//;p}' "$0"
	exit 0
	;;
esac
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

# The test modules a program needs (tests.list's MODULES: remu_test_mr.ko
# for remu_mr_test, remu_test_dmabuf.ko for the tests of moving dma-bufs)
# are loaded for that program only: remu_test_mr pins remu.
# The .ko files come from the checkout, or from REMU_KO_DIR when set
# (make check-debug: modules built for the debug kernel).
ko_dir=${REMU_KO_DIR:-$repo}
mod_load() {	# MODULE
	[ -d "/sys/module/$1" ] && return 0
	if insmod "$ko_dir/$1.ko"; then
		echo "ok 1 setup: $1.ko loaded"
	else
		echo "not ok 1 setup: cannot load $1.ko"
		status=1
	fi
}
mod_unload() {	# MODULE
	[ -d "/sys/module/$1" ] || return 0
	rmmod "$1" || { echo "not ok 1 teardown: rmmod $1 failed"; status=1; }
}

# each test's time goes to the log (docs/testing.md: the time of a run)
for t in "${tests[@]}"; do
	echo "# ---- $t"
	t0=$SECONDS
	if [ ! -x "$here/$t" ]; then
		# not built (make selftests): a failure, not a silent gap
		echo "not ok 1 $t: $here/$t is not built (run make)"
		status=1
		continue
	fi
	for m in ${test_modules[$t]-}; do mod_load "$m"; done
	"$here/$t" "$@" || status=1
	for m in ${test_modules[$t]-}; do mod_unload "$m"; done
	echo "# ---- $t: $((SECONDS - t0)) s"
done

if scripts/remu-down; then
	echo "ok 1 teardown: scripts/remu-down removed everything and unloaded remu"
else
	echo "not ok 1 teardown: scripts/remu-down failed"
	status=1
fi
exit $status
