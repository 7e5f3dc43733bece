%%% The scenario test/valgrind/run runs in a BEAM node under memcheck: echo
%%% over a few connections, close races (a socket closed while other
%%% processes recv/accept/send on it), owner deaths, and two processes doing
%%% exact-length recv on one socket (whose bytes are then sent back out, so
%%% uninitialised bytes would reach sendmsg). Small: everything is ~50x
%%% slower under valgrind. Prints "scenario ok" and halts.
-module(vg_scenario).
-export([main/0]).

main() ->
    %% A stuck run ends itself (halt/1 does not wait for anything), well
    %% inside test/valgrind/run's timeout.
    _ = spawn(fun() -> timer:sleep(540000),
                       io:format("scenario failed: timed out~n"),
                       erlang:halt(4)
              end),
    try
        echo(20),
        close_races(30),
        owner_deaths(20),
        exact_recv(3),
        io:format("scenario ok~n"),
        erlang:halt(0)
    catch C:R:St ->
            io:format("scenario failed: ~p:~p~n~p~n", [C, R, St]),
            erlang:halt(3)
    end.

listener() ->
    {ok, L} = nifsock:open(inet, stream),
    ok = nifsock:bind(L, #{family => inet, addr => {127, 0, 0, 1}, port => 0}),
    ok = nifsock:listen(L, 64),
    {ok, Addr} = nifsock:sockname(L),
    {L, Addr}.

pair(L, Addr) ->
    {ok, C} = nifsock:open(inet, stream),
    ok = nifsock:connect(C, Addr, 20000),
    {ok, A} = nifsock:accept(L, 20000),
    {C, A}.

echo(N) ->
    {L, Addr} = listener(),
    [begin
         {C, A} = pair(L, Addr),
         Msg = [<<"hello">>, integer_to_list(I), rand:bytes(100)],
         ok = nifsock:send(C, Msg),
         Bin = iolist_to_binary(Msg),
         {ok, Bin} = nifsock:recv(A, byte_size(Bin), 20000),
         ok = nifsock:send(A, Bin),
         {ok, Bin} = nifsock:recv(C, byte_size(Bin), 20000),
         ok = nifsock:close(C),
         {error, closed} = nifsock:recv(A, 0, 20000),
         ok = nifsock:close(A)
     end || I <- lists:seq(1, N)],
    ok = nifsock:close(L).

close_races(N) ->
    {L, Addr} = listener(),
    Self = self(),
    [begin
         {C, A} = pair(L, Addr),
         {L2, _} = listener(),
         Ws = [spawn(fun() -> Self ! {w, self(), F()} end)
               || F <- [fun() -> nifsock:recv(C, 0, 20000) end,
                        fun() -> nifsock:recv(C, 10, 20000) end,
                        fun() -> nifsock:accept(L2, 20000) end,
                        fun() -> nifsock:send(C, binary:copy(<<1>>, 4000000), 20000) end]],
         case I rem 2 of 0 -> timer:sleep(5); 1 -> ok end,
         ok = nifsock:close(C),
         ok = nifsock:close(L2),
         [receive {w, W, _} -> ok after 60000 -> exit(waiter_stuck) end || W <- Ws],
         ok = nifsock:close(A)
     end || I <- lists:seq(1, N)],
    ok = nifsock:close(L).

owner_deaths(N) ->
    Self = self(),
    Owners = [spawn(fun() ->
                            {L, Addr} = listener(),
                            {C, A} = pair(L, Addr),
                            ok = nifsock:send(A, <<"part">>),
                            Self ! {ready, self()},
                            case I rem 3 of
                                0 -> nifsock:recv(C, 100, infinity);
                                1 -> nifsock:accept(L, infinity);
                                2 -> nifsock:recv(A, 0, infinity)
                            end
                    end) || I <- lists:seq(1, N)],
    [receive {ready, P} -> ok after 60000 -> exit(owner_stuck) end || P <- Owners],
    timer:sleep(50),
    [exit(P, kill) || P <- Owners],
    timer:sleep(500),
    [garbage_collect(P) || P <- processes()],
    ok.

%% A waits in recv(S, 1000) holding 3 bytes; B's recv(S, 4, 0) may be handed
%% A's partial buffer; whatever B gets is sent back out through sendmsg.
exact_recv(N) ->
    {L, Addr} = listener(),
    [begin
         {C, S} = pair(L, Addr),
         Self = self(),
         A = spawn(fun() -> Self ! {a, nifsock:recv(S, 1000, 2000)} end),
         timer:sleep(100),
         ok = nifsock:send(C, <<"abc">>),
         timer:sleep(100),
         erlang:suspend_process(A),
         ok = nifsock:send(C, <<"de">>),
         timer:sleep(100),
         B = nifsock:recv(S, 4, 0),
         erlang:resume_process(A),
         receive {a, _} -> ok after 20000 -> ok end,
         case B of
             {ok, Bin} -> ok = nifsock:send(S, Bin);
             _ -> ok
         end,
         [nifsock:close(X) || X <- [C, S]]
     end || _ <- lists:seq(1, N)],
    nifsock:close(L).
