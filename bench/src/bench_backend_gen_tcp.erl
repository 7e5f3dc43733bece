%% @doc bench_backend adapter for `gen_tcp' in passive mode ({active, false}).
-module(bench_backend_gen_tcp).
-behaviour(bench_backend).
-define(TCP, gen_tcp).
-include("bench_gen_tcp_like.hrl").
