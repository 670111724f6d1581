#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# remu_limits_test.sh - remu_limits_test at the default limits, then with
# the module reloaded with small max_* parameters, so that every object
# count the device reports (max_mr too, 1048576 by default) is exhausted
# once: each refused with ENOMEM exactly at the limit the device reports.
# Then the module is reloaded with its defaults (remu0 and remu1 as
# scripts/remu-up makes them) for the tests after this one.  Every unload
# must be clean (remu_reload checks for a "leaked" line).
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib/remu_ktap_lib.sh"
. "$here/lib/remu_lib.sh"

ktap_header 4

run() {
	local out rc
	out=$("$here/remu_limits_test" "$@" 2>&1)
	rc=$?
	echo "$out" | grep -E "^(ok|not ok|#)" | grep -vE "^# (Starting|RUN|OK)"
	return $rc
}

ktap_check "defaults: every limit up to 65536 exhausted, ucontext, memlock, memcg, DM quota, rxq_full" \
	run
small() {
	remu_reload max_pd=50 max_qp=40 max_cq=30 max_srq=20 max_mr=100 \
		max_mw=60 max_ah=70 max_ucontext=6 || return 1
	[ "$(cat /sys/module/remu/parameters/max_mr)" = 100 ] || return 1
	ibv_devinfo -v -d remu0 | grep -E "max_(pd|qp|cq|srq|mr|mw|ah):" | tr -s '\t ' ' '
	run -r limits.counts -r global.ucontext
}
ktap_check "small limits (max_mr=100...): every kind exhausted at its limit" small
above() {
	# a parameter above the compile-time maximum is not taken
	remu_reload max_pd=1000000 max_mr=2000000 || return 1
	ibv_devinfo -v -d remu0 | grep -qE "max_pd:[[:space:]]+65536$" &&
		ibv_devinfo -v -d remu0 | grep -qE "max_mr:[[:space:]]+1048576$"
}
ktap_check "parameters above the maximum: the maximum is reported" above
ktap_check "defaults again" remu_reload
ktap_finished
