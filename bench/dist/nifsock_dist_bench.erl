%% @doc Distribution benchmark: nifsock_dist against inet_tcp_dist.
%%
%% The driver (this module's main/1, in a node without distribution) starts
%% two peer nodes per carrier (`-proto_dist nifsock' with each of its
%% carriers, `-nifsock dist_carrier port' and `process', and the default
%% inet_tcp), controlled over stdio so the driver takes no part in their
%% traffic, and connects each pair. Then, for each round, each workload is run
%% on every pair, the carrier order reversed from round to round:
%% <ul>
%% <li>`rtt': one process on A sends a small tuple to an echo process on B
%%     and waits for the answer, for a fixed time: round trips per second;</li>
%% <li>`stream': one process on A sends 1 MB binaries to a sink on B, which
%%     answers once it has them all: MB/s;</li>
%% <li>`small': one process on A sends 100-byte binaries to a sink on B as
%%     fast as it can (the sender runs ahead until the dist buffer is busy):
%%     messages per second.</li>
%% </ul>
%% Medians over rounds and the ratios nifsock / inet_tcp go to stdout and to
%% the report file as a markdown table, with the CPU time both nodes of a pair
%% spent per unit of work (from /proc/PID/task/*/schedstat, Linux only; the
%% warm-up is counted too), which the machine's other load disturbs less than
%% the rates.
%%
%% With `pin=1' (the default; bench/dist/run passes 0 where it finds no
%% `taskset', and starts and stops the busy loops) node A of every pair
%% runs on CPU 0 and node B on CPU 1, so each carrier gets the same placement
%% (unpinned, the round-trip rate is bimodal, by where the kernel happened to
%% put the two nodes). `load=N' says that N busy loops (`while :; do :;
%% done') run beside the nodes, loop I pinned to CPU I mod the CPU count when
%% pinning; this module only reports them.
-module(nifsock_dist_bench).

-export([main/1]).
%% Run on the peers
-export([rtt/2, stream/3, small/3, echo/0, sink/2]).

-define(DEFAULTS, #{rounds => 9, rtt_ms => 1000, stream_mb => 400, small_count => 300000,
                   pin => 1, load => 0}).

%%% ------------------------------------------------------------------
%%% Driver

-spec main([string()]) -> no_return().
main([Ebin, BenchEbin, Report | Args]) ->
    Opts = parse_args(Args, ?DEFAULTS),
    try run(Ebin, BenchEbin, Report, Opts) of
        ok -> halt(0)
    catch
        C:R:St ->
            io:format(standard_error, "bench failed: ~p:~p~n~p~n", [C, R, St]),
            halt(1)
    end.

parse_args([], Opts) -> Opts;
parse_args([KV | Rest], Opts) ->
    [K, V] = string:split(KV, "="),
    parse_args(Rest, Opts#{list_to_atom(K) => list_to_integer(V)}).

run(Ebin, BenchEbin, Report, #{rounds := Rounds} = Opts) ->
    Tag = integer_to_list(erlang:unique_integer([positive])) ++ "_" ++ os:getpid(),
    Carriers = [port, process, inet_tcp],
    Pairs = maps:from_list([{C, start_pair(C, Tag, Ebin, BenchEbin, Opts)} || C <- Carriers]),
    try
        Workloads = [rtt, stream, small],
        Results =
            lists:foldl(
              fun(Round, Acc) ->
                      Order = case Round rem 2 of
                                  1 -> Carriers;
                                  0 -> lists:reverse(Carriers)
                              end,
                      lists:foldl(
                        fun(W, Acc1) ->
                                lists:foldl(
                                  fun(C, Acc2) ->
                                          V = measure(W, maps:get(C, Pairs), Opts),
                                          io:format(standard_error,
                                                    "round ~b ~-6s ~-8s ~12.1f  cpu ~.2f us/unit~n",
                                                    [Round, W, C | tuple_to_list(V)]),
                                          maps:update_with({W, C}, fun(L) -> [V | L] end, [V],
                                                           Acc2)
                                  end, Acc1, Order)
                        end, Acc, Workloads)
              end, #{}, lists:seq(1, Rounds)),
        Table = report(Workloads, Results, Opts),
        ok = io:setopts([{encoding, unicode}]),
        io:put_chars(Table),
        ok = file:write_file(Report, unicode:characters_to_binary(Table))
    after
        [stop_pair(P) || P <- maps:values(Pairs)]
    end,
    ok.

%% The peer's start command: erl, under `taskset -c Cpu' when pinning.
exec(Cpu, #{pin := 1}) ->
    #{exec => {os:find_executable("taskset"),
               ["-c", integer_to_list(Cpu rem erlang:system_info(logical_processors)),
                os:find_executable("erl")]}};
exec(_Cpu, _Opts) ->
    #{}.

start_pair(Carrier, Tag, Ebin, BenchEbin, Opts) ->
    Dist = case Carrier of
               inet_tcp -> [];
               _ -> ["-proto_dist", "nifsock", "-nifsock", "dist_carrier", atom_to_list(Carrier)]
           end,
    Start = fun(Side, Cpu) ->
                    Name = list_to_atom(lists:concat(["nsdbench_", Carrier, "_", Side, "_", Tag])),
                    {ok, Peer, Node} =
                        peer:start((exec(Cpu, Opts))#{
                                     name => Name, connection => standard_io,
                                     args => Dist ++ ["-pa", Ebin, "-pa", BenchEbin,
                                                      "-setcookie", "nsdbench_" ++ Tag]}),
                    {Peer, Node}
            end,
    {PA, A} = Start(a, 0),
    {PB, B} = Start(b, 1),
    pong = peer:call(PA, net_adm, ping, [B]),
    OsPids = [peer:call(P, os, getpid, []) || P <- [PA, PB]],
    #{a => PA, b => PB, node_a => A, node_b => B, os_pids => OsPids}.

stop_pair(#{a := PA, b := PB}) ->
    catch peer:stop(PA),
    catch peer:stop(PB).

%% {Rate, CPU microseconds per unit of work (both nodes)}
measure(W, #{a := PA, node_b := B, os_pids := OsPids}, Opts) ->
    Cpu0 = cpu_ns(OsPids),
    {Rate, Units} = peer:call(PA, ?MODULE, W, [B | args(W, Opts)], 120000),
    Cpu1 = cpu_ns(OsPids),
    {Rate, (Cpu1 - Cpu0) / 1000 / Units}.

args(rtt, #{rtt_ms := Ms}) -> [Ms];
args(stream, #{stream_mb := MB}) -> [1000000, MB];
args(small, #{small_count := N}) -> [100, N].

%% CPU time of all threads of these OS processes, in ns (0 where unreadable).
cpu_ns(OsPids) ->
    lists:sum([task_ns("/proc/" ++ P ++ "/task/") || P <- OsPids]).

task_ns(Dir) ->
    case file:list_dir(Dir) of
        {ok, Tasks} ->
            lists:sum([case file:read_file(Dir ++ T ++ "/schedstat") of
                           {ok, Bin} ->
                               [Ns | _] = binary:split(Bin, <<" ">>),
                               binary_to_integer(Ns);
                           _ ->
                               0
                       end || T <- Tasks]);
        _ ->
            0
    end.

report(Workloads, Results, #{rounds := Rounds, pin := Pin, load := Load} = Opts) ->
    Med = fun(W, C, I) -> median([element(I, V) || V <- maps:get({W, C}, Results)]) end,
    Rows = [row(W, Med(W, port, 1), Med(W, process, 1), Med(W, inet_tcp, 1), Opts)
            || W <- Workloads],
    CpuRows = [cpu_row(W, Med(W, port, 2), Med(W, process, 2), Med(W, inet_tcp, 2))
               || W <- Workloads],
    {ok, Host} = inet:gethostname(),
    Header = io_lib:format(
               "## nifsock_dist vs inet_tcp_dist~n~n"
               "OTP ~s, ~b cores (`~s`), ~b interleaved rounds, medians; ratio = nifsock_dist / "
               "inet_tcp_dist (higher is better), for each nifsock_dist carrier (`port`, the "
               "default, and `process`). Two peer nodes per carrier on loopback, "
               "default VM flags, one sending process; ~s; ~s.~n~n"
               "| workload | port | process | inet_tcp_dist | port ratio | process ratio |~n"
               "|---|---:|---:|---:|---:|---:|~n",
               [erlang:system_info(otp_release), erlang:system_info(logical_processors),
                Host, Rounds,
                case Pin of
                    1 -> "node A pinned to CPU 0, node B to CPU 1 (`taskset`)";
                    _ -> "nodes not pinned"
                end,
                case Load of
                    0 -> "no other load";
                    _ -> io_lib:format("~b busy loop~s (`while :; do :; done`)~s running throughout",
                                       [Load, [$s || Load > 1],
                                        [" pinned one per CPU" || Pin =:= 1]])
                end]),
    CpuHeader = "\nCPU time of both nodes per unit of work (lower is better; ratio = "
                "inet_tcp_dist / nifsock_dist, so higher is better here too):\n\n"
                "| workload | port | process | inet_tcp_dist | port ratio | process ratio |\n"
                "|---|---:|---:|---:|---:|---:|\n",
    lists:flatten([Header, Rows, CpuHeader, CpuRows, "\n"]).

row(rtt, P, Q, I, _) ->
    io_lib:format("| round trips/s (small message, 1 process pair) | ~s | ~s | ~s | ~.2fx | ~.2fx |~n",
                  [fmt(P), fmt(Q), fmt(I), P / I, Q / I]);
row(stream, P, Q, I, _) ->
    io_lib:format("| MB/s (stream of 1 MB binaries, one way) | ~.1f | ~.1f | ~.1f | ~.2fx | ~.2fx |~n",
                  [P, Q, I, P / I, Q / I]);
row(small, P, Q, I, #{small_count := Count}) ->
    io_lib:format("| msgs/s (~b one-way 100-byte messages) | ~s | ~s | ~s | ~.2fx | ~.2fx |~n",
                  [Count, fmt(P), fmt(Q), fmt(I), P / I, Q / I]).

cpu_row(W, P, Q, I) ->
    Unit = case W of
               rtt -> "µs per round trip";
               stream -> "µs per MB";
               small -> "µs per message"
           end,
    io_lib:format("| ~ts | ~.2f | ~.2f | ~.2f | ~s | ~s |~n",
                  [Unit, P, Q, I, inv_ratio(I, P), inv_ratio(I, Q)]).

inv_ratio(I, N) when N > 0 -> io_lib:format("~.2fx", [I / N]);
inv_ratio(_I, _N) -> "-".

fmt(X) -> integer_to_list(round(X)).

median(L) ->
    S = lists:sort(L),
    N = length(S),
    case N rem 2 of
        1 -> lists:nth(N div 2 + 1, S);
        0 -> (lists:nth(N div 2, S) + lists:nth(N div 2 + 1, S)) / 2
    end.

%%% ------------------------------------------------------------------
%%% On the peers

%% @doc Round trips per second to an echo process on `B' for `Ms' ms, and the
%% round trips made (warm-up included).
-spec rtt(node(), pos_integer()) -> {float(), pos_integer()}.
rtt(B, Ms) ->
    Echo = spawn_link(B, ?MODULE, echo, []),
    _ = ping_pong(Echo, 2000),
    T0 = erlang:monotonic_time(),
    Deadline = T0 + erlang:convert_time_unit(Ms, millisecond, native),
    N = rtt_loop(Echo, Deadline, 0),
    T1 = erlang:monotonic_time(),
    Echo ! stop,
    {N / seconds(T1 - T0), N + 2000}.

rtt_loop(Echo, Deadline, N) ->
    ping_pong(Echo, 500),
    case erlang:monotonic_time() < Deadline of
        true -> rtt_loop(Echo, Deadline, N + 500);
        false -> N + 500
    end.

ping_pong(_Echo, 0) -> ok;
ping_pong(Echo, K) ->
    Echo ! {self(), ping, K},
    receive {pong, K} -> ping_pong(Echo, K - 1) end.

%% @private
-spec echo() -> ok.
echo() ->
    receive
        {From, ping, K} -> From ! {pong, K}, echo();
        stop -> ok
    end.

%% @doc MB/s sending `Count' binaries of `Size' bytes to a sink on `B', and the
%% MB sent (warm-up included).
-spec stream(node(), pos_integer(), pos_integer()) -> {float(), float()}.
stream(B, Size, Count) ->
    Bin = binary:copy(<<"nifsock!">>, Size div 8),
    _ = one_way(B, Bin, 20),
    T0 = erlang:monotonic_time(),
    Bytes = one_way(B, Bin, Count),
    T1 = erlang:monotonic_time(),
    {Bytes / 1.0e6 / seconds(T1 - T0), (Count + 20) * Size / 1.0e6}.

%% @doc Messages per second sending `Count' binaries of `Size' bytes to `B', and
%% the messages sent (warm-up included).
-spec small(node(), pos_integer(), pos_integer()) -> {float(), pos_integer()}.
small(B, Size, Count) ->
    Bin = binary:copy(<<"x">>, Size),
    _ = one_way(B, Bin, 1000),
    T0 = erlang:monotonic_time(),
    _ = one_way(B, Bin, Count),
    T1 = erlang:monotonic_time(),
    {Count / seconds(T1 - T0), Count + 1000}.

one_way(B, Bin, Count) ->
    Sink = spawn(B, ?MODULE, sink, [self(), Count]),
    Ref = erlang:monitor(process, Sink),
    send_n(Sink, Bin, Count),
    receive
        {Sink, Bytes} -> erlang:demonitor(Ref, [flush]), Bytes;
        {'DOWN', Ref, process, Sink, Reason} -> exit({sink_down, Reason})
    end.

send_n(_Sink, _Bin, 0) -> ok;
send_n(Sink, Bin, K) ->
    Sink ! Bin,
    send_n(Sink, Bin, K - 1).

%% @private
-spec sink(pid(), non_neg_integer()) -> ok.
sink(From, Count) ->
    From ! {self(), sink_loop(Count, 0)},
    ok.

sink_loop(0, Bytes) -> Bytes;
sink_loop(K, Bytes) ->
    receive Bin -> sink_loop(K - 1, Bytes + byte_size(Bin)) end.

seconds(Native) ->
    erlang:convert_time_unit(Native, native, microsecond) / 1.0e6.
