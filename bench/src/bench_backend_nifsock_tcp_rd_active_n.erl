%% @doc bench_backend adapter for `nifsock_tcp' with {active, N} (N = 100)
%% over the readiness driver path (application env `readiness' = `driver').
-module(bench_backend_nifsock_tcp_rd_active_n).
-behaviour(bench_backend).
-define(TCP, nifsock_tcp).
-define(SETOPTS, nifsock_tcp:setopts).
-define(DATA, nifsock).
-define(CLOSED, nifsock_closed).
-define(ERROR, nifsock_error).
-define(PASSIVE, nifsock_passive).
-define(READINESS, driver).
-include("bench_active_n.hrl").
