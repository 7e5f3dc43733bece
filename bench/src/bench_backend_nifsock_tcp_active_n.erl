%% @doc bench_backend adapter for `nifsock_tcp' with {active, N} (N = 100,
%% re-armed on nifsock_passive).
-module(bench_backend_nifsock_tcp_active_n).
-behaviour(bench_backend).
-include("bench_nifsock_tcp_active_n.hrl").
