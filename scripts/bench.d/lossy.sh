# SPDX-License-Identifier: GPL-2.0
# scripts/bench.d/lossy.sh - --lossy (sourced by scripts/bench)
#
# scripts/bench --lossy [--quick] [--reps N] [--base REF] [--out FILE]
# measures RC goodput over a lossy link, remu against rxe, in one boot:
# netem on both ends of the veth (v0, and v1 in namespace peer), as
# selftests/remu_netem_test.sh sets it, with each of the lines
#   L1  delay 1ms loss 5% reorder 10% duplicate 2%
#   L2  loss 1%
#   L3  loss 5%
#   L4  delay 1ms reorder 10%
# and perftest ib_write_bw (RC, fixed iteration counts: 1 MiB x 16 and
# 64 KiB x 160; --quick 8 and 48) in the phases
#   remu-wire  remu0 (client, initial namespace) -> remu1 (namespace peer)
#   remu-base  the same with remu.ko built from git REF (--base REF, into
#              build/bench/base/): before/after in one boot
#   rxe-wire   rxe0 on v0 (client: rxe's requester, which is what recovers
#              a WRITE) -> remu1; rxe only works in the initial namespace,
#              so the far end is remu (the interop pair of
#              remu_interop_test.sh)
# Goodput is perftest's BW average (MiB/s); for each cell it also prints
# the counters that explain it, per run: the client's packets sent
# against the packets of the data, its timer expiries
# (completer_retry_err), sequence NAKs received (rcvd_seq_err) and the
# time the expiries waited at least (each one a whole QP timeout without
# progress: perftest's -u 14, 67.1 ms; rxe counts every retry it starts
# there, after a NAK too, so its figure is an upper bound), remu's probes
# and stale NAKs (docs/reliability.md), and the server's duplicates and
# out-of-sequence drops.  Medians of --reps runs (default 3, --quick 1).
# Output: build/bench/lossy-last.txt (and --out FILE).  With --raw FILE
# it only formats FILE, the raw results of a guest run (scripts/bench
# --guest --lossy ... --raw FILE in a VM boot that also ran other things).

# shellcheck shell=bash disable=SC2154,SC2034 # shared globals

# --lossy: RC WRITE goodput under netem, remu against rxe (see the top).
# The netem lines, each "LABEL NETEM-ARGS"; the tests "SIZE ITERATIONS".
lossy_lines() {
	echo "L1 delay 1ms loss 5% reorder 10% duplicate 2%"
	echo "L2 loss 1%"
	echo "L3 loss 5%"
	echo "L4 delay 1ms reorder 10%"
}

lossy_tests() {
	if [ "$quick" = 0 ]; then
		echo "1048576 16"
		echo "65536 160"
	else
		echo "1048576 8"
		echo "65536 48"
	fi
}

lossy_qdisc_del() {
	tc qdisc del dev v0 root 2>/dev/null
	ip netns exec peer tc qdisc del dev v1 root 2>/dev/null
	return 0
}

# lcnt TAG DEV...: the counters of DEV as "C TAG DEV NAME VALUE" lines
lcnt() {
	local tag=$1 dev
	shift
	for dev in "$@"; do
		rdma statistic show link "$dev/1" 2>/dev/null |
			awk -v t="$tag" -v d="$dev" '{
				for (i = 3; i < NF; i += 2) printf "C\t%s\t%s\t%s\t%s\n", t, d, $i, $(i + 1) }'
	done >>"$raw"
}

# lossy_phase NAME CLIENT-DEV: every line and test, server remu1 (peer)
lossy_phase() {
	local name=$1 label args size n r t0 t1 secs key tag
	cdev=$2
	caddr=10.77.0.1
	echo "# phase $name: client $cdev, server remu1 (namespace peer) at 10.77.0.2"
	while read -r label args; do
		# shellcheck disable=SC2086 # netem's words
		if ! tc qdisc replace dev v0 root netem $args ||
		   ! ip netns exec peer tc qdisc replace dev v1 root netem $args; then
			echo "$prog: netem $args failed" >&2
			printf 'R\t%s\tib_write_bw %s 0\t1\tfail\t0\tnetem failed\t-\n' "$name" "$label" >>"$raw"
			continue
		fi
		while read -r size n; do
			key="ib_write_bw $label $size"
			for r in $(seq "$reps"); do
				tag="$name|$key|$r"
				lcnt "$tag|start" "$cdev" remu1
				t0=$(date +%s.%N)
				if run1 remu1 10.77.0.2 peer 240 ib_write_bw -s "$size" -n "$n"; then
					t1=$(date +%s.%N)
					secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
					lcnt "$tag|end" "$cdev" remu1
					printf 'R\t%s\t%s\t%s\tok\t%s\t%s\t%s\n' "$name" "$key" "$r" "$secs" "$result" "-s $size -n $n" >>"$raw"
					echo "$name $key ($args) rep $r: $result (${secs}s)"
				else
					t1=$(date +%s.%N)
					secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
					lcnt "$tag|end" "$cdev" remu1
					printf 'R\t%s\t%s\t%s\tfail\t%s\t%s\t%s\n' "$name" "$key" "$r" "$secs" "$result" "-s $size -n $n" >>"$raw"
					echo "$name $key ($args) rep $r: FAILED (${secs}s): $result"
					break
				fi
			done
		done < <(lossy_tests)
	done < <(lossy_lines)
	lossy_qdisc_del
}

lossy_guest() {
	[ -n "${REMU_IN_VM-}" ] || die "--guest runs inside the test VM (use scripts/bench on the host)"
	[ -n "$raw" ] || die "--guest wants --raw FILE"
	: >"$raw" || die "cannot write $raw"
	cd "$REPO" || exit 2
	local label args
	meta "guest_kernel" "$(uname -r)"
	meta "guest_cpus" "$(nproc)"
	meta "perftest" "$(dpkg-query -W -f '${Version}' perftest 2>/dev/null)"
	meta "reps" "$reps"
	meta "quick" "$quick"
	[ -z "$base" ] || meta "base" "$base ($(cat build/bench/base/REF 2>/dev/null))"
	while read -r label args; do
		meta "netem_$label" "$args (on v0 and on v1)"
	done < <(lossy_lines)
	modprobe sch_netem || die "modprobe sch_netem failed"
	trap lossy_qdisc_del EXIT
	scripts/remu-up >/dev/null || die "scripts/remu-up failed"
	devattrs remu0
	warmup remu0 10.77.0.1 ""
	lossy_phase remu-wire remu0
	if [ -n "$base" ]; then
		scripts/remu-down >/dev/null || die "scripts/remu-down failed"
		REMU_KO_DIR=$REPO/build/bench/base scripts/remu-up >/dev/null ||
			die "scripts/remu-up of the base build failed"
		warmup remu0 10.77.0.1 ""
		lossy_phase remu-base remu0
		scripts/remu-down >/dev/null || die "scripts/remu-down failed"
		scripts/remu-up >/dev/null || die "scripts/remu-up failed"
	fi
	if rdma link delete remu0 && modprobe rdma_rxe &&
		rdma link add rxe0 type rxe netdev v0 && wait_gid rxe0 10.77.0.1 >/dev/null; then
		devattrs rxe0
		cdev=rxe0
		run1 remu1 10.77.0.2 peer 60 ib_write_bw -s 65536 -n 200 ||
			echo "# warm-up on rxe0 failed: $result"
		lossy_phase rxe-wire rxe0
		rdma link delete rxe0
	else
		echo "$prog: rxe0 setup failed" >&2
		printf 'R\trxe-wire\tib_write_bw - 0\t1\tfail\t0\trxe0 setup failed\t-\n' >>"$raw"
	fi
	trap - EXIT
	lossy_qdisc_del
	scripts/remu-down >/dev/null || { echo "$prog: scripts/remu-down failed" >&2; return 1; }
	return 0
}

# lossy_report RAW: per line and size, the counters of each phase, per run
lossy_report() {
	awk -F'\t' '
	$1 == "M" && $2 == "dev_remu0" { if (match($3, /active_mtu: *[0-9]+/)) { s = substr($3, RSTART, RLENGTH); gsub(/[^0-9]/, "", s); mtu = s + 0 } }
	$1 == "C" {
		n = split($2, t, "|")
		cell = t[1] "|" t[2]; k = cell SUBSEP t[3] SUBSEP $3 SUBSEP $4
		if (t[4] == "start") a[k] = $5
		else if (k in a) dd[cell SUBSEP t[3] SUBSEP ($3 == "remu1" ? "s" : "c") SUBSEP $4] = $5 - a[k]
	}
	$1 == "R" && $5 == "ok" {
		cell = $2 "|" $3
		okrun[cell SUBSEP $4] = 1
		if (!(cell in runs)) order[++nc] = cell
		runs[cell]++
		split($8, w, " "); size[cell] = w[2]; iters[cell] = w[4]
		split($7, f, " "); bw[cell] = bw[cell] " " f[4]
		wall[cell] += $6
	}
	END {
		if (!mtu) mtu = 1024
		# the counters of the runs that succeeded
		for (k in dd) {
			split(k, kk, SUBSEP)
			if ((kk[1] SUBSEP kk[2]) in okrun) d[kk[1] SUBSEP kk[3] SUBSEP kk[4]] += dd[k]
		}
		printf "  %-24s %-9s %6s %6s %6s %6s %6s %7s %6s %6s %6s\n", "cell", "phase", "sent/", "timer", "probe", "NAKs", "stale", "timer", "wall", "dup", "ooseq"
		printf "  %-24s %-9s %6s %6s %6s %6s %6s %7s %6s %6s %6s\n", "", "", "data", "/run", "/run", "/run", "/run", "wait s", "s/run", "/run", "/run"
		for (i = 1; i <= nc; i++) {
			cell = order[i]; split(cell, cp, "|"); ph = cp[1]; key = cp[2]
			n = runs[cell]
			pk = iters[cell] * int((size[cell] + mtu - 1) / mtu)
			c = cell SUBSEP "c" SUBSEP
			tmo = d[c "completer_retry_err"] / n
			printf "  %-24s %-9s %6.2f %6.1f %6.1f %6.1f %6.1f %7.2f %6.1f %6.0f %6.0f\n", key, ph,
				pk ? d[c "sent_pkts"] / n / pk : 0, tmo, d[c "retry_probe"] / n,
				d[c "rcvd_seq_err"] / n, d[c "stale_seq_nak"] / n,
				tmo * 0.0671, wall[cell] / n,
				d[cell SUBSEP "s" SUBSEP "duplicate_request"] / n,
				d[cell SUBSEP "s" SUBSEP "out_of_seq_request"] / n
		}
	}' "$1"
}

lossy_host() {
	local stamp log rc status=0 nfail
	local -a cols=("remu-wire rxe-wire" 1 2)
	cd "$REPO" || exit 2
	{ [ -f remu.ko ] && [ -f build/provider/libremu-rdmav34.so ]; } || die "build first (make)"
	command -v ib_write_bw >/dev/null || die "perftest is not installed (scripts/setup)"
	mkdir -p build/bench
	stamp=$(date -u +%Y%m%d-%H%M%S)
	[ -n "$base" ] && cols=("remu-base remu-wire rxe-wire" 2 3)
	if [ -n "$raw" ]; then
		# --raw FILE: only format what a guest run left in FILE
		[ -s "$raw" ] || die "--raw: $raw is empty"
		grep -q "^M	vm_status" "$raw" || printf 'M\tvm_status\t-\n' >>"$raw"
		lossy_format
		return
	fi
	raw=$REPO/build/bench/lossy-raw-$stamp.tsv
	local -a gargs=(--guest --lossy --reps "$reps" --raw "$raw")
	[ "$quick" = 0 ] || gargs+=(--quick)
	if [ -n "$base" ]; then
		build_base
		gargs+=(--base "$base")
	fi
	guest_run 2400 "$raw" "${gargs[@]}"
	lossy_format || status=1
	[ "$rc" = 0 ] || { echo "$prog: the VM run failed (scripts/vm exit $rc)" >&2; status=1; }
	return "$status"
}

# lossy_format: the report of $raw (cols, base, out as lossy_host set)
lossy_format() {
	local log nfail status=0
	log=build/bench/lossy-last.txt
	{
		echo "scripts/bench $(printf '%q ' "${orig_args[@]}")"
		awk -F'\t' '$1 == "M" && $3 != "" { printf "  %-14s %s\n", $2 ":", $3 }' "$raw"
		echo
		table "$raw" "${cols[@]}"
		if [ -n "$base" ]; then
			echo
			echo "The same, ratio = remu-wire / remu-base (this tree against $base):"
			table "$raw" "${cols[0]}" 2 1
		fi
		echo
		echo "Medians of the runs; MB/s is perftest's BW average (MiB/s) of the"
		echo "WRITEs, client -> server remu1 across the lossy veth; the second column"
		echo "is the netem line (above).  A ratio above 1 means the first phase"
		echo "named is faster."
		echo
		echo "Per run (averages of the runs): the client's packets sent per packet"
		echo "of data, its timer expiries, probes (retry_probe: remu resending a hole"
		echo "still unfilled ~2 round trips after a go-back), sequence NAKs received"
		echo "and those of them it found stale (stale_seq_nak: no go-back), the least"
		echo "time the expiries waited (x 67.1 ms, perftest's QP timeout 14), the"
		echo "wall time of the run (with ~3 s of program start), and remu1's"
		echo "duplicates and out-of-sequence drops.  rxe counts in"
		echo "completer_retry_err every retry it starts, after a NAK too: its timer"
		echo "columns are an upper bound."
		lossy_report "$raw"
		nfail=$(awk -F'\t' '$1 == "R" && $5 != "ok"' "$raw" | wc -l)
		if [ "$nfail" -gt 0 ]; then
			echo
			echo "Failed runs:"
			awk -F'\t' '$1 == "R" && $5 != "ok" { printf "  %s %s rep %s: %s\n", $2, $3, $4, $7 }' "$raw"
			status=1
		fi
		echo "raw results: ${raw#"$REPO"/}"
	} >"$log"
	echo
	cat "$log"
	[ -z "$out" ] || cp "$log" "$out"
	return "$status"
}
