# Shell functions the scripts that run test servers share (sourced).

# stop_pid FILE [TRIES]: stops the process whose id FILE holds, waits for
# it (TRIES half-seconds, 60 by default) and kills it past that; removes
# FILE.
stop_pid() {
	local f=$1 tries=${2:-60} pid
	[ -f "$f" ] || return 0
	pid=$(cat "$f")
	if kill "$pid" 2>/dev/null; then
		for _ in $(seq "$tries"); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.5
		done
		kill -9 "$pid" 2>/dev/null || true
	fi
	rm -f "$f"
}
