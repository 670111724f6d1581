# SPDX-License-Identifier: GPL-2.0
# scripts/bench.d/lib.sh - what every mode of scripts/bench shares
# (sourced by scripts/bench before the mode's file): the raw-results
# records (meta, snap), a device's RoCEv2 GID, one perftest client/server
# run (run1), a phase of perftest runs (warmup, phase), the results table
# (table), the cost classes of a perf report (prof_classes, sent_pkts)
# and remu.ko built from another commit (build_base).
#
# Globals: the options scripts/bench parsed (reps, quick, filter, extra,
# base, raw...), REPO, prog, die(); run1 sets result, and runs the client
# on $cdev at $caddr under ${client_wrap[@]}.

# shellcheck shell=bash disable=SC2154,SC2034 # shared globals

meta() { # meta KEY VALUE
	printf 'M\t%s\t%s\n' "$1" "$2" >>"$raw"
}

# snap TAG: every counter that can explain a figure, as "C TAG WHERE NAME
# VALUE" lines: the rdma hw counters of each device (remu's and rxe's have
# the same names for the engines' events), the UDP MIB of both namespaces
# and the per-CPU backlog drops; the host prints what a phase changed.
snap() {
	local tag=$1 dev w hdr val i
	for dev in remu0 remu1 rxe0; do
		[ -e "/sys/class/infiniband/$dev" ] || continue
		rdma statistic show link "$dev/1" 2>/dev/null |
			awk -v t="$tag" -v d="$dev" '{
				for (i = 3; i < NF; i += 2) printf "C\t%s\t%s\t%s\t%s\n", t, d, $i, $(i + 1) }'
	done >>"$raw"
	for w in init peer; do
		if [ "$w" = init ]; then
			{ read -r hdr; read -r val; } < <(grep '^Udp:' /proc/net/snmp)
		else
			{ read -r hdr; read -r val; } < <(ip netns exec peer grep '^Udp:' /proc/net/snmp)
		fi
		paste <(tr ' ' '\n' <<<"$hdr") <(tr ' ' '\n' <<<"$val") |
			awk -v t="$tag" -v w="$w" 'NR > 1 { printf "C\t%s\t%s\tudp_%s\t%s\n", t, w, $1, $2 }' >>"$raw"
	done
	i=0
	while read -r _ val _; do
		i=$((i + 16#$val))
	done </proc/net/softnet_stat
	printf 'C\t%s\tkernel\tsoftnet_dropped\t%s\n' "$tag" "$i" >>"$raw"
	[ ! -r /sys/kernel/debug/remu/wire ] ||
		printf 'C\t%s\tremu\trx_no_device\t%s\n' "$tag" \
			"$(awk '$1 == "rx_no_device" { print $2 }' /sys/kernel/debug/remu/wire)" >>"$raw"
}

# The GID index of DEV's RoCEv2 GID for the IPv4 address ADDR (or nothing).
gid_index() { # gid_index DEV ADDR
	local d=/sys/class/infiniband/$1/ports/1 want g i type a b c e
	IFS=. read -r a b c e <<<"$2"
	want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$a" "$b" "$c" "$e")
	for g in "$d"/gids/*; do
		i=${g##*/}
		[ "$(cat "$g" 2>/dev/null)" = "$want" ] || continue
		type=$(cat "$d/gid_attrs/types/$i" 2>/dev/null)
		[ "$type" = "RoCE v2" ] || continue
		echo "$i"
		return 0
	done
	return 1
}

wait_gid() { # wait_gid DEV ADDR: echo the GID index once it exists
	local n
	for n in $(seq 100); do
		gid_index "$1" "$2" && return 0
		sleep 0.1
	done
	return 1
}

devattrs() { # devattrs DEV: record what decides the comparison
	local dev=$1 v
	v=$(ibv_devinfo -v -d "$dev" 2>/dev/null |
		awk -F: '/max_qp_rd_atom|max_qp_init_rd_atom|active_mtu|max_qp_wr:|phys_port_cnt/ {
			gsub(/[ \t]+/, " "); sub(/^ /, ""); printf "%s:%s; ", $1, $2 }')
	meta "dev_$dev" "$v"
}

port=20000
result=""
# run1 SDEV ADDR NS TIMEOUT PROGRAM ARGS...: one client/server run on the
# client device $cdev; sets result to the client's result line, returns 0
# if both sides succeeded.
run1() {
	local sdev=$1 addr=$2 ns=$3 tmo=$4 gidx cgidx sout cout spid rc rs ex=()
	local -a wrap=("${client_wrap[@]}")
	shift 4
	[ -z "$ns" ] || ex=(ip netns exec "$ns")
	result=""
	# rdma devices are shared between namespaces: sysfs shows remu1 here
	gidx=$(gid_index "$sdev" "$addr")
	cgidx=$(gid_index "$cdev" "$caddr")
	if [ -z "$gidx" ] || [ -z "$cgidx" ]; then
		result="no IPv4 RoCEv2 GID on $sdev or $cdev"
		return 1
	fi
	port=$((port + 1))
	sout=$(mktemp) cout=$(mktemp)
	"${ex[@]}" timeout -k 5 "$tmo" "$@" -d "$sdev" -x "$gidx" -F -p "$port" >"$sout" 2>&1 &
	spid=$!
	if ! remu_wait_listen "$spid" "$port"; then
		kill "$spid" 2>/dev/null
		wait "$spid"
		result="server did not start: $(tail -3 "$sout" | tr '\n' ' ')"
		rm -f "$sout" "$cout"
		return 1
	fi
	"${wrap[@]}" timeout -k 5 "$tmo" "$@" -d "$cdev" -x "$cgidx" -F -p "$port" "$addr" >"$cout" 2>&1
	rc=$?
	# a failed client leaves the server waiting: do not wait for its timeout
	[ "$rc" = 0 ] || kill "$spid" 2>/dev/null
	wait "$spid"
	rs=$?
	result=$(grep -E '^ *[0-9]+ +[0-9]+ +[0-9.]+' "$cout" | tail -1 | tr -s ' \t' ' ' | sed 's/^ //; s/ $//')
	if [ "$rc" != 0 ] || [ "$rs" != 0 ] || [ -z "$result" ]; then
		result="client exit $rc, server exit $rs: $(grep -v '^[ -]*$' "$cout" | tail -2 | tr '\n' ' ')| server: $(grep -v '^[ -]*$' "$sout" | tail -2 | tr '\n' ' ')"
		rm -f "$sout" "$cout"
		return 1
	fi
	rm -f "$sout" "$cout"
	return 0
}

cdev=""
caddr=10.77.0.1
client_wrap=()	# a command the client runs under (--profile)
warmup() { # warmup DEV ADDR NS
	cdev=$1
	run1 "$1" "$2" "$3" 60 ib_write_bw -s 65536 -n 200 ||
		echo "# warm-up on $1 failed: $result"
}

# phase NAME SERVER-DEV SERVER-ADDR SERVER-NS TEST...
phase() {
	local name=$1 sdev=$2 addr=$3 ns=$4 t p tr size n r t0 t1 secs tmo
	shift 4
	cdev=remu0
	[ "$name" != rxe-loop ] || cdev=rxe0
	echo "# phase $name: client $cdev, server $sdev${ns:+ (namespace $ns)} at $addr"
	snap "$name-start"
	for t in "$@"; do
		# shellcheck disable=SC2086 # split the test's words
		set -- $t
		p=$1 tr=$2 size=$3 n=$4
		shift 4
		[ "$quick" = 0 ] || n=$(( n / 10 < 5 ? 5 : n / 10 ))
		tmo=120
		[ "$quick" = 0 ] || tmo=60
		# shellcheck disable=SC2206 # --args are words
		args=(-n "$n" "$@" $extra)
		[ "$p" = ib_atomic_bw ] || args+=(-s "$size")
		# RC-qN (--scale): RC with N QPs, the "-q N" among the test's words
		[ "${tr%-q*}" = RC ] || args+=(-c "$tr")
		for r in $(seq "$reps"); do
			t0=$(date +%s.%N)
			if run1 "$sdev" "$addr" "$ns" "$tmo" "$p" "${args[@]}"; then
				t1=$(date +%s.%N)
				secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
				printf 'R\t%s\t%s %s %s\t%s\tok\t%s\t%s\t%s\n' "$name" "$p" "$tr" "$size" "$r" "$secs" "$result" "${args[*]}" >>"$raw"
				echo "$name $p $tr $size rep $r: $result (${secs}s)"
			else
				t1=$(date +%s.%N)
				secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
				printf 'R\t%s\t%s %s %s\t%s\tfail\t%s\t%s\t%s\n' "$name" "$p" "$tr" "$size" "$r" "$secs" "$result" "${args[*]}" >>"$raw"
				echo "$name $p $tr $size rep $r: FAILED (${secs}s): $result"
				# one failure already makes the cell FAIL: save the time
				break
			fi
		done
	done
	snap "$name-end"
}

sent_pkts() { # sent_pkts DEV
	rdma statistic show link "$1/1" 2>/dev/null |
		awk '{ for (i = 3; i < NF; i += 2) if ($i == "sent_pkts") print $(i + 1) }'
}

# prof_classes: stdin "PCT% [k] symbol" lines; the sum of each class
prof_classes() {
	awk '{
		pct = $1; sub(/%/, "", pct); sym = $NF; tot += pct
		if ($2 == "[.]") c = "user space (perftest, provider polling)"
		else if (sym ~ /crc32|crc_|icrc/) c = "ICRC (crc32)"
		else if (sym ~ /memcpy|memmove|copy_(user|to|from)|rep_movs|skb_copy|memset|clear_page/) c = "copy/memset"
		else if (sym ~ /alloc|kmem_cache|kfree|slab|slub|__free|free_|stack_depot|unwind|orc_|stack_trace|memchr_inv|kfence|poison|check_bytes|check_object/) c = "allocation + slub_debug"
		else if (sym ~ /fib_|ip_route|rt_dst|dst_|ip6_route|__ip_select_ident|route/) c = "routing"
		else if (sym ~ /_raw_spin|_raw_read|_raw_write|queued_spin|mutex|native_queued|lock/) c = "locks"
		else if (sym ~ /schedule|switch_to|finish_task|worker|process_one_work|wake_up|enqueue|dequeue|pick_next|select_task|ttwu|update_curr|update_load|sched|__queue_work|queue_work|kick_pool|tick|hrtimer/) c = "scheduling, workqueue, timers"
		else if (sym ~ /idle|cpuidle|default_idle|mwait|halt|pv_native_safe_halt|do_idle/) c = "idle"
		else if (sym ~ /^(ip_|ip6_|udp|__udp|__ip|__netif|netif_|net_rx|__dev_|dev_|neigh|nf_|skb_|__skb|veth|loopback|process_backlog|tcp|inet|sk_|__sk|sock)/) c = "IP/UDP/netdev stack"
		else if (sym ~ /^remu_/) c = "remu (own code)"
		else if (sym ~ /^rxe_/) c = "rxe (own code)"
		else if (sym ~ /^(ib_|uverbs|rdma_|ib_uverbs)/) c = "ib core/uverbs"
		else c = "other kernel"
		cls[c] += pct
	}
	END {
		for (c in cls) printf "  %6.2f%%  %s\n", cls[c], c
		printf "  %6.2f%%  total\n", tot
	}' | sort -rn
}

# guest_run [--host] TIMEOUT RAW ARG...: scripts/bench --guest's half of a
# mode in one VM boot (scripts/bench ARG... in the guest, under scripts/vm
# --timeout TIMEOUT), then the boot's M lines appended to RAW: the date,
# with --host the host's CPU and QEMU, the VM's settings, the commit, the
# wall time and the VM's exit status, which is left in rc.  Dies when the
# guest wrote nothing to RAW.
guest_run() {
	local host=0 timeout raw start end
	[ "$1" = --host ] && { host=1; shift; }
	timeout=$1 raw=$2
	shift 2
	start=$(date +%s)
	scripts/vm --timeout "$timeout" -- scripts/bench "$@"
	rc=$?
	end=$(date +%s)
	[ -s "$raw" ] || die "the guest wrote no results (scripts/vm exit $rc)"
	{
		printf 'M\thost_date\t%s\n' "$(date -u '+%Y-%m-%d %H:%M UTC')"
		if [ "$host" = 1 ]; then
			printf 'M\thost_cpu\t%s (%s cores)\n' "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)" "$(nproc)"
			printf 'M\tqemu\t%s\n' "$(qemu-system-x86_64 --version | head -1)"
		fi
		printf 'M\tvm\tscripts/vm defaults: -accel tcg,%s -cpu max -smp 2 -m 2048\n' "${REMU_VM_TCG:-thread=multi}"
		printf 'M\tcommit\t%s\n' "$(git describe --always --dirty 2>/dev/null)"
		printf 'M\twall\t%s s\n' "$((end - start))"
		printf 'M\tvm_status\t%s\n' "$rc"
	} >>"$raw"
}

# awk functions the reports share, put before each report's program:
# median(S), the median of the space-separated numbers in S, and fmt(X),
# X with three significant figures at most
AWK_LIB='
	function median(s,   n, v, i, j, x) {
		n = split(s, v, " ")
		for (i = 2; i <= n; i++) {	# insertion sort, n is small
			x = v[i] + 0
			for (j = i - 1; j >= 1 && v[j] + 0 > x; j--) v[j + 1] = v[j]
			v[j + 1] = x
		}
		if (n % 2) return v[(n + 1) / 2]
		return (v[n / 2] + v[n / 2 + 1]) / 2
	}
	function fmt(x) {
		if (x >= 100) return sprintf("%.0f", x)
		if (x >= 10) return sprintf("%.1f", x)
		return sprintf("%.2f", x)
	}
'

# table RAW [PHASES NUM DEN]: the formatted table on stdout, one column per
# phase (default: remu-wire remu-loop rxe-loop), ratio = phase NUM / phase
# DEN (default 2 / 3, remu-loop / rxe-loop)
table() {
	awk -F'\t' -v columns="${2:-remu-wire remu-loop rxe-loop}" \
		-v num="${3:-2}" -v den="${4:-3}" "$AWK_LIB"'
	$1 == "R" {
		key = $3
		if (!(key in seen)) { seen[key] = 1; order[++nk] = key }
		cell = key SUBSEP $2
		if ($5 != "ok") { failed[cell] = 1; next }
		split($7, f, " ")
		split(key, k, " ")
		if (k[1] ~ /_lat$/) v = f[5]			# t_typical
		else if (k[3] <= 8) v = f[5] * 1000		# MsgRate, Mpps -> k/s
		else v = f[4]					# BW average MB/s
		vals[cell] = vals[cell] " " v
		phases[$2] = 1
	}
	END {
		np = split(columns, ph, " ")
		who = ph[num]; sub(/^remu-.*/, "remu", who)
		printf "%-13s %-6s %8s  %-10s %10s %10s %10s  %-6s %s\n", "test", "", "size", "metric", ph[1], ph[2], ph[3], "ratio", ph[num] " vs " ph[den]
		for (i = 1; i <= nk; i++) {
			key = order[i]
			split(key, k, " ")
			lat = k[1] ~ /_lat$/
			if (lat) metric = "usec typ"
			else if (k[3] <= 8) metric = "kmsg/s"
			else metric = "MB/s"
			line = sprintf("%-13s %-6s %8s  %-10s", k[1], k[2], k[3], metric)
			for (j = 1; j <= np; j++) {
				cell = key SUBSEP ph[j]
				m[j] = ""
				if (cell in failed) s = "FAIL"
				else if (cell in vals) { m[j] = median(vals[cell]); s = fmt(m[j]) }
				else s = "-"
				line = line sprintf(" %10s", s)
			}
			if (m[num] != "" && m[den] != "" && m[num] > 0 && m[den] > 0) {
				ratio = m[num] / m[den]
				speed = lat ? 1 / ratio : ratio
				if (speed >= 1) word = sprintf("%s %.2fx faster", who, speed)
				else word = sprintf("%s %.2fx slower", who, 1 / speed)
				line = line sprintf("  %-6.2f %s", ratio, word)
			} else
				line = line "  -"
			print line
		}
	}' "$1"
}

# --base REF, on the host: remu.ko as of git revision REF, in
# build/bench/base (its Kbuild, drivers and uapi, built like make module)
build_base() {
	local d=$REPO/build/bench/base kdir rev
	rev=$(git rev-parse --verify -q "$base^{commit}") || die "--base: no commit $base"
	kdir=$(scripts/kver --kdir) || die "no kernel build directory (scripts/kver)"
	{ rm -rf "$d" && mkdir -p "$d"; } || die "cannot make $d"
	git archive "$rev" Kbuild drivers uapi scripts/compat-probe | tar -x -C "$d" ||
		die "cannot extract $base into $d"
	make -s -C "$kdir" M="$d" REMU_TEST_MODULES=n modules >"$d/build.log" 2>&1 ||
		die "the build of $base failed ($d/build.log)"
	git log -1 --format='%h %s' "$rev" >"$d/REF"
}
