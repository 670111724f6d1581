# SPDX-License-Identifier: GPL-2.0
# scripts/bench.d/perftest.sh - the default mode: the perftest set in the
# phases remu-wire, remu-loop and rxe-loop (or base-loop with --base), the
# limit beneath remu (UDP and memcpy), --breakdown; and the frame of
# --trace-cost, whose phases are in trace-cost.sh.  Its --help is the top
# of scripts/bench.  Entry points: perftest_guest (in the VM, results in
# $raw) and perftest_host (boots the VM, writes the report).

# shellcheck shell=bash disable=SC2154,SC2034 # shared globals

# ---------------------------------------------------------------------------
# The tests: "PROGRAM TRANSPORT SIZE ITERATIONS [EXTRA ARGS]".  Each run
# costs about 3 s of program start and connection setup under TCG; the
# iteration counts make the measured part last about 2 s in the slowest
# phase of a --quick calibration run (runs of under a second are mostly
# noise), which keeps the whole bench (3 reps) at about 20 minutes.
# ---------------------------------------------------------------------------
iters() { # iters PROGRAM TRANSPORT SIZE
	case "$1 $2 $3" in
		*_bw\ RC\ 1) echo 12000 ;;
		*_bw\ RC\ 4095) echo 8000 ;;
		*_bw\ RC\ 65536) echo 600 ;;
		*_bw\ RC\ 1048576) echo 30 ;;
		*_lat\ RC\ 1) echo 5000 ;;
		*_lat\ RC\ 4095) echo 3000 ;;
		*_lat\ RC\ 65536) echo 300 ;;
		*_lat\ RC\ 1048576) echo 20 ;;
		*_bw\ UD\ 1) echo 15000 ;;
		*_bw\ UD\ 4095) echo 8000 ;;
		*_lat\ UD\ 1) echo 5000 ;;
		*_lat\ UD\ 4095) echo 4000 ;;
		ib_atomic_bw\ *) echo 12000 ;;
	esac
}

all_tests() {
	local p k s
	for p in send write read; do
		for k in bw lat; do
			for s in 1 4095 65536 1048576; do
				echo "ib_${p}_$k RC $s $(iters "ib_${p}_$k" RC "$s")"
			done
		done
	done
	for k in bw lat; do
		for s in 1 4095; do
			echo "ib_send_$k UD $s $(iters "ib_send_$k" UD "$s")"
		done
	done
	echo "ib_atomic_bw RC 8 $(iters ib_atomic_bw RC 8) -A FETCH_AND_ADD"
}

perftest_guest() {
	[ -n "${REMU_IN_VM-}" ] || die "--guest runs inside the test VM (use scripts/bench on the host)"
	[ -n "$raw" ] || die "--guest wants --raw FILE"
	: >"$raw" || die "cannot write $raw"
	cd "$REPO" || exit 2

	local -a tests=()
	local t
	while read -r t; do
		# shellcheck disable=SC2086 # split the test's words
		set -- $t
		[ -z "$filter" ] || [[ "$1 $2 $3" =~ $filter ]] || continue
		tests+=("$t")
	done < <(all_tests)
	[ ${#tests[@]} -gt 0 ] || die "no test matches '$filter'"

	meta "guest_kernel" "$(uname -r)"
	meta "guest_cpus" "$(nproc)"
	meta "guest_cpu" "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
	meta "perftest" "$(dpkg-query -W -f '${Version}' perftest 2>/dev/null)"
	meta "reps" "$reps"
	meta "quick" "$quick"
	meta "filter" "$filter"
	meta "args" "$extra"

	scripts/remu-up >/dev/null || die "scripts/remu-up failed"
	devattrs remu0
	devattrs remu1

	# A short throwaway run first: the first runs after boot are slower.
	warmup remu0 10.77.0.1 ""

	if [ "$tracecost" = 1 ]; then
		trace_cost_phases "${tests[@]}"
		return
	fi
	limit

	if [ -n "$base" ]; then
		# before/after in one boot: remu-base, then this tree, in
		# loopback (remu-wire left out to keep the boot short)
		meta "base" "$base ($(cat build/bench/base/REF 2>/dev/null))"
		scripts/remu-down >/dev/null || die "scripts/remu-down failed"
		REMU_KO_DIR=$REPO/build/bench/base scripts/remu-up >/dev/null ||
			die "scripts/remu-up of the base build failed"
		warmup remu0 10.77.0.1 ""
		phase base-loop remu0 10.77.0.1 "" "${tests[@]}"
		scripts/remu-down >/dev/null || die "scripts/remu-down failed"
		scripts/remu-up >/dev/null || die "scripts/remu-up failed"
		warmup remu0 10.77.0.1 ""
	else
		phase remu-wire remu1 10.77.0.2 peer "${tests[@]}"
	fi
	phase remu-loop remu0 10.77.0.1 "" "${tests[@]}"
	[ "$breakdown" = 0 ] || breakdown_one remu0

	local rxe_ok=1
	if ! rdma link delete remu0; then
		echo "$prog: rdma link delete remu0 failed" >&2
		rxe_ok=0
	elif ! modprobe rdma_rxe; then
		echo "$prog: modprobe rdma_rxe failed" >&2
		rxe_ok=0
	elif ! rdma link add rxe0 type rxe netdev v0; then
		echo "$prog: rdma link add rxe0 type rxe netdev v0 failed" >&2
		rxe_ok=0
	fi
	if [ "$rxe_ok" = 1 ]; then
		wait_gid rxe0 10.77.0.1 >/dev/null ||
			echo "$prog: rxe0 has no RoCEv2 GID for 10.77.0.1" >&2
		devattrs rxe0
		warmup rxe0 10.77.0.1 ""
		phase rxe-loop rxe0 10.77.0.1 "" "${tests[@]}"
		[ "$breakdown" = 0 ] || breakdown_one rxe0
	else
		for t in "${tests[@]}"; do
			# shellcheck disable=SC2086 # split the test's words
		set -- $t
			printf 'R\trxe-loop\t%s %s %s\t1\tfail\t0\trxe0 setup failed\t-\n' "$1" "$2" "$3" >>"$raw"
		done
	fi

	rdma link delete rxe0 2>/dev/null
	scripts/remu-down || { echo "$prog: scripts/remu-down failed" >&2; return 1; }
	return 0
}

# limit: what the path beneath remu moves in this boot, as "L KIND REP
# COUNT BYTES USEC SIZE MTU" lines: UDP datagrams of remu's full packet
# size (BTH + active MTU + ICRC) from the initial namespace to the peer's
# address across the veth (udp-wire) and to the local address through lo
# (udp-loop), counted by the receiver; and a memcpy of the same bytes.
limit() {
	local mtu size secs r kind dst ns rout rpid line ex
	mtu=$(ibv_devinfo -d remu0 2>/dev/null | awk '/active_mtu/ { print $2; exit }')
	[[ $mtu =~ ^[0-9]+$ ]] || { echo "# limit: no active_mtu on remu0" >&2; return; }
	size=$((mtu + 16))	# BTH 12 + payload + ICRC 4
	secs=3
	[ "$quick" = 0 ] || secs=2
	for r in $(seq "$reps"); do
		for kind in udp-wire udp-loop; do
			dst=10.77.0.2 ns=peer
			[ "$kind" = udp-wire ] || { dst=10.77.0.1; ns=""; }
			ex=()
			[ -z "$ns" ] || ex=(ip netns exec "$ns")
			rout=$(mktemp)
			"${ex[@]}" timeout -k 5 $((secs + 30)) tools/remu_udp_bench recv 4800 5 >"$rout" 2>&1 &
			rpid=$!
			for _ in $(seq 100); do
				grep -q '^udp_recv listening' "$rout" && break
				sleep 0.05
			done
			tools/remu_udp_bench send "$dst" 4800 "$size" "$secs" >/dev/null 2>&1
			wait "$rpid"
			line=$(awk '$1 == "udp_recv" && $2 == "datagrams" { print $3 "\t" $5 "\t" $7 }' "$rout")
			rm -f "$rout"
			if [ -n "$line" ]; then
				printf 'L\t%s\t%s\t%b\t%s\t%s\n' "$kind" "$r" "$line" "$size" "$mtu" >>"$raw"
				echo "limit $kind rep $r: $line (datagrams bytes usec)"
			else
				echo "limit $kind rep $r: FAILED"
			fi
		done
		line=$(tools/remu_udp_bench memcpy "$size" "$secs" | awk '$1 == "memcpy" { print $3 "\t" $5 "\t" $7 }')
		[ -z "$line" ] ||
			printf 'L\tmemcpy\t%s\t%b\t%s\t%s\n' "$r" "$line" "$size" "$mtu" >>"$raw"
	done
}

# --breakdown, in the guest, after the phase of DEV (remu-loop, rxe-loop):
# where a packet's CPU time goes on DEV in this boot.  ib_write_bw -s 65536
# -D 8 in loopback on DEV, its client under "perf record -a -e cpu-clock
# -F 999" (every CPU, so both ends, the engines and softirqs count); the
# samples are summed per cost class (prof_classes) and written as "B DEV
# PACKETS SAMPLES CLASS" lines, PACKETS being what DEV sent over the run
# (rdma statistic sent_pkts: requests and ACKs).  breakdown prints them.
breakdown_one() { # DEV
	local dev=$1 d=/tmp/bd-$1 p0 p1 ok
	if ! command -v perf >/dev/null; then
		printf 'B\t%s\t0\t0\tfailed: perf is not installed\n' "$dev" >>"$raw"
		return 1
	fi
	mkdir -p "$d"
	cdev=$dev
	p0=$(sent_pkts "$dev")
	client_wrap=(perf record -a -e cpu-clock -F 999 -o "$d/perf.data" --)
	run1 "$dev" 10.77.0.1 "" 90 ib_write_bw -s 65536 -D 8 2>"$d/record.err"
	ok=$?
	client_wrap=()
	p1=$(sent_pkts "$dev")
	if [ "$ok" != 0 ] || [ -z "$p0" ] || [ -z "$p1" ]; then
		printf 'B\t%s\t0\t0\tfailed: %s\n' "$dev" "${result:-no sent_pkts counter}" >>"$raw"
		return 1
	fi
	# "PCT% SAMPLES [k] SYMBOL": classify with the sample count in
	# place of the share, so that prof_classes sums samples
	perf report -i "$d/perf.data" --no-children --sort sym --stdio -g none \
		-n --percent-limit 0 2>/dev/null | grep -E '^ +[0-9]' |
		awk '{ print $2 "% " $3 " " $NF }' | prof_classes |
		awk -v dev="$dev" -v pk=$((p1 - p0)) '{
			n = $1; sub(/%/, "", n); $1 = ""; sub(/^ +/, "")
			printf "B\t%s\t%d\t%d\t%s\n", dev, pk, n, $0
		}' >>"$raw"
}

# limits RAW: the UDP and memcpy limit of the boot (medians of the L lines)
# and every bandwidth row of 4095 bytes and more as a fraction of it
limits() {
	awk -F'\t' "$AWK_LIB"'
	$1 == "L" && $4 > 0 && $6 > 0 {
		size = $7; mtu = $8
		if ($2 == "memcpy") {
			mbs[$2] = mbs[$2] " " $5 / $6 * 1e6 / 1048576
			nsp[$2] = nsp[$2] " " $6 * 1000 / $4
		} else {
			# RoCE payload a datagram stands for: one MTU
			mbs[$2] = mbs[$2] " " $4 * mtu / $6 * 1e6 / 1048576
			kpps[$2] = kpps[$2] " " $4 / $6 * 1000
			nsp[$2] = nsp[$2] " " $6 * 1000 / $4
		}
	}
	$1 == "R" && $5 == "ok" {
		split($3, k, " ")
		if (k[1] !~ /_bw$/ || k[3] < 4095) next
		if (!($3 in seen)) { seen[$3] = 1; order[++nk] = $3 }
		split($7, f, " ")
		vals[$3 SUBSEP $2] = vals[$3 SUBSEP $2] " " f[4]
	}
	END {
		if (!("udp-wire" in mbs) && !("udp-loop" in mbs)) {
			print "  (no limit measured in this run)"
			exit
		}
		printf "  %-9s %6s %12s %10s %10s\n", "limit", "bytes", "payload MB/s", "kpkt/s", "usec/pkt"
		n = split("udp-wire udp-loop memcpy", kind, " ")
		for (i = 1; i <= n; i++) {
			if (!(kind[i] in mbs)) continue
			lim[kind[i]] = median(mbs[kind[i]])
			printf "  %-9s %6d %12s %10s %10s\n", kind[i], size, fmt(lim[kind[i]]),
				kind[i] == "memcpy" ? "-" : fmt(median(kpps[kind[i]])),
				fmt(median(nsp[kind[i]]) / 1000)
		}
		if (!nk) exit
		print ""
		printf "  %-13s %-4s %8s %12s %12s %12s\n", "fraction of", "", "size", "wire/udp-wire", "loop/udp-loop", "rxe/udp-loop"
		for (i = 1; i <= nk; i++) {
			split(order[i], k, " ")
			line = sprintf("  %-13s %-4s %8s", k[1], k[2], k[3])
			m = split("remu-wire:udp-wire remu-loop:udp-loop rxe-loop:udp-loop", pr, " ")
			for (j = 1; j <= m; j++) {
				split(pr[j], pp, ":")
				c = order[i] SUBSEP pp[1]
				if ((c in vals) && lim[pp[2]] > 0)
					line = line sprintf(" %13.3f", median(vals[c]) / lim[pp[2]])
				else
					line = line sprintf(" %13s", "-")
			}
			print line
		}
	}' "$1"
}

# breakdown RAW: the B lines of --breakdown as a table, CPU us per packet
# sent by class and device (one cpu-clock sample at 999 Hz ~ 1001 us)
breakdown() {
	awk -F'\t' '
	$1 == "B" {
		if (!($2 in pk)) { devs[++nd] = $2 }
		pk[$2] = $3
		if ($5 ~ /^failed/) { fail[$2] = $5; next }
		if (!($5 in seen)) { seen[$5] = 1; cls[++nc] = $5 }
		n[$5 SUBSEP $2] = $4
	}
	END {
		if (!nd) { print "  (no breakdown in this run)"; exit }
		line = sprintf("  %-40s", "class")
		for (j = 1; j <= nd; j++) line = line sprintf(" %10s", devs[j])
		print line
		line = sprintf("  %-40s", "packets sent")
		for (j = 1; j <= nd; j++) line = line sprintf(" %10d", pk[devs[j]])
		print line
		for (i = 1; i <= nc; i++) {
			c = cls[i]
			if (c == "total") continue
			line = sprintf("  %-40s", c)
			for (j = 1; j <= nd; j++) {
				d = devs[j]
				if ((d in fail) || pk[d] <= 0 || !((c SUBSEP d) in n))
					line = line sprintf(" %10s", "-")
				else {
					v = n[c SUBSEP d] * 1e6 / 999 / pk[d]
					line = line sprintf(" %10.2f", v)
					if (c != "idle" && c !~ /^user space/) busy[d] += v
					all[d] += v
				}
			}
			print line
		}
		line = sprintf("  %-40s", "kernel, not idle (the cost to move)")
		for (j = 1; j <= nd; j++) line = line sprintf(" %10s", (devs[j] in busy) ? sprintf("%.2f", busy[devs[j]]) : "-")
		print line
		line = sprintf("  %-40s", "everything sampled")
		for (j = 1; j <= nd; j++) line = line sprintf(" %10s", (devs[j] in all) ? sprintf("%.2f", all[devs[j]]) : "-")
		print line
		for (j = 1; j <= nd; j++)
			if (devs[j] in fail) printf "  %s: %s\n", devs[j], fail[devs[j]]
	}' "$1"
}

# counters RAW: per phase, the counters whose value changed
counters() {
	awk -F'\t' '
	$1 == "C" {
		ph = $2; sub(/-(start|end)$/, "", ph)
		k = ph SUBSEP $3 " " $4
		if ($2 ~ /-start$/) a[k] = $5
		else if (k in a && $5 != a[k]) {
			if (!(ph in line)) order[++n] = ph
			line[ph] = line[ph] sprintf(" %s:%s=%d", $3, $4, $5 - a[k])
		}
	}
	END {
		for (i = 1; i <= n; i++) {
			ph = order[i]
			printf "  %s:", ph
			m = split(line[ph], w, " ")
			col = length(ph) + 3
			for (j = 1; j <= m; j++) {
				if (col + length(w[j]) + 1 > 78) { printf "\n   "; col = 3 }
				printf " %s", w[j]; col += length(w[j]) + 1
			}
			printf "\n"
		}
	}' "$1"
}

perftest_host() {
	local stamp log vmt rc status=0 nfail
	cd "$REPO" || exit 2
	{ [ -f remu.ko ] && [ -f build/provider/libremu-rdmav34.so ] &&
		[ -x tools/remu_udp_bench ]; } || die "build first (make)"
	command -v ib_send_bw >/dev/null || die "perftest is not installed (scripts/setup)"
	mkdir -p build/bench
	stamp=$(date -u +%Y%m%d-%H%M%S)
	raw=$REPO/build/bench/raw-$stamp.tsv
	vmt=2700
	[ "$quick" = 0 ] || vmt=900
	local -a gargs=(--guest --reps "$reps" --raw "$raw")
	[ "$quick" = 0 ] || gargs+=(--quick)
	[ -z "$extra" ] || gargs+=(--args "$extra")
	if [ "$breakdown" = 1 ]; then
		gargs+=(--breakdown)
		vmt=$((vmt + 300))
	fi
	local -a cols=()
	if [ "$tracecost" = 1 ]; then
		build_notrace
		gargs+=(--trace-cost)
		cols=("notrace trace-off trace-on" 2 1)
		vmt=$((vmt * 3 / 2))
	fi
	if [ -n "$base" ]; then
		build_base
		gargs+=(--base "$base")
		cols=("base-loop remu-loop rxe-loop" 2 3)
	fi
	[ -z "$filter" ] || gargs+=("$filter")

	guest_run --host "$vmt" "$raw" "${gargs[@]}"

	log=build/bench/last.txt
	{
		echo "scripts/bench $(printf '%q ' "${orig_args[@]}")"
		awk -F'\t' '$1 == "M" && $3 != "" { printf "  %-14s %s\n", $2 ":", $3 }' "$raw"
		echo
		table "$raw" "${cols[@]}"
		echo
		echo "Medians of the runs; kmsg/s is perftest's MsgRate, MB/s its BW average"
		if [ "$tracecost" = 1 ]; then
			echo "(MiB/s), usec typ its t_typical.  All phases remu0 -> remu1 across the"
			echo "veth pair.  ratio = trace-off / notrace: tracepoints compiled in but"
			echo "off against compiled out (for MB/s and kmsg/s 1 means no cost)."
		else
			echo "(MiB/s), usec typ its t_typical.  ratio = remu-loop / rxe-loop: for"
			echo "MB/s and kmsg/s above 1 means remu is faster, for usec below 1 does."
			[ -z "$base" ] ||
				echo "base-loop: remu.ko built from $base, in loopback, in the same boot."
		fi
		echo
		echo "The limit beneath remu in this boot: UDP datagrams of remu's full packet"
		echo "size (BTH + active MTU + ICRC) across the veth into namespace peer and"
		echo "through lo, as received (payload MB/s counts one MTU per datagram, MiB/s"
		echo "like perftest), and a memcpy of the same bytes; medians of the reps."
		limits "$raw"
		echo
		echo "Counters each phase changed (rdma statistic, UDP MIB, softnet drops):"
		counters "$raw"
		if [ "$breakdown" = 1 ]; then
			echo
			echo "Where a packet's CPU time goes (--breakdown): ib_write_bw 64 KiB in"
			echo "loopback on each device after its phase, the client under perf record"
			echo "-a -e cpu-clock -F 999 (both CPUs, about 3 s of program start included);"
			echo "CPU microseconds per packet the device sent (requests and ACKs), per"
			echo "cost class of the sampled symbol (scripts/bench prof_classes)."
			breakdown "$raw"
		fi
		nfail=$(awk -F'\t' '$1 == "R" && $5 != "ok"' "$raw" | wc -l)
		if [ "$nfail" -gt 0 ]; then
			echo
			echo "Failed runs:"
			awk -F'\t' '$1 == "R" && $5 != "ok" { printf "  %s %s rep %s: %s\n", $2, $3, $4, $7 }' "$raw"
		fi
		echo "raw results: ${raw#"$REPO"/}"
	} >"$log"
	echo
	cat "$log"
	[ -z "$out" ] || cp "$log" "$out"
	[ "$rc" = 0 ] || { echo "$prog: the VM run failed (scripts/vm exit $rc)" >&2; status=1; }
	[ "${nfail:-0}" = 0 ] || status=1
	return "$status"
}
