%% @doc bench_backend adapter for `nifsock_tcp' in passive mode ({active, false}).
-module(bench_backend_nifsock_tcp).
-behaviour(bench_backend).
-define(TCP, nifsock_tcp).
-include("bench_gen_tcp_like.hrl").
