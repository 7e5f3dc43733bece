# Sourced by the bench scripts that count a server's system calls per request.
#
#   perf_around PID EVENTS OUT CMD...
#
# `perf stat -x, -e EVENTS -o OUT` of process PID (all its threads) for as long
# as CMD (a command or a shell function) runs: counting starts PERF_LEAD
# seconds before CMD and stops at its end (perf's `-p PID -- WAITER`, the
# waiter blocked on a FIFO that is written when CMD has ended), so every request that CMD (wrk)
# counts falls inside the counted window. (A fixed `perf stat -- sleep SECS`
# started beside a wrk of SECS missed the end of wrk's run, which starts a
# little later: 0.98 recv per request, a window error as large as the
# differences measured.) The window adds the idle server's PERF_LEAD seconds
# and the last moment: a handful of calls against hundreds of thousands.
# Returns CMD's exit status.
PERF_LEAD=${PERF_LEAD:-0.2}
perf_around() {
    local pid=$1 ev=$2 out=$3
    shift 3
    local args=(stat -x, -e "$ev" -o "$out")
    perf_window args "$pid" "$@"
}

#   perf_window ARGS PID CMD...
#
# The same window for any perf subcommand: ARGS names an array holding perf's
# arguments before `-p PID` (e.g. `record -q -e EVENT -o FILE`).
perf_window() {
    local -n perf_args=$1
    local pid=$2 stop pp rc=0
    shift 2
    stop=$(mktemp -u "${TMPDIR:-/tmp}/perf-around.XXXXXX")
    mkfifo "$stop"
    perf "${perf_args[@]}" -p "$pid" -- sh -c 'read -r _ < "$0"' "$stop" &
    pp=$!
    sleep "$PERF_LEAD"
    "$@" || rc=$?
    # read-write: never blocks, even if perf (and so the waiter) failed to start
    local fd
    exec {fd}<>"$stop"
    echo >&"$fd"
    exec {fd}>&-
    wait "$pp" || true
    rm -f "$stop"
    return "$rc"
}
