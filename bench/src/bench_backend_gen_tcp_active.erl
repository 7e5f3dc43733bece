%% @doc bench_backend adapter for `gen_tcp' with {active, once}: every
%% recv re-arms {active, once} and waits for the {tcp, S, Data} message.
-module(bench_backend_gen_tcp_active).
-behaviour(bench_backend).
-define(TCP, gen_tcp).
-define(ACTIVE_ONCE, true).
-include("bench_gen_tcp_like.hrl").

recv(S, 0, Timeout) ->
    case inet:setopts(S, [{active, once}]) of
        ok ->
            receive
                {tcp, S, Data} -> {ok, Data};
                {tcp_closed, S} -> {error, closed};
                {tcp_error, S, R} -> {error, R}
            after Timeout ->
                {error, timeout}
            end;
        E -> E
    end;
recv(S, Len, Timeout) ->
    recv_exact(S, Len, Timeout, []).

-include("bench_recv_exact.hrl").
