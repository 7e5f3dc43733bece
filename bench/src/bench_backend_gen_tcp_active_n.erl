%% @doc bench_backend adapter for `gen_tcp' with {active, N} (N = 100,
%% re-armed on tcp_passive), the mode Ranch and Cowboy use.
-module(bench_backend_gen_tcp_active_n).
-behaviour(bench_backend).
-define(TCP, gen_tcp).
-define(SETOPTS, inet:setopts).
-define(DATA, tcp).
-define(CLOSED, tcp_closed).
-define(ERROR, tcp_error).
-define(PASSIVE, tcp_passive).
-include("bench_active_n.hrl").
