%% Adapter body shared by every backend shaped like `gen_tcp' in
%% passive mode (gen_tcp itself, later nifsock_tcp). The including
%% module defines ?TCP as the module to call.

-export([available/0, listen/2, accept/2, controlling_process/2, recv/3,
         send/2, close/1, connect/3, read_size/2]).

available() ->
    ok = readiness(),
    case code:ensure_loaded(?TCP) of
        {module, ?TCP} -> ok;
        Err -> {error, Err}
    end.

-include("bench_readiness.hrl").

listen(Port, Opts) ->
    case ?TCP:listen(Port, [binary, {active, false}, {packet, raw},
                            {reuseaddr, true}, {ip, {127, 0, 0, 1}},
                            {backlog, maps:get(backlog, Opts, 1024)}]) of
        {ok, L} ->
            {ok, P} = local_port(L),
            {ok, L, P};
        E -> E
    end.

%% gen_tcp's listen sockets answer inet:port/1; a gen_tcp-shaped module of
%% its own may export port/1 or sockname/1 instead.
local_port(L) ->
    _ = code:ensure_loaded(?TCP),
    case {erlang:function_exported(?TCP, port, 1), erlang:function_exported(?TCP, sockname, 1)} of
        {true, _} -> ?TCP:port(L);
        {false, true} ->
            case ?TCP:sockname(L) of
                {ok, {_Addr, P}} -> {ok, P};
                {ok, #{port := P}} -> {ok, P};
                E -> E
            end;
        {false, false} -> inet:port(L)
    end.

accept(L, Timeout) -> ?TCP:accept(L, Timeout).

controlling_process(S, Pid) -> ?TCP:controlling_process(S, Pid).

-ifndef(ACTIVE_ONCE).
recv(S, Len, Timeout) -> ?TCP:recv(S, Len, Timeout).
-endif.

send(S, Data) -> ?TCP:send(S, Data).

close(S) -> ?TCP:close(S).

%% gen_tcp's sockets take inet:setopts/2; a gen_tcp-shaped module of its own
%% exports setopts/2.
read_size(S, Bytes) ->
    _ = code:ensure_loaded(?TCP),
    case erlang:function_exported(?TCP, setopts, 2) of
        true -> ?TCP:setopts(S, [{buffer, Bytes}]);
        false -> inet:setopts(S, [{buffer, Bytes}])
    end.

connect(Port, Opts, Timeout) ->
    Linger = case maps:get(linger0, Opts, false) of
                 true -> [{linger, {true, 0}}];
                 false -> []
             end,
    ?TCP:connect({127, 0, 0, 1}, Port,
                 [binary, {active, false}, {packet, raw},
                  {nodelay, maps:get(nodelay, Opts, false)} | Linger], Timeout).
