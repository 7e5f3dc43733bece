%% {active, N} receive path shared by gen_tcp and nifsock_tcp adapters: the
%% socket stays in {active, ?N} and is re-armed on the passive message, as
%% Ranch/Cowboy do. The including module defines ?TCP, ?SETOPTS and the
%% message tags ?DATA, ?CLOSED, ?ERROR, ?PASSIVE.
-define(ACTIVE_ONCE, true).
-define(N, 100).
-include("bench_gen_tcp_like.hrl").

recv(S, 0, Timeout) ->
    case get({?MODULE, S}) of
        undefined ->
            ok = ?SETOPTS(S, [{active, ?N}]),
            put({?MODULE, S}, armed);
        armed ->
            ok
    end,
    receive
        {?DATA, S, Data} -> {ok, Data};
        {?PASSIVE, S} ->
            ok = ?SETOPTS(S, [{active, ?N}]),
            recv(S, 0, Timeout);
        {?CLOSED, S} -> {error, closed};
        {?ERROR, S, R} -> {error, R}
    after Timeout ->
        {error, timeout}
    end;
recv(S, Len, Timeout) ->
    recv_exact(S, Len, Timeout, []).

-include("bench_recv_exact.hrl").
