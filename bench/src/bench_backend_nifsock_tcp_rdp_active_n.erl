%% @doc bench_backend adapter for `nifsock_tcp' with {active, N} (N = 100)
%% over the readiness pump source (application env `readiness' = `pump').
-module(bench_backend_nifsock_tcp_rdp_active_n).
-behaviour(bench_backend).
-define(READINESS, pump).
-include("bench_nifsock_tcp_active_n.hrl").
