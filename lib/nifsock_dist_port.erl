%% @private
%% @doc The port carrier of `nifsock_dist' (the default; `{nifsock,
%% dist_carrier}' = `port' | `process'): after the handshake the connection
%% is run by a port of nifsock's own driver (`"libnifsock dist"', in the same
%% library as the NIF), as `inet_tcp_dist' hands ERTS an inet_drv port. ERTS
%% calls the port's `outputv' with the dist data and the port's
%% `driver_output' of a received packet goes straight to `erts_net_message':
%% no process is on the data path (see `native/nifsock/src/ops/dist.rs' and
%% doc/readiness-research.md, "The port carrier").
%%
%% The port is opened with the connection (`open/0', linked to the connection
%% supervisor, so either's death takes the other) and is what `dist_util'
%% gets as the controller (`f_getll') and passes to the tick function. Once
%% ERTS knows it (`erlang:setnode/3'), `attach/2' hands it the socket: the NIF
%% `dist_attach/2' parks a dup of the socket's fd (and any bytes nifsock read
%% ahead) for the port and closes the socket; the port's attach
%% `port_control' takes the fd, selects it, and delivers those bytes.
-module(nifsock_dist_port).

-export([open/0, attach/2, tick/1, setopts/2, getopts/2]).

-define(DRIVER, "libnifsock").
%% port_control operations (ops/dist.rs)
-define(OP_ATTACH, 1).
-define(OP_SETOPT, 2).
-define(OP_GETOPT, 3).

%% @doc A dist port for a new connection, or an error (the driver did not load).
-spec open() -> {ok, port()} | {error, term()}.
open() ->
    ok = hold_driver(),
    case nifsock_readiness:load_driver() =:= ok orelse loaded() of
        true ->
            try open_port({spawn_driver, ?DRIVER ++ " dist"}, [binary]) of
                Port -> {ok, Port}
            catch
                error:Reason -> {error, Reason}
            end;
        false ->
            {error, no_driver}
    end.

%% erl_ddll unloads a driver loaded with load_driver/2 when the last process
%% that loaded it exits, and kills its ports then (reason `driver_unloaded').
%% On the driver readiness path nifsock_readiness holds it for the node's
%% life; a connection's own load (the process that opens the port) is not
%% enough on the others: the last connection's process exiting would kill
%% its port before the link's reason (`net_tick_timeout', ...) reaches it,
%% and that reason would be the nodedown's. So a holder process, started
%% by the first connection and never linked, keeps the driver loaded for
%% the node (it registers only once loaded: a second holder that loses the
%% name exits, the first already holds the driver).
-define(HOLDER, nifsock_dist_driver).

hold_driver() ->
    case whereis(?HOLDER) of
        undefined ->
            Caller = self(),
            {Pid, Ref} = spawn_monitor(fun() -> holder(Caller) end),
            receive
                {Pid, held} -> erlang:demonitor(Ref, [flush]), ok;
                {'DOWN', Ref, process, Pid, _} -> ok
            end;
        _ ->
            ok
    end.

holder(Caller) ->
    Held = nifsock_readiness:load_driver() =:= ok andalso
               (catch register(?HOLDER, self())) =:= true,
    Caller ! {self(), held},
    Held andalso holder_loop().

holder_loop() ->
    receive _ -> holder_loop() end.

%% After an upgrade the code path's priv dir is the new copy's, but the
%% driver stays the one loaded from the old file (erl_ddll refuses the same
%% name from another path): its ports work the same (the park table is
%% shared by the copies).
loaded() ->
    {ok, Drivers} = erl_ddll:loaded_drivers(),
    lists:member(?DRIVER, Drivers).

%% @doc Hands socket `S' (owned by the caller) to `Port', after `setnode'.
-spec attach(port(), nifsock_tcp:socket()) -> ok.
attach(Port, S) ->
    case nifsock_nif:dist_attach(S, Port) of
        ok ->
            case control(Port, ?OP_ATTACH, <<>>) of
                {ok, _} -> ok;
                {error, Reason} -> exit({dist_attach, Reason})
            end;
        {error, Reason} ->
            exit({dist_attach, Reason})
    end.

%% @doc dist_util's `mf_tick': an empty packet (as inet_tcp_dist's tick).
-spec tick(port()) -> ok | {error, closed}.
tick(Port) ->
    try erlang:port_command(Port, <<>>, [force]) of
        true -> ok
    catch
        error:_ ->
            self() ! {tcp_closed, Port},
            {error, closed}
    end.

%% @doc net_kernel:setopts(Node, Opts) on a live connection: the socket
%% options the port can set (nodelay, keepalive, sndbuf, recbuf, priority,
%% tos); framing and delivery options are refused, others are `einval'.
-spec setopts(port(), [term()]) -> ok | {error, term()}.
setopts(Port, Opts) ->
    case [Opt || Opt <- Opts, lists:member(name(Opt), [active, deliver, packet, mode,
                                                       binary, list])] of
        [] -> set_each(Port, Opts);
        Bad -> {error, {badopts, Bad}}
    end.

set_each(_Port, []) ->
    ok;
set_each(Port, [{Name, Value} | Rest]) ->
    case {sockopt(Name), encode(Name, Value)} of
        {{Level, Opt}, {ok, Int}} ->
            case control(Port, ?OP_SETOPT, <<Level:32, Opt:32, Int:32/signed>>) of
                {ok, _} -> set_each(Port, Rest);
                {error, _} = E -> E
            end;
        _ ->
            {error, einval}
    end;
set_each(_Port, [_ | _]) ->
    {error, einval}.

%% @doc net_kernel:getopts(Node, Names) on a live connection.
-spec getopts(port(), [atom()]) -> {ok, [{atom(), term()}]} | {error, term()}.
getopts(Port, Names) ->
    get_each(Port, Names, []).

get_each(_Port, [], Acc) ->
    {ok, lists:reverse(Acc)};
get_each(Port, [Name | Rest], Acc) ->
    case sockopt(Name) of
        {Level, Opt} ->
            case control(Port, ?OP_GETOPT, <<Level:32, Opt:32, 0:32>>) of
                {ok, <<Int:32/signed>>} -> get_each(Port, Rest, [{Name, decode(Name, Int)} | Acc]);
                {ok, _} -> {error, einval};
                {error, _} = E -> E
            end;
        undefined ->
            {error, einval}
    end.

%% Linux's levels and names (the port carrier's driver is Linux's).
sockopt(nodelay) -> {6, 1};        % IPPROTO_TCP, TCP_NODELAY
sockopt(keepalive) -> {1, 9};      % SOL_SOCKET, SO_KEEPALIVE
sockopt(sndbuf) -> {1, 7};         % SO_SNDBUF
sockopt(recbuf) -> {1, 8};         % SO_RCVBUF
sockopt(priority) -> {1, 12};      % SO_PRIORITY
sockopt(tos) -> {0, 1};            % IPPROTO_IP, IP_TOS
sockopt(_) -> undefined.

encode(Name, B) when Name =:= nodelay; Name =:= keepalive ->
    case B of
        true -> {ok, 1};
        false -> {ok, 0};
        _ -> error
    end;
encode(_Name, N) when is_integer(N), N >= 0, N < 16#80000000 -> {ok, N};
encode(_Name, _) -> error.

decode(Name, I) when Name =:= nodelay; Name =:= keepalive -> I =/= 0;
decode(_Name, I) -> I.

name({Name, _}) -> Name;
name(Name) -> Name.

control(Port, Op, Data) ->
    try iolist_to_binary(erlang:port_control(Port, Op, Data)) of
        <<0, Reply/binary>> -> {ok, Reply};
        <<1, Name/binary>> -> {error, binary_to_atom(Name)};
        _ -> {error, einval}
    catch
        error:_ -> {error, closed}
    end.
