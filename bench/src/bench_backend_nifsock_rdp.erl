%% @doc bench_backend adapter for `nifsock' with the readiness pump source
%% (application env `readiness' = `pump': one enif_select per batch).
-module(bench_backend_nifsock_rdp).
-behaviour(bench_backend).
-define(SOCK, nifsock).
-define(READINESS, pump).
-include("bench_socket_like.hrl").
