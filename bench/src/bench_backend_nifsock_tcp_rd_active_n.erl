%% @doc bench_backend adapter for `nifsock_tcp' with {active, N} (N = 100)
%% over the readiness driver path (application env `readiness' = `driver').
-module(bench_backend_nifsock_tcp_rd_active_n).
-behaviour(bench_backend).
-define(READINESS, driver).
-include("bench_nifsock_tcp_active_n.hrl").
