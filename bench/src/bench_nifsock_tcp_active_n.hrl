%% Adapter body of the `nifsock_tcp' {active, N} backends (N = 100, re-armed
%% on nifsock_passive): nifsock_tcp's module and message tags over
%% bench_active_n.hrl. The including module may define ?READINESS first.
-define(TCP, nifsock_tcp).
-define(SETOPTS, nifsock_tcp:setopts).
-define(DATA, nifsock).
-define(CLOSED, nifsock_closed).
-define(ERROR, nifsock_error).
-define(PASSIVE, nifsock_passive).
-include("bench_active_n.hrl").
