# SPDX-License-Identifier: GPL-2.0
# scripts/bench.d/rate.sh - --rate (sourced by scripts/bench)
#
# scripts/bench --rate [--quick] [--reps N] [--out FILE]: per-QP rate
# limits (docs/rate-limits.md), the rate asked against the rate achieved,
# at three rates, in one boot:
#   perftest  ib_write_bw -s 65536 --rate_limit R --rate_units M (MiB/s;
#             its default unit is Gb/s), unchanged, at R
#             = 5, 10, 20, in the phases remu-wire, remu-loop and rxe-loop
#             (as the default bench).  perftest's default limiter (HW, a
#             static rate) wants an InfiniBand link and falls back to its
#             software limiter (SW) on RoCE, on mlx5 as on remu and rxe;
#             its PP limiter (the verbs' per-QP rate limit) is for raw
#             Ethernet QPs only (raw_ethernet_bw), which remu has not.
#   remu      tools/remu_rate_bench: the QP's own limit, set with
#             ibv_modify_qp_rate_limit(), on a stream of 64 KiB RDMA
#             WRITEs, at 50, 100 and 200 Mb/s of wire packets, remu0 ->
#             remu1 and remu0 in loopback, after a run with no limit.
#             rxe has no rate limits (packet_pacing_caps 0,
#             ibv_modify_qp_rate_limit() EOPNOTSUPP): the tool's answer
#             on rxe0 is shown as it comes.
# Medians of --reps runs (default 3, --quick 1 with half the
# iterations).  Each achieved/asked outside 0.95..1.05 is marked "*" and
# counted on the last line (the issue's bar: within 5 % at 3 rates).
# Output: build/bench/rate-last.txt (and --out FILE).

# shellcheck shell=bash disable=SC2154,SC2034 # shared globals

rate_perftest_rates="5 10 20"	# MiB/s, perftest's unit
rate_remu_rates="50,100,200"	# Mb/s of wire packets

# perftest_rate PHASE SDEV ADDR NS: ib_write_bw --rate_limit at each rate,
# as "R PHASE RATE REP ok|fail BW_AVERAGE" lines
rate_perftest() {
	local name=$1 sdev=$2 addr=$3 ns=$4 r rep n bw
	for r in $rate_perftest_rates; do
		# about 4 s at the rate (2 s with --quick)
		n=$((r * 16 * 4))
		[ "$quick" = 0 ] || n=$((n / 2))
		for rep in $(seq "$reps"); do
			if run1 "$sdev" "$addr" "$ns" 120 ib_write_bw -s 65536 \
				-n "$n" --rate_limit "$r" --rate_units M; then
				bw=$(awk '{ print $4 }' <<<"$result")
				printf 'R\t%s\t%s\t%s\tok\t%s\n' "$name" "$r" "$rep" "$bw" >>"$raw"
				echo "$name ib_write_bw --rate_limit $r rep $rep: $bw MiB/s"
			else
				printf 'R\t%s\t%s\t%s\tfail\t%s\n' "$name" "$r" "$rep" "$result" >>"$raw"
				echo "$name ib_write_bw --rate_limit $r rep $rep: FAILED: $result"
			fi
		done
	done
}

# rate_tool PHASE ARGS...: tools/remu_rate_bench, its lines as "T PHASE LINE"
rate_tool() {
	local name=$1 out rc rep line d=2
	shift
	[ "$quick" = 0 ] || d=1
	for rep in $(seq "$reps"); do
		out=$(timeout -k 5 180 tools/remu_rate_bench -r "$rate_remu_rates" -d "$d" "$@" 2>&1)
		rc=$?
		while IFS= read -r line; do
			echo "$name rep $rep: $line"
			printf 'T\t%s\t%s\t%s\n' "$name" "$rep" "$line" >>"$raw"
		done <<<"$out"
		[ "$rc" = 0 ] || printf 'T\t%s\t%s\texit %s\n' "$name" "$rep" "$rc" >>"$raw"
	done
}

rate_guest() {
	[ -n "${REMU_IN_VM-}" ] || die "--guest runs inside the test VM (use scripts/bench on the host)"
	[ -n "$raw" ] || die "--guest wants --raw FILE"
	: >"$raw" || die "cannot write $raw"
	cd "$REPO" || exit 2
	meta "guest_kernel" "$(uname -r)"
	meta "guest_cpus" "$(nproc)"
	meta "perftest" "$(dpkg-query -W -f '${Version}' perftest 2>/dev/null)"
	meta "reps" "$reps"
	meta "quick" "$quick"
	scripts/remu-up >/dev/null || die "scripts/remu-up failed"
	warmup remu0 10.77.0.1 ""

	cdev=remu0
	rate_perftest remu-wire remu1 10.77.0.2 peer
	rate_perftest remu-loop remu0 10.77.0.1 ""
	rate_tool remu-wire -c remu0 -s remu1
	rate_tool remu-loop -c remu0 -s remu0

	if rdma link delete remu0 && modprobe rdma_rxe &&
		rdma link add rxe0 type rxe netdev v0 && wait_gid rxe0 10.77.0.1 >/dev/null; then
		warmup rxe0 10.77.0.1 ""
		cdev=rxe0
		rate_perftest rxe-loop rxe0 10.77.0.1 ""
		# rxe has no rate limit: what the tool gets there, once
		reps=1 rate_tool rxe-loop -c rxe0 -s rxe0
		rdma link delete rxe0
	else
		echo "$prog: rxe0 setup failed" >&2
		printf 'R\trxe-loop\t-\t1\tfail\trxe0 setup failed\n' >>"$raw"
	fi
	scripts/remu-down >/dev/null || { echo "$prog: scripts/remu-down failed" >&2; return 1; }
	return 0
}

# the report, from the raw results
rate_table() {
	awk -F'\t' "$AWK_LIB"'
	# "*": achieved/asked outside 0.95..1.05 (counted for the summary)
	function off(q) {
		judged++
		if (q >= 0.95 && q <= 1.05) return ""
		outside++
		return "*"
	}
	$1 == "R" {
		if (!($3 in seen)) { seen[$3] = 1; rates[++nr] = $3 }
		if ($5 == "ok") bw[$3, $2] = bw[$3, $2] " " $6
		else failed[$3, $2] = 1
	}
	$1 == "T" {
		split($4, w, " ")
		if (w[1] !~ /^(rc|uc|ud)$/) {
			if ($4 !~ /^#/ && index(note[$2], $4) == 0)
				note[$2] = note[$2] (note[$2] == "" ? "" : "; ") $4
			next
		}
		if (!(w[2] in tseen)) { tseen[w[2]] = 1; trates[++nt] = w[2] }
		tach[w[2], $2] = tach[w[2], $2] " " w[3]
		tpay[w[2], $2] = tpay[w[2], $2] " " w[5]
		theld[w[2], $2] = theld[w[2], $2] " " w[6]
		if (w[7] != "ok") tbad[w[2], $2] = 1
	}
	END {
		np = split("remu-wire remu-loop rxe-loop", ph, " ")
		print "perftest ib_write_bw -s 65536 --rate_limit R --rate_units M (its SW limiter on RoCE), BW average in MiB/s, achieved/asked:"
		printf "  %-10s", "asked"
		for (j = 1; j <= np; j++) printf " %18s", ph[j]
		printf "\n"
		for (i = 1; i <= nr; i++) {
			r = rates[i]
			if (r == "-") continue
			printf "  %-10s", r
			for (j = 1; j <= np; j++) {
				if ((r, ph[j]) in failed) s = "FAIL"
				else if ((r, ph[j]) in bw) {
					m = median(bw[r, ph[j]])
					s = sprintf("%.2f (%.3f)%s", m, m / r, off(m / r))
				} else s = "-"
				printf " %18s", s
			}
			printf "\n"
		}
		print ""
		print "remu per-QP rate limit (ibv_modify_qp_rate_limit), 64 KiB RDMA WRITEs: wire Mb/s achieved (achieved/asked), payload MiB/s, packets held:"
		printf "  %-10s", "asked"
		for (j = 1; j <= 2; j++) printf " %34s", ph[j]
		printf "\n"
		for (i = 1; i <= nt; i++) {
			r = trates[i]
			printf "  %-10s", r
			for (j = 1; j <= 2; j++) {
				if (!((r, ph[j]) in tach)) { printf " %34s", "-"; continue }
				a = median(tach[r, ph[j]])
				s = sprintf("%.1f", a)
				if (r != "none") s = s sprintf(" (%.3f)%s", a / r, off(a / r))
				s = s sprintf(", %.2f, %d", median(tpay[r, ph[j]]), median(theld[r, ph[j]]))
				if ((r, ph[j]) in tbad) s = s " DATA FAIL"
				printf " %34s", s
			}
			printf "\n"
		}
		for (p in note) printf "  %s: %s\n", p, note[p]
		printf "\nwithin 5 %% of the rate asked: %d of %d (* marks the others)\n", judged - outside, judged
	}' "$1"
}

rate_host() {
	local stamp rc log
	local -a q=()
	[ "$quick" = 0 ] || q=(--quick)
	cd "$REPO" || exit 2
	{ [ -f remu.ko ] && [ -f build/provider/libremu-rdmav34.so ] &&
		[ -x tools/remu_rate_bench ]; } || die "build first (make)"
	mkdir -p build/bench
	stamp=$(date -u +%Y%m%d-%H%M%S)
	raw=$REPO/build/bench/rate-raw-$stamp.tsv
	scripts/vm --timeout 1800 -- scripts/bench --guest --rate --reps "$reps" \
		"${q[@]}" --raw "$raw" >/dev/null
	rc=$?
	[ -s "$raw" ] || die "the guest wrote no results (scripts/vm exit $rc)"
	log=build/bench/rate-last.txt
	{
		echo "scripts/bench $(printf '%q ' "${orig_args[@]}")"
		echo "  host_date:     $(date -u '+%Y-%m-%d %H:%M UTC')"
		echo "  host_cpu:      $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1) ($(nproc) cores)"
		echo "  vm:            scripts/vm defaults: -accel tcg,${REMU_VM_TCG:-thread=multi} -cpu max -smp 2 -m 2048"
		echo "  commit:        $(git describe --always --dirty 2>/dev/null)"
		awk -F'\t' '$1 == "M" { printf "  %-14s %s\n", $2 ":", $3 }' "$raw"
		echo
		rate_table "$raw"
		echo
		echo "Medians of $reps run(s).  perftest: the payload bandwidth it reports"
		echo "against its --rate_limit (MiB/s); remu: wire bits (Ethernet frames"
		echo "without FCS) from the completion timestamps against the QP's limit."
	} >"$log"
	cat "$log"
	[ -z "$out" ] || cp "$log" "$out"
	[ "$rc" = 0 ] || { echo "$prog: the VM run failed (scripts/vm exit $rc)" >&2; return 1; }
	grep -q 'FAIL' "$log" && return 1
	return 0
}
