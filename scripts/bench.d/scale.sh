# SPDX-License-Identifier: GPL-2.0
# scripts/bench.d/scale.sh - --scale (sourced by scripts/bench)
#
# scripts/bench --scale [--quick] [--reps N] [--out FILE] measures many
# QPs, in one boot, remu against rxe: perftest ib_write_bw and ib_send_bw
# at 64 KiB and ib_write_bw at 4 KiB, with -q 1, 16 and 64 (the messages
# of the default bench spread over the QPs) in the three phases of the
# default bench; then tools/remu_scale_bench on remu0 and on rxe0 (see
# docs/performance.md, "Scaling"): the QP life cycle rate
# (256 RC QPs of 128 send/recv WRs and 4 SGEs, one CQ: created, taken to
# RTS, destroyed; QPs per second), the memory per QP (the same 256 QPs in
# RTS: /proc/meminfo, /proc/slabinfo, the process's RSS, pinned pages and
# the queues it maps), and the RDMA CM connection rate (100 connections
# one after the other, each with a SEND each way: remu0 -> remu1 in
# namespace peer, remu0 in loopback, rxe0 in loopback).  Medians of --reps
# runs (default 3; --quick: 1 rep, a tenth of the perftest iterations, 64
# QPs, 20 connections).  Output: build/bench/scale-last.txt (and --out).

# shellcheck shell=bash disable=SC2154,SC2034 # shared globals

# --scale, in the guest: many QPs.  perftest ib_write_bw/ib_send_bw with
# -q 1, 16 and 64 in the three phases of the default bench; then
# tools/remu_scale_bench for each device: the QP life cycle rate (qp), the
# memory per QP (mem) and the RDMA CM connection rate (cm: remu-wire,
# remu-loop, rxe-loop).  Its result lines go to $raw as "S PHASE LINE".
scale_tests() {
	local p s q n
	for s in 65536 4096; do
		for p in ib_write_bw ib_send_bw; do
			# (4 KiB: WRITE only, to keep the boot short)
			[ "$s.$p" != 4096.ib_send_bw ] || continue
			for q in 1 16 64; do
				# the messages of the default bench's 64 KiB
				# and 4095-byte runs, spread over the QPs
				n=$(( (s == 65536 ? 600 : 8000) / q ))
				[ "$n" -ge 20 ] || n=20
				if [ "$q" = 1 ]; then
					echo "$p RC $s $n"
				else
					echo "$p RC-q$q $s $n -q $q"
				fi
			done
		done
	done
}

scale_tool() { # scale_tool PHASE TOOL-ARGS...
	local ph=$1 out rc
	shift
	out=$(timeout 600 tools/remu_scale_bench "$@" 2>&1)
	rc=$?
	awk -v p="$ph" '{ print p ": " $0 }' <<<"$out"
	if [ "$rc" = 0 ]; then
		grep -v '^#' <<<"$out" | sed "s/^/S\t$ph\t/" >>"$raw"
	else
		printf 'S\t%s\tFAIL remu_scale_bench %s: exit %s: %s\n' "$ph" "$*" \
			"$rc" "$(tail -2 <<<"$out" | tr '\n' ' ')" >>"$raw"
	fi
}

scale_guest() {
	[ -n "${REMU_IN_VM-}" ] || die "--guest runs inside the test VM (use scripts/bench on the host)"
	[ -n "$raw" ] || die "--guest wants --raw FILE"
	: >"$raw" || die "cannot write $raw"
	cd "$REPO" || exit 2
	local n=256 ncm=100
	local -a tests=()
	[ "$quick" = 0 ] || { n=64; ncm=20; }
	mapfile -t tests < <(scale_tests)
	meta "guest_kernel" "$(uname -r)"
	meta "guest_cpus" "$(nproc)"
	meta "perftest" "$(dpkg-query -W -f '${Version}' perftest 2>/dev/null)"
	meta "reps" "$reps"
	meta "quick" "$quick"
	meta "scale" "qp/mem: $n RC QPs of 128 send/recv WRs, 4 SGEs, one CQ; cm: $ncm connections per run"
	scripts/remu-up >/dev/null || die "scripts/remu-up failed"
	warmup remu0 10.77.0.1 ""
	phase remu-wire remu1 10.77.0.2 peer "${tests[@]}"
	phase remu-loop remu0 10.77.0.1 "" "${tests[@]}"
	scale_tool remu qp -d remu0 -n "$n" -r "$reps"
	scale_tool remu mem -d remu0 -n "$n"
	scale_tool remu-wire cm -a 10.77.0.2 -N peer -n "$ncm" -r "$reps"
	scale_tool remu-loop cm -a 10.77.0.1 -n "$ncm" -r "$reps"
	if rdma link delete remu0 && modprobe rdma_rxe &&
		rdma link add rxe0 type rxe netdev v0 && wait_gid rxe0 10.77.0.1 >/dev/null; then
		warmup rxe0 10.77.0.1 ""
		phase rxe-loop rxe0 10.77.0.1 "" "${tests[@]}"
		scale_tool rxe qp -d rxe0 -n "$n" -r "$reps"
		scale_tool rxe mem -d rxe0 -n "$n"
		scale_tool rxe-loop cm -a 10.77.0.1 -n "$ncm" -r "$reps"
		rdma link delete rxe0
	else
		echo "$prog: rxe0 setup failed" >&2
		printf 'S\trxe\tFAIL rxe0 setup\n' >>"$raw"
	fi
	scripts/remu-down >/dev/null || { echo "$prog: scripts/remu-down failed" >&2; return 1; }
	return 0
}

# scale_report RAW: the tables of remu_scale_bench's S lines
scale_report() {
	awk -F'\t' '
	function r(a, b) { return (a > 0 && b > 0) ? sprintf("%.2f", a / b) : "-" }
	$1 == "S" && $3 ~ /^FAIL/ { fail = fail "  " $2 ": " $3 "\n"; next }
	$1 != "S" { next }
	{ n = split($3, w, " ") }
	w[1] == "qp" {
		dev = w[2] ~ /^rxe/ ? "rxe" : "remu"
		qn = w[4]; cr[dev] = w[6]; rts[dev] = w[8]; de[dev] = w[10]; qdev[dev] = w[2]
	}
	w[1] == "cm" {
		cmn = w[4]; conn[$2] = w[6]; ep[$2] = w[8]; cn[$2] = w[10]; xf[$2] = w[12]; dn[$2] = w[14]
	}
	w[1] == "mem" {
		dev = w[2] ~ /^rxe/ ? "rxe" : "remu"
		mn = w[4]; key = w[5] " " w[6]
		if (!(key in seen)) { seen[key] = 1; order[++nm] = key }
		mem[key, dev] = w[7]
	}
	END {
		printf "QP life cycle: %s RC QPs (128 send/recv WRs, 4 SGEs, one CQ), QPs per second\n", qn
		printf "  %-10s %10s %10s %10s\n", "device", "create", "to RTS", "destroy"
		for (k = 1; k <= 2; k++) {
			d = k == 1 ? "remu" : "rxe"
			if (d in cr) printf "  %-10s %10s %10s %10s\n", qdev[d], cr[d], rts[d], de[d]
		}
		printf "  %-10s %10s %10s %10s\n", "remu/rxe", r(cr["remu"], cr["rxe"]), r(rts["remu"], rts["rxe"]), r(de["remu"], de["rxe"])
		print ""
		printf "RDMA CM: %s connections one after the other (connect, one SEND each way,\n", cmn
		printf "disconnect, destroy); connections per second and the mean client time per step\n"
		printf "  %-10s %8s %13s %11s %9s %9s\n", "path", "conn/s", "create_ep ms", "connect ms", "SENDs ms", "down ms"
		split("remu-wire remu-loop rxe-loop", pp, " ")
		for (k = 1; k <= 3; k++)
			if (pp[k] in conn)
				printf "  %-10s %8s %13s %11s %9s %9s\n", pp[k], conn[pp[k]], ep[pp[k]], cn[pp[k]], xf[pp[k]], dn[pp[k]]
		printf "  remu-loop/rxe-loop conn/s: %s\n", r(conn["remu-loop"], conn["rxe-loop"])
		print ""
		printf "Memory per QP: %s RC QPs in RTS (128 send/recv WRs, 4 SGEs), bytes per QP\n", mn
		printf "  %-36s %10s %10s\n", "", "remu", "rxe"
		for (i = 1; i <= nm; i++) {
			split(order[i], kk, " ")
			if (kk[1] == "after_destroy" && kk[2] !~ /^(memfree_drop|Slab|VmallocUsed|uverbs_map_size)$/) continue
			label = kk[1] == "live" ? kk[2] : kk[2] " after destroy"
			a = (order[i], "remu") in mem ? mem[order[i], "remu"] : "-"
			b = (order[i], "rxe") in mem ? mem[order[i], "rxe"] : "-"
			printf "  %-36s %10s %10s\n", label, a, b
		}
		if (fail != "") { printf "\nFailed:\n%s", fail; exit 1 }
	}' "$1"
}

scale_host() {
	local stamp log rc status=0 nfail
	cd "$REPO" || exit 2
	{ [ -f remu.ko ] && [ -f build/provider/libremu-rdmav34.so ] &&
		[ -x tools/remu_scale_bench ]; } || die "build first (make)"
	command -v ib_send_bw >/dev/null || die "perftest is not installed (scripts/setup)"
	mkdir -p build/bench
	stamp=$(date -u +%Y%m%d-%H%M%S)
	raw=$REPO/build/bench/scale-raw-$stamp.tsv
	local -a gargs=(--guest --scale --reps "$reps" --raw "$raw")
	[ "$quick" = 0 ] || gargs+=(--quick)
	guest_run 1200 "$raw" "${gargs[@]}"
	log=build/bench/scale-last.txt
	{
		echo "scripts/bench $(printf '%q ' "${orig_args[@]}")"
		awk -F'\t' '$1 == "M" && $3 != "" { printf "  %-14s %s\n", $2 ":", $3 }' "$raw"
		echo
		echo "perftest with N QPs (RC-qN: -q N, the messages spread over the QPs)"
		table "$raw"
		echo
		echo "Medians of the runs; MB/s is perftest's BW average (MiB/s).  ratio ="
		echo "remu-loop / rxe-loop: above 1 means remu is faster."
		echo
		scale_report "$raw" || status=1
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
	[ "$rc" = 0 ] || { echo "$prog: the VM run failed (scripts/vm exit $rc)" >&2; status=1; }
	return "$status"
}
