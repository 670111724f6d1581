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
