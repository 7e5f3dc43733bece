%% @doc bench_backend adapter for `ssl' over `nifsock_tcp' (ssl's cb_info).
-module(bench_backend_nifsock_tcp_ssl).
-behaviour(bench_backend).
-define(TCP, nifsock_tcp).
-define(CB_OPTS, [{cb_info, {nifsock_tcp, nifsock, nifsock_closed, nifsock_error,
                             nifsock_passive}}]).
-include("bench_ssl_like.hrl").
