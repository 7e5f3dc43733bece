%% @doc bench_backend adapter for `nifsock' (mirrors OTP's socket module), on the
%% default readiness path.
-module(bench_backend_nifsock).
-behaviour(bench_backend).
-define(SOCK, nifsock).
-include("bench_socket_like.hrl").
