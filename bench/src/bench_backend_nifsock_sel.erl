%% @doc bench_backend adapter for `nifsock' on the fallback readiness path,
%% one `enif_select' per wait (application env `readiness' = `select').
-module(bench_backend_nifsock_sel).
-behaviour(bench_backend).
-define(SOCK, nifsock).
-define(READINESS, select).
-include("bench_socket_like.hrl").
