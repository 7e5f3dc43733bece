%% Two processes, one per scheduler (`erl +S 2`), each sending 64 bytes on
%% one end of its own loopback connection and reading them at the other, for
%% Ms milliseconds; prints the send+recv pairs per second of both together.
%% What it shows is what the keep-alive bench (`+S 1:1`) cannot: costs that
%% grow when two schedulers use nifsock at once, such as counters shared by
%% every thread (CHANGELOG, "per-thread counters").
%%
%%   erlc -o /tmp bench/profile/two_schedulers.erl
%%   erl +S 2 -noshell -pa _build/default/lib/nifsock/ebin -pa /tmp \
%%       -run two_schedulers run 3000
-module(two_schedulers).
-export([run/1]).

run([MsArg]) ->
    Ms = list_to_integer(MsArg),
    Self = self(),
    Pids = [spawn_opt(fun() -> Self ! {self(), loop(Ms)} end, [{scheduler, I}])
            || I <- [1, 2]],
    Ns = [receive {P, N} -> N end || P <- Pids],
    io:format("~p~n", [lists:sum(Ns) * 1000 div Ms]),
    halt().

loop(Ms) ->
    {ok, L} = nifsock:open(inet, stream, tcp),
    ok = nifsock:bind(L, #{family => inet, addr => loopback, port => 0}),
    ok = nifsock:listen(L),
    {ok, #{port := Port}} = nifsock:sockname(L),
    {ok, C} = nifsock:open(inet, stream, tcp),
    ok = nifsock:connect(C, #{family => inet, addr => loopback, port => Port}),
    {ok, S} = nifsock:accept(L),
    Bin = binary:copy(<<"x">>, 64),
    go(C, S, Bin, erlang:monotonic_time(millisecond) + Ms, 0).

go(C, S, Bin, Deadline, N) when N band 255 =:= 0 ->
    case erlang:monotonic_time(millisecond) > Deadline of
        true -> N;
        false -> step(C, S, Bin, Deadline, N)
    end;
go(C, S, Bin, Deadline, N) ->
    step(C, S, Bin, Deadline, N).

step(C, S, Bin, Deadline, N) ->
    ok = nifsock:send(C, Bin),
    {ok, _} = nifsock:recv(S, 64),
    go(C, S, Bin, Deadline, N + 1).
