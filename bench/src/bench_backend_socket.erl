%% @doc bench_backend adapter for OTP's `socket' module.
-module(bench_backend_socket).
-behaviour(bench_backend).
-define(SOCK, socket).
-include("bench_socket_like.hrl").
