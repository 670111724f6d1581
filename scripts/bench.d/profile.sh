# SPDX-License-Identifier: GPL-2.0
# scripts/bench.d/profile.sh - --profile (sourced by scripts/bench)
#
# scripts/bench --profile [--out FILE] [PROGRAMS] shows where the time
# goes: in one boot, ib_write_bw -s 65536 in loopback on remu0, then on
# rxe0, each under "perf record -a -g" (4 s) and "perf stat -a" (software
# events and tracepoint counts, 3 s), with the packets each window moved;
# prints the top symbols by self time and the share of each cost class
# (ICRC, copy, allocation, routing, locks, scheduling, stack...).
# PROGRAMS (optional, an extended regular expression) picks other 64 KiB
# bandwidth programs among ib_write_bw, ib_read_bw and ib_send_bw, each
# profiled in turn on both devices (e.g. 'ib_(read|write)_bw'; each
# program adds about 2.5 minutes of VM time).  Output:
# build/bench/profile-last.txt (and --out FILE).

# shellcheck shell=bash disable=SC2154,SC2034 # shared globals

# --profile, in the guest: where the time goes, for remu and rxe loopback.
# For each device: an ib_write_bw -s 65536 -D 10 client/server pair in
# loopback; 3 s into it, "perf record -a -g -e cpu-clock -F 999" for 4 s,
# then "perf stat -a" (tracepoint counts) for 3 s; the rdma sent_pkts
# counter around each window gives the packets it moved.  Then perf report
# (self time per symbol, and the share of named cost classes).
PROF_EVENTS="task-clock,context-switches,cpu-migrations"
PROF_EVENTS="$PROF_EVENTS,workqueue:workqueue_execute_start,sched:sched_wakeup,sched:sched_switch"
PROF_EVENTS="$PROF_EVENTS,skb:kfree_skb,skb:consume_skb,kmem:kmalloc,kmem:kmem_cache_alloc"
PROF_EVENTS="$PROF_EVENTS,irq:softirq_entry,net:net_dev_xmit,timer:timer_start"

profile_one() { # profile_one DEV PROGRAM
	local dev=$1 prog=$2 p0 p1 d=/tmp/prof-$1-$2 what="$2 -s 65536 -D 8"
	cdev=$dev
	mkdir -p "$d"
	# perf wraps the client: its window is exactly one run
	p0=$(sent_pkts "$dev")
	client_wrap=(perf record -a -g -e cpu-clock -F 999 -o "$d/perf.data" --)
	run1 "$dev" 10.77.0.1 "" 90 "$prog" -s 65536 -D 8 2>"$d/record.err"
	echo "## $dev: $what (loopback) under perf record -a -g -e cpu-clock -F 999: $result"
	p1=$(sent_pkts "$dev")
	echo "## $dev: packets sent during the record run: $((p1 - p0)) (rdma statistic sent_pkts)"
	rdma statistic show link "$dev/1" >"$d/cnt0.txt" 2>/dev/null
	p0=$(sent_pkts "$dev")
	client_wrap=(perf stat -a -e "$PROF_EVENTS" -o "$d/stat.txt" --)
	run1 "$dev" 10.77.0.1 "" 90 "$prog" -s 65536 -D 8
	echo "## $dev: $what (loopback) under perf stat -a: $result"
	p1=$(sent_pkts "$dev")
	client_wrap=()
	echo "## $dev: packets sent during the stat run: $((p1 - p0))"
	echo "## $dev: port counters the stat run moved"
	rdma statistic show link "$dev/1" 2>/dev/null |
		awk 'NR == FNR { for (i = 3; i < NF; i += 2) b[$i] = $(i + 1); next }
		{ for (i = 3; i < NF; i += 2) if ($(i + 1) != b[$i]) printf "  %s=%d", $i, $(i + 1) - b[$i] }
		END { print "" }' "$d/cnt0.txt" -
	echo "## $dev: perf stat -a -e $PROF_EVENTS"
	grep -E '^ +[0-9]' "$d/stat.txt"
	echo "## $dev: perf report --no-children --sort sym (self time), top 50"
	perf report -i "$d/perf.data" --no-children --sort sym --stdio -g none \
		--percent-limit 0.3 2>/dev/null | grep -E '^ +[0-9]' | head -50
	echo "## $dev: perf report --no-children --sort dso"
	perf report -i "$d/perf.data" --no-children --sort dso --stdio -g none \
		2>/dev/null | grep -E '^ +[0-9]' | head -12
	echo "## $dev: samples by cost class (self time, every symbol)"
	perf report -i "$d/perf.data" --no-children --sort sym --stdio -g none \
		--percent-limit 0 2>/dev/null | grep -E '^ +[0-9]' | prof_classes
	echo "## $dev: perf report --children (inclusive), entry points"
	perf report -i "$d/perf.data" --children --sort sym --stdio -g none \
		--percent-limit 1 2>/dev/null | grep -E '^ +[0-9]' |
		grep -E 'remu_|rxe_|ip_local_out|ip_finish|udp_queue_rcv|__netif_receive|process_one_work|net_rx_action|do_softirq|alloc_skb|skb_copy|crc32|ip_route_output|memcpy|ib_uverbs|worker_thread|schedule' | head -45
}

profile_progs() { # the programs --profile's FILTER picks (default ib_write_bw)
	local p
	for p in ib_write_bw ib_read_bw ib_send_bw; do
		if [ -z "$filter" ]; then
			[ "$p" = ib_write_bw ] && echo "$p"
		elif [[ $p =~ $filter ]]; then
			echo "$p"
		fi
	done
}

profile_guest() {
	[ -n "${REMU_IN_VM-}" ] || die "--guest runs inside the test VM (use scripts/bench on the host)"
	[ -n "$raw" ] || die "--guest wants --raw FILE"
	cd "$REPO" || exit 2
	local -a progs
	local pr
	mapfile -t progs < <(profile_progs)
	[ ${#progs[@]} -gt 0 ] || die "--profile: no program matches '$filter'"
	command -v perf >/dev/null || die "perf is not installed (scripts/setup: linux-perf)"
	scripts/remu-up >/dev/null || die "scripts/remu-up failed"
	caddr=10.77.0.1
	warmup remu0 10.77.0.1 ""
	{
		echo "guest: $(uname -r), $(nproc) CPUs; $(perf --version)"
		echo "## sampling check: perf record -a -e cpu-clock -F 999 over a 2 s shell busy loop"
		perf record -a -e cpu-clock -F 999 -o /tmp/prof-check.data -- \
			timeout 2 sh -c 'while :; do :; done' >/dev/null 2>&1
		perf report -i /tmp/prof-check.data --no-children --sort comm --stdio \
			2>/dev/null | grep -E '^ +[0-9]' | head -4
		for pr in "${progs[@]}"; do profile_one remu0 "$pr"; done
	} >"$raw" 2>&1
	if rdma link delete remu0 && modprobe rdma_rxe &&
		rdma link add rxe0 type rxe netdev v0 && wait_gid rxe0 10.77.0.1 >/dev/null; then
		warmup rxe0 10.77.0.1 ""
		for pr in "${progs[@]}"; do profile_one rxe0 "$pr"; done >>"$raw" 2>&1
		rdma link delete rxe0
	else
		echo "rxe0 setup failed" >>"$raw"
	fi
	scripts/remu-down >/dev/null
	cat "$raw"
}

profile_host() {
	local stamp rc log
	cd "$REPO" || exit 2
	{ [ -f remu.ko ] && [ -f build/provider/libremu-rdmav34.so ]; } || die "build first (make)"
	mkdir -p build/bench
	stamp=$(date -u +%Y%m%d-%H%M%S)
	raw=$REPO/build/bench/profile-raw-$stamp.txt
	scripts/vm --timeout 600 -- scripts/bench --guest --profile --raw "$raw" ${filter:+"$filter"} >/dev/null
	rc=$?
	[ -s "$raw" ] || die "the guest wrote no results (scripts/vm exit $rc)"
	log=build/bench/profile-last.txt
	{
		echo "scripts/bench $(printf '%q ' "${orig_args[@]}")"
		echo "  host_date:     $(date -u '+%Y-%m-%d %H:%M UTC')"
		echo "  commit:        $(git describe --always --dirty 2>/dev/null)"
		cat "$raw"
	} >"$log"
	cat "$log"
	[ -z "$out" ] || cp "$log" "$out"
	[ "$rc" = 0 ]
}
