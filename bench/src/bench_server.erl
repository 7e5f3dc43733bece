%% @doc The server side of the benchmark; runs in the server node (pinned
%% to one core). One listener per run: N acceptor processes, each
%% accepting, spawning a handler process, handing the connection to it
%% (controlling_process) and going back to accept. The handler serves the
%% connection until the peer closes. Everything is bounded in time: every
%% recv has a timeout.
-module(bench_server).

-export([start/3, stop/1, stats/1, memory/0, gc_all/0, os_pid/0,
         wait_handlers/3, load/1]).

-define(RECV_TIMEOUT, 30000).      % a connection silent this long is dropped
-define(IDLE_TIMEOUT, 120000).     % idle workload handlers wait this long at most
-define(SINK_READ_SIZE, 65536).    % bytes per read in the bulk sink, every backend: the client's writes

%% counters: 1 accepted, 2 handlers alive, 3 accept errors, 4 handler errors
-define(C_ACCEPTED, 1).
-define(C_HANDLERS, 2).
-define(C_ACC_ERR, 3).
-define(C_H_ERR, 4).

-spec load(atom()) -> ok | {error, term()}.
%% Load the adapter and everything it uses before any measurement.
load(Backend) ->
    bench_backend:available(Backend).

-spec os_pid() -> string().
os_pid() -> os:getpid().

%% Kind: http | echo | sink | idle.
-spec start(atom(), http | echo | sink | idle, pos_integer()) ->
    {ok, {pid(), counters:counters_ref()}, inet:port_number()} | {error, term()}.
start(Backend, Kind, NAcceptors) ->
    Mod = bench_backend:mod(Backend),
    Parent = self(),
    Cnt = counters:new(4, [write_concurrency]),
    Master = spawn(fun() -> master(Parent, Mod, Kind, NAcceptors, Cnt) end),
    MRef = monitor(process, Master),
    receive
        {Master, {ok, Port}} -> demonitor(MRef, [flush]), {ok, {Master, Cnt}, Port};
        {Master, Err} -> demonitor(MRef, [flush]), Err;
        {'DOWN', MRef, _, _, Why} -> {error, {master_died, Why}}
    after 10000 ->
        exit(Master, kill),
        {error, start_timeout}
    end.

-spec stop({pid(), counters:counters_ref()}) -> map().
stop({Master, _Cnt} = Ref) ->
    MRef = monitor(process, Master),
    Master ! stop,
    receive {'DOWN', MRef, _, _, _} -> ok
    after 5000 -> exit(Master, kill)
    end,
    stats(Ref).

-spec stats({pid(), counters:counters_ref()}) -> map().
stats({_Master, Cnt}) ->
    #{accepted => counters:get(Cnt, ?C_ACCEPTED),
      handlers => counters:get(Cnt, ?C_HANDLERS),
      accept_errors => counters:get(Cnt, ?C_ACC_ERR),
      handler_errors => counters:get(Cnt, ?C_H_ERR)}.

%% Wait (bounded) until at least N handlers are alive.
-spec wait_handlers({pid(), counters:counters_ref()}, non_neg_integer(), non_neg_integer()) ->
    ok | {timeout, non_neg_integer()}.
wait_handlers({_, Cnt} = Ref, N, TimeoutMs) ->
    case counters:get(Cnt, ?C_HANDLERS) of
        H when H >= N -> ok;
        H when TimeoutMs =< 0 -> {timeout, H};
        _ -> timer:sleep(20), wait_handlers(Ref, N, TimeoutMs - 20)
    end.

-spec gc_all() -> ok.
gc_all() ->
    _ = [erlang:garbage_collect(P) || P <- processes()],
    ok.

%% erlang:memory/0 figures plus VmRSS (bytes) of this OS process.
-spec memory() -> map().
memory() ->
    M = maps:from_list(erlang:memory()),
    M#{rss => vm_rss()}.

vm_rss() ->
    {ok, B} = file:read_file("/proc/self/status"),
    {match, [Kb]} = re:run(B, <<"VmRSS:\\s+(\\d+) kB">>, [{capture, all_but_first, binary}]),
    binary_to_integer(Kb) * 1024.

%%% master / acceptors

master(Parent, Mod, Kind, NAcceptors, Cnt) ->
    process_flag(trap_exit, true),
    case Mod:listen(0, #{backlog => 1024}) of
        {ok, L, Port} ->
            Self = self(),
            Accs = [spawn_link(fun() -> acceptor(Self, Mod, Kind, L, Cnt) end)
                    || _ <- lists:seq(1, NAcceptors)],
            Parent ! {self(), {ok, Port}},
            master_loop(Mod, L, Accs);
        Err ->
            Parent ! {self(), {error, {listen, Err}}}
    end.

master_loop(Mod, L, Accs) ->
    receive
        stop ->
            _ = Mod:close(L),
            [exit(A, kill) || A <- Accs],
            ok;
        {'EXIT', _, _} ->
            master_loop(Mod, L, Accs)
    end.

acceptor(Master, Mod, Kind, L, Cnt) ->
    case Mod:accept(L, infinity) of
        {ok, S} ->
            counters:add(Cnt, ?C_ACCEPTED, 1),
            H = spawn(fun() -> handler_start(Mod, Kind, Cnt) end),
            case Mod:controlling_process(S, H) of
                ok -> H ! {go, S};
                Err ->
                    counters:add(Cnt, ?C_ACC_ERR, 1),
                    exit(H, kill),
                    _ = Mod:close(S),
                    error({controlling_process, Err})
            end,
            acceptor(Master, Mod, Kind, L, Cnt);
        {error, closed} ->
            ok;
        {error, _} ->
            counters:add(Cnt, ?C_ACC_ERR, 1),
            %% do not spin on a persistent error; the master kills us at stop
            timer:sleep(10),
            acceptor(Master, Mod, Kind, L, Cnt)
    end.

handler_start(Mod, Kind, Cnt) ->
    receive
        {go, S} ->
            counters:add(Cnt, ?C_HANDLERS, 1),
            R = try handle(Kind, Mod, S)
                catch C:E -> {error, {C, E}}
                end,
            case R of
                ok -> ok;
                {error, closed} -> ok;
                {error, econnreset} -> ok;
                {error, {completion_status, _}} -> ok;
                _ -> counters:add(Cnt, ?C_H_ERR, 1)
            end,
            _ = Mod:close(S),
            counters:sub(Cnt, ?C_HANDLERS, 1)
    after 10000 ->
        counters:add(Cnt, ?C_H_ERR, 1)
    end.

%%% handlers

handle(http, Mod, S) -> http(Mod, S, <<>>, http_patterns());
handle(echo, Mod, S) -> echo(Mod, S);
handle(sink, Mod, S) ->
    case Mod:read_size(S, ?SINK_READ_SIZE) of
        ok -> sink_start(Mod, S, <<>>);
        E -> E
    end;
handle(idle, Mod, S) ->
    case Mod:recv(S, 0, ?IDLE_TIMEOUT) of
        {ok, _} -> ok;
        E -> E
    end.

-define(BODY, <<"nifsock bench hello\n">>).
%% Both replies are about 100 bytes.
response(close) ->
    <<"HTTP/1.1 200 OK\r\nServer: b\r\nContent-Type: text/plain\r\n"
      "Connection: close\r\nContent-Length: 20\r\n\r\n", ?BODY/binary>>;
response(keep) ->
    <<"HTTP/1.1 200 OK\r\nServer: bench\r\nContent-Type: text/plain\r\n"
      "Content-Length: 20\r\nX-Pad: keep-alive\r\n\r\n", ?BODY/binary>>.

%% The two binary:match patterns, compiled once per connection: compiling
%% them on every request (binary:match with an uncompiled pattern) was about
%% a third of every backend's server CPU per request (bench/profile/README.md).
http_patterns() ->
    {binary:compile_pattern(<<"\r\n\r\n">>),
     binary:compile_pattern([<<"Connection: close">>, <<"connection: close">>,
                             <<"HTTP/1.0">>])}.

http(Mod, S, Buf0, P) ->
    case Mod:recv(S, 0, ?RECV_TIMEOUT) of
        {ok, Data} ->
            Buf = case Buf0 of <<>> -> Data; _ -> <<Buf0/binary, Data/binary>> end,
            http_requests(Mod, S, Buf, P);
        E -> E
    end.

http_requests(Mod, S, Buf, {End, CloseP} = P) ->
    case binary:match(Buf, End) of
        nomatch when byte_size(Buf) > 16384 -> {error, request_too_large};
        nomatch -> http(Mod, S, Buf, P);
        {Pos, 4} ->
            <<Req:Pos/binary, _:4/binary, Rest/binary>> = Buf,
            Close = binary:match(Req, CloseP) =/= nomatch,
            Reply = response(case Close of true -> close; false -> keep end),
            case Mod:send(S, Reply) of
                ok when Close -> ok;
                ok when Rest =:= <<>> -> http(Mod, S, <<>>, P);
                ok -> http_requests(Mod, S, Rest, P);
                E -> E
            end
    end.

echo(Mod, S) ->
    case Mod:recv(S, 0, ?RECV_TIMEOUT) of
        {ok, Data} ->
            case Mod:send(S, Data) of
                ok -> echo(Mod, S);
                E -> E
            end;
        E -> E
    end.

%% bulk sink: 8-byte big-endian length, then that many bytes read with
%% recv(S, 0); then a 1-byte ack.
sink_start(Mod, S, Buf) when byte_size(Buf) >= 8 ->
    <<Len:64, Rest/binary>> = Buf,
    sink(Mod, S, Len - byte_size(Rest));
sink_start(Mod, S, Buf) ->
    case Mod:recv(S, 0, ?RECV_TIMEOUT) of
        {ok, D} -> sink_start(Mod, S, <<Buf/binary, D/binary>>);
        E -> E
    end.

sink(Mod, S, Left) when Left =< 0 ->
    case Mod:send(S, <<"k">>) of
        ok ->
            %% wait for the client to close (bounded)
            case Mod:recv(S, 0, 10000) of
                {ok, _} -> ok;
                E -> E
            end;
        E -> E
    end;
sink(Mod, S, Left) ->
    case Mod:recv(S, 0, ?RECV_TIMEOUT) of
        {ok, D} -> sink(Mod, S, Left - byte_size(D));
        E -> E
    end.
