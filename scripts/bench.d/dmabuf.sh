# SPDX-License-Identifier: GPL-2.0
# scripts/bench.d/dmabuf.sh - --dmabuf (sourced by scripts/bench)
#
# scripts/bench --dmabuf [--reps N] [--out FILE] is another one of the
# project's own: tools/remu_dmabuf_bench, with the test exporter
# remu_test_dmabuf.ko loaded, measures ibv_reg_dmabuf_mr/ibv_dereg_mr time
# (udmabuf, dma-heap, test exporter; 64 KiB to 16 MiB; against ibv_reg_mr)
# and the re-map latency after a move (an 8-byte READ remu0 -> remu1 before
# and after the exporter moved the buffer); medians of --reps runs (default
# 21, --quick 5).  See docs/dma-buf.md.  Output: build/bench/dmabuf.txt
# (and --out FILE).

# shellcheck shell=bash disable=SC2154,SC2034 # shared globals

# --dmabuf: one program in one boot, no phases
dmabuf_guest() {
	local st=0
	[ -n "${REMU_IN_VM-}" ] || die "--guest runs inside the test VM (use scripts/bench on the host)"
	cd "$REPO" || exit 2
	scripts/remu-up >/dev/null || die "scripts/remu-up failed"
	insmod "$REPO/remu_test_dmabuf.ko" || die "cannot load remu_test_dmabuf.ko"
	tools/remu_dmabuf_bench "$reps" || st=1
	rmmod remu_test_dmabuf || st=1
	scripts/remu-down >/dev/null || st=1
	return $st
}

dmabuf_host() {
	local log=build/bench/dmabuf.txt n=$reps rc
	cd "$REPO" || exit 2
	[ -x tools/remu_dmabuf_bench ] && [ -f remu_test_dmabuf.ko ] || die "build first (make)"
	mkdir -p build/bench
	{
		echo "scripts/bench $(printf '%q ' "${orig_args[@]}")"
		echo "  host_date:     $(date -u '+%Y-%m-%d %H:%M UTC')"
		echo "  commit:        $(git describe --always --dirty 2>/dev/null)"
		echo "  vm:            scripts/vm defaults (TCG)"
		scripts/vm --timeout 900 -- scripts/bench --guest --dmabuf --reps "$n"
		rc=$?
		echo "  vm_status:     $rc"
	} 2>&1 | tee "$log"
	rc=$(sed -n 's/^  vm_status: *//p' "$log")
	[ -z "$out" ] || cp "$log" "$out"
	[ "$rc" = 0 ]
}
