-module(bench_pp_profile).
-export([server/1, server/2, client/2]).
%% server: nifsock echo of 100-byte messages on one connection
server(Parent) ->
    echo(accept_one(Parent, nifsock)).
echo(S) ->
    case nifsock:recv(S, 100, infinity) of
        {ok, D} -> ok = nifsock:send(S, D), echo(S);
        _ -> ok
    end.
%% server/2: the same echo on Mod (nifsock or socket, the same API) as
%% bench/run's pingpong server does it: recv(S, 0, 30000), then send.
server(Parent, Mod) ->
    echo0(Mod, accept_one(Parent, Mod)).
echo0(Mod, S) ->
    case Mod:recv(S, 0, 30000) of
        {ok, D} -> ok = Mod:send(S, D), echo0(Mod, S);
        _ -> ok
    end.
%% Listens on 127.0.0.1 (any port, told to Parent as {port, P}) and accepts one connection.
accept_one(Parent, Mod) ->
    {ok, L} = Mod:open(inet, stream), ok = Mod:bind(L, #{family => inet, addr => {127,0,0,1}, port => 0}),
    ok = Mod:listen(L, 16), {ok, #{port := P}} = Mod:sockname(L),
    Parent ! {port, P},
    {ok, S} = Mod:accept(L),
    S.
client(Port, Ms) ->
    {ok, S} = gen_tcp:connect({127,0,0,1}, Port, [binary, {active, false}, {nodelay, true}]),
    B = binary:copy(<<"x">>, 100),
    End = erlang:monotonic_time(millisecond) + Ms,
    N = loop(S, B, End, 0),
    io:format("round trips/s ~p~n", [N * 1000 div Ms]).
loop(S, B, End, N) ->
    case erlang:monotonic_time(millisecond) > End of
        true -> N;
        false -> ok = gen_tcp:send(S, B), {ok, _} = gen_tcp:recv(S, 100), loop(S, B, End, N + 1)
    end.
