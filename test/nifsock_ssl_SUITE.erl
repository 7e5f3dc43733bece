%%% Common Test suite for TLS over nifsock: OTP's `ssl' running over
%%% `nifsock_tcp' through its `cb_info' option, and `nifsock_ranch_ssl', the
%%% Ranch 2.x TLS transport.
%%%
%%% The connection cases run in four groups, so that the reference proves each
%%% test: `gen_tcp' (both ends plain ssl over gen_tcp), `nifsock_server' (the
%%% server accepts with nifsock_tcp and upgrades with ssl:handshake/3, the
%%% client is plain ssl), `nifsock_client' (ssl:connect with cb_info against a
%%% plain ssl server) and `nifsock_both'. Each case makes one connected pair
%%% owned by the test process (the server's handshake runs in a helper that
%%% hands the sslsocket over with ssl:controlling_process/2).
%%%
%%% The `ranch' group drives nifsock_ranch_ssl's callbacks the way Ranch 2.1
%%% and Cowboy call them (acceptor -> connection supervisor -> connection
%%% process, ranch:handshake/1's result handling, {active, N} re-armed on
%%% ssl_passive, sendfile, shutdown), against plain-ssl and nifsock clients.
%%%
%%% Certificates are made at run time with public_key:pkix_test_data/1.
%%% All traffic is on loopback.
-module(nifsock_ssl_SUITE).

-include_lib("common_test/include/ct.hrl").

-export([all/0, groups/0, suite/0, init_per_suite/1, end_per_suite/1,
         init_per_group/2, end_per_group/2, init_per_testcase/2, end_per_testcase/2]).

-export([ssl_echo_passive/1,
         ssl_recv_length/1,
         ssl_active_true/1,
         ssl_active_once/1,
         ssl_active_n_passive/1,
         ssl_close_by_client/1,
         ssl_close_by_server/1,
         ssl_close_active_closed/1,
         ssl_owner_exit_closes/1,
         ssl_transfer_1mib_both_ways/1,
         ssl_transfer_1mib_concurrent/1,
         ssl_alpn/1,
         ssl_tls12/1,
         ssl_packet_4/1,
         ssl_peername_sockname/1,
         ssl_controlling_process/1,
         ssl_upgrade_connected_socket/1,
         ssl_recv_timeout/1,
         ssl_getstat/1,
         ssl_socket_options/1]).

-export([ssl_ranch_exports_transport_callbacks/1,
         ssl_ranch_identity/1,
         ssl_ranch_listen_no_cert/1,
         ssl_ranch_listen_options/1,
         ssl_ranch_accept_timeout_and_closed/1,
         ssl_ranch_keepalive_requests/1,
         ssl_ranch_active_n_rearm/1,
         ssl_ranch_sendfile/1,
         ssl_ranch_sendfile_fd/1,
         ssl_ranch_shutdown_write/1,
         ssl_ranch_handshake_hello_continue/1,
         ssl_ranch_handshake_cancel/1,
         ssl_ranch_handshake_failure_closes/1,
         ssl_ranch_recv_proxy_header/1,
         ssl_ranch_alpn_negotiated/1,
         ssl_ranch_names_and_stats/1,
         ssl_ranch_listen_local/1,
         ssl_ranch_tags_follow_socket/1]).

-define(T, 5000).
-define(MIB, (1024 * 1024)).
-define(TR, nifsock_ranch_ssl).
-define(CB, {cb_info, {nifsock_tcp, nifsock, nifsock_closed, nifsock_error, nifsock_passive}}).

%%--------------------------------------------------------------------
%% CT callbacks
%%--------------------------------------------------------------------

suite() -> [{timetrap, {seconds, 120}}].

all() ->
    [{group, gen_tcp}, {group, nifsock_server}, {group, nifsock_client},
     {group, nifsock_both}, {group, ranch}].

groups() ->
    Cases = [ssl_echo_passive, ssl_recv_length, ssl_active_true, ssl_active_once,
             ssl_active_n_passive, ssl_close_by_client, ssl_close_by_server,
             ssl_close_active_closed, ssl_owner_exit_closes, ssl_transfer_1mib_both_ways,
             ssl_transfer_1mib_concurrent, ssl_alpn, ssl_tls12, ssl_packet_4,
             ssl_peername_sockname, ssl_controlling_process, ssl_upgrade_connected_socket,
             ssl_recv_timeout, ssl_getstat, ssl_socket_options],
    [{gen_tcp, [], Cases},
     {nifsock_server, [], Cases},
     {nifsock_client, [], Cases},
     {nifsock_both, [], Cases},
     {ranch, [],
      [ssl_ranch_exports_transport_callbacks, ssl_ranch_identity, ssl_ranch_listen_no_cert,
       ssl_ranch_listen_options, ssl_ranch_accept_timeout_and_closed,
       ssl_ranch_keepalive_requests, ssl_ranch_active_n_rearm, ssl_ranch_sendfile,
       ssl_ranch_sendfile_fd, ssl_ranch_shutdown_write, ssl_ranch_handshake_hello_continue,
       ssl_ranch_handshake_cancel, ssl_ranch_handshake_failure_closes,
       ssl_ranch_recv_proxy_header, ssl_ranch_alpn_negotiated, ssl_ranch_names_and_stats,
       ssl_ranch_listen_local, ssl_ranch_tags_follow_socket]}].

init_per_suite(Config) ->
    {ok, _} = application:ensure_all_started(ssl),
    {ServerOpts, ClientOpts} = certs(),
    File = filename:join(?config(priv_dir, Config), "sendfile_100k.bin"),
    Content = rand:bytes(100 * 1024 + 17),
    ok = file:write_file(File, Content),
    [{server_opts, ServerOpts}, {client_opts, ClientOpts}, {file, File}, {content, Content}
     | Config].

end_per_suite(_Config) ->
    ok.

init_per_group(gen_tcp, Config) -> [{server, gen_tcp}, {client, gen_tcp} | Config];
init_per_group(nifsock_server, Config) -> [{server, nifsock}, {client, gen_tcp} | Config];
init_per_group(nifsock_client, Config) -> [{server, gen_tcp}, {client, nifsock} | Config];
init_per_group(nifsock_both, Config) -> [{server, nifsock}, {client, nifsock} | Config];
init_per_group(ranch, Config) ->
    %% The connection processes' sendfile requests read this file.
    persistent_term:put({?MODULE, file}, ?config(file, Config)),
    Config.

end_per_group(ranch, _Config) ->
    _ = persistent_term:erase({?MODULE, file}),
    ok;
end_per_group(_Group, _Config) ->
    ok.

init_per_testcase(_Case, Config) ->
    flush(),
    Config.

end_per_testcase(_Case, _Config) ->
    flush(),
    ok.

%% A root CA and a server and a client certificate under it (ECDSA P-256:
%% quick to make), signed with SHA-256: pkix_test_data/1 signs with SHA-1
%% unless told, and ssl from OTP 26 on no longer accepts SHA-1 certificate
%% signatures by default (TLS 1.3 fails with unable_to_supply_acceptable_cert).
%% The client verifies the server's chain; the host name is not checked (the
%% test certificates name no host).
certs() ->
    Key = [{key, {namedCurve, secp256r1}}, {digest, sha256}],
    Chain = #{root => Key, intermediates => [], peer => Key},
    #{server_config := S, client_config := C} =
        public_key:pkix_test_data(#{server_chain => Chain, client_chain => Chain}),
    {[{verify, verify_none} | S],
     [{verify, verify_peer}, {server_name_indication, disable} | C]}.

%%--------------------------------------------------------------------
%% Making a connected pair
%%--------------------------------------------------------------------

%% {Server, Client}: two connected sslsockets owned by the caller, passive,
%% binary. ServerExtra and ClientExtra are added ssl options.
pair(Config) ->
    pair(Config, [], []).

pair(Config, ServerExtra, ClientExtra) ->
    ServerOpts = ServerExtra ++ ?config(server_opts, Config),
    ClientOpts = ClientExtra ++ [binary, {active, false} | ?config(client_opts, Config)],
    Self = self(),
    {Port, Accept} = server(?config(server, Config), ServerOpts),
    Helper = spawn_link(fun() ->
                                {ok, S} = Accept(),
                                ok = ssl:controlling_process(S, Self),
                                Self ! {server_socket, self(), S}
                        end),
    {ok, C} = client(?config(client, Config), Port, ClientOpts),
    S = receive {server_socket, Helper, S0} -> S0 after ?T -> error(no_server_socket) end,
    {S, C}.

server(gen_tcp, Opts) ->
    {ok, L} = ssl:listen(0, [binary, {active, false}, {reuseaddr, true}, {ip, {127, 0, 0, 1}}
                             | Opts]),
    {ok, {_, Port}} = ssl:sockname(L),
    {Port, fun() ->
                   {ok, T} = ssl:transport_accept(L, ?T),
                   R = ssl:handshake(T, ?T),
                   ok = ssl:close(L),
                   R
           end};
server(nifsock, Opts) ->
    {ok, L} = nifsock_tcp:listen(0, [binary, {active, false}, {reuseaddr, true},
                                     {ip, {127, 0, 0, 1}}]),
    {ok, {_, Port}} = nifsock_tcp:sockname(L),
    {Port, fun() ->
                   {ok, T} = nifsock_tcp:accept(L, ?T),
                   ok = nifsock_tcp:close(L),
                   ssl:handshake(T, [?CB | Opts], ?T)
           end}.

client(gen_tcp, Port, Opts) ->
    ssl:connect({127, 0, 0, 1}, Port, Opts, ?T);
client(nifsock, Port, Opts) ->
    ssl:connect({127, 0, 0, 1}, Port, [?CB | Opts], ?T).

close_pair({S, C}) ->
    _ = ssl:close(C),
    _ = ssl:close(S),
    ok.

%%--------------------------------------------------------------------
%% Connection cases (run in each of the four groups)
%%--------------------------------------------------------------------

%% Passive echo both ways: what the client sends the server reads, and back.
ssl_echo_passive(Config) ->
    {S, C} = Pair = pair(Config),
    [begin
         ok = ssl:send(C, Msg),
         Msg = recv_exactly(S, byte_size(Msg)),
         ok = ssl:send(S, [Msg, <<"!">>]),
         Back = <<Msg/binary, "!">>,
         Back = recv_exactly(C, byte_size(Msg) + 1)
     end || Msg <- [<<"hello">>, rand:bytes(3000), <<"x">>, rand:bytes(40000)]],
    {ok, [{protocol, 'tlsv1.3'}]} = ssl:connection_information(S, [protocol]),
    {ok, [{protocol, 'tlsv1.3'}]} = ssl:connection_information(C, [protocol]),
    close_pair(Pair).

%% recv(S, N) returns exactly N bytes, gathered across records, and leaves the rest.
ssl_recv_length(Config) ->
    {S, C} = Pair = pair(Config),
    ok = ssl:send(C, <<"abc">>),
    ok = ssl:send(C, <<"defghij">>),
    {ok, <<"abcde">>} = ssl:recv(S, 5, ?T),
    {ok, <<"fg">>} = ssl:recv(S, 2, ?T),
    {ok, <<"hij">>} = ssl:recv(S, 3, ?T),
    close_pair(Pair).

%% {active, true}: data arrives as {ssl, S, Data} messages, in order.
ssl_active_true(Config) ->
    {S, C} = Pair = pair(Config),
    ok = ssl:setopts(S, [{active, true}]),
    Data = rand:bytes(50000),
    ok = ssl:send(C, Data),
    ok = ssl:send(C, <<"tail">>),
    Expect = <<Data/binary, "tail">>,
    Expect = active_collect(S, byte_size(Expect)),
    ok = ssl:setopts(C, [{active, true}]),
    ok = ssl:send(S, <<"back">>),
    receive {ssl, C, <<"back">>} -> ok after ?T -> error(no_data) end,
    close_pair(Pair).

%% {active, once}: one {ssl, S, Data} message, then the socket is passive again.
ssl_active_once(Config) ->
    {S, C} = Pair = pair(Config),
    ok = ssl:setopts(S, [{active, once}]),
    ok = ssl:send(C, <<"one">>),
    receive {ssl, S, <<"one">>} -> ok after ?T -> error(no_data) end,
    {ok, [{active, false}]} = ssl:getopts(S, [active]),
    ok = ssl:send(C, <<"two">>),
    {ok, <<"two">>} = ssl:recv(S, 3, ?T),
    ok = ssl:setopts(S, [{active, once}]),
    ok = ssl:send(C, <<"three">>),
    receive {ssl, S, <<"three">>} -> ok after ?T -> error(no_data) end,
    close_pair(Pair).

%% {active, 3}: three messages, then {ssl_passive, S} and a passive socket; re-armed it delivers again.
ssl_active_n_passive(Config) ->
    {S, C} = Pair = pair(Config),
    ok = ssl:setopts(S, [{active, 3}]),
    [begin
         ok = ssl:send(C, integer_to_binary(I)),
         Bin = integer_to_binary(I),
         receive {ssl, S, Bin} -> ok after ?T -> error({no_data, I}) end
     end || I <- [1, 2, 3]],
    receive {ssl_passive, S} -> ok after ?T -> error(no_passive) end,
    {ok, [{active, false}]} = ssl:getopts(S, [active]),
    ok = ssl:setopts(S, [{active, 1}]),
    ok = ssl:send(C, <<"4">>),
    receive {ssl, S, <<"4">>} -> ok after ?T -> error(no_data) end,
    receive {ssl_passive, S} -> ok after ?T -> error(no_passive) end,
    close_pair(Pair).

%% The client closes: the passive server reads what was sent, then {error, closed}.
ssl_close_by_client(Config) ->
    {S, C} = pair(Config),
    ok = ssl:send(C, <<"last words">>),
    ok = ssl:close(C),
    <<"last words">> = recv_exactly(S, 10),
    {error, closed} = ssl:recv(S, 0, ?T),
    _ = ssl:close(S),
    ok.

%% The server closes: the passive client reads what was sent, then {error, closed}.
ssl_close_by_server(Config) ->
    {S, C} = pair(Config),
    ok = ssl:send(S, <<"bye">>),
    ok = ssl:close(S),
    <<"bye">> = recv_exactly(C, 3),
    {error, closed} = ssl:recv(C, 0, ?T),
    _ = ssl:close(C),
    ok.

%% An active socket gets its data, then {ssl_closed, S} when the peer closes (both directions).
ssl_close_active_closed(Config) ->
    {S, C} = pair(Config),
    ok = ssl:setopts(S, [{active, true}]),
    ok = ssl:send(C, <<"data">>),
    ok = ssl:close(C),
    <<"data">> = active_collect(S, 4),
    receive {ssl_closed, S} -> ok after ?T -> error(no_ssl_closed) end,
    {S2, C2} = pair(Config),
    ok = ssl:setopts(C2, [{active, true}]),
    ok = ssl:close(S2),
    receive {ssl_closed, C2} -> ok after ?T -> error(no_ssl_closed) end,
    ok.

%% The sslsocket's owner exits: the connection closes and the peer sees {error, closed}.
ssl_owner_exit_closes(Config) ->
    {S, C} = pair(Config),
    {Pid, Ref} = spawn_monitor(fun() -> receive go -> ok end end),
    ok = ssl:controlling_process(S, Pid),
    Pid ! go,
    receive {'DOWN', Ref, process, Pid, _} -> ok end,
    {error, closed} = ssl:recv(C, 0, ?T),
    _ = ssl:close(C),
    ok.

%% 1 MiB client to server (active server), then 1 MiB server to client (passive client), byte for byte.
ssl_transfer_1mib_both_ways(Config) ->
    {S, C} = Pair = pair(Config),
    Up = rand:bytes(?MIB),
    Down = rand:bytes(?MIB),
    ok = ssl:setopts(S, [{active, true}]),
    Sender = spawn_link(fun() -> ok = ssl:send(C, Up) end),
    Up = active_collect(S, ?MIB),
    ok = ssl:setopts(S, [{active, false}]),
    unlink(Sender),
    spawn_link(fun() -> ok = ssl:send(S, Down) end),
    Down = recv_exactly(C, ?MIB),
    close_pair(Pair).

%% 1 MiB each way at the same time (both sends in flight at once; 64 KiB sends).
ssl_transfer_1mib_concurrent(Config) ->
    {S, C} = Pair = pair(Config),
    Up = rand:bytes(?MIB),
    Down = rand:bytes(?MIB),
    Self = self(),
    [spawn_link(fun() ->
                        [ok = ssl:send(Sock, binary:part(Data, Off, 65536))
                         || Off <- lists:seq(0, ?MIB - 1, 65536)],
                        Self ! {sent, Sock}
                end) || {Sock, Data} <- [{C, Up}, {S, Down}]],
    ok = ssl:setopts(S, [{active, true}]),
    ok = ssl:setopts(C, [{active, true}]),
    {Up, Down} = collect_two(S, C, [], [], 0, 0),
    [receive {sent, Sock} -> ok after ?T -> error(not_sent) end || Sock <- [C, S]],
    close_pair(Pair).

collect_two(_S, _C, AccS, AccC, ?MIB, ?MIB) ->
    {iolist_to_binary(lists:reverse(AccS)), iolist_to_binary(lists:reverse(AccC))};
collect_two(S, C, AccS, AccC, NS, NC) ->
    receive
        {ssl, S, D} -> collect_two(S, C, [D | AccS], AccC, NS + byte_size(D), NC);
        {ssl, C, D} -> collect_two(S, C, AccS, [D | AccC], NS, NC + byte_size(D));
        {ssl_error, _, _} = E -> error({E, NS, NC});
        {ssl_closed, _} = E -> error({E, NS, NC})
    after ?T -> stall_report(), stall_sockets([{server, S}, {client, C}]), error({stalled, NS, NC})
    end.

%% What a stalled transfer leaves to go on (a fresh-clone CI run on OTP 29
%% stalled here once, nifsock on both ends): nifsock's counters, this
%% process's mailbox, and every process waiting in nifsock or in ssl's
%% connection and sender code, with its stack and mailbox (binaries as
%% their sizes).
stall_report() ->
    Mods = [nifsock, nifsock_tcp, nifsock_wait, nifsock_tcp_pump, tls_sender,
            tls_connection, tls_gen_connection, ssl_gen_statem, gen_statem],
    Keys = [current_stacktrace, status, message_queue_len, messages],
    Waiting = [{P, [{K, brief(V)} || {K, V} <- I]}
               || P <- processes(),
                  I <- [process_info(P, Keys)], I =/= undefined,
                  {current_stacktrace, Stack} <- [lists:keyfind(current_stacktrace, 1, I)],
                  lists:any(fun({M, _, _, _}) -> lists:member(M, Mods) end, Stack)],
    {messages, Mine} = process_info(self(), messages),
    ct:pal("stalled: nifsock:info() ~p~nthis process's mailbox ~p~nwaiting in nifsock or ssl ~p",
           [nifsock:info(), brief(Mine), Waiting]).

%% Each end's transport socket (nifsock's, if it is one): nifsock:info/1 and
%% the kernel's queues for its port (/proc/net/tcp: tx_queue:rx_queue, the
%% bytes not yet acknowledged by the peer and not yet read here).
stall_sockets(Ends) ->
    {ok, Tcp} = file:read_file("/proc/net/tcp"),
    Lines = binary:split(Tcp, <<"\n">>, [global]),
    [begin
         T = transport(E),
         Info = try nifsock:info(T) catch _:_ -> not_nifsock end,
         Port = try nifsock_tcp:sockname(T) of
                    {ok, {_, P}} -> P;
                    _ -> none
                catch _:_ -> none
                end,
         Kernel = case Port of
                      none -> [];
                      _ -> Hex = iolist_to_binary(io_lib:format(":~4.16.0B ", [Port])),
                           [L || L <- Lines, binary:match(L, Hex) =/= nomatch]
                  end,
         ct:pal("stalled, ~p end: port ~p~nnifsock:info/1 ~p~n/proc/net/tcp ~p",
                [Name, Port, Info, Kernel])
     end || {Name, E} <- Ends],
    ok.

%% The nifsock socket inside an sslsocket (its layout differs by release).
transport({'$nifsock', _} = T) -> T;
transport(T) when is_tuple(T) -> transport(tuple_to_list(T));
transport([H | Rest]) ->
    case transport(H) of
        none -> transport(Rest);
        T -> T
    end;
transport(_) -> none.

brief(B) when is_binary(B), byte_size(B) > 16 -> {binary, byte_size(B)};
brief(L) when is_list(L) -> [brief(E) || E <- L];
brief(T) when is_tuple(T) -> list_to_tuple(brief(tuple_to_list(T)));
brief(X) -> X.

%% ALPN: the server's preference among the client's protocols is negotiated on both ends.
ssl_alpn(Config) ->
    {S, C} = Pair = pair(Config, [{alpn_preferred_protocols, [<<"h2">>, <<"http/1.1">>]}],
                         [{alpn_advertised_protocols, [<<"http/1.1">>, <<"h2">>]}]),
    {ok, <<"h2">>} = ssl:negotiated_protocol(S),
    {ok, <<"h2">>} = ssl:negotiated_protocol(C),
    close_pair(Pair),
    {S2, C2} = Pair2 = pair(Config, [{alpn_preferred_protocols, [<<"h2">>, <<"http/1.1">>]}],
                            [{alpn_advertised_protocols, [<<"http/1.1">>]}]),
    {ok, <<"http/1.1">>} = ssl:negotiated_protocol(S2),
    {ok, <<"http/1.1">>} = ssl:negotiated_protocol(C2),
    close_pair(Pair2).

%% TLS 1.2 (its own handshake and record code in ssl): echo and a 200 KB transfer.
ssl_tls12(Config) ->
    {S, C} = Pair = pair(Config, [{versions, ['tlsv1.2']}], [{versions, ['tlsv1.2']}]),
    {ok, [{protocol, 'tlsv1.2'}]} = ssl:connection_information(C, [protocol]),
    ok = ssl:send(C, <<"ping">>),
    <<"ping">> = recv_exactly(S, 4),
    Data = rand:bytes(200000),
    spawn_link(fun() -> ok = ssl:send(S, Data) end),
    Data = recv_exactly(C, byte_size(Data)),
    close_pair(Pair).

%% {packet, 4} (framed by ssl itself): each send is one message, in passive and active mode.
ssl_packet_4(Config) ->
    {S, C} = Pair = pair(Config),
    ok = ssl:setopts(S, [{packet, 4}]),
    ok = ssl:setopts(C, [{packet, 4}]),
    ok = ssl:send(C, <<"framed">>),
    ok = ssl:send(C, <<"two">>),
    {ok, <<"framed">>} = ssl:recv(S, 0, ?T),
    {ok, <<"two">>} = ssl:recv(S, 0, ?T),
    ok = ssl:setopts(C, [{active, once}]),
    ok = ssl:send(S, <<"reply">>),
    receive {ssl, C, <<"reply">>} -> ok after ?T -> error(no_data) end,
    {ok, [{packet, 4}]} = ssl:getopts(S, [packet]),
    close_pair(Pair).

%% peername/sockname are {IP, Port} tuples, each end's sockname the other's peername.
ssl_peername_sockname(Config) ->
    {S, C} = Pair = pair(Config),
    {ok, {{127, 0, 0, 1}, SP} = SName} = ssl:sockname(S),
    {ok, {{127, 0, 0, 1}, CP} = CName} = ssl:sockname(C),
    true = is_integer(SP) andalso is_integer(CP),
    {ok, CName} = ssl:peername(S),
    {ok, SName} = ssl:peername(C),
    close_pair(Pair).

%% controlling_process: active messages go to the new owner.
ssl_controlling_process(Config) ->
    {S, C} = Pair = pair(Config),
    Self = self(),
    Pid = spawn_link(fun() ->
                             receive go -> ok end,
                             ok = ssl:setopts(S, [{active, once}]),
                             receive {ssl, S, D} -> Self ! {got, D} after ?T -> Self ! none end,
                             receive stop -> ok end
                     end),
    ok = ssl:controlling_process(S, Pid),
    Pid ! go,
    ok = ssl:send(C, <<"to the new owner">>),
    receive {got, <<"to the new owner">>} -> ok after ?T -> error(no_data) end,
    Pid ! stop,
    close_pair(Pair).

%% ssl:connect/3 and ssl:handshake/3 on already connected TCP sockets (of the group's kinds).
ssl_upgrade_connected_socket(Config) ->
    {LMod, LOpts} = case ?config(server, Config) of
                        gen_tcp -> {gen_tcp, []};
                        nifsock -> {nifsock_tcp, [?CB]}
                    end,
    {CMod, COpts} = case ?config(client, Config) of
                        gen_tcp -> {gen_tcp, []};
                        nifsock -> {nifsock_tcp, [?CB]}
                    end,
    {ok, L} = LMod:listen(0, [binary, {active, false}, {ip, {127, 0, 0, 1}}]),
    {ok, {_, Port}} = inet_or_nifsock_sockname(LMod, L),
    Self = self(),
    spawn_link(fun() ->
                       {ok, T} = LMod:accept(L, ?T),
                       {ok, S0} = ssl:handshake(T, LOpts ++ ?config(server_opts, Config), ?T),
                       ok = ssl:controlling_process(S0, Self),
                       Self ! {server_socket, S0}
               end),
    {ok, T} = CMod:connect({127, 0, 0, 1}, Port, [binary, {active, false}]),
    {ok, C} = ssl:connect(T, COpts ++ ?config(client_opts, Config), ?T),
    S = receive {server_socket, S1} -> S1 after ?T -> error(no_server_socket) end,
    ok = ssl:send(C, <<"upgraded">>),
    <<"upgraded">> = recv_exactly(S, 8),
    ok = LMod:close(L),
    close_pair({S, C}).

inet_or_nifsock_sockname(gen_tcp, L) -> inet:sockname(L);
inet_or_nifsock_sockname(nifsock_tcp, L) -> nifsock_tcp:sockname(L).

%% recv with a timeout and nothing to read is {error, timeout}; the connection still works after.
ssl_recv_timeout(Config) ->
    {S, C} = Pair = pair(Config),
    {error, timeout} = ssl:recv(S, 0, 20),
    ok = ssl:send(C, <<"after">>),
    <<"after">> = recv_exactly(S, 5),
    close_pair(Pair).

%% getstat: the TCP socket's byte counters grow with traffic (more than the payload: TLS records).
ssl_getstat(Config) ->
    {S, C} = Pair = pair(Config),
    ok = ssl:send(C, rand:bytes(10000)),
    _ = recv_exactly(S, 10000),
    {ok, Stats} = ssl:getstat(S, [recv_oct, send_oct]),
    RecvOct = proplists:get_value(recv_oct, Stats),
    true = is_integer(RecvOct) andalso RecvOct > 10000,
    {ok, All} = ssl:getstat(C),
    true = proplists:get_value(send_oct, All) > 10000,
    close_pair(Pair).

%% Socket options through ssl: set at connect, set and read with ssl:setopts/getopts next to ssl's own (active, mode, packet).
ssl_socket_options(Config) ->
    {S, C} = Pair = pair(Config, [], [{nodelay, true}, {send_timeout, 7000}]),
    %% (ssl answers its own options and the transport's in its own order)
    [{nodelay, true}, {send_timeout, 7000}] = sorted(ssl:getopts(C, [nodelay, send_timeout])),
    ok = ssl:setopts(S, [{nodelay, true}, {keepalive, true}, {mode, list}]),
    [{active, false}, {keepalive, true}, {mode, list}, {nodelay, true}, {packet, 0}] =
        sorted(ssl:getopts(S, [nodelay, keepalive, active, mode, packet])),
    ok = ssl:send(C, <<"as a list">>),
    {ok, "as a list"} = ssl:recv(S, 9, ?T),
    ok = ssl:setopts(S, [{keepalive, false}, {mode, binary}]),
    {ok, [{keepalive, false}]} = ssl:getopts(S, [keepalive]),
    close_pair(Pair).

sorted({ok, Opts}) -> lists:sort(Opts).

%%--------------------------------------------------------------------
%% nifsock_ranch_ssl
%%--------------------------------------------------------------------

%% Every ranch_transport callback (Ranch 2.x) and every ranch_ssl export is exported with its arity.
ssl_ranch_exports_transport_callbacks(_Config) ->
    Callbacks = [{name, 0}, {secure, 0}, {messages, 0}, {listen, 1}, {accept, 2},
                 {handshake, 2}, {handshake, 3}, {handshake_continue, 2},
                 {handshake_continue, 3}, {handshake_cancel, 1}, {connect, 3}, {connect, 4},
                 {recv, 3}, {recv_proxy_header, 2}, {send, 2}, {sendfile, 2}, {sendfile, 4},
                 {sendfile, 5}, {setopts, 2}, {getopts, 2}, {getstat, 1}, {getstat, 2},
                 {controlling_process, 2}, {peername, 1}, {sockname, 1}, {shutdown, 2},
                 {close, 1}, {cleanup, 1}, {disallowed_listen_options, 0}],
    [] = Callbacks -- ?TR:module_info(exports),
    ok.

%% name/0 is ssl, secure/0 true, messages/0 ssl's four tags, disallowed options ranch_ssl's.
ssl_ranch_identity(_Config) ->
    ssl = ?TR:name(),
    true = ?TR:secure(),
    {ssl, ssl_closed, ssl_error, ssl_passive} = ?TR:messages(),
    [alpn_advertised_protocols, client_preferred_next_protocols, fallback,
     server_name_indication, srp_identity | Tcp] = ?TR:disallowed_listen_options(),
    Tcp = nifsock_ranch:disallowed_listen_options(),
    ok.

%% listen/1 without a certificate option is {error, no_cert}, as ranch_ssl.
ssl_ranch_listen_no_cert(_Config) ->
    {error, no_cert} = ?TR:listen(#{socket_opts => [{ip, {127, 0, 0, 1}}]}),
    {error, no_cert} = ?TR:listen(#{}),
    ok.

%% listen/1 splits TCP from TLS options: ranch_tcp's defaults on the TCP socket, disallowed TLS options and session tickets (no ssl:listen ticket store) dropped, the rest kept for the handshake, which works.
ssl_ranch_listen_options(Config) ->
    TlsOpts = ?config(server_opts, Config),
    {ok, L} = ?TR:listen(#{socket_opts => [{ip, {127, 0, 0, 1}}, {send_timeout, 4321},
                                           {server_name_indication, "x"},
                                           {session_tickets, stateless},
                                           {alpn_preferred_protocols, [<<"h2">>]} | TlsOpts],
                           logger => false}),
    {nifsock_ranch_ssl, TcpL, Kept} = L,
    {ok, [{active, false}, {packet, 0}, {mode, binary}, {nodelay, true},
          {send_timeout, 4321}, {send_timeout_close, true}]} =
        ?TR:getopts(L, [active, packet, mode, nodelay, send_timeout, send_timeout_close]),
    {ok, {{127, 0, 0, 1}, Port}} = ?TR:sockname(L),
    {ok, {{127, 0, 0, 1}, Port}} = nifsock_tcp:sockname(TcpL),
    false = lists:keymember(server_name_indication, 1, Kept),
    false = lists:keymember(send_timeout, 1, Kept),
    false = lists:keymember(ip, 1, Kept),
    {alpn_preferred_protocols, [<<"h2">>]} = lists:keyfind(alpn_preferred_protocols, 1, Kept),
    [] = TlsOpts -- Kept,
    false = lists:keymember(session_tickets, 1, Kept),
    %% A client asking for tickets gets a working connection.
    Self = self(),
    spawn_link(fun() ->
                       {ok, C} = ssl:connect({127, 0, 0, 1}, Port,
                                             [binary, {active, false}, {session_tickets, auto}
                                              | ?config(client_opts, Config)], ?T),
                       {ok, <<"t">>} = ssl:recv(C, 1, ?T),
                       Self ! {client_done, ssl:close(C)}
               end),
    {ok, A} = ?TR:accept(L, ?T),
    {ok, S} = ?TR:handshake(A, ?T),
    ok = ?TR:send(S, <<"t">>),
    receive {client_done, ok} -> ok after ?T -> error(no_client) end,
    ok = ?TR:close(S),
    %% A TCP option nifsock_tcp refuses fails the listen, as ranch_ssl.
    {error, einval} = ?TR:listen(#{socket_opts => [{ip, {127, 0, 0, 1}}, {backlog, foo}
                                                   | TlsOpts]}),
    ok = ?TR:close(L).

%% ssl is given the TCP socket's tags: connect/4 with {tags, gen_tcp} and a handshake on an accepted socket whose tags were set to a custom tuple both work, passive and active ({ssl, S, D}); a {tags, _} listen option is dropped (the accepted socket has the default tags).
ssl_ranch_tags_follow_socket(Config) ->
    {ok, L} = listen(Config, [{tags, gen_tcp}]),
    {ok, {_, Port}} = ?TR:sockname(L),
    Self = self(),
    spawn_link(fun() ->
                       {ok, C} = ?TR:connect({127, 0, 0, 1}, Port,
                                             [{tags, gen_tcp} | ?config(client_opts, Config)], ?T),
                       TcpC = transport_socket(C),
                       {ok, [{tags, {tcp, tcp_closed, tcp_error, tcp_passive}}]} =
                           nifsock_tcp:getopts(TcpC, [tags]),
                       {ok, <<"ping">>} = ssl:recv(C, 4, ?T),
                       ok = ssl:setopts(C, [{active, once}]),
                       ok = ssl:send(C, <<"pong">>),
                       receive {ssl, C, <<"bye">>} -> ok after ?T -> error(no_active_data) end,
                       Self ! {client_done, ssl:close(C)}
               end),
    {ok, {nifsock_ranch_ssl, TcpS, _} = A} = ?TR:accept(L, ?T),
    {ok, [{tags, {nifsock, nifsock_closed, nifsock_error, nifsock_passive}}]} =
        nifsock_tcp:getopts(TcpS, [tags]),
    ok = nifsock_tcp:setopts(TcpS, [{tags, {d, c, e, p}}]),
    {ok, S} = ?TR:handshake(A, ?T),
    ok = ?TR:send(S, <<"ping">>),
    ok = ssl:setopts(S, [{active, once}]),
    receive {ssl, S, <<"pong">>} -> ok after ?T -> error(no_active_data) end,
    ok = ?TR:send(S, <<"bye">>),
    receive {client_done, ok} -> ok after ?T -> error(no_client) end,
    ok = ?TR:close(S),
    ok = ?TR:close(L).

%% The nifsock socket inside an sslsocket, found by shape (the sslsocket
%% record differs between OTP releases: OTP 25 keeps it in a 4-tuple with the
%% callback module, OTP 27 directly).
transport_socket(SslSocket) ->
    [S] = lists:usort(nifsock_sockets(SslSocket)),
    S.

nifsock_sockets(T) when is_tuple(T) ->
    case nifsock:is_socket(T) of
        true -> [T];
        false -> lists:append([nifsock_sockets(E) || E <- tuple_to_list(T)])
    end;
nifsock_sockets(_) ->
    [].

%% accept/2 times out with {error, timeout}; once the listener is closed, {error, closed}.
ssl_ranch_accept_timeout_and_closed(Config) ->
    {ok, L} = listen(Config, []),
    {error, timeout} = ?TR:accept(L, 10),
    Self = self(),
    Pid = spawn_link(fun() -> Self ! {accepted, ?TR:accept(L, infinity)} end),
    wait_accepting(Pid),
    ok = ?TR:close(L),
    receive {accepted, {error, closed}} -> ok after ?T -> error(accept_not_closed) end.

wait_accepting(Pid) ->
    case process_info(Pid, status) of
        {status, waiting} -> ok;
        _ -> receive after 1 -> wait_accepting(Pid) end
    end.

%% Keep-alive: 50 requests on each of 4 connections (plain-ssl and nifsock clients), acceptors and connection processes as Ranch.
ssl_ranch_keepalive_requests(Config) ->
    Listener = start_listener(Config, []),
    Port = port(Listener),
    [begin
         {ok, C} = connect(Kind, Port, Config),
         [begin
              Body = integer_to_binary(I * J),
              Reply = <<"ok ", Body/binary, "\n">>,
              Reply = request(C, <<"echo ", Body/binary, "\n">>)
          end || I <- lists:seq(1, 50)],
         <<"bye\n">> = request(C, <<"close\n">>),
         {error, closed} = ssl:recv(C, 0, ?T),
         ok = ssl:close(C)
     end || {Kind, J} <- [{gen_tcp, 1}, {nifsock, 2}, {gen_tcp, 3}, {nifsock, 4}]],
    stop_listener(Listener).

%% The connection process's {active, 2} is re-armed on each {ssl_passive, S}: 30 requests one at a time make 15 re-arms; 30 pipelined ones all get answers.
ssl_ranch_active_n_rearm(Config) ->
    Listener = start_listener(Config, []),
    {ok, C} = connect(nifsock, port(Listener), Config),
    %% One request per record, each answered before the next: one message each.
    [<<"ok x\n">> = request(C, <<"echo x\n">>) || _ <- lists:seq(1, 30)],
    <<"15\n">> = request(C, <<"rearms\n">>),
    Reqs = [<<"echo ", (integer_to_binary(I))/binary, "\n">> || I <- lists:seq(1, 30)],
    [ok = ssl:send(C, R) || R <- Reqs],
    Expect = iolist_to_binary([<<"ok ", (integer_to_binary(I))/binary, "\n">>
                               || I <- lists:seq(1, 30)]),
    Expect = recv_exactly(C, byte_size(Expect)),
    ok = ssl:close(C),
    stop_listener(Listener).

%% sendfile/2,4,5 by file name: whole file, a range, and chunk_size, read and sent over TLS.
ssl_ranch_sendfile(Config) ->
    Listener = start_listener(Config, []),
    Content = ?config(content, Config),
    Size = byte_size(Content),
    [begin
         {ok, C} = connect(Kind, port(Listener), Config),
         ok = ssl:send(C, <<"file 0 0\n">>),
         Content = recv_exactly(C, Size),
         ok = ssl:send(C, <<"file 1000 5000\n">>),
         Part = binary:part(Content, 1000, 5000),
         Part = recv_exactly(C, 5000),
         ok = ssl:send(C, <<"filechunk 7 777\n">>),
         Part2 = binary:part(Content, 7, Size - 7),
         Part2 = recv_exactly(C, Size - 7),
         <<"sent ", _/binary>> = request(C, <<"lastsent\n">>),
         ok = ssl:close(C)
     end || Kind <- [gen_tcp, nifsock]],
    stop_listener(Listener).

%% sendfile/4 on an open raw file reads from Offset and puts the file position back.
ssl_ranch_sendfile_fd(Config) ->
    {S, C} = Pair = pair([{server, nifsock}, {client, gen_tcp} | Config]),
    Content = ?config(content, Config),
    {ok, Fd} = file:open(?config(file, Config), [read, raw, binary]),
    {ok, 10} = file:position(Fd, 10),
    {ok, 20000} = ?TR:sendfile(S, Fd, 100, 20000),
    {ok, 10} = file:position(Fd, {cur, 0}),
    Part = binary:part(Content, 100, 20000),
    Part = recv_exactly(C, 20000),
    {ok, 300} = ?TR:sendfile(S, Fd, 10, 300, [{chunk_size, 7}]),
    Part2 = binary:part(Content, 10, 300),
    Part2 = recv_exactly(C, 300),
    ok = file:close(Fd),
    {error, enoent} = ?TR:sendfile(S, "/nonexistent/nifsock"),
    close_pair(Pair).

%% shutdown(S, write) after the response: the client reads it, then {error, closed}; the connection process sees ssl_closed.
ssl_ranch_shutdown_write(Config) ->
    Listener = start_listener(Config, []),
    {ok, C} = connect(gen_tcp, port(Listener), Config),
    ok = ssl:send(C, <<"shutdown\n">>),
    <<"half closed\n">> = recv_exactly(C, 12),
    {error, closed} = ssl:recv(C, 0, ?T),
    ok = ssl:close(C),
    receive {conn_done, _, closed} -> ok after ?T -> error(no_conn_done) end,
    stop_listener(Listener).

%% {handshake, hello}: handshake/3 gives {ok, S, Ext} (Ranch's continue path), handshake_continue/3 completes it.
ssl_ranch_handshake_hello_continue(Config) ->
    Listener = start_listener(Config, [{handshake_opts, [{handshake, hello}]}]),
    {ok, C} = connect(nifsock, port(Listener), Config),
    receive {hello, #{sni := _}} -> ok; {hello, Ext} when is_map(Ext) -> ok
    after ?T -> error(no_hello)
    end,
    <<"ok 1\n">> = request(C, <<"echo 1\n">>),
    ok = ssl:close(C),
    stop_listener(Listener).

%% handshake_cancel/1 after {handshake, hello}: the client's handshake fails and the socket is closed.
ssl_ranch_handshake_cancel(Config) ->
    Listener = start_listener(Config, [{handshake_opts, [{handshake, hello}]}, cancel]),
    {error, _} = connect(nifsock, port(Listener), Config),
    receive {hello, _} -> ok after ?T -> error(no_hello) end,
    receive {conn_done, _, cancelled} -> ok after ?T -> error(no_cancel) end,
    stop_listener(Listener).

%% A client that speaks no TLS: handshake/3 fails, Ranch's error path closes the socket (close/1 is ok on it), the listener keeps serving.
ssl_ranch_handshake_failure_closes(Config) ->
    Listener = start_listener(Config, []),
    Port = port(Listener),
    {ok, T} = gen_tcp:connect({127, 0, 0, 1}, Port, [binary, {active, false}]),
    ok = gen_tcp:send(T, <<"GET / HTTP/1.1\r\n\r\n">>),
    receive {conn_done, _, {handshake_error, _}} -> ok
    after ?T -> error(no_handshake_error)
    end,
    %% The TCP connection is closed by the server (after any alert).
    closed = drain_until_closed(T),
    {ok, C} = connect(nifsock, Port, Config),
    <<"ok 2\n">> = request(C, <<"echo 2\n">>),
    ok = ssl:close(C),
    stop_listener(Listener).

drain_until_closed(T) ->
    case gen_tcp:recv(T, 0, ?T) of
        {ok, _} -> drain_until_closed(T);
        {error, closed} -> closed;
        {error, econnreset} -> closed
    end.

%% recv_proxy_header/2 before the handshake (as ranch:recv_proxy_header/2): a v1 header is parsed, then TLS runs on the same connection.
ssl_ranch_recv_proxy_header(Config) ->
    Listener = start_listener(Config, [proxy_header]),
    Port = port(Listener),
    {ok, T} = gen_tcp:connect({127, 0, 0, 1}, Port, [binary, {active, false}]),
    ok = gen_tcp:send(T, <<"PROXY TCP4 192.168.1.1 192.168.1.2 56324 443\r\n">>),
    {ok, C} = ssl:connect(T, ?config(client_opts, Config), ?T),
    receive
        {proxy, #{src_address := {192, 168, 1, 1}, src_port := 56324,
                  dest_address := {192, 168, 1, 2}, dest_port := 443}} -> ok
    after ?T -> error(no_proxy_info)
    end,
    <<"ok 3\n">> = request(C, <<"echo 3\n">>),
    ok = ssl:close(C),
    stop_listener(Listener).

%% ALPN options in socket_opts reach the handshake: cowboy_tls's ssl:negotiated_protocol/1 sees h2.
ssl_ranch_alpn_negotiated(Config) ->
    Listener = start_listener(Config, [{socket_opts,
                                        [{alpn_preferred_protocols, [<<"h2">>, <<"http/1.1">>]}]}]),
    {ok, C} = ssl:connect({127, 0, 0, 1}, port(Listener),
                          [binary, {active, false}, {alpn_advertised_protocols, [<<"h2">>]}
                           | ?config(client_opts, Config)], ?T),
    <<"proto h2\n">> = request(C, <<"proto\n">>),
    ok = ssl:close(C),
    stop_listener(Listener).

%% peername/sockname on the listener, the accepted socket and the sslsocket; getstat; setopts/getopts before and after the handshake.
ssl_ranch_names_and_stats(Config) ->
    {ok, L} = listen(Config, []),
    {ok, {{127, 0, 0, 1}, Port} = LName} = ?TR:sockname(L),
    Self = self(),
    spawn_link(fun() ->
                       {ok, C} = ?TR:connect({127, 0, 0, 1}, Port, ?config(client_opts, Config),
                                             ?T),
                       {ok, CName} = ?TR:sockname(C),
                       {ok, LName} = ?TR:peername(C),
                       Self ! {client, CName},
                       {ok, <<"x">>} = ?TR:recv(C, 1, ?T),
                       ok = ?TR:close(C)
               end),
    {ok, A} = ?TR:accept(L, ?T),
    {ok, LName} = ?TR:sockname(A),
    {ok, Peer} = ?TR:peername(A),
    ok = ?TR:setopts(A, [{nodelay, true}]),
    {ok, [{nodelay, true}]} = ?TR:getopts(A, [nodelay]),
    {ok, [_ | _]} = ?TR:getstat(A),
    {ok, S} = ?TR:handshake(A, ?T),
    {ok, LName} = ?TR:sockname(S),
    {ok, Peer} = ?TR:peername(S),
    receive {client, Peer} -> ok after ?T -> error(no_client) end,
    ok = ?TR:setopts(S, [{packet, raw}]),
    {ok, [{active, false}]} = ?TR:getopts(S, [active]),
    %% (before the send: the client closes once it has the byte)
    {ok, [{send_oct, SendOct}]} = ?TR:getstat(S, [send_oct]),
    true = SendOct > 1,
    ok = ?TR:send(S, <<"x">>),
    {error, closed} = ?TR:recv(S, 0, ?T),
    ok = ?TR:close(S),
    ok = ?TR:close(L).

%% TLS on a unix socket ({ip, {local, Path}}): names are {local, Path} before and after the handshake; cleanup/1 removes the file.
ssl_ranch_listen_local(Config) ->
    Path = nifsock_test_lib:tmp_path("nifsock_ssl"),
    TransOpts = #{socket_opts => [{ip, {local, Path}} | ?config(server_opts, Config)],
                  logger => false},
    {ok, L} = ?TR:listen(TransOpts),
    BinPath = list_to_binary(Path),
    {ok, {local, BinPath}} = ?TR:sockname(L),
    Self = self(),
    spawn_link(fun() ->
                       {ok, T} = nifsock_tcp:connect({local, Path}, 0,
                                                     [local, binary, {active, false}]),
                       {ok, C} = ssl:connect(T, [?CB | ?config(client_opts, Config)], ?T),
                       {ok, <<"over unix">>} = ssl:recv(C, 9, ?T),
                       Self ! client_done,
                       receive stop -> ok end
               end),
    {ok, A} = ?TR:accept(L, ?T),
    {ok, S} = ?TR:handshake(A, ?T),
    {ok, {local, BinPath}} = ?TR:sockname(S),
    {ok, {local, _}} = ?TR:peername(S),
    ok = ?TR:send(S, <<"over unix">>),
    receive client_done -> ok after ?T -> error(no_client) end,
    ok = ?TR:close(S),
    ok = ?TR:close(L),
    {ok, _} = file:read_link_info(Path),
    ok = ?TR:cleanup(TransOpts),
    {error, enoent} = file:read_link_info(Path).

%%--------------------------------------------------------------------
%% A Ranch 2.1 stand-in: acceptors, connection supervisor, connection
%% processes (cowboy_http-like: {active, 2} re-armed on ssl_passive)
%%--------------------------------------------------------------------

listen(Config, Extra) ->
    ?TR:listen(#{socket_opts => [{ip, {127, 0, 0, 1}} | Extra ++ ?config(server_opts, Config)],
                 logger => false}).

%% Options: {socket_opts, Extra}, {handshake_opts, Opts} (ranch:handshake/2's),
%% cancel (handshake_cancel after hello), proxy_header.
start_listener(Config, Opts) ->
    Test = self(),
    {ok, L} = listen(Config, proplists:get_value(socket_opts, Opts, [])),
    ConnsSup = spawn_link(fun() -> conns_sup(Test, Opts) end),
    Acceptors = [spawn_link(fun() -> acceptor(L, ConnsSup) end) || _ <- [1, 2]],
    {L, ConnsSup, Acceptors}.

port({L, _, _}) ->
    {ok, {_, Port}} = ?TR:sockname(L),
    Port.

stop_listener({L, ConnsSup, Acceptors}) ->
    ok = ?TR:close(L),
    [begin unlink(P), exit(P, kill) end || P <- [ConnsSup | Acceptors]],
    ok.

%% ranch_acceptor:loop/5.
acceptor(L, ConnsSup) ->
    case ?TR:accept(L, infinity) of
        {ok, CSocket} ->
            case ?TR:controlling_process(CSocket, ConnsSup) of
                ok ->
                    Ref = make_ref(),
                    ConnsSup ! {start_protocol, self(), Ref, CSocket},
                    receive Ref -> ok end;
                {error, _} ->
                    ?TR:close(CSocket)
            end,
            acceptor(L, ConnsSup);
        {error, closed} ->
            ok
    end.

%% ranch_conns_sup: start the protocol, hand the socket over, send {handshake, ...}.
conns_sup(Test, Opts) ->
    receive
        {start_protocol, From, Ref, CSocket} ->
            Pid = spawn(fun() -> connection(Test, Opts) end),
            case ?TR:controlling_process(CSocket, Pid) of
                ok -> Pid ! {handshake, ?MODULE, ?TR, CSocket, ?T};
                {error, _} -> ?TR:close(CSocket), exit(Pid, kill)
            end,
            From ! Ref,
            conns_sup(Test, Opts)
    end.

%% ranch:handshake/2 and ranch:recv_proxy_header/2 as Cowboy's protocols call them.
connection(Test, Opts) ->
    receive {handshake, ?MODULE, Transport, CSocket, Timeout} = HS ->
            case lists:member(proxy_header, Opts) of
                true ->
                    {ok, ProxyInfo} = Transport:recv_proxy_header(CSocket, Timeout),
                    Test ! {proxy, ProxyInfo};
                false ->
                    ok
            end,
            self() ! HS,
            handshake(Test, Opts)
    end.

handshake(Test, Opts) ->
    receive {handshake, ?MODULE, Transport, CSocket, Timeout} ->
            Result = case lists:keyfind(handshake_opts, 1, Opts) of
                         {_, HOpts} -> Transport:handshake(CSocket, HOpts, Timeout);
                         false -> Transport:handshake(CSocket, Timeout)
                     end,
            case Result of
                {ok, S} ->
                    serve(Test, Transport, S);
                {ok, S, Ext} ->
                    Test ! {hello, Ext},
                    case lists:member(cancel, Opts) of
                        true ->
                            ok = Transport:handshake_cancel(S),
                            Test ! {conn_done, self(), cancelled};
                        false ->
                            {ok, S2} = Transport:handshake_continue(S, Timeout),
                            serve(Test, Transport, S2)
                    end;
                {error, Reason} ->
                    %% ranch:handshake_result/5
                    ok = Transport:close(CSocket),
                    Test ! {conn_done, self(), {handshake_error, Reason}}
            end
    end.

serve(Test, Transport, S) ->
    ok = Transport:setopts(S, [{active, 2}]),
    loop(Test, Transport, S, <<>>, #{rearms => 0, lastsent => 0}).

loop(Test, Transport, S, Buf, State) ->
    {OK, Closed, Error, Passive} = Transport:messages(),
    receive
        {OK, S, Data} ->
            lines(Test, Transport, S, <<Buf/binary, Data/binary>>, State);
        {Passive, S} ->
            ok = Transport:setopts(S, [{active, 2}]),
            loop(Test, Transport, S, Buf, State#{rearms := maps:get(rearms, State) + 1});
        {Closed, S} ->
            ok = Transport:close(S),
            Test ! {conn_done, self(), closed};
        {Error, S, Reason} ->
            ok = Transport:close(S),
            Test ! {conn_done, self(), {error, Reason}}
    end.

lines(Test, Transport, S, Buf, State) ->
    case binary:split(Buf, <<"\n">>) of
        [Line, Rest] ->
            case command(Transport, S, Line, State) of
                {continue, State2} -> lines(Test, Transport, S, Rest, State2);
                stop -> ok = Transport:close(S), Test ! {conn_done, self(), stopped};
                half_closed -> loop(Test, Transport, S, <<>>, State)
            end;
        [_] ->
            loop(Test, Transport, S, Buf, State)
    end.

command(Transport, S, <<"echo ", Body/binary>>, State) ->
    ok = Transport:send(S, [<<"ok ">>, Body, <<"\n">>]),
    {continue, State};
command(Transport, S, <<"file ", Args/binary>>, State) ->
    [Off, Len] = [binary_to_integer(A) || A <- binary:split(Args, <<" ">>)],
    File = persistent_file(),
    {ok, Sent} = case {Off, Len} of
                     {0, 0} -> Transport:sendfile(S, File);
                     _ -> Transport:sendfile(S, File, Off, Len)
                 end,
    {continue, State#{lastsent := Sent}};
command(Transport, S, <<"filechunk ", Args/binary>>, State) ->
    [Off, Chunk] = [binary_to_integer(A) || A <- binary:split(Args, <<" ">>)],
    {ok, Sent} = Transport:sendfile(S, persistent_file(), Off, 0, [{chunk_size, Chunk}]),
    {continue, State#{lastsent := Sent}};
command(Transport, S, <<"lastsent">>, #{lastsent := N} = State) ->
    ok = Transport:send(S, [<<"sent ">>, integer_to_binary(N), <<"\n">>]),
    {continue, State};
command(Transport, S, <<"rearms">>, #{rearms := N} = State) ->
    ok = Transport:send(S, [integer_to_binary(N), <<"\n">>]),
    {continue, State};
command(Transport, S, <<"proto">>, State) ->
    {ok, Proto} = ssl:negotiated_protocol(S),
    ok = Transport:send(S, [<<"proto ">>, Proto, <<"\n">>]),
    {continue, State};
command(Transport, S, <<"close">>, _State) ->
    ok = Transport:send(S, <<"bye\n">>),
    stop;
command(Transport, S, <<"shutdown">>, _State) ->
    ok = Transport:send(S, <<"half closed\n">>),
    ok = Transport:shutdown(S, write),
    half_closed.

%% The file for sendfile requests (set by init_per_group(ranch, _)).
persistent_file() ->
    persistent_term:get({?MODULE, file}).

connect(gen_tcp, Port, Config) ->
    ssl:connect({127, 0, 0, 1}, Port, [binary, {active, false} | ?config(client_opts, Config)],
                ?T);
connect(nifsock, Port, Config) ->
    ?TR:connect({127, 0, 0, 1}, Port, ?config(client_opts, Config), ?T).

request(C, Req) ->
    ok = ssl:send(C, Req),
    recv_line(C, <<>>).

recv_line(C, Acc) ->
    case binary:split(Acc, <<"\n">>) of
        [Line, <<>>] -> <<Line/binary, "\n">>;
        [_] ->
            {ok, D} = ssl:recv(C, 0, ?T),
            recv_line(C, <<Acc/binary, D/binary>>)
    end.

%%--------------------------------------------------------------------
%% Helpers
%%--------------------------------------------------------------------

recv_exactly(S, N) ->
    {ok, D} = ssl:recv(S, N, ?T),
    D.

active_collect(S, N) ->
    active_collect(S, N, []).

active_collect(_S, 0, Acc) ->
    iolist_to_binary(lists:reverse(Acc));
active_collect(S, N, Acc) when N > 0 ->
    receive {ssl, S, D} -> active_collect(S, N - byte_size(D), [D | Acc])
    after ?T -> error({no_data, N})
    end.

flush() ->
    receive _ -> flush() after 0 -> ok end.
