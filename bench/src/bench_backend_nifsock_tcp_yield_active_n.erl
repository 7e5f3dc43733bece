%% @doc bench_backend adapter for `nifsock_tcp' with {active, N} (N = 100)
%% and the yields after replies on (application env `reply_yield' = true,
%% off by default): the owner's reply yields and reads the next request.
-module(bench_backend_nifsock_tcp_yield_active_n).
-behaviour(bench_backend).
-define(REPLY_YIELD, true).
-include("bench_nifsock_tcp_active_n.hrl").
