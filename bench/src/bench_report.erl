%% @doc Turns the per-round results into bench/results/latest.md (also
%% printed to stdout) and a gnuplot bar chart bench/results/latest.png.
%%
%% Every figure is the median over rounds; every ratio is computed per
%% round (same round, X / baseline) and then medianed. It also writes
%% bench/results/summary.md: the OTP release, the targets and the driver vs
%% select comparison, the section bench/all-otp puts in bench/RESULTS.md per
%% release.
-module(bench_report).

-export([write/2, median/1]).

-define(BASES, [socket, gen_tcp, gen_tcp_ssl]).

%% {Workload, Metric, Label, Unit/format, lower_is_better?}
rows() ->
    [{churn, rps, "churn: req/s", int, false},
     {churn, cpu_us_per_req, "churn: server CPU µs/req", f2, true},
     {churn, errors, "churn: wrk errors (socket+non-2xx)", int, true},
     {keepalive, rps, "keepalive: req/s", int, false},
     {keepalive, cpu_us_per_req, "keepalive: server CPU µs/req", f2, true},
     {pingpong1, rt_per_s, "pingpong x1: round trips/s", int, false},
     {pingpong1, cpu_us_per_rt, "pingpong x1: server CPU µs/rt", f2, true},
     {pingpong16, rt_per_s, "pingpong x16: round trips/s", int, false},
     {pingpong16, cpu_us_per_rt, "pingpong x16: server CPU µs/rt", f2, true},
     {bulk, mb_per_s, "bulk: MB/s", int, false},
     {bulk, cpu_us_per_mb, "bulk: server CPU µs/MB", f1, true},
     {tls_keepalive, rps, "tls_keepalive: req/s", int, false},
     {tls_keepalive, cpu_us_per_req, "tls_keepalive: server CPU µs/req", f2, true},
     {tls_bulk, mb_per_s, "tls_bulk: MB/s", int, false},
     {tls_bulk, cpu_us_per_mb, "tls_bulk: server CPU µs/MB", f1, true},
     {idle, mem_total, "idle: bytes/conn, erlang:memory(total)", int, true},
     {idle, rss, "idle: bytes/conn, VmRSS", int, true},
     {idle, binary, "idle: bytes/conn, erlang:memory(binary)", int, true},
     {idle, system, "idle: bytes/conn, erlang:memory(system)", int, true},
     {idle, processes, "idle: bytes/conn, erlang:memory(processes)", int, true},
     {syscalls, sc_accept, "syscalls/conn: accept*", f2, true},
     {syscalls, sc_fcntl, "syscalls/conn: fcntl", f2, true},
     {syscalls, sc_getsockopt, "syscalls/conn: getsockopt", f2, true},
     {syscalls, sc_setsockopt, "syscalls/conn: setsockopt", f2, true},
     {syscalls, sc_close, "syscalls/conn: close/shutdown", f2, true},
     {syscalls, sc_recv, "syscalls/conn: recv*/read*", f2, true},
     {syscalls, sc_send, "syscalls/conn: send*/write*", f2, true},
     {syscalls, sc_sockmisc, "syscalls/conn: getsockname/getpeername/ioctl", f2, true},
     {syscalls, sc_socket, "syscalls/conn: **socket syscalls** (sum of the above)", f2, true},
     {syscalls, sc_epoll_ctl, "syscalls/conn: epoll_ctl", f2, true},
     {syscalls, sc_epoll_wait, "syscalls/conn: epoll_wait/poll", f2, true},
     {syscalls, sc_futex, "syscalls/conn: futex", f2, true},
     {syscalls, sc_other, "syscalls/conn: other", f2, true},
     {syscalls, sc_total, "syscalls/conn: **total**", f2, true}].

-spec write([{atom(), pos_integer(), atom(), map()}], map()) -> ok.
write(AllResults, Cfg) ->
    {Results, RoundInfo} = select_rounds(AllResults),
    put(bench_round_info, RoundInfo),
    Backends = maps:get(backends, Cfg),
    Bases = [B || B <- ?BASES, lists:member(B, Backends)],
    Others = [B || B <- Backends, not lists:member(B, ?BASES)],
    RatioCols = [{X, Base} || X <- Others, Base <- Bases],
    Subject = subject(Cfg, Others),
    TargetSubject = case Subject =:= maps:get(subject, Cfg) of
                        true -> Subject;
                        false -> none
                    end,
    Md = [header(Cfg),
          not_run(Results, Cfg),
          table(Results, Backends, RatioCols),
          targets(Results, TargetSubject, maps:get(subject, Cfg), Backends),
          noise(AllResults, maps:get(ncpu, Cfg)),
          notes(Cfg)],
    Dir = maps:get(results, Cfg),
    MdFile = filename:join(Dir, "latest.md"),
    ok = file:write_file(MdFile, unicode:characters_to_binary(Md)),
    Summary = [summary_header(Cfg),
               not_run(Results, Cfg),
               targets("####", Results, TargetSubject, maps:get(subject, Cfg), Backends),
               paths(Results, Backends),
               summary_noise(AllResults)],
    ok = file:write_file(filename:join(Dir, "summary.md"), unicode:characters_to_binary(Summary)),
    chart(Results, Subject, Bases, Cfg),
    ok.

subject(Cfg, Others) ->
    S = maps:get(subject, Cfg),
    case lists:member(S, Others) of
        true -> S;
        false when Others =/= [] -> hd(Others);
        false -> none
    end.

%%% data access

%% [{Round, Value}] of one metric of one backend, failed runs left out
vals(Results, W, K, B) ->
    [{R, V} || {W1, R, B1, M} <- Results, W1 =:= W, B1 =:= B,
               not maps:is_key(failed, M), {ok, V} <- [maps:find(K, M)]].

med(Results, W, K, B) ->
    median([V || {_, V} <- vals(Results, W, K, B)]).

%% X against the strongest of Bases: the lowest of X's ratios to each one
%% (each the median over rounds of X_r / B_r). Each peer is compared as a
%% whole, in its own rounds; the per-round max over Bases (ratio/5 with more
%% than one base) takes the luckiest of several noisy runs every round, so it
%% reads below 1.0 for peers of equal speed (the max of three runs of the
%% same mean is above that mean).
vs_strongest(Results, W, K, X, Bases) ->
    per_peer(Results, W, K, X, Bases, fun lists:min/1).

%% X's cost (lower is better) against the leanest of Bases: the highest of
%% X's ratios to each one.
vs_leanest(Results, W, K, X, Bases) ->
    per_peer(Results, W, K, X, Bases, fun lists:max/1).

%% Pick over X's ratio to each of Bases; undefined unless every one has data.
per_peer(Results, W, K, X, Bases, Pick) ->
    Rs = [ratio(Results, W, K, X, [B]) || B <- Bases],
    case Rs =:= [] orelse lists:member(undefined, Rs) of
        true -> undefined;
        false -> Pick(Rs)
    end.

%% median over rounds of X_r / max(Bases_r)
ratio(Results, W, K, X, Bases) ->
    Xs = vals(Results, W, K, X),
    Bs = [vals(Results, W, K, B) || B <- Bases],
    Rs = [V / Den || {R, V} <- Xs,
                     Ds <- [[proplists:get_value(R, L) || L <- Bs]],
                     not lists:member(undefined, Ds),
                     Den <- [lists:max(Ds)],
                     Den > 0],
    median(Rs).

-spec median([number()]) -> number() | undefined.
median([]) -> undefined;
median(L) ->
    S = lists:sort(L),
    N = length(S),
    case N rem 2 of
        1 -> lists:nth(N div 2 + 1, S);
        0 -> (lists:nth(N div 2, S) + lists:nth(N div 2 + 1, S)) / 2
    end.

%% A round is noisy when any of its runs had other load > 10%. When a
%% workload has at least 2 quiet rounds, its noisy rounds are left out
%% (whole rounds, so ratios stay paired); otherwise all rounds are used.
select_rounds(Results) ->
    Ws = lists:usort([W || {W, _, _, _} <- Results]),
    Info = maps:from_list(
             [begin
                  Rounds = lists:usort([R || {W1, R, _, _} <- Results, W1 =:= W]),
                  Noisy = lists:usort([R || {W1, R, _, M} <- Results, W1 =:= W,
                                            maps:get(other_pct, M, 0) > 10]),
                  Quiet = Rounds -- Noisy,
                  {W, case length(Quiet) >= 2 of
                          true -> {Quiet, length(Noisy), dropped};
                          false -> {Rounds, length(Noisy), kept}
                      end}
              end || W <- Ws]),
    Used = [X || {W, R, _, _} = X <- Results,
                 lists:member(R, element(1, maps:get(W, Info)))],
    {Used, Info}.

%% "3", "2 (1 noisy dropped)" or "3 (2 noisy, kept)"
rounds_cell(Results, W, K, Backends) ->
    N = rounds(Results, W, K, Backends),
    case maps:get(W, get(bench_round_info)) of
        {_, 0, _} -> integer_to_list(N);
        {_, Noisy, dropped} -> io_lib:format("~b (~b noisy dropped)", [N, Noisy]);
        {_, Noisy, kept} -> io_lib:format("~b (~b noisy, kept)", [N, Noisy])
    end.

%% the fewest rounds of any backend that ran the workload (bulk, say, has
%% no active-mode nifsock_tcp rows: a "–" there is not zero rounds)
rounds(Results, W, K, Backends) ->
    case [N || B <- Backends, N <- [length(vals(Results, W, K, B))], N > 0] of
        [] -> 0;
        L -> lists:min(L)
    end.

%%% markdown

header(Cfg) ->
    M = maps:get(machine, Cfg),
    Skipped = case maps:get(skipped, Cfg) of
                  [] -> "";
                  Sk -> ["- backends skipped (not loadable): ",
                         lists:join(", ", [io_lib:format("`~p` (~0p)", [B, R]) || {B, R} <- Sk]), "\n"]
              end,
    [io_lib:format("# nifsock benchmark — ~p mode\n\n", [maps:get(mode, Cfg)]),
     io_lib:format("- date: ~s; bench wall time ~b s\n", [maps:get(date, M), maps:get(bench_wall_s, Cfg)]),
     io_lib:format("- machine: nproc ~s, CPU ~s, kernel ~s, OTP ~s, ~s\n",
                   [maps:get(nproc, M), maps:get(cpu, M), maps:get(kernel, M), maps:get(otp, M), maps:get(wrk, M)]),
     io_lib:format("- pinning: ~s\n", [maps:get(pinning, M)]),
     io_lib:format("- rounds: ~b (syscalls: ~b), backends interleaved per round in the order ~s, rotated by one each round; "
                   "figures are medians over rounds, ratios are per-round ratios medianed\n",
                   [maps:get(rounds, Cfg), maps:get(syscall_rounds, Cfg),
                    lists:join(" ", [atom_to_list(B) || B <- maps:get(backends, Cfg)])]),
     io_lib:format("- churn/keepalive: wrk -t 1 -c ~b -d ~bs (churn with `Connection: close`), ~b acceptors; "
                   "pingpong: 100 B, x1 ~b ms, x16 ~b ms, ~s; bulk: ~b MiB in 64 KiB writes; idle: ~b conns; "
                   "syscalls: ~b conns under `strace -f -c`; load client backend: `~p`; "
                   "net.ipv4.tcp_tw_reuse=~s (not changed)\n",
                   [maps:get(wrk_conns, Cfg), maps:get(http_secs, Cfg), maps:get(acceptors, Cfg),
                    maps:get(pp1_ms, Cfg, maps:get(pp_ms, Cfg)), maps:get(pp_ms, Cfg),
                    pp_client_text(maps:get(pp_client, Cfg, beam)),
                    maps:get(bulk_mib, Cfg), maps:get(idle_conns, Cfg),
                    maps:get(syscall_conns, Cfg), maps:get(client, Cfg), maps:get(tw_reuse, M)]),
     Skipped,
     io_lib:format("- raw per-round numbers: `~s`\n\n", [rel(Cfg, maps:get(raw_file, Cfg))])].

pp_client_text({native, _}) ->
    "native client (bench/pingpong-client: one thread, epoll, pinned to the load core)";
pp_client_text(beam) ->
    "BEAM client (a process per connection in the load node, over the load client backend)".

rel(Cfg, F) ->
    Root = maps:get(root, Cfg) ++ "/",
    case lists:prefix(Root, F) of
        true -> lists:nthtail(length(Root), F);
        false -> F
    end.

table(Results, Backends, RatioCols) ->
    Hdr = ["metric" | [io_lib:format("`~p`", [B]) || B <- Backends]]
        ++ [io_lib:format("~p / ~p", [X, B]) || {X, B} <- RatioCols] ++ ["rounds"],
    Lines = [[Label | [fmt(Fmt, med(Results, W, K, B)) || B <- Backends]]
             ++ [fmt(ratio, ratio(Results, W, K, X, [B])) || {X, B} <- RatioCols]
             ++ [rounds_cell(Results, W, K, Backends)]
             || {W, K, Label, Fmt, _} <- rows(),
                lists:keymember(W, 1, Results)],
    ["## Results\n\n", md_table(Hdr, Lines), "\n"].

md_table(Hdr, Lines) ->
    N = length(Hdr),
    [row(Hdr), row(["---" | lists:duplicate(N - 1, "--:")]) | [row(L) || L <- Lines]].

row(Cells) -> ["| ", lists:join(" | ", Cells), " |\n"].

fmt(_, undefined) -> "–";
fmt(int, V) -> group(round(V));
fmt(f1, V) -> float_to_list(float(V), [{decimals, 1}]);
fmt(f2, V) -> float_to_list(float(V), [{decimals, 2}]);
fmt(ratio, V) -> float_to_list(float(V), [{decimals, 2}]) ++ "×".

group(N) when N < 0 -> "-" ++ group(-N);
group(N) ->
    S = integer_to_list(N),
    Rev = lists:reverse(S),
    lists:reverse(group3(Rev)).

group3([A, B, C, D | T]) -> [A, B, C, $, | group3([D | T])];
group3(L) -> L.

targets(Results, S, Wanted, Backends) ->
    targets("##", Results, S, Wanted, Backends).

targets(H, _Results, none, Wanted, _) ->
    io_lib:format("~s Targets\n\n`~p` was not run; targets not evaluated.\n\n", [H, Wanted]);
targets(H, Results, S, _, Backends) ->
    Has = fun(B) -> lists:member(B, Backends) end,
    %% Request/response against each peer's best mode, whichever that is in
    %% this run: OTP 25's gen_tcp is fastest in {active, N}, OTP 27's in
    %% passive mode or {active, once} (keep-alive 1.4x its {active, 100} on an
    %% Intel Xeon VM, 2026-12-06). Every peer mode that ran is compared as a
    %% whole and the strongest counts (`vs_strongest/5', `vs_leanest/5'); the
    %% rows against gen_tcp {active, N} alone stay as references.
    Peers = [B || B <- [socket, gen_tcp, gen_tcp_active, gen_tcp_active_n], Has(B)],
    HasPeers = Has(gen_tcp_active_n) andalso Has(socket) andalso Has(gen_tcp),
    Best = "best(socket, gen_tcp passive, {active, once}, {active, N})",
    TcpN = nifsock_tcp_active_n,
    T = [{"churn req/s ≥ 1.5× gen_tcp", ratio(Results, churn, rps, S, [gen_tcp]), '>=', 1.5, Has(gen_tcp)},
         {"churn req/s ≥ 1.5× socket", ratio(Results, churn, rps, S, [socket]), '>=', 1.5, Has(socket)},
         {"churn socket syscalls/conn ≤ 5", med(Results, syscalls, sc_socket, S), '=<', 5, true},
         {"churn all server syscalls/conn ≤ 0.6× socket", ratio(Results, syscalls, sc_total, S, [socket]), '=<', 0.6, Has(socket)},
         {"keepalive req/s ≥ 1.0× " ++ Best, vs_strongest(Results, keepalive, rps, S, Peers), '>=', 1.0, HasPeers},
         {"keepalive nifsock_tcp {active, N} req/s ≥ 1.15× " ++ Best, vs_strongest(Results, keepalive, rps, TcpN, Peers), '>=', 1.15, HasPeers and Has(TcpN)},
         {"keepalive server CPU/req ≤ 0.85× the leanest of the same", vs_leanest(Results, keepalive, cpu_us_per_req, S, Peers), '=<', 0.85, HasPeers},
         {"keepalive req/s / gen_tcp {active, N} (reference)", ratio(Results, keepalive, rps, S, [gen_tcp_active_n]), '>=', 1.0, reference},
         {"keepalive nifsock_tcp {active, N} / gen_tcp {active, N} (reference)", ratio(Results, keepalive, rps, TcpN, [gen_tcp_active_n]), '>=', 1.15, reference},
         {"keepalive server CPU/req / gen_tcp {active, N} (reference)", ratio(Results, keepalive, cpu_us_per_req, S, [gen_tcp_active_n]), '=<', 0.85, reference},
         {"pingpong x1 ≥ 1.0× " ++ Best, vs_strongest(Results, pingpong1, rt_per_s, S, Peers), '>=', 1.0, HasPeers},
         {"pingpong x1 / per-round max of the peers (reference)", ratio(Results, pingpong1, rt_per_s, S, Peers), '>=', 1.0, reference},
         {"pingpong x16 ≥ 1.1× " ++ Best, vs_strongest(Results, pingpong16, rt_per_s, S, Peers), '>=', 1.1, HasPeers},
         {"pingpong x16 / per-round max of the peers (reference)", ratio(Results, pingpong16, rt_per_s, S, Peers), '>=', 1.1, reference},
         {"bulk MB/s ≥ 1.1× socket", ratio(Results, bulk, mb_per_s, S, [socket]), '>=', 1.1, Has(socket)},
         {"idle bytes/conn (erlang:memory) ≤ 0.65× gen_tcp", ratio(Results, idle, mem_total, S, [gen_tcp]), '=<', 0.65, Has(gen_tcp)},
         {"idle bytes/conn (VmRSS) ≤ 0.8× gen_tcp", ratio(Results, idle, rss, S, [gen_tcp]), '=<', 0.8, Has(gen_tcp)}],
    Lines = [[Name, fmt(f2, V), verdict(V, Op, Lim, Ok)] || {Name, V, Op, Lim, Ok} <- T],
    [io_lib:format("~s Targets for `~p` (not enforced)\n\n", [H, S]),
     md_table(["target", "measured", "status"], Lines), "\n"].

verdict(_, _, _, false) -> "n/a (baseline not run)";
verdict(_, _, _, reference) -> "reference, not a target";
verdict(undefined, _, _, _) -> "n/a (no data)";
verdict(V, '>=', Lim, _) when V >= Lim -> "met";
verdict(V, '=<', Lim, _) when V =< Lim -> "met";
verdict(_, _, _, _) -> "**missed**".

noise(Results, NCpu) ->
    All = [{W, R, B, maps:get(other_pct, M)} || {W, R, B, M} <- Results, maps:is_key(other_pct, M)],
    Ws = lists:foldr(fun({W, _, _, _}, Acc) -> [W | lists:delete(W, Acc)] end, [], All),
    Failed = [{W, R, B} || {W, R, B, M} <- Results, maps:is_key(failed, M)],
    Errs = [{W, R, B, E} || {W, R, B, M} <- Results, {ok, E} <- [maps:find(errors, M)], E > 0],
    Lines = [begin
                 Os = [O || {W1, _, _, O} <- All, W1 =:= W],
                 Judged = Os,
                 Noisy = [O || O <- Judged, O > 10],
                 [atom_to_list(W), integer_to_list(length(Os)),
                  integer_to_list(length(Noisy)), fmt(f1, median(Judged)),
                  fmt(f1, case Judged of [] -> undefined; _ -> lists:max(Judged) end)]
             end || W <- Ws],
    ["## Noise and errors\n\n",
     io_lib:format("*Other load* = machine busy time (user+nice+system of /proc/stat) not used by the "
                   "server nodes, the client node or wrk, as % of the ~b CPUs' capacity during a run. "
                   "A round with any run over 10% is noisy; when a workload has at least 2 quiet rounds its noisy "
                   "rounds are left out of the figures and ratios (they stay in the raw CSV), otherwise all "
                   "rounds are used (see the rounds column). "
                   "/proc/stat counts 10 ms ticks, so 3 ticks per CPU are subtracted before judging "
                   "(this matters only for runs under a second, e.g. bulk in quick mode).\n\n", [NCpu]),
     md_table(["workload", "runs", "noisy (> 10%)", "median other %", "max other %"], Lines),
     "\n",
     case Failed of
         [] -> "- no run failed\n";
         _ -> ["- failed runs (left out of the medians): ",
               lists:join(", ", [io_lib:format("~p r~b ~p", [W, R, B]) || {W, R, B} <- Failed]), "\n"]
     end,
     case Errs of
         [] -> "- no run reported errors\n";
         _ -> ["- runs with errors (wrk socket errors + non-2xx, client errors, server handler errors): ",
               lists:join(", ", [io_lib:format("~p r~b ~p: ~p", [W, R, B, E]) || {W, R, B, E} <- Errs]), "\n"]
     end,
     "\n"].

notes(_Cfg) ->
    "How the figures are computed: see `bench/README.md`. Server CPU is user+system time of the server "
    "node's OS process (sum over its threads of /proc/PID/task/*/schedstat) around the timed part; idle bytes/conn are deltas over "
    "the connections opened (fresh server node per run); syscalls are per connection from "
    "`strace -f -c` attached to the server node during the churn client's connections.\n".

%% The workloads asked for that have no result at all, named (their targets
%% read "n/a (no data)"): a run whose time budget (deadline_s) was used up
%% before them skips them, as does a workload no backend runs.
not_run(Results, Cfg) ->
    case [W || W <- maps:get(workloads, Cfg, []), not lists:keymember(W, 1, Results)] of
        [] -> "";
        Ws -> io_lib:format("**Not run**: ~ts (no result: the time budget, deadline_s = ~b s, was used up "
                            "before them, or no backend runs them; see the run's log).\n\n",
                            [lists:join(", ", [atom_to_list(W) || W <- Ws]), maps:get(deadline_s, Cfg)])
    end.

%%% summary.md (one release's section of bench/RESULTS.md)

summary_header(Cfg) ->
    M = maps:get(machine, Cfg),
    [io_lib:format("### OTP ~ts\n\n", [maps:get(otp, M)]),
     io_lib:format("~ts, ~p mode, ~b rounds, backends interleaved per round (~ts, rotated by one each round); ~ts; kernel ~ts, ~ts. "
                   "Figures are medians over rounds, ratios per-round ratios medianed. "
                   "Raw numbers: `~ts`.\n\n",
                   [maps:get(date, M), maps:get(mode, Cfg), maps:get(rounds, Cfg),
                    lists:join(" ", [atom_to_list(B) || B <- maps:get(backends, Cfg)]),
                    maps:get(pinning, M), maps:get(kernel, M), maps:get(wrk, M),
                    rel(Cfg, maps:get(raw_file, Cfg))])].

%% The readiness paths side by side: the default (driver) and the select
%% fallback, for nifsock passive and nifsock_tcp {active, N}, with gen_tcp
%% {active, N} as the reference. driver / select is the per-round ratio: above
%% 1 the driver path is faster (rates), below 1 it spends less (CPU).
paths(Results, Backends) ->
    Pairs = [{D, S} || {D, S} <- [{nifsock, nifsock_sel}, {nifsock_tcp_active_n, nifsock_tcp_sel_active_n}],
                       lists:member(D, Backends), lists:member(S, Backends)],
    Ref = [gen_tcp_active_n || lists:member(gen_tcp_active_n, Backends)],
    Ws = [churn, keepalive, pingpong1, pingpong16],
    case Pairs of
        [] ->
            "#### Driver vs select path\n\nNot measured (run nifsock and nifsock_sel, or "
            "nifsock_tcp_active_n and nifsock_tcp_sel_active_n).\n\n";
        _ ->
            Hdr = ["metric" | lists:append([[io_lib:format("`~p`", [D]), io_lib:format("`~p`", [S]),
                                             "driver / select"] || {D, S} <- Pairs])]
                ++ [io_lib:format("`~p`", [R]) || R <- Ref],
            Lines = [[Label | lists:append([[fmt(Fmt, med(Results, W, K, D)), fmt(Fmt, med(Results, W, K, S)),
                                             fmt(ratio, ratio(Results, W, K, D, [S]))] || {D, S} <- Pairs])]
                     ++ [fmt(Fmt, med(Results, W, K, R)) || R <- Ref]
                     || {W, K, Label, Fmt, _} <- rows(), lists:member(W, Ws),
                        K =/= errors, lists:keymember(W, 1, Results)],
            ["#### Driver vs select path\n\n", md_table(Hdr, Lines), "\n"]
    end.

summary_noise(AllResults) ->
    Os = [maps:get(other_pct, M) || {_, _, _, M} <- AllResults, maps:is_key(other_pct, M)],
    Failed = length([x || {_, _, _, M} <- AllResults, maps:is_key(failed, M)]),
    io_lib:format("Other load on the machine during the runs: median ~ts %, max ~ts % of the CPUs "
                  "(~b of ~b runs over 10 %); ~b failed runs.\n\n",
                  [fmt(f1, median(Os)), fmt(f1, case Os of [] -> undefined; _ -> lists:max(Os) end),
                   length([O || O <- Os, O > 10]), length(Os), Failed]).

%%% chart

chart(_Results, none, _Bases, Cfg) ->
    _ = file:delete(filename:join(maps:get(results, Cfg), "latest.png")),
    ok;
chart(Results, S, Bases, Cfg) ->
    Items = [{"churn req/s", churn, rps},
             {"keepalive req/s", keepalive, rps},
             {"pingpong x1", pingpong1, rt_per_s},
             {"pingpong x16", pingpong16, rt_per_s},
             {"bulk MB/s", bulk, mb_per_s},
             {"churn CPU/req (lower=better)", churn, cpu_us_per_req},
             {"idle mem/conn (lower=better)", idle, mem_total},
             {"syscalls/conn (lower=better)", syscalls, sc_total}],
    Dir = maps:get(results, Cfg),
    Tmp = filename:join(filename:dirname(maps:get(pidfile, Cfg)), "chart"),
    ok = filelib:ensure_dir(Tmp ++ "/x"),
    Dat = filename:join(Tmp, "ratios.dat"),
    Num = fun(undefined) -> "NaN"; (V) -> float_to_list(float(V), [{decimals, 6}]) end,
    Data = [{L, [ratio(Results, W, K, S, [B]) || B <- Bases]}
            || {L, W, K} <- Items, lists:keymember(W, 1, Results)],
    Lines = [[io_lib:format("\"~s\"", [L]) | [[" ", Num(V)] || V <- Vs]] ++ "\n" || {L, Vs} <- Data],
    YMax = lists:max([1.0 | [float(V) || {_, Vs} <- Data, V <- Vs, V =/= undefined]]) * 1.15,
    ok = file:write_file(Dat, ["# label", [[" vs_", atom_to_list(B)] || B <- Bases], "\n" | Lines]),
    Png = filename:join(Dir, "latest.png"),
    N = length(Bases),
    Off = fun(I) -> (I - (N + 1) / 2) / (N + 1) end,
    Plots = lists:append(
              [[io_lib:format("'~s' using ~b:xtic(1) title '~p / ~p'", [Dat, I + 1, S, B])
                || {I, B} <- lists:zip(lists:seq(1, N), Bases)],
               [io_lib:format("'~s' using ($0+~.4f):(column(~b)):(sprintf('%.2f', column(~b))) "
                              "with labels offset 0,0.7 font ',9' notitle",
                              [Dat, Off(I), I + 1, I + 1])
                || I <- lists:seq(1, N)],
               ["1 with lines dashtype 2 lc rgb 'black' title 'parity (1.0)'"]]),
    Gp = ["set terminal pngcairo size 1100,560 noenhanced font 'sans,10'\n",
          io_lib:format("set output '~s'\n", [Png]),
          io_lib:format("set title \"~p vs baselines, ~p mode, ~b rounds (median of per-round ratios; "
                        "server taskset -c ~s +S 1:1, load taskset -c ~s)~s\"\n",
                        [S, maps:get(mode, Cfg), maps:get(rounds, Cfg),
                         maps:get(server_core, Cfg), maps:get(load_core, Cfg),
                         case S =:= maps:get(subject, Cfg) of
                             true -> "";
                             false -> io_lib:format("\\n(~p not run; showing ~p)", [maps:get(subject, Cfg), S])
                         end]),
          "set style data histogram\nset style histogram cluster gap 1\n",
          "set style fill solid 0.85 border -1\nset boxwidth 0.9\n",
          io_lib:format("set yrange [0:~.2f]\n", [YMax]),
          "set ylabel 'ratio'\nset grid ytics\nset key outside top center horizontal\n",
          "set xtics rotate by -25 nomirror\nset bmargin 7\nset datafile missing 'NaN'\n",
          "plot ", lists:join(", \\\n     ", Plots), "\n"],
    GpFile = filename:join(Tmp, "chart.gp"),
    ok = file:write_file(GpFile, Gp),
    case os:find_executable("gnuplot") of
        false -> io:format(standard_error, "bench: gnuplot not found, no chart~n", []);
        G ->
            Out = os:cmd(G ++ " " ++ GpFile ++ " 2>&1"),
            Out =/= [] andalso io:format(standard_error, "bench: gnuplot: ~s~n", [Out]),
            ok
    end.
