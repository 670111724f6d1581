# SPDX-License-Identifier: GPL-2.0
# remu_lib.sh - helpers shared by the shell tests and scripts/bench
# (sourced).

# remu_wait_listen PID PORT: wait (up to 10 s) until process PID has a TCP
# socket listening on PORT.  Reads the process's own /proc/PID/net, so it
# works for a server in another network namespace too.  Returns 1 if the
# process exits or never listens.
remu_wait_listen() {
	local hex f addr st _n
	hex=$(printf '%04X' "$2")
	for _n in $(seq 200); do
		kill -0 "$1" 2>/dev/null || return 1
		for f in /proc/"$1"/net/tcp /proc/"$1"/net/tcp6; do
			# sl local_address rem_address st ...
			while read -r _ addr _ st _; do
				[ "$st" = 0A ] && [ "${addr##*:}" = "$hex" ] && return 0
			done <"$f" 2>/dev/null
		done
		sleep 0.05
	done
	return 1
}

# remu_rping_expect FILE PREFIX N: FILE holds exactly the N lines
# "PREFIXping data: rdma-ping-I: PATTERN" that `rping -v` prints for the
# 64-byte buffer its client fills (PREFIX "server " for the server's side)
remu_rping_expect() {
	python3 - "$@" <<'PYEOF'
import sys
path, prefix, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
want = []
first = ord("A")
for i in range(n):
    line = "rdma-ping-%d: " % i
    c = first
    while len(line) < 63:
        line += chr(c)
        c = ord("A") if c >= ord("z") else c + 1
    first = ord("A") if first >= ord("z") else first + 1
    want.append(prefix + "ping data: " + line)
got = [l.rstrip("\n") for l in open(path, errors="replace")
       if l.startswith(prefix + "ping data: ")]
if got != want:
    at = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w),
              min(len(got), len(want)))
    print("# %d ping lines, %d wanted; first difference at line %d"
          % (len(got), n, at))
    if at < len(got):
        print("#   got:  " + got[at])
    if at < len(want):
        print("#   want: " + want[at])
    sys.exit(1)
PYEOF
}
