%% @doc bench_backend adapter for `nifsock_tcp' with {active, N} (N = 100)
%% on the fallback readiness path, one `enif_select' per wait
%% (application env `readiness' = `select').
-module(bench_backend_nifsock_tcp_sel_active_n).
-behaviour(bench_backend).
-define(READINESS, select).
-include("bench_nifsock_tcp_active_n.hrl").
