%% @doc bench_backend adapter for `nifsock' with the readiness driver path
%% (application env `readiness' = `driver', prototype of issue 13).
-module(bench_backend_nifsock_rd).
-behaviour(bench_backend).
-define(SOCK, nifsock).
-define(READINESS, driver).
-include("bench_socket_like.hrl").
