# SPDX-License-Identifier: GPL-2.0
# remu_ktap_lib.sh - KTAP output for the remu shell tests (sourced).  Same output
# as the kernel's kselftest/ktap_helpers.sh: a plan, one "ok N name" or
# "not ok N name" line per test, "# " diagnostics, and a totals line.

KTAP_N=0
KTAP_PASS=0
KTAP_FAIL=0
KTAP_SKIP=0

ktap_header() { echo "TAP version 13"; echo "1..$1"; }
ktap_diag() { echo "# $*"; }
ktap_pass() { KTAP_N=$((KTAP_N + 1)); KTAP_PASS=$((KTAP_PASS + 1)); echo "ok $KTAP_N $*"; }
ktap_fail() { KTAP_N=$((KTAP_N + 1)); KTAP_FAIL=$((KTAP_FAIL + 1)); echo "not ok $KTAP_N $*"; }
ktap_skip() { KTAP_N=$((KTAP_N + 1)); KTAP_SKIP=$((KTAP_SKIP + 1)); echo "ok $KTAP_N $1 # SKIP ${2:-}"; }

# ktap_check NAME CMD...: run CMD, pass if it succeeds; its output is shown
# as diagnostics either way.
ktap_check() {
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then
		ktap_pass "$name"
	else
		[ -n "$out" ] && printf '%s\n' "$out" | sed 's/^/# /'
		ktap_fail "$name"
	fi
}

ktap_finished() {
	echo "# Totals: pass:$KTAP_PASS fail:$KTAP_FAIL xfail:0 xpass:0 skip:$KTAP_SKIP error:0"
	[ "$KTAP_FAIL" -eq 0 ]
}
