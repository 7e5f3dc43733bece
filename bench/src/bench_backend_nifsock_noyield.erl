%% @doc bench_backend adapter for `nifsock' with the yields of blocking
%% recv(S, 0) calls off (application env `recv_yield' = false): every recv
%% that finds the queue drained by its last read waits at once.
-module(bench_backend_nifsock_noyield).
-behaviour(bench_backend).
-define(SOCK, nifsock).
-define(RECV_YIELD, false).
-include("bench_socket_like.hrl").
