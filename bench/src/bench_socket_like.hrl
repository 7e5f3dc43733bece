%% Adapter body shared by every backend shaped like OTP's `socket'
%% module (socket itself, nifsock). The including module defines
%% ?SOCK as the module to call.

-export([available/0, listen/2, accept/2, controlling_process/2, recv/3,
         send/2, close/1, connect/3, read_size/2]).

available() ->
    ok = readiness(),
    case code:ensure_loaded(?SOCK) of
        {module, ?SOCK} ->
            %% a throwaway socket proves the NIF (if any) is loaded
            case ?SOCK:open(inet, stream, tcp) of
                {ok, S} -> _ = ?SOCK:close(S), ok;
                Err -> {error, {open, Err}}
            end;
        Err -> {error, Err}
    end.

-include("bench_readiness.hrl").

listen(Port, Opts) ->
    {ok, L} = ?SOCK:open(inet, stream, tcp),
    ok = ?SOCK:setopt(L, {socket, reuseaddr}, true),
    case ?SOCK:bind(L, #{family => inet, addr => {127, 0, 0, 1}, port => Port}) of
        ok ->
            ok = ?SOCK:listen(L, maps:get(backlog, Opts, 1024)),
            {ok, #{port := P}} = ?SOCK:sockname(L),
            {ok, L, P};
        {error, _} = E ->
            _ = ?SOCK:close(L),
            E
    end.

accept(L, Timeout) -> ?SOCK:accept(L, Timeout).

controlling_process(S, Pid) -> ?SOCK:setopt(S, {otp, controlling_process}, Pid).

recv(S, Len, Timeout) -> ?SOCK:recv(S, Len, Timeout).

send(S, Data) -> ?SOCK:send(S, Data).

close(S) -> ?SOCK:close(S).

read_size(S, Bytes) -> ?SOCK:setopt(S, {otp, rcvbuf}, Bytes).

connect(Port, Opts, Timeout) ->
    {ok, S} = ?SOCK:open(inet, stream, tcp),
    case maps:get(linger0, Opts, false) of
        true -> ok = ?SOCK:setopt(S, {socket, linger}, #{onoff => true, linger => 0});
        false -> ok
    end,
    case maps:get(nodelay, Opts, false) of
        true -> ok = ?SOCK:setopt(S, {tcp, nodelay}, true);
        false -> ok
    end,
    case ?SOCK:connect(S, #{family => inet, addr => {127, 0, 0, 1}, port => Port}, Timeout) of
        ok -> {ok, S};
        {error, _} = E -> _ = ?SOCK:close(S), E
    end.
