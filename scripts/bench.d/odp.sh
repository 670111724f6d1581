# SPDX-License-Identifier: GPL-2.0
# scripts/bench.d/odp.sh - --odp (sourced by scripts/bench)
#
# scripts/bench --odp [--quick] [--reps N] [--out FILE] measures what
# on-demand paging costs, with tools/remu_odp_bench (remu0 -> remu1 across
# the veth pair) in a VM of 3 GiB (--mem 3072: a pinned 1 GiB MR must fit
# beside the guest's tmpfs): ibv_reg_mr/ibv_dereg_mr time of a 1 GiB
# anonymous mapping, pinned (untouched, and written first) and ODP; the
# first-touch device fault cost per 4 KiB page (remote WRITEs of 4 KiB and
# 64 KiB into 4096 untouched pages of an ODP MR, then into the same pages
# again; the port counters num_page_faults/num_page_fault_pages must show
# exactly 4096 pages faulted by the first pass and none by the second);
# streaming 64 KiB WRITE bandwidth into a pinned and an ODP MR (ratio).
# Every run checks the data it moved.  Then perftest ib_write_bw -s 65536
# with and without --odp, remu0 -> remu1, alternating (perftest does not
# check data).  Medians of --reps runs (default 5, --quick 3, which also
# shrinks the sizes).  Output: build/bench/odp-last.txt (and --out FILE).

# shellcheck shell=bash disable=SC2154,SC2034 # shared globals

# --odp, in the guest: tools/remu_odp_bench remu0 -> remu1, then perftest
# ib_write_bw 64 KiB with and without --odp; everything in $raw
odp_guest() {
	[ -n "${REMU_IN_VM-}" ] || die "--guest runs inside the test VM (use scripts/bench on the host)"
	[ -n "$raw" ] || die "--guest wants --raw FILE"
	cd "$REPO" || exit 2
	local rc st=0 r k n=600 kind odpopt
	local -a pargs=(-c remu0 -s remu1 -r "$reps")
	[ "$quick" = 0 ] || { pargs+=(-p 1024 -l 4); n=60; }
	scripts/remu-up >/dev/null || die "scripts/remu-up failed"
	{
		echo "guest: $(uname -r), $(nproc) CPUs, $(awk '/^MemTotal/ { printf "%d MiB", $2 / 1024 }' /proc/meminfo)"
		echo "command: tools/remu_odp_bench ${pargs[*]}"
		tools/remu_odp_bench "${pargs[@]}"
	} >"$raw" 2>&1
	rc=$?
	[ "$rc" = 0 ] || st=1
	cat "$raw"

	# perftest: the same WRITE stream through an unchanged client
	cdev=remu0
	caddr=10.77.0.1
	# a short throwaway run first (warmup would make remu1 the client)
	run1 remu1 10.77.0.2 peer 60 ib_write_bw -s 65536 -n 200 ||
		echo "# perftest warm-up failed: $result"
	{
		echo
		echo "## perftest: ib_write_bw -s 65536 -n $n, remu0 -> remu1 (namespace peer), with and without --odp ($reps runs, order flips every run)"
		for r in $(seq "$reps"); do
			for k in 0 1; do
				kind=pinned odpopt=()
				[ $(((k + r) % 2)) = 0 ] || { kind=odp; odpopt=(--odp); }
				if ! run1 remu1 10.77.0.2 peer 120 ib_write_bw -s 65536 \
					-n "$n" "${odpopt[@]}"; then
					echo "perftest run $r $kind: FAILED: $result"
					st=1
					continue
				fi
				printf 'P\t%s\t%s\t%s\n' "$kind" "$r" "$result"
			done
		done
	} >>"$raw" 2>&1
	awk -F'\t' "$AWK_LIB"'
	$1 == "P" { split($4, f, " "); runs[$2] = runs[$2] " " f[4] }
	END {
		printf "%-8s %10s   %s\n", "MR", "MB/s", "run BW average (MB/s)"
		for (k = 1; k <= 2; k++) {
			kind = k == 1 ? "pinned" : "odp"
			m[kind] = (kind in runs) ? median(runs[kind]) : 0
			printf "%-8s %10.1f  %s\n", kind, m[kind], runs[kind]
		}
		if (m["pinned"] > 0) printf "odp/pinned %.3f\n", m["odp"] / m["pinned"]
	}' "$raw" >>"$raw.sum"
	sed -i '/^P\t/d' "$raw"
	cat "$raw.sum" >>"$raw"
	rm -f "$raw.sum"
	sed -n '/^## perftest/,$p' "$raw"
	scripts/remu-down >/dev/null || { echo "$prog: scripts/remu-down failed" >&2; return 1; }
	return "$st"
}

# --odp, on the host
odp_host() {
	local stamp rc log
	cd "$REPO" || exit 2
	{ [ -f remu.ko ] && [ -f build/provider/libremu-rdmav34.so ] &&
		[ -x tools/remu_odp_bench ]; } || die "build first (make)"
	command -v ib_write_bw >/dev/null || die "perftest is not installed (scripts/setup)"
	mkdir -p build/bench
	stamp=$(date -u +%Y%m%d-%H%M%S)
	raw=$REPO/build/bench/odp-raw-$stamp.txt
	local -a gargs=(--guest --odp --reps "$reps" --raw "$raw")
	[ "$quick" = 0 ] || gargs+=(--quick)
	scripts/vm --mem 3072 --timeout 1500 -- scripts/bench "${gargs[@]}" >/dev/null
	rc=$?
	[ -s "$raw" ] || die "the guest wrote no results (scripts/vm exit $rc)"
	log=build/bench/odp-last.txt
	{
		echo "scripts/bench $(printf '%q ' "${orig_args[@]}")"
		echo "  host_date:     $(date -u '+%Y-%m-%d %H:%M UTC')"
		echo "  host_cpu:      $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1) ($(nproc) cores)"
		echo "  vm:            scripts/vm --mem 3072: -accel tcg,${REMU_VM_TCG:-thread=multi} -cpu max -smp 2 -m 3072"
		echo "  commit:        $(git describe --always --dirty 2>/dev/null)"
		sed 's/^/  /' "$raw"
	} >"$log"
	cat "$log"
	[ -z "$out" ] || cp "$log" "$out"
	[ "$rc" = 0 ] || { echo "$prog: the VM run failed (scripts/vm exit $rc)" >&2; return 1; }
	return 0
}
