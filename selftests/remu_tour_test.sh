#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# remu_tour_test.sh - the tour's chapters (tour/NAME.c, docs/tracing.md
# "Watching it in the tour") as a test: every chapter runs once through
# tour/run-chapter, in the tour's order, and passes when it saw every
# trace event and counter it teaches (exit status 0).  A chapter that
# misses one prints "[MISSING] ..." and fails; its output goes to the log.
#
# Usage (in the test VM, after scripts/remu-up): remu_tour_test.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$here/lib/remu_ktap_lib.sh"

mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
read -r -a chapters < <("$repo/tour/run-chapter" --list)
out=$(mktemp)
trap 'rm -f "$out"' EXIT

ktap_header ${#chapters[@]}
for c in "${chapters[@]}"; do
	t0=$SECONDS
	if "$repo/tour/run-chapter" "$c" > "$out" 2>&1; then
		ktap_pass "chapter $c: saw everything it teaches ($((SECONDS - t0)) s)"
	else
		sed 's/^/# /' "$out"
		ktap_fail "chapter $c: did not see what it teaches"
	fi
done
ktap_finished
