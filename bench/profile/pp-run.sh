# Sourced by bench/profile/pingpong-ab and pingpong-counts: one ping-pong x1
# run, with bench_pp_profile compiled into $d (the caller's temporary dir; its
# EXIT trap kills the server node's process group, `sp`, if one is left).
#
#   pp_run EBIN EVAL SERVER_CALL PERF_DELAY CLIENT_MS EVENTS [CONNS]
#
# Starts the server node, `setsid taskset -c 0 erl +S 1:1` with EBIN in its
# path, which evaluates EVAL (may be empty) and then runs
# bench_pp_profile:SERVER_CALL (e.g. `server(Self)`); runs its gen_tcp client
# on core 1 for CLIENT_MS ms (CONNS connections, default 1, each a process); PERF_DELAY s into it, `perf stat -x, -e EVENTS`
# on the server for 3 s, into $d/perf. Sets pp_rt to the client's round
# trips/s (a variable, not output: in the caller's shell, so that `sp` is
# there for its trap while the run goes on).
pp_run() {
    local ebin=$1 eval=$2 call=$3 delay=$4 ms=$5 events=$6 conns=${7:-1} beam pp
    rm -f "$d/port"
    setsid taskset -c 0 erl +S 1:1 -noshell -pa "$ebin" -pa "$d" -eval "$eval
      Self = self(), spawn(fun() -> bench_pp_profile:$call end),
      receive {port, P} -> file:write_file(\"$d/port\", integer_to_list(P)) end,
      timer:sleep(9000), halt()." >/dev/null 2>&1 &
    sp=$!
    for _ in $(seq 50); do [ -s "$d/port" ] && break; sleep 0.1; done
    beam=$(pgrep -s "$sp" beam.smp | head -1)
    ( sleep "$delay"; perf stat -x, -e "$events" -p "$beam" -o "$d/perf" -- sleep 3 ) &
    pp=$!
    pp_rt=$(taskset -c 1 erl +S 1:1 -noshell -pa "$d" \
           -eval "bench_pp_profile:client($(cat "$d/port"), $ms, $conns), halt()." | awk '{print $3}')
    wait "$pp"
    kill -- "-$sp" 2>/dev/null || true
    wait "$sp" 2>/dev/null || true
    sp=
}
