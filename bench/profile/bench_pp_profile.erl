-module(bench_pp_profile).
-export([server/1, server/2, server/3, client/2, client/3]).
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
%% server/3: N connections, each served by its own process: Mod's echo0, or
%% gen_tcp `{active, 100}' (as bench/run's gen_tcp_active_n backend).
server(Parent, gen_tcp_active_n, N) ->
    {ok, L} = gen_tcp:listen(0, [binary, {ip, {127,0,0,1}}, {active, false},
                                 {nodelay, true}, {backlog, 64}]),
    {ok, P} = inet:port(L),
    Parent ! {port, P},
    serve_each(N, fun() -> gen_tcp:accept(L) end, fun gen_tcp:controlling_process/2,
               fun echo_active/1);
server(Parent, Mod, N) ->
    {ok, L} = listen(Parent, Mod),
    serve_each(N, fun() -> Mod:accept(L) end,
               fun(S, Pid) -> Mod:setopt(S, {otp, controlling_process}, Pid) end,
               fun(S) -> echo0(Mod, S) end).
%% Accepts N connections, each handed to a process of its own running Echo.
serve_each(N, Accept, Give, Echo) ->
    [begin
         {ok, S} = Accept(),
         Pid = spawn(fun() -> receive go -> ok end, Echo(S) end),
         ok = Give(S, Pid),
         Pid ! go
     end || _ <- lists:seq(1, N)],
    receive after infinity -> ok end.
echo_active(S) ->
    ok = inet:setopts(S, [{active, 100}]),
    echo_active_loop(S).
echo_active_loop(S) ->
    receive
        {tcp, S, D} -> ok = gen_tcp:send(S, D), echo_active_loop(S);
        {tcp_passive, S} -> echo_active(S);
        _ -> ok
    end.
%% Listens on 127.0.0.1 (any port, told to Parent as {port, P}) and accepts one connection.
accept_one(Parent, Mod) ->
    {ok, L} = listen(Parent, Mod),
    {ok, S} = Mod:accept(L),
    S.
listen(Parent, Mod) ->
    {ok, L} = Mod:open(inet, stream), ok = Mod:bind(L, #{family => inet, addr => {127,0,0,1}, port => 0}),
    ok = Mod:listen(L, 64), {ok, #{port := P}} = Mod:sockname(L),
    Parent ! {port, P},
    {ok, L}.
client(Port, Ms) ->
    client(Port, Ms, 1).
%% client/3: N connections, each a process doing round trips for Ms ms.
client(Port, Ms, N) ->
    Self = self(),
    B = binary:copy(<<"x">>, 100),
    Socks = [begin
                 {ok, S} = gen_tcp:connect({127,0,0,1}, Port,
                                           [binary, {active, false}, {nodelay, true}]),
                 S
             end || _ <- lists:seq(1, N)],
    End = erlang:monotonic_time(millisecond) + Ms,
    Pids = [begin
                P = spawn(fun() -> receive go -> Self ! {self(), loop(S, B, End, 0)} end end),
                ok = gen_tcp:controlling_process(S, P),
                P ! go,
                P
            end || S <- Socks],
    Total = lists:sum([receive {P, C} -> C end || P <- Pids]),
    io:format("round trips/s ~p~n", [Total * 1000 div Ms]).
loop(S, B, End, N) ->
    case erlang:monotonic_time(millisecond) > End of
        true -> N;
        false -> ok = gen_tcp:send(S, B), {ok, _} = gen_tcp:recv(S, 100), loop(S, B, End, N + 1)
    end.
