%% @doc Cowboy "hello world" on a Ranch transport, for bench/cowboy/run:
%% the same Cowboy listener (cowboy_clear, the options of
%% `cowboy:start_clear/3') over `nifsock_ranch' or `ranch_tcp', and the
%% report of the runs.
%%
%% Server side (a node started by bench/cowboy/run with the Cowboy, Ranch
%% and Cowlib ebins of NIFSOCK_COWBOY_DEPS on its path):
%% `serve/1' starts the listener, writes its port to a file and halts when
%% the script that started it is gone (or after a time limit). `init/2' is
%% the handler. Cowboy, Ranch and Cowlib are called, never included, so the
%% module compiles without them (bench/run compiles all of bench/src).
%%
%% Report side: `report/1' reads the runs' CSV and prints the markdown table
%% (medians over rounds, medians of per-round ratios, the two targets).
-module(bench_cowboy).

-export([serve/1, init/2, report/1]).

-define(REF, bench_cowboy).
-define(BODY, <<"Hello world!">>).
%% The Ranch options, the same for both transports.
-define(ACCEPTORS, 16).
-define(MAX_CONNS, 1024).

%%% ------------------------------------------------------------------
%%% Server node

%% erl -run bench_cowboy serve Transport PortFile WatchPid MaxSecs
-spec serve([string()]) -> no_return().
serve([Transport0, PortFile, WatchPid, MaxSecs]) ->
    Transport = list_to_atom(Transport0),
    try
        {ok, _} = application:ensure_all_started(cowboy),
        Dispatch = cowboy_router:compile([{'_', [{"/[...]", ?MODULE, []}]}]),
        TransOpts = #{socket_opts => [{ip, {127, 0, 0, 1}}, {port, 0}],
                      num_acceptors => ?ACCEPTORS, max_connections => ?MAX_CONNS,
                      connection_type => supervisor},
        ProtoOpts = #{env => #{dispatch => Dispatch}, connection_type => supervisor},
        %% cowboy:start_clear/3 with the transport as a parameter
        {ok, _} = ranch:start_listener(?REF, Transport, TransOpts, cowboy_clear, ProtoOpts),
        Port = ranch:get_port(?REF),
        ok = file:write_file(PortFile, [integer_to_list(Port), $\n]),
        watch(WatchPid, erlang:monotonic_time(second) + list_to_integer(MaxSecs))
    catch
        C:E:St ->
            io:format(standard_error, "bench_cowboy: ~p: ~p:~p~n~p~n", [Transport, C, E, St]),
            halt(1)
    end.

%% Halt once the starting script exits or the time limit is reached.
watch(Pid, Until) ->
    case filelib:is_dir("/proc/" ++ Pid) andalso erlang:monotonic_time(second) < Until of
        true ->
            timer:sleep(500),
            watch(Pid, Until);
        false ->
            halt(0)
    end.

%% The handler: "Hello world!" as text/plain, for any path.
-spec init(term(), term()) -> {ok, term(), term()}.
init(Req0, State) ->
    Req = cowboy_req:reply(200, #{<<"content-type">> => <<"text/plain">>}, ?BODY, Req0),
    {ok, Req, State}.

%%% ------------------------------------------------------------------
%%% Report

%% erl -run bench_cowboy report RunsCsv CountsCsv Out.md Meta
%% RunsCsv: round,mode,transport,rps,requests,errors,cpu_us_per_req,other_pct
%% CountsCsv: mode,transport,sys_per_req,cs_per_req,cpu_us_per_req (perf stat runs)
-spec report([string()]) -> no_return().
report([RunsCsv, CountsCsv, Out, Meta]) ->
    try
        Runs = [#{round => list_to_integer(R), mode => M, transport => T,
                  rps => num(Rps), requests => num(Reqs), errors => num(Err),
                  cpu => num(Cpu), other => num(Other)}
                || [R, M, T, Rps, Reqs, Err, Cpu, Other] <- csv(RunsCsv)],
        Counts = [{{M, T}, {num(S), num(Cs), num(Cpu)}}
                  || [M, T, S, Cs, Cpu] <- csv(CountsCsv)],
        Md = table(Runs, Counts, Meta),
        ok = file:write_file(Out, unicode:characters_to_binary(Md)),
        halt(0)
    catch
        C:E:St ->
            io:format(standard_error, "bench_cowboy report: ~p:~p~n~p~n", [C, E, St]),
            halt(1)
    end.

csv(File) ->
    case file:read_file(File) of
        {ok, B} ->
            [_Hdr | Lines] = [L || L <- string:lexemes(binary_to_list(B), "\n")],
            [string:split(L, ",", all) || L <- Lines];
        {error, enoent} ->
            []
    end.

num(S) ->
    try list_to_integer(S)
    catch error:badarg ->
            try list_to_float(S)
            catch error:badarg -> float(list_to_integer(hd(string:split(S, "."))))
            end
    end.

-define(SUBJECT, "nifsock_ranch").
-define(BASE, "ranch_tcp").

modes() ->
    [{"keepalive", "keep-alive (wrk -t1 -c64)", 1.15},
     {"close", "`Connection: close` (wrk -t1 -c64, a connection per request)", 1.3}].

table(Runs, Counts, Meta) ->
    Rows = [row(Mode, Label, Target, Runs, Counts) || {Mode, Label, Target} <- modes()],
    Targets = [io_lib:format("keep-alive req/s ≥ 1.15× ranch_tcp: ~s; "
                             "`Connection: close` req/s ≥ 1.3× ranch_tcp: ~s",
                             [verdict(lists:keyfind("keepalive", 1, Rows)),
                              verdict(lists:keyfind("close", 1, Rows))])],
    ["## Cowboy hello world: nifsock_ranch vs ranch_tcp\n\n",
     Meta, "\n\n",
     "| workload | rounds | nifsock_ranch req/s | ranch_tcp req/s | req/s ratio (per-round median) "
     "| server CPU µs/req nifsock_ranch | ranch_tcp | CPU ratio | syscalls/req nifsock_ranch "
     "| ranch_tcp | ctx switches/req nifsock_ranch | ranch_tcp | errors | other load |\n",
     "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n",
     [Line || {_, Line, _} <- Rows],
     "\nPer-round req/s ratios: ",
     lists:join("; ", [[M, " ", lists:join(" ", [io_lib:format("~.3f", [R]) || R <- Rs])]
                       || {M, _, {_, _, Rs}} <- Rows]),
     "\n\nOther load: the median over the runs of the machine's busy time not spent by the "
     "server nodes or wrk, as % of all CPUs.\n",
     "\n**Targets (Cowboy):** ", Targets, noisy(Runs), "\n"].

%% Over 10% other load in the median run: the req/s ratios are mostly the
%% other load's doing; say so next to the targets.
noisy(Runs) ->
    case median([maps:get(other, R) || R <- Runs]) of
        Other when is_number(Other), Other > 10 ->
            io_lib:format(" — NOISY: other load ~.1f% of the machine in the median run, so the "
                          "req/s ratios mostly measure how much CPU each run got; "
                          "the CPU µs/req ratios are the steadier figure", [float(Other)]);
        _ ->
            ""
    end.

row(Mode, Label, Target, Runs, Counts) ->
    Of = fun(T) -> [R || R = #{mode := M, transport := T1} <- Runs, M =:= Mode, T1 =:= T] end,
    S = Of(?SUBJECT),
    B = Of(?BASE),
    Paired = [{X, Y} || X = #{round := R} <- S, Y = #{round := R1} <- B, R =:= R1,
                        maps:get(requests, X) > 0, maps:get(requests, Y) > 0],
    Ratios = [maps:get(rps, X) / maps:get(rps, Y) || {X, Y} <- Paired],
    CpuRatios = [maps:get(cpu, X) / maps:get(cpu, Y) || {X, Y} <- Paired],
    Med = fun(K, L) -> median([maps:get(K, X) || X <- L]) end,
    Ratio = median(Ratios),
    Cnt = fun(T, I) ->
                  case lists:keyfind({Mode, T}, 1, Counts) of
                      {_, C} -> fmt(element(I, C), 2);
                      false -> "–"
                  end
          end,
    Errors = lists:sum([maps:get(errors, X) || X <- S ++ B]),
    Line = io_lib:format("| ~ts | ~b | ~ts | ~ts | **~ts** (target ≥ ~.2f) | ~ts | ~ts | ~ts | ~ts | ~ts | ~ts | ~ts | ~b | ~ts% |\n",
                         [Label, length(Paired), fmt(Med(rps, S), 0), fmt(Med(rps, B), 0),
                          fmt(Ratio, 3), Target, fmt(Med(cpu, S), 2), fmt(Med(cpu, B), 2),
                          fmt(median(CpuRatios), 3), Cnt(?SUBJECT, 1), Cnt(?BASE, 1),
                          Cnt(?SUBJECT, 2), Cnt(?BASE, 2), Errors,
                          fmt(median([maps:get(other, X) || X <- S ++ B]), 1)]),
    {Mode, Line, {Ratio, Target, Ratios}}.

verdict({_, _, {undefined, _, _}}) -> "no data";
verdict({_, _, {Ratio, Target, _}}) when Ratio >= Target ->
    io_lib:format("**met** (~.3f×)", [Ratio]);
verdict({_, _, {Ratio, _, _}}) ->
    io_lib:format("**missed** (~.3f×)", [Ratio]).

median(L) -> bench_report:median(L).

fmt(undefined, _) -> "–";
fmt(V, 0) -> integer_to_list(round(V));
fmt(V, D) -> float_to_list(float(V), [{decimals, D}]).
