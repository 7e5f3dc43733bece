%% @doc bench_backend adapter for `ssl' over `gen_tcp' (the TLS baseline).
-module(bench_backend_gen_tcp_ssl).
-behaviour(bench_backend).
-define(TCP, gen_tcp).
-define(CB_OPTS, []).
-include("bench_ssl_like.hrl").
