%% @doc Load generator for the non-HTTP workloads. Runs in the client
%% node (pinned to the other core). Uses a bench_backend adapter too
%% (gen_tcp passive by default), the same one for every server backend.
-module(bench_client).

-export([pingpong/5, bulk/4, idle_open/4, idle_close/1, churn/5]).

-define(T, 10000).

%% N connections, each a process doing 100-byte round trips
%% (send 100 B, recv exactly 100 B) until DurationMs has passed.
%% Returns {RoundTrips, ElapsedUs, Errors}.
-spec pingpong(module(), inet:port_number(), pos_integer(), pos_integer(), pos_integer()) ->
    {non_neg_integer(), pos_integer(), non_neg_integer()}.
pingpong(CMod, Port, N, Size, DurationMs) ->
    Self = self(),
    Msg = binary:copy(<<"p">>, Size),
    Pids = [spawn_link(fun() -> pp_worker(Self, CMod, Port, Msg) end) || _ <- lists:seq(1, N)],
    Ready = [receive {ready, P, R} -> R after ?T -> timeout end || P <- Pids],
    case lists:all(fun(R) -> R =:= ok end, Ready) of
        false ->
            [P ! stop || P <- Pids],
            error({pingpong_connect, Ready});
        true -> ok
    end,
    T0 = erlang:monotonic_time(microsecond),
    Deadline = T0 + DurationMs * 1000,
    [P ! {go, Deadline} || P <- Pids],
    Res = [receive {done, P, C, E} -> {C, E} after DurationMs + ?T -> {0, 1} end || P <- Pids],
    T1 = erlang:monotonic_time(microsecond),
    {lists:sum([C || {C, _} <- Res]), T1 - T0, lists:sum([E || {_, E} <- Res])}.

pp_worker(Parent, CMod, Port, Msg) ->
    case CMod:connect(Port, #{linger0 => true, nodelay => true}, ?T) of
        {ok, S} ->
            Parent ! {ready, self(), ok},
            receive
                {go, Deadline} ->
                    {C, E} = pp_loop(CMod, S, Msg, byte_size(Msg), Deadline, 0),
                    _ = CMod:close(S),
                    Parent ! {done, self(), C, E};
                stop ->
                    CMod:close(S)
            end;
        Err ->
            Parent ! {ready, self(), Err}
    end.

pp_loop(CMod, S, Msg, Size, Deadline, N) ->
    %% check the clock every 16 round trips
    case N band 15 =:= 0 andalso erlang:monotonic_time(microsecond) >= Deadline of
        true -> {N, 0};
        false ->
            case CMod:send(S, Msg) of
                ok ->
                    case CMod:recv(S, Size, ?T) of
                        {ok, _} -> pp_loop(CMod, S, Msg, Size, Deadline, N + 1);
                        _ -> {N, 1}
                    end;
                _ -> {N, 1}
            end
    end.

%% Stream Bytes in 64 KiB writes, after an 8-byte length header; wait
%% for the server's 1-byte ack. Returns {ok, ElapsedUs}.
-spec bulk(module(), inet:port_number(), pos_integer(), pos_integer()) ->
    {ok, pos_integer()} | {error, term()}.
bulk(CMod, Port, Bytes, Chunk) ->
    Buf = binary:copy(<<"0123456789abcdef">>, Chunk div 16),
    N = Bytes div Chunk,
    Total = N * Chunk,
    {ok, S} = CMod:connect(Port, #{nodelay => false}, ?T),
    T0 = erlang:monotonic_time(microsecond),
    ok = CMod:send(S, <<Total:64>>),
    R = bulk_send(CMod, S, Buf, N),
    Res = case R of
              ok ->
                  case CMod:recv(S, 1, 60000) of
                      {ok, <<"k">>} -> {ok, erlang:monotonic_time(microsecond) - T0};
                      E -> {error, {ack, E}}
                  end;
              E -> {error, {send, E}}
          end,
    _ = CMod:close(S),
    Res.

bulk_send(_CMod, _S, _Buf, 0) -> ok;
bulk_send(CMod, S, Buf, N) ->
    case CMod:send(S, Buf) of
        ok -> bulk_send(CMod, S, Buf, N - 1);
        E -> E
    end.

%% Open N idle connections from Par holder processes. Returns the holders
%% and the number of connections opened.
-spec idle_open(module(), inet:port_number(), pos_integer(), pos_integer()) ->
    {[pid()], non_neg_integer(), non_neg_integer()}.
idle_open(CMod, Port, N, Par) ->
    Self = self(),
    Per = [N div Par + (case I =< N rem Par of true -> 1; false -> 0 end) || I <- lists:seq(1, Par)],
    Holders = [spawn(fun() -> holder(Self, CMod, Port, K) end) || K <- Per, K > 0],
    Res = [receive {opened, H, Ok, Err} -> {Ok, Err} after 60000 -> {0, 1} end || H <- Holders],
    {Holders, lists:sum([O || {O, _} <- Res]), lists:sum([E || {_, E} <- Res])}.

holder(Parent, CMod, Port, K) ->
    Socks = [CMod:connect(Port, #{linger0 => true}, ?T) || _ <- lists:seq(1, K)],
    Ok = [S || {ok, S} <- Socks],
    Parent ! {opened, self(), length(Ok), K - length(Ok)},
    receive close -> ok after 300000 -> ok end,
    [CMod:close(S) || S <- Ok],
    Parent ! {closed, self()}.

-spec idle_close([pid()]) -> ok.
idle_close(Holders) ->
    [H ! close || H <- Holders],
    [receive {closed, H} -> ok after 30000 -> exit(H, kill) end || H <- Holders],
    ok.

%% HTTP/1.1 "Connection: close" churn with exactly N connections from
%% Par workers: connect, send one request, read until the server closes,
%% close (SO_LINGER {true, 0}: no TIME_WAIT left behind).
%% Returns {Completed, Errors, ElapsedUs}.
-spec churn(module(), inet:port_number(), pos_integer(), pos_integer(), binary()) ->
    {non_neg_integer(), non_neg_integer(), pos_integer()}.
churn(CMod, Port, N, Par, Req) ->
    Self = self(),
    Per = [N div Par + (case I =< N rem Par of true -> 1; false -> 0 end) || I <- lists:seq(1, Par)],
    T0 = erlang:monotonic_time(microsecond),
    Ws = [spawn_link(fun() -> Self ! {churned, self(), churn_loop(CMod, Port, K, Req, 0, 0)} end)
          || K <- Per, K > 0],
    Res = [receive {churned, W, R} -> R after 120000 -> {0, 1} end || W <- Ws],
    T1 = erlang:monotonic_time(microsecond),
    {lists:sum([C || {C, _} <- Res]), lists:sum([E || {_, E} <- Res]), T1 - T0}.

churn_loop(_CMod, _Port, 0, _Req, Ok, Err) -> {Ok, Err};
churn_loop(CMod, Port, K, Req, Ok, Err) ->
    R = case CMod:connect(Port, #{linger0 => true}, ?T) of
            {ok, S} ->
                X = case CMod:send(S, Req) of
                        ok -> read_to_close(CMod, S, 0);
                        E -> E
                    end,
                _ = CMod:close(S),
                X;
            E -> E
        end,
    case R of
        {ok, Bytes} when Bytes > 0 -> churn_loop(CMod, Port, K - 1, Req, Ok + 1, Err);
        _ -> churn_loop(CMod, Port, K - 1, Req, Ok, Err + 1)
    end.

read_to_close(CMod, S, Acc) ->
    case CMod:recv(S, 0, ?T) of
        {ok, D} -> read_to_close(CMod, S, Acc + byte_size(D));
        {error, closed} -> {ok, Acc};
        E -> E
    end.
