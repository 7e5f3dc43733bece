%% @doc The Erlang distribution over nifsock sockets: `erl -proto_dist nifsock'.
%%
%% A distribution carrier module in the sense of ERTS's "How to implement an
%% alternative carrier for the Erlang distribution": net_kernel calls
%% `listen/2', `accept/1', `accept_connection/5', `setup/5', `select/1',
%% `address/0', `close/1' and `is_node_name/1'; the handshake itself is
%% `dist_util''s. Nodes register with epmd exactly as `inet_tcp_dist' does, and
%% the bytes on the wire are the same (`{packet, 2}' during the handshake,
%% 4-byte length headers after), so a nifsock node and an `inet_tcp_dist' node
%% connect to each other.
%%
%% After the handshake a connection is run one of two ways, chosen by the
%% application env key `{nifsock, dist_carrier}' (`-nifsock dist_carrier
%% process' on the command line):
%% <ul>
%% <li>`port' (the default): by a port of nifsock's own driver, as
%%     `inet_tcp_dist' hands ERTS an inet_drv port: ERTS writes the dist data
%%     through the port's `outputv' and the port's reads go straight to ERTS,
%%     no process on the data path (`nifsock_dist_port'). The socket is handed
%%     to the port once the handshake is done, and is closed (every nifsock
%%     call on it then says `{error, closed}'). The connection supervisor
%%     (the process running the `dist_util' handshake and then its tick loop)
%%     is linked to the port. If the port cannot be opened (the driver does
%%     not load), the connection uses the process carrier.</li>
%% <li>`process': by three processes:
%% <ul>
%% <li>the connection supervisor: as above. It owns the socket during the
%%     handshake;</li>
%% <li>the controller (`nifsock_dist_conn', registered with `erlang:setnode/3'):
%%     the output side, and the only writer of the socket, ticks included;</li>
%% <li>the input handler (`nifsock_dist_conn'): the socket's owner after the
%%     handshake, in active mode (the data comes to it from nifsock's readiness
%%     drain), framing, and `erlang:dist_ctrl_put_data/2'.</li>
%% </ul>
%% The three are linked: any one dying takes the connection down, and the
%% socket's owner with it, so the socket is closed however the connection
%% goes away.</li>
%% </ul>
%%
%% `nifsock6_dist' is the same carrier over IPv6 (`-proto_dist nifsock6').
-module(nifsock_dist).

%% The carrier API (net_kernel)
-export([listen/1, listen/2, accept/1, accept_connection/5, setup/5, close/1,
         select/1, address/0, is_node_name/1]).
%% Optional: net_kernel:setopts/2 and getopts/2 on the listen socket
-export([setopts/2, getopts/2]).
%% The same, for an address family (nifsock6_dist)
-export([gen_listen/3, gen_accept/2, gen_accept_connection/6, gen_setup/6,
         gen_select/2, gen_address/1]).
%% Spawned
-export([accept_loop/3, do_accept/7, do_setup/7]).
%% hs_data callbacks (external funs: a connection holds no old code)
-export([hs_send/2, hs_recv/3, hs_pre_nodeup/1, hs_post_nodeup/1, hs_getll/1,
         hs_handshake_complete/3, conn_setopts/2, conn_getopts/2]).
%% The carrier a new connection gets
-export([carrier/0]).

-include_lib("kernel/include/net_address.hrl").
-include_lib("kernel/include/dist.hrl").
-include_lib("kernel/include/dist_util.hrl").

-type family() :: inet | inet6.
-type socket() :: nifsock_tcp:socket().

%% The connection supervisor keeps its socket here; the hs_data callbacks run
%% in that process.
-define(SOCKET_KEY, '$nifsock_dist_socket').

%%% ------------------------------------------------------------------
%%% Selecting this carrier, addresses

%% @doc Whether this carrier can reach `Node' (its host resolves for inet).
-spec select(node()) -> boolean().
select(Node) ->
    gen_select(inet, Node).

%% @private
-spec gen_select(family(), node()) -> boolean().
gen_select(Family, Node) ->
    case dist_util:split_node(Node) of
        {node, Name, Host} ->
            case epmd_call(net_kernel:epmd_module(), address_please, [Name, Host, Family]) of
                {ok, _Addr} -> true;
                {ok, _Addr, _Port, _Creation} -> true;
                _ -> false
            end;
        _ ->
            false
    end.

%% @doc The carrier's address record, without a port.
-spec address() -> #net_address{}.
address() ->
    gen_address(inet).

%% @private
-spec gen_address(family()) -> #net_address{}.
gen_address(Family) ->
    {ok, Host} = inet:gethostname(),
    #net_address{host = Host, protocol = tcp, family = Family}.

%% @doc Whether `Node' looks like `Name@Host'.
-spec is_node_name(term()) -> boolean().
is_node_name(Node) when is_atom(Node) ->
    case split(atom_to_list(Node), $@) of
        [_, _Host] -> true;
        _ -> false
    end;
is_node_name(_) ->
    false.

%%% ------------------------------------------------------------------
%%% Listening

%% @doc Listens and registers `Name' with epmd (on this host).
-spec listen(atom()) -> {ok, {socket(), #net_address{}, pos_integer()}} | {error, term()}.
listen(Name) ->
    {ok, Host} = inet:gethostname(),
    listen(Name, Host).

%% @doc Listens and registers `Name' with epmd.
-spec listen(atom(), string()) ->
          {ok, {socket(), #net_address{}, pos_integer()}} | {error, term()}.
listen(Name, Host) ->
    gen_listen(inet, Name, Host).

%% @private
-spec gen_listen(family(), atom(), string()) ->
          {ok, {socket(), #net_address{}, pos_integer()}} | {error, term()}.
gen_listen(Family, Name, Host) ->
    Epmd = net_kernel:epmd_module(),
    case listen_socket(Epmd, Family, Name, Host) of
        {ok, L} ->
            {ok, {_IP, Port} = Addr} = nifsock_tcp:sockname(L),
            case Epmd:register_node(Name, Port, driver(Family)) of
                {ok, Creation} ->
                    {ok, {L, (gen_address(Family))#net_address{address = Addr}, Creation}};
                Error ->
                    _ = nifsock_tcp:close(L),
                    Error
            end;
        Error ->
            Error
    end.

listen_socket(Epmd, Family, Name, Host) ->
    {First, Last} =
        case epmd_call(Epmd, listen_port_please, [Name, Host]) of
            {ok, 0} -> port_range();
            {ok, Port} -> {Port, Port}
        end,
    listen_first_free(First, Last, listen_options(Family)).

port_range() ->
    case application:get_env(kernel, inet_dist_listen_min) of
        {ok, Min} when is_integer(Min) ->
            case application:get_env(kernel, inet_dist_listen_max) of
                {ok, Max} when is_integer(Max) -> {Min, Max};
                _ -> {Min, Min}
            end;
        _ ->
            {0, 0}
    end.

listen_first_free(Port, Last, _Opts) when Port > Last ->
    {error, eaddrinuse};
listen_first_free(Port, Last, Opts) ->
    case safe(fun() -> nifsock_tcp:listen(Port, Opts) end) of
        {error, eaddrinuse} -> listen_first_free(Port + 1, Last, Opts);
        Other -> Other
    end.

%% inet_dist_listen_options first (net_kernel's defaults only where they say
%% nothing), then what the carrier needs: passive, {packet, 2}, list mode (the
%% handshake reads strings), the interface of inet_dist_use_interface.
listen_options(Family) ->
    User = env_list(inet_dist_listen_options),
    Defaults = [Opt || {K, _} = Opt <- [{reuseaddr, true}, {backlog, 128}],
                       not lists:keymember(K, 1, User)],
    Interface = case application:get_env(kernel, inet_dist_use_interface) of
                    {ok, IP} -> [{ip, IP}];
                    undefined -> []
                end,
    Defaults ++ without_forced(User) ++ forced_options(Family) ++ Interface.

connect_options(Family) ->
    without_forced(env_list(inet_dist_connect_options)) ++ forced_options(Family).

forced_options(Family) ->
    [Family, list, {active, false}, {packet, 2}, nodelay()].

without_forced(Opts) ->
    [Opt || Opt <- Opts,
            not lists:member(option_name(Opt), [active, packet, mode, binary, list, inet,
                                                inet6, local, deliver])].

option_name({Name, _}) -> Name;
option_name(Name) -> Name.

env_list(Key) ->
    case application:get_env(kernel, Key) of
        {ok, L} when is_list(L) -> L;
        _ -> []
    end.

%% dist_nodelay (default true), as inet_tcp_dist.
nodelay() ->
    {nodelay, application:get_env(kernel, dist_nodelay, true) =/= false}.

%% @doc Closes the listen socket.
-spec close(socket()) -> ok.
close(L) ->
    nifsock_tcp:close(L).

%% @doc net_kernel:setopts(new, Opts): options for the listen socket (and so
%% for the connections it accepts). Framing and delivery options are refused.
-spec setopts(socket(), [nifsock_tcp:option()]) -> ok | {error, term()}.
setopts(S, Opts) ->
    case [Opt || Opt <- Opts,
                 lists:member(option_name(Opt), [active, deliver, packet, mode, binary, list])] of
        [] -> nifsock_tcp:setopts(S, Opts);
        Bad -> {error, {badopts, Bad}}
    end.

%% @doc Reads options of a listen socket.
-spec getopts(socket(), [atom()]) -> {ok, [{atom(), term()}]} | {error, term()}.
getopts(S, Opts) ->
    nifsock_tcp:getopts(S, Opts).

%%% ------------------------------------------------------------------
%%% Accepting

%% @doc Starts the acceptor (linked to net_kernel, which restarts it if it dies).
-spec accept(socket()) -> pid().
accept(L) ->
    gen_accept(inet, L).

%% @private
-spec gen_accept(family(), socket()) -> pid().
gen_accept(Family, L) ->
    spawn_opt(?MODULE, accept_loop, [Family, self(), L], [link, {priority, max}]).

%% @private
-spec accept_loop(family(), pid(), socket()) -> no_return().
accept_loop(Family, Kernel, L) ->
    case nifsock_tcp:accept(L) of
        {ok, S} ->
            Kernel ! {accept, self(), S, Family, tcp},
            hand_over(Kernel, S),
            accept_loop(Family, Kernel, L);
        {error, Reason} ->
            exit({accept, Reason})
    end.

%% net_kernel answers with the handshake process, which becomes the owner.
hand_over(Kernel, S) ->
    receive
        {Kernel, controller, Pid} ->
            case nifsock_tcp:controlling_process(S, Pid) of
                ok -> ok;
                {error, _} -> nifsock_tcp:close(S)
            end,
            Pid ! {self(), controller},
            ok;
        {Kernel, unsupported_protocol} ->
            _ = nifsock_tcp:close(S),
            exit(unsupported_protocol)
    end.

%% @doc Starts the handshake of an accepted connection.
-spec accept_connection(pid(), socket(), node(), [node()], non_neg_integer()) -> pid().
accept_connection(AcceptPid, S, MyNode, Allowed, SetupTime) ->
    gen_accept_connection(inet, AcceptPid, S, MyNode, Allowed, SetupTime).

%% @private
-spec gen_accept_connection(family(), pid(), socket(), node(), [node()], non_neg_integer()) ->
          pid().
gen_accept_connection(Family, AcceptPid, S, MyNode, Allowed, SetupTime) ->
    spawn_opt(?MODULE, do_accept, [Family, self(), AcceptPid, S, MyNode, Allowed, SetupTime],
              dist_util:net_ticker_spawn_options()).

%% @private
-spec do_accept(family(), pid(), pid(), socket(), node(), [node()], non_neg_integer()) ->
          no_return().
do_accept(Family, Kernel, AcceptPid, S, MyNode, Allowed, SetupTime) ->
    receive
        {AcceptPid, controller} ->
            Timer = dist_util:start_timer(SetupTime),
            case check_ip(Family, S) of
                true ->
                    Ctrl = start_connection(S),
                    HSData = (hs_data(Ctrl))#hs_data{
                               kernel_pid = Kernel,
                               this_node = MyNode,
                               timer = Timer,
                               allowed = Allowed,
                               f_address = fun(_, Node) -> remote_address(Family, S, Node) end},
                    dist_util:handshake_other_started(HSData);
                {false, IP} ->
                    error_logger:error_msg("** Connection attempt from disallowed IP ~w ** ~n",
                                           [IP]),
                    ?shutdown(no_node)
            end
    end.

remote_address(Family, S, Node) ->
    case nifsock_tcp:peername(S) of
        {ok, Address} ->
            case split(atom_to_list(Node), $@) of
                [_, Host] ->
                    #net_address{address = Address, host = Host, protocol = tcp, family = Family};
                _ ->
                    ?shutdown(no_node)
            end;
        {error, _} ->
            ?shutdown(no_node)
    end.

%% With kernel's check_ip set, only peers on one of our own subnets get in.
check_ip(Family, S) ->
    case application:get_env(check_ip) of
        {ok, true} ->
            case {nifsock_tcp:peername(S), inet:getifaddrs()} of
                {{ok, {PeerIP, _}}, {ok, IFs}} ->
                    Nets = [{A, M} || {_, Props} <- IFs, {A, M} <- addr_masks(Props)],
                    Driver = driver(Family),
                    case [A || {A, M} <- Nets, tuple_size(A) =:= tuple_size(PeerIP),
                               Driver:mask(M, A) =:= Driver:mask(M, PeerIP)] of
                        [] -> {false, PeerIP};
                        _ -> true
                    end;
                _ ->
                    ?shutdown(no_node)
            end;
        _ ->
            true
    end.

addr_masks([{addr, A}, {netmask, M} | Rest]) -> [{A, M} | addr_masks(Rest)];
addr_masks([_ | Rest]) -> addr_masks(Rest);
addr_masks([]) -> [].

%%% ------------------------------------------------------------------
%%% Connecting

%% @doc Starts connecting to `Node' and the handshake.
-spec setup(node(), normal | hidden, node(), shortnames | longnames, non_neg_integer()) -> pid().
setup(Node, Type, MyNode, LongOrShortNames, SetupTime) ->
    gen_setup(inet, Node, Type, MyNode, LongOrShortNames, SetupTime).

%% @private
-spec gen_setup(family(), node(), normal | hidden, node(), shortnames | longnames,
                non_neg_integer()) -> pid().
gen_setup(Family, Node, Type, MyNode, LongOrShortNames, SetupTime) ->
    spawn_opt(?MODULE, do_setup,
              [Family, self(), Node, Type, MyNode, LongOrShortNames, SetupTime],
              dist_util:net_ticker_spawn_options()).

%% @private
-spec do_setup(family(), pid(), node(), normal | hidden, node(), shortnames | longnames,
               non_neg_integer()) -> no_return().
do_setup(Family, Kernel, Node, Type, MyNode, LongOrShortNames, SetupTime) ->
    [Name, Host] = split_node_name(Family, Node, LongOrShortNames),
    Epmd = net_kernel:epmd_module(),
    Timer = dist_util:start_timer(SetupTime),
    {IP, Port, Version} =
        case epmd_call(Epmd, address_please, [Name, Host, Family]) of
            {ok, IP0, Port0, Version0} ->
                {IP0, Port0, Version0};
            {ok, IP0} ->
                case Epmd:port_please(Name, IP0) of
                    {port, Port0, Version0} -> {IP0, Port0, Version0};
                    _ -> ?shutdown(Node)
                end;
            _ ->
                ?shutdown(Node)
        end,
    dist_util:reset_timer(Timer),
    case safe(fun() -> nifsock_tcp:connect(IP, Port, connect_options(Family)) end) of
        {ok, S} ->
            Ctrl = start_connection(S),
            Address = #net_address{address = {IP, Port}, host = Host, protocol = tcp,
                                   family = Family},
            HSData = (hs_data(Ctrl))#hs_data{
                       kernel_pid = Kernel,
                       other_node = Node,
                       this_node = MyNode,
                       timer = Timer,
                       other_version = Version,
                       request_type = Type,
                       f_address = fun(_, _) -> Address end},
            dist_util:handshake_we_started(HSData);
        _ ->
            %% The node went away since epmd told us its port.
            ?shutdown(Node)
    end.

%% [Name, Host], or the setup ends (as inet_tcp_dist: a short name for a
%% long-names node, or a dotted one for a short-names node, is refused).
split_node_name(Family, Node, LongOrShortNames) ->
    case split(atom_to_list(Node), $@) of
        [Name, Host] when Host =/= [] ->
            case {split(Host, $.), LongOrShortNames} of
                {[_], longnames} ->
                    case (driver(Family)):parse_address(Host) of
                        {ok, _} ->
                            [Name, Host];
                        _ ->
                            error_logger:error_msg("** System running to use fully qualified "
                                                   "hostnames **~n** Hostname ~ts is illegal **~n",
                                                   [Host]),
                            ?shutdown(Node)
                    end;
                {[_, _ | _], shortnames} ->
                    error_logger:error_msg("** System NOT running to use fully qualified "
                                           "hostnames **~n** Hostname ~ts is illegal **~n",
                                           [Host]),
                    ?shutdown(Node);
                _ ->
                    [Name, Host]
            end;
        _ ->
            error_logger:error_msg("** Nodename ~p illegal **~n", [Node]),
            ?shutdown(Node)
    end.

%%% ------------------------------------------------------------------
%%% The handshake

%% @doc The carrier of new connections: `{nifsock, dist_carrier}' (`port',
%% the default, or `process').
-spec carrier() -> port | process.
carrier() ->
    %% Loading the application reads `-nifsock dist_carrier process' from the
    %% command line and the release's sys.config.
    _ = application:load(nifsock),
    case application:get_env(nifsock, dist_carrier) of
        {ok, process} -> process;
        _ -> port
    end.

%% The controller, linked to the calling process (the connection supervisor,
%% which owns the socket and runs the handshake over it): a dist port (the
%% port carrier) or a nifsock_dist_conn process.
start_connection(S) ->
    put(?SOCKET_KEY, S),
    case carrier() =:= port andalso nifsock_dist_port:open() of
        {ok, Port} -> Port;
        _ -> nifsock_dist_conn:start_link(S)
    end.

hs_data(Ctrl) when is_port(Ctrl) ->
    (hs_data_common(Ctrl))#hs_data{mf_tick = fun nifsock_dist_port:tick/1};
hs_data(Ctrl) ->
    (hs_data_common(Ctrl))#hs_data{mf_tick = fun nifsock_dist_conn:tick/1}.

hs_data_common(Ctrl) ->
    #hs_data{socket = Ctrl,
             this_flags = 0,
             f_send = fun ?MODULE:hs_send/2,
             f_recv = fun ?MODULE:hs_recv/3,
             f_setopts_pre_nodeup = fun ?MODULE:hs_pre_nodeup/1,
             f_setopts_post_nodeup = fun ?MODULE:hs_post_nodeup/1,
             f_getll = fun ?MODULE:hs_getll/1,
             f_handshake_complete = fun ?MODULE:hs_handshake_complete/3,
             %% mf_getstat undefined: dist_util uses erlang:dist_get_stat/1,
             %% which ERTS keeps for a port controller as for a process.
             mf_setopts = fun ?MODULE:conn_setopts/2,
             mf_getopts = fun ?MODULE:conn_getopts/2}.

socket() ->
    get(?SOCKET_KEY).

%% @private
-spec hs_send(pid(), iodata()) -> ok | {error, term()}.
hs_send(_Ctrl, Data) ->
    nifsock_tcp:send(socket(), Data).

%% @private
-spec hs_recv(pid(), non_neg_integer(), timeout()) -> {ok, string()} | {error, term()}.
hs_recv(_Ctrl, Length, Timeout) ->
    nifsock_tcp:recv(socket(), Length, Timeout).

%% @private
%% After the handshake the input handler does its own framing over raw binary
%% active delivery (see nifsock_dist_conn); bytes already read stay queued in
%% nifsock and are its first message.
-spec hs_pre_nodeup(pid()) -> ok | {error, term()}.
hs_pre_nodeup(_Ctrl) ->
    nifsock_tcp:setopts(socket(), [{packet, raw}, binary, nodelay()]).

%% @private
-spec hs_post_nodeup(pid()) -> ok.
hs_post_nodeup(_Ctrl) ->
    ok.

%% @private
-spec hs_getll(pid() | port()) -> {ok, pid() | port()}.
hs_getll(Ctrl) ->
    {ok, Ctrl}.

%% @private
%% After setnode: the port carrier hands the socket to the port.
-spec hs_handshake_complete(pid() | port(), node(), term()) -> ok.
hs_handshake_complete(Port, _Node, _DHandle) when is_port(Port) ->
    nifsock_dist_port:attach(Port, socket());
hs_handshake_complete(Ctrl, _Node, DHandle) ->
    nifsock_dist_conn:handshake_complete(Ctrl, socket(), DHandle).

%% @private
%% net_kernel:setopts(Node, Opts) on a live connection.
-spec conn_setopts(pid() | port(), [nifsock_tcp:option()]) -> ok | {error, term()}.
conn_setopts(Port, Opts) when is_port(Port) ->
    nifsock_dist_port:setopts(Port, Opts);
conn_setopts(_Ctrl, Opts) ->
    setopts(socket(), Opts).

%% @private
-spec conn_getopts(pid() | port(), [atom()]) -> {ok, [{atom(), term()}]} | {error, term()}.
conn_getopts(Port, Opts) when is_port(Port) ->
    nifsock_dist_port:getopts(Port, Opts);
conn_getopts(_Ctrl, Opts) ->
    getopts(socket(), Opts).

%%% ------------------------------------------------------------------
%%% Helpers

driver(inet) -> inet_tcp;
driver(inet6) -> inet6_tcp.

%% epmd modules needn't implement every function: erl_epmd's stands in.
epmd_call(Mod, Fun, Args) ->
    case erlang:function_exported(Mod, Fun, length(Args)) of
        true -> apply(Mod, Fun, Args);
        false -> apply(erl_epmd, Fun, Args)
    end.

%% nifsock_tcp raises on options it doesn't know: an error, not a crash.
safe(Fun) ->
    try Fun()
    catch error:{invalid_option, Opt} -> {error, {invalid_option, Opt}}
    end.

split(String, Sep) ->
    string:split(String, [Sep], all).
