%% The Erlang distribution over nifsock (`-proto_dist nifsock', nifsock_dist).
%%
%% The CT node runs the default distribution, so every case starts its own
%% peer nodes with `-proto_dist nifsock' (loopback, unique names), controls
%% them over stdio (`connection => standard_io') and makes them talk to each
%% other: all traffic under test is between two nifsock_dist nodes (or, in
%% dist_mixed_cluster_with_inet_tcp, a nifsock_dist node and an inet_tcp_dist
%% one). Helpers that run inside the peers are exported from this module.
%%
%% Every case runs in two groups, one per nifsock_dist carrier (`{nifsock,
%% dist_carrier}'): `port' (the default: a port of nifsock's driver runs the
%% connection, as inet_drv's port does for inet_tcp_dist) and `process' (the
%% controller and input handler processes).
-module(nifsock_dist_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include_lib("kernel/include/file.hrl").

-export([all/0, groups/0, suite/0, init_per_group/2, end_per_group/2,
         init_per_testcase/2, end_per_testcase/2]).
-export([dist_ping/1, dist_rpc/1, dist_big_messages_both_ways/1,
         dist_small_messages_in_order/1, dist_nodedown_when_peer_killed/1,
         dist_mixed_cluster_with_inet_tcp/1, dist_inet6/1,
         dist_disconnect_closes_socket_and_reconnects/1, dist_wrong_cookie_pang/1,
         dist_connection_options/1, dist_ticks/1, dist_check_ip/1,
         dist_interleaved_large_and_small_in_order/1, dist_nodedown_with_data_in_flight/1,
         dist_tiny_reads_frame_intact/1, dist_streams_and_round_trips_alternate/1,
         dist_fd_count_restored_after_nodedown/1, dist_no_stale_epoll_registration/1,
         dist_port_driver_outlives_connections/1]).
%% run inside the peers
-export([big_exchange/2, big_peer/1, small_exchange/2, small_peer/2, watch_node/1,
         await_nodedown/1, socket_count/0, await_no_connection/2,
         mixed_exchange/2, mixed_peer/2, start_flood/1, flood_peer/2, dist_ctrl/1,
         await_connection_gone/3, phases/2, echo/0, fd_count/0, await_fd_count/2,
         stale_epoll_entries/0, await_no_connection_nodes/1, await_driver_unloaded/2]).

-define(T, 30000).
-define(BIG, (10 * 1024 * 1024)).
-define(SMALL_COUNT, 100000).
%% Nodes that never connect on their own once a connection has gone down (a
%% message global still had on its way would otherwise connect them again):
%% the cases that disconnect and count what is left reconnect explicitly.
-define(NO_RECONNECT, ["-kernel", "dist_auto_connect", "once"]).

suite() ->
    [{timetrap, {minutes, 3}}].

all() ->
    [{group, port}, {group, process}].

groups() ->
    Cases = [dist_ping, dist_rpc, dist_big_messages_both_ways, dist_small_messages_in_order,
             dist_nodedown_when_peer_killed, dist_mixed_cluster_with_inet_tcp, dist_inet6,
             dist_disconnect_closes_socket_and_reconnects, dist_wrong_cookie_pang,
             dist_connection_options, dist_ticks, dist_check_ip,
             dist_interleaved_large_and_small_in_order, dist_nodedown_with_data_in_flight,
             dist_tiny_reads_frame_intact, dist_streams_and_round_trips_alternate,
             dist_fd_count_restored_after_nodedown, dist_no_stale_epoll_registration],
    [{port, [], Cases ++ [dist_port_driver_outlives_connections]}, {process, [], Cases}].

init_per_group(Carrier, Config) ->
    [{dist_carrier, Carrier} | Config].

end_per_group(_Carrier, _Config) ->
    ok.

%% The case's nifsock nodes use the group's carrier (start_node reads it).
init_per_testcase(_Case, Config) ->
    put(dist_carrier, proplists:get_value(dist_carrier, Config, port)),
    Config.

end_per_testcase(_Case, _Config) ->
    nifsock_test_lib:stop_peers().

%%% ------------------------------------------------------------------
%%% Cases

%% @doc net_adm:ping between two nifsock nodes: pong, both list each other, and
%% the connection is run by the group's carrier: a port (of nifsock's driver,
%% as inet_tcp_dist's is inet_drv's) or a process.
dist_ping(_Config) ->
    {PA, A} = start_node(nifsock),
    {PB, B} = start_node(nifsock),
    ?assertEqual(pong, peer:call(PA, net_adm, ping, [B], ?T)),
    ?assertEqual([B], peer:call(PA, erlang, nodes, [], ?T)),
    ?assertEqual([A], peer:call(PB, erlang, nodes, [], ?T)),
    [{B, CtrlA}] = peer:call(PA, erlang, system_info, [dist_ctrl], ?T),
    [{A, CtrlB}] = peer:call(PB, erlang, system_info, [dist_ctrl], ?T),
    ?assert(is_carrier(CtrlA)),
    ?assert(is_carrier(CtrlB)),
    ?assertEqual(get(dist_carrier) =:= port,
                 is_port(CtrlA) andalso {name, "libnifsock dist"} =:=
                     peer:call(PA, erlang, port_info, [CtrlA, name], ?T)),
    ok.

%% @doc rpc:call and erpc:call in both directions.
dist_rpc(_Config) ->
    {PA, A} = start_node(nifsock),
    {PB, B} = start_node(nifsock),
    ?assertEqual(B, peer:call(PA, rpc, call, [B, erlang, node, []], ?T)),
    ?assertEqual(A, peer:call(PB, rpc, call, [A, erlang, node, []], ?T)),
    ?assertEqual(6, peer:call(PA, erpc, call, [B, erlang, '+', [2, 4]], ?T)),
    ?assertEqual({badrpc, {'EXIT', {badarith, '_'}}},
                 strip_stack(peer:call(PA, rpc, call, [B, erlang, '/', [1, 0]], ?T))),
    ok.

%% @doc A 10 MB binary each way at the same time (ERTS sends them as ~64 KB
%% fragments), content checked by MD5 on both sides.
dist_big_messages_both_ways(_Config) ->
    {PA, _A} = start_node(nifsock),
    {_PB, B} = start_node(nifsock),
    ?assertEqual(ok, peer:call(PA, ?MODULE, big_exchange, [B, ?BIG], 60000)),
    %% and again, on the warm connection, with a size that is no multiple of anything
    ?assertEqual(ok, peer:call(PA, ?MODULE, big_exchange, [B, ?BIG + 12345], 60000)),
    ok.

%% @doc 100,000 small messages each way at the same time arrive complete and in
%% order.
dist_small_messages_in_order(_Config) ->
    {PA, _A} = start_node(nifsock),
    {_PB, B} = start_node(nifsock),
    ?assertEqual(ok, peer:call(PA, ?MODULE, small_exchange, [B, ?SMALL_COUNT], 60000)),
    ok.

%% @doc When a peer's OS process is killed, the other node gets `{nodedown, B}'
%% (monitor_node) and a nodedown from net_kernel:monitor_nodes at once (the
%% socket closes), well before any tick timeout.
dist_nodedown_when_peer_killed(_Config) ->
    {PA, _A} = start_node(nifsock),
    {PB, B} = start_node(nifsock),
    ?assertEqual(pong, peer:call(PA, net_adm, ping, [B], ?T)),
    ok = peer:call(PA, ?MODULE, watch_node, [B], ?T),
    OsPid = peer:call(PB, os, getpid, [], ?T),
    Killed = os:system_time(millisecond),
    _ = os:cmd("kill -9 " ++ OsPid),
    {nodedown, At, Reasons} = peer:call(PA, ?MODULE, await_nodedown, [20000], ?T),
    ct:pal("nodedown after ~b ms, reasons ~p", [At - Killed, Reasons]),
    ?assert(At - Killed < 5000),
    ?assertEqual([], peer:call(PA, erlang, nodes, [], ?T)),
    %% the connection's socket is gone: only the listener is left
    ?assertEqual(ok, peer:call(PA, ?MODULE, await_no_connection, [1, 5000], ?T)),
    ok.

%% @doc A nifsock_dist node and an inet_tcp_dist node: nifsock_dist speaks the
%% same wire protocol (epmd registration, handshake in 2-byte frames, then
%% 4-byte frames), so they connect, in either direction, and exchange
%% messages: pong, rpc both ways, a 1 MB binary both ways. The nifsock side
%% runs the connection with the group's carrier, the inet side with a port.
dist_mixed_cluster_with_inet_tcp(_Config) ->
    %% (not ?NO_RECONNECT: under it OTP 29's N, which disconnected I, refuses
    %% I's connection, and this case is about I setting one up)
    {PN, N} = start_node(nifsock),
    {PI, I} = start_node(inet_tcp),
    ?assertEqual(pong, peer:call(PN, net_adm, ping, [I], ?T)),
    [{I, CtrlN}] = peer:call(PN, erlang, system_info, [dist_ctrl], ?T),
    [{N, CtrlI}] = peer:call(PI, erlang, system_info, [dist_ctrl], ?T),
    ?assert(is_carrier(CtrlN)),
    ?assert(is_port(CtrlI)),
    ?assertEqual(I, peer:call(PN, rpc, call, [I, erlang, node, []], ?T)),
    ?assertEqual(N, peer:call(PI, rpc, call, [N, erlang, node, []], ?T)),
    ?assertEqual(ok, peer:call(PN, ?MODULE, big_exchange, [I, 1024 * 1024], ?T)),
    %% the other way round: the inet_tcp_dist node sets the connection up
    true = peer:call(PN, erlang, disconnect_node, [I], ?T),
    ?assertEqual(ok, peer:call(PN, ?MODULE, await_no_connection, [1, 5000], ?T)),
    ?assertEqual(pong, peer:call(PI, net_adm, ping, [N], ?T)),
    ?assertEqual(ok, peer:call(PI, ?MODULE, big_exchange, [N, 1024 * 1024], ?T)),
    ok.

%% @doc nifsock6_dist (`-proto_dist nifsock6'): two nodes connect over ::1.
dist_inet6(_Config) ->
    {PA, _A} = start_node(nifsock6),
    {_PB, B} = start_node(nifsock6),
    ?assertEqual(pong, peer:call(PA, net_adm, ping, [B], ?T)),
    {ok, Info} = peer:call(PA, net_kernel, node_info, [B], ?T),
    {net_address, {IP, _Port}, _Host, tcp, inet6} = proplists:get_value(address, Info),
    ?assertEqual({0, 0, 0, 0, 0, 0, 0, 1}, IP),
    ?assertEqual(ok, peer:call(PA, ?MODULE, big_exchange, [B, 1024 * 1024], ?T)),
    ok.

%% @doc erlang:disconnect_node closes the connection's socket on both nodes
%% (nifsock's socket count falls back to the listener) and the next ping
%% connects again.
dist_disconnect_closes_socket_and_reconnects(_Config) ->
    {PA, _A} = start_node(nifsock, "nifsock_dist_suite", ?NO_RECONNECT),
    {PB, B} = start_node(nifsock, "nifsock_dist_suite", ?NO_RECONNECT),
    ?assertEqual(pong, peer:call(PA, net_adm, ping, [B], ?T)),
    ?assertEqual(2, peer:call(PA, ?MODULE, socket_count, [], ?T)),
    true = peer:call(PA, erlang, disconnect_node, [B], ?T),
    ?assertEqual(ok, peer:call(PA, ?MODULE, await_no_connection, [1, 5000], ?T)),
    ?assertEqual(ok, peer:call(PB, ?MODULE, await_no_connection, [1, 5000], ?T)),
    ?assertEqual(true, peer:call(PA, net_kernel, connect_node, [B], ?T)),
    ?assertEqual(pong, peer:call(PA, net_adm, ping, [B], ?T)),
    ?assertEqual(2, peer:call(PA, ?MODULE, socket_count, [], ?T)),
    ok.

%% @doc Different cookies: the handshake fails, ping returns pang, and neither
%% node keeps a socket for the failed attempt.
dist_wrong_cookie_pang(_Config) ->
    {PA, _A} = start_node(nifsock, "cookie_one"),
    {PB, B} = start_node(nifsock, "cookie_two"),
    ?assertEqual(pang, peer:call(PA, net_adm, ping, [B], ?T)),
    ?assertEqual(ok, peer:call(PA, ?MODULE, await_no_connection, [1, 5000], ?T)),
    ?assertEqual(ok, peer:call(PB, ?MODULE, await_no_connection, [1, 5000], ?T)),
    ok.

%% @doc net_kernel:getopts/setopts on a live connection reach its socket
%% (nodelay is on by default, as inet_tcp_dist's); framing options are refused.
dist_connection_options(_Config) ->
    {PA, _A} = start_node(nifsock),
    {_PB, B} = start_node(nifsock),
    ?assertEqual(pong, peer:call(PA, net_adm, ping, [B], ?T)),
    ?assertEqual({ok, [{nodelay, true}]}, peer:call(PA, net_kernel, getopts, [B, [nodelay]], ?T)),
    ?assertEqual(ok, peer:call(PA, net_kernel, setopts, [B, [{nodelay, false}]], ?T)),
    ?assertEqual({ok, [{nodelay, false}]}, peer:call(PA, net_kernel, getopts, [B, [nodelay]], ?T)),
    ?assertMatch({error, {badopts, _}},
                 peer:call(PA, net_kernel, setopts, [B, [{packet, 2}]], ?T)),
    ?assertEqual(pong, peer:call(PA, net_adm, ping, [B], ?T)),
    ok.

%% @doc Ticks (net_ticktime 2 s): an idle connection stays up for 4 s (twice
%% the tick time), carried by ticks alone; when the peer stops (SIGSTOP) the
%% connection goes down with net_tick_timeout within a few seconds.
dist_ticks(_Config) ->
    Tick = ["-kernel", "net_ticktime", "2"],
    {PA, _A} = start_node(nifsock, "nifsock_dist_suite", Tick),
    {PB, B} = start_node(nifsock, "nifsock_dist_suite", Tick),
    ?assertEqual(pong, peer:call(PA, net_adm, ping, [B], ?T)),
    ok = peer:call(PA, ?MODULE, watch_node, [B], ?T),
    {ok, In0, Out0} = tick_counts(PA, B),
    timer:sleep(4000),
    ?assertEqual([B], peer:call(PA, erlang, nodes, [], ?T)),
    {ok, In1, Out1} = tick_counts(PA, B),
    ct:pal("ticks over 4 s idle: in ~b, out ~b", [In1 - In0, Out1 - Out0]),
    OsPid = peer:call(PB, os, getpid, [], ?T),
    Stopped = os:system_time(millisecond),
    _ = os:cmd("kill -STOP " ++ OsPid),
    try
        {nodedown, At, Reasons} = peer:call(PA, ?MODULE, await_nodedown, [20000], ?T),
        ct:pal("nodedown ~b ms after SIGSTOP, reasons ~p", [At - Stopped, Reasons]),
        ?assertEqual([monitor_node, {monitor_nodes, net_tick_timeout}], Reasons),
        ?assert(At - Stopped < 10000)
    after
        os:cmd("kill -CONT " ++ OsPid)
    end,
    ok.

%% @doc With kernel's check_ip on, a peer on one of our own subnets (loopback)
%% is let in.
dist_check_ip(_Config) ->
    CheckIp = ["-kernel", "check_ip", "true"],
    {PA, _A} = start_node(nifsock, "nifsock_dist_suite", CheckIp),
    {PB, B} = start_node(nifsock, "nifsock_dist_suite", CheckIp),
    ?assertEqual({ok, true}, peer:call(PB, application, get_env, [kernel, check_ip], ?T)),
    ?assertEqual(pong, peer:call(PA, net_adm, ping, [B], ?T)),
    ok.

%% @doc Over inet_tcp_dist and nifsock_dist: 3000 messages each way at the
%% same time, every 50th a binary of 300 KB or more (ERTS cuts it into
%% fragments, the reads cut those again), the rest a few bytes, arrive intact
%% and in order.
dist_interleaved_large_and_small_in_order(_Config) ->
    [begin
         {PA, _A} = start_node(C),
         {_PB, B} = start_node(C),
         ?assertEqual({C, ok}, {C, peer:call(PA, ?MODULE, mixed_exchange, [B, 3000], 60000)})
     end || C <- [inet_tcp, nifsock]],
    ok.

%% @doc Over inet_tcp_dist and nifsock_dist: with `{buffer, 7}' on the
%% connections every read is at most 7 bytes, so length headers and packets
%% are cut at every place; the interleaved exchange still arrives intact and
%% in order.
dist_tiny_reads_frame_intact(_Config) ->
    Tiny = ["-kernel", "inet_dist_listen_options", "[{buffer,7}]",
            "-kernel", "inet_dist_connect_options", "[{buffer,7}]"],
    [begin
         {PA, _A} = start_node(C, "nifsock_dist_suite", Tiny),
         {_PB, B} = start_node(C, "nifsock_dist_suite", Tiny),
         ?assertEqual({C, ok}, {C, peer:call(PA, ?MODULE, mixed_exchange, [B, 300], 60000)})
     end || C <- [inet_tcp, nifsock]],
    ok.

%% @doc Over inet_tcp_dist and nifsock_dist: five times a 2 MB binary each
%% way (nifsock_dist's input handler then reads passively) and 200 small
%% round trips (it is active again): every binary and answer arrives intact.
dist_streams_and_round_trips_alternate(_Config) ->
    [begin
         {PA, _A} = start_node(C),
         {_PB, B} = start_node(C),
         ?assertEqual({C, ok}, {C, peer:call(PA, ?MODULE, phases, [B, 5], 60000)})
     end || C <- [inet_tcp, nifsock]],
    ok.

%% @doc Over inet_tcp_dist and nifsock_dist: the peer's OS process killed
%% while both sides stream 1 MB binaries at each other (data queued to send,
%% read and not yet handled) gives nodedown, and the connection's socket is
%% closed: the dist controller port is gone (inet_tcp) or only the listener's
%% socket is left (nifsock).
dist_nodedown_with_data_in_flight(_Config) ->
    [begin
         {PA, _A} = start_node(C),
         {PB, B} = start_node(C),
         ?assertEqual(ok, peer:call(PA, ?MODULE, start_flood, [B], 60000)),
         Ctrl = peer:call(PA, ?MODULE, dist_ctrl, [B], ?T),
         ok = peer:call(PA, ?MODULE, watch_node, [B], ?T),
         OsPid = peer:call(PB, os, getpid, [], ?T),
         _ = os:cmd("kill -9 " ++ OsPid),
         {nodedown, _At, Reasons} = peer:call(PA, ?MODULE, await_nodedown, [20000], ?T),
         ct:pal("~p: nodedown reasons ~p", [C, Reasons]),
         ?assertMatch([monitor_node, {monitor_nodes, _}], Reasons),
         ?assertEqual({C, ok},
                      {C, peer:call(PA, ?MODULE, await_connection_gone, [C, Ctrl, 10000], ?T)})
     end || C <- [inet_tcp, nifsock]],
    ok.

%% @doc Over inet_tcp_dist and nifsock_dist: the node's count of open file
%% descriptors (/proc/self/fd) is back to what it was before the connection
%% once the connection goes down, whether it was disconnected or its peer
%% killed (with data in flight), and a connection set up again after a
%% disconnect brings it back too: no fd leaks.
dist_fd_count_restored_after_nodedown(_Config) ->
    [begin
         {PA, _A} = start_node(C, "nifsock_dist_suite", ?NO_RECONNECT),
         {PB, B} = start_node(C, "nifsock_dist_suite", ?NO_RECONNECT),
         %% the resolver's port (started by the first lookup) stays open
         [_, Host] = string:split(atom_to_list(B), "@"),
         {ok, _} = peer:call(PA, inet, getaddr, [Host, inet], ?T),
         Fds0 = peer:call(PA, ?MODULE, fd_count, [], ?T),
         ?assertEqual(pong, peer:call(PA, net_adm, ping, [B], ?T)),
         ?assert(peer:call(PA, ?MODULE, fd_count, [], ?T) > Fds0),
         true = peer:call(PA, erlang, disconnect_node, [B], ?T),
         ?assertEqual({C, ok}, {C, peer:call(PA, ?MODULE, await_fd_count, [Fds0, 10000], ?T)}),
         ?assertEqual(true, peer:call(PA, net_kernel, connect_node, [B], ?T)),
         ?assertEqual(pong, peer:call(PA, net_adm, ping, [B], ?T)),
         true = peer:call(PA, erlang, disconnect_node, [B], ?T),
         ?assertEqual({C, ok}, {C, peer:call(PA, ?MODULE, await_fd_count, [Fds0, 10000], ?T)}),
         ?assertEqual(true, peer:call(PA, net_kernel, connect_node, [B], ?T)),
         ?assertEqual(ok, peer:call(PA, ?MODULE, start_flood, [B], 60000)),
         ok = peer:call(PA, ?MODULE, watch_node, [B], ?T),
         OsPid = peer:call(PB, os, getpid, [], ?T),
         _ = os:cmd("kill -9 " ++ OsPid),
         {nodedown, _At, _Reasons} = peer:call(PA, ?MODULE, await_nodedown, [20000], ?T),
         ?assertEqual({C, ok}, {C, peer:call(PA, ?MODULE, await_fd_count, [Fds0, 10000], ?T)})
     end || C <- [inet_tcp, nifsock]],
    ok.

is_carrier(Ctrl) ->
    case get(dist_carrier) of
        process -> is_pid(Ctrl);
        _ -> is_port(Ctrl)
    end.

tick_counts(PA, B) ->
    {ok, Info} = peer:call(PA, net_kernel, node_info, [B], ?T),
    {ok, proplists:get_value(in, Info), proplists:get_value(out, Info)}.

%%% ------------------------------------------------------------------
%%% Inside the peers

%% @doc On A: sends B a `Size'-byte binary while B sends one back; both sides
%% check what they got against the sender's MD5.
big_exchange(B, Size) ->
    Peer = spawn_link(B, ?MODULE, big_peer, [self()]),
    Mine = rand:bytes(Size),
    Peer ! {self(), Mine, erlang:md5(Mine)},
    receive
        {Peer, Theirs, TheirMd5, MineOk} ->
            ?assertEqual(Size, byte_size(Theirs)),
            ?assertEqual(TheirMd5, erlang:md5(Theirs)),
            ?assertEqual(true, MineOk),
            ok
    after 50000 ->
            timeout
    end.

%% @doc On B: sends a binary of the same size back at once, then checks A's.
big_peer(From) ->
    receive
        {From, Bin, Md5} ->
            Mine = rand:bytes(byte_size(Bin)),
            From ! {self(), Mine, erlang:md5(Mine), erlang:md5(Bin) =:= Md5}
    end.

%% @doc On A: N messages each way at the same time, each side checking order.
small_exchange(B, N) ->
    Peer = spawn_link(B, ?MODULE, small_peer, [self(), N]),
    _ = spawn_link(fun() -> [Peer ! {seq, I} || I <- lists:seq(1, N)] end),
    Got = receive_in_order(1, N),
    PeerGot = receive {Peer, R} -> R after 50000 -> timeout end,
    case {Got, PeerGot} of
        {ok, ok} -> ok;
        Other -> Other
    end.

%% @doc On B: sends N messages to A while checking the order of A's.
small_peer(From, N) ->
    Self = self(),
    _ = spawn_link(fun() -> [From ! {seq, I} || I <- lists:seq(1, N)], Self ! sent end),
    Got = receive_in_order(1, N),
    receive sent -> ok end,
    From ! {self(), Got}.

receive_in_order(I, N) when I > N ->
    ok;
receive_in_order(I, N) ->
    receive
        {seq, I} -> receive_in_order(I + 1, N);
        {seq, J} -> {out_of_order, I, J}
    after 30000 ->
            {missing_from, I}
    end.

%% @doc On A: N messages each way at the same time, small ones and every 50th
%% a large binary, each side checking content and order.
mixed_exchange(B, N) ->
    Peer = spawn_link(B, ?MODULE, mixed_peer, [self(), N]),
    _ = spawn_link(fun() -> [Peer ! mixed(I) || I <- lists:seq(1, N)] end),
    Got = receive_mixed(1, N),
    PeerGot = receive {Peer, R} -> R after 50000 -> timeout end,
    case {Got, PeerGot} of
        {ok, ok} -> ok;
        Other -> Other
    end.

%% @doc On B: sends A the same N messages while checking A's.
mixed_peer(From, N) ->
    Self = self(),
    _ = spawn_link(fun() -> [From ! mixed(I) || I <- lists:seq(1, N)], Self ! sent end),
    Got = receive_mixed(1, N),
    receive sent -> ok end,
    From ! {self(), Got}.

mixed(I) when I rem 50 =:= 0 -> {mixed, I, binary:copy(<<I:32>>, 75000 + I)};
mixed(I) -> {mixed, I, <<I:32>>}.

receive_mixed(I, N) when I > N ->
    ok;
receive_mixed(I, N) ->
    Want = mixed(I),
    receive
        Want -> receive_mixed(I + 1, N);
        {mixed, J, Bin} -> {wrong, I, J, byte_size(Bin)}
    after 30000 ->
            {missing_from, I}
    end.

%% @doc On A: N times a 2 MB binary each way, then 200 round trips to an
%% echo process on B.
phases(_B, 0) ->
    ok;
phases(B, N) ->
    ok = big_exchange(B, 2 * 1024 * 1024 + N),
    Echo = spawn_link(B, ?MODULE, echo, []),
    ok = ping_pong(Echo, 200),
    Echo ! stop,
    phases(B, N - 1).

ping_pong(_Echo, 0) ->
    ok;
ping_pong(Echo, K) ->
    Echo ! {self(), K},
    receive
        {Echo, K} -> ping_pong(Echo, K - 1);
        {Echo, Other} -> {wrong_answer, K, Other}
    after 30000 ->
            {no_answer, K}
    end.

%% @doc On B: answers `{From, X}' with `{self(), X}' until `stop'.
echo() ->
    receive
        {From, X} -> From ! {self(), X}, echo();
        stop -> ok
    end.

%% @doc On A: 1 MB binaries stream to a sink on B and from B to a sink here,
%% until the connection goes; returns once each sink has had 5 MB.
start_flood(B) ->
    Self = self(),
    SinkA = spawn(fun() -> flood_sink(Self, a, 0) end),
    _ = spawn(B, ?MODULE, flood_peer, [SinkA, Self]),
    receive
        {sink_b, SinkB} -> _ = spawn(fun() -> flood(SinkB, flood_bin()) end)
    after 30000 -> error(no_sink_b)
    end,
    [receive {flooded, Side} -> ok after 50000 -> error({no_flood, Side}) end || Side <- [a, b]],
    ok.

%% @doc On B: a sink for A's stream, and a stream to A's sink.
flood_peer(SinkA, Caller) ->
    SinkB = spawn(fun() -> flood_sink(Caller, b, 0) end),
    Caller ! {sink_b, SinkB},
    flood(SinkA, flood_bin()).

flood_bin() -> binary:copy(<<"flood!!!">>, 131072).

%% Sends until the connection is gone (noconnect: no new connection attempt).
flood(To, Bin) ->
    case erlang:send(To, Bin, [noconnect]) of
        ok -> flood(To, Bin);
        _ -> ok
    end.

flood_sink(Report, Side, Got) ->
    receive
        Bin when is_binary(Bin) ->
            Got1 = Got + byte_size(Bin),
            Got < 5000000 andalso Got1 >= 5000000 andalso (Report ! {flooded, Side}),
            flood_sink(Report, Side, Got1)
    end.

%% @doc On A: the controller of the connection to B (a port for inet_tcp).
dist_ctrl(B) ->
    proplists:get_value(B, erlang:system_info(dist_ctrl)).

%% @doc On A: waits until no node is connected and the connection's socket
%% is closed: the controller port closed (inet_tcp), or only the listener's
%% nifsock socket left (nifsock).
await_connection_gone(_Carrier, Ctrl, Timeout) when Timeout =< 0 ->
    {still, nodes(), Ctrl, socket_count()};
await_connection_gone(Carrier, Ctrl, Timeout) ->
    Gone = case Carrier of
               inet_tcp -> erlang:port_info(Ctrl) =:= undefined;
               nifsock -> socket_count() =:= 1
           end,
    case {nodes(), Gone} of
        {[], true} -> ok;
        _ -> timer:sleep(20), await_connection_gone(Carrier, Ctrl, Timeout - 20)
    end.

%% @doc On A: starts a watcher of node B (monitor_node and monitor_nodes).
watch_node(B) ->
    Caller = self(),
    Pid = spawn(fun() ->
                        register(nifsock_dist_watcher, self()),
                        ok = net_kernel:monitor_nodes(true, [nodedown_reason]),
                        true = monitor_node(B, true),
                        Caller ! {self(), watching},
                        watcher(B, [])
                end),
    receive {Pid, watching} -> ok end.

watcher(B, Seen) ->
    receive
        {nodedown, B} when Seen =:= [] ->
            watcher(B, [monitor_node]);
        {nodedown, B} ->
            report_nodedown(lists:reverse([monitor_node | Seen]));
        {nodedown, B, Info} when Seen =:= [] ->
            watcher(B, [{monitor_nodes, proplists:get_value(nodedown_reason, Info)}]);
        {nodedown, B, Info} ->
            report_nodedown(lists:reverse([{monitor_nodes,
                                            proplists:get_value(nodedown_reason, Info)} | Seen]))
        %% anything else (an await arriving early, nodeups) stays queued
    end.

report_nodedown(Reasons) ->
    At = os:system_time(millisecond),
    receive {From, await} -> From ! {self(), {nodedown, At, Reasons}} end.

%% @doc On A: waits for the watcher to have seen both nodedowns.
await_nodedown(Timeout) ->
    Pid = whereis(nifsock_dist_watcher),
    Pid ! {self(), await},
    receive {Pid, Result} -> Result after Timeout -> timeout end.

%% @doc On A: the OS process's open file descriptors.
fd_count() ->
    {ok, Fds} = file:list_dir("/proc/self/fd"),
    length(Fds).

%% @doc On A: waits until no node is connected and `Expected' fds are open.
await_fd_count(Expected, Timeout) when Timeout =< 0 ->
    {still, nodes(), fd_count(), Expected};
await_fd_count(Expected, Timeout) ->
    case {nodes(), fd_count()} of
        {[], Expected} -> ok;
        _ -> timer:sleep(20), await_fd_count(Expected, Timeout - 20)
    end.

%% @doc File descriptors held by nifsock sockets in this node (closed
%% sockets whose objects are not yet garbage collected don't count).
socket_count() ->
    maps:get(fds, nifsock:info()).

%% @doc Waits until no node is connected and `Expected' sockets are open.
await_no_connection(Expected, Timeout) when Timeout =< 0 ->
    {still, nodes(), socket_count(), Expected};
await_no_connection(Expected, Timeout) ->
    case {nodes(), socket_count()} of
        {[], Expected} -> ok;
        _ -> timer:sleep(20), await_no_connection(Expected, Timeout - 20)
    end.

%% @doc After connections are set up, used and taken down again, no epoll set of
%% the node (ERTS's, nifsock's) still holds a registration of a file no fd of
%% the node refers to (as a socket's registration would if its close left it
%% there, e.g. the port carrier's handed-over socket, whose dup keeps its
%% open file alive).
dist_no_stale_epoll_registration(_Config) ->
    [begin
         {PA, _A} = start_node(C, "nifsock_dist_suite", ?NO_RECONNECT),
         {PB, B} = start_node(C, "nifsock_dist_suite", ?NO_RECONNECT),
         ?assertEqual(pong, peer:call(PA, net_adm, ping, [B], ?T)),
         ?assertEqual(ok, peer:call(PA, ?MODULE, small_exchange, [B, 1000], 60000)),
         ?assertEqual({C, []}, {C, peer:call(PA, ?MODULE, stale_epoll_entries, [], ?T)}),
         ?assertEqual({C, []}, {C, peer:call(PB, ?MODULE, stale_epoll_entries, [], ?T)}),
         true = peer:call(PA, erlang, disconnect_node, [B], ?T),
         ok = peer:call(PA, ?MODULE, await_no_connection_nodes, [10000], ?T),
         ?assertEqual(true, peer:call(PA, net_kernel, connect_node, [B], ?T)),
         ?assertEqual(pong, peer:call(PA, net_adm, ping, [B], ?T)),
         ?assertEqual({C, []}, {C, peer:call(PA, ?MODULE, stale_epoll_entries, [], ?T)})
     end || C <- [inet_tcp, nifsock]],
    ok.

%% @doc Port carrier, on the select readiness path (where no readiness port
%% holds nifsock's driver): the driver stays loaded after every connection
%% and its processes are gone (erl_ddll would otherwise unload it with the
%% last of them, killing a dying connection's port with `driver_unloaded'
%% before its own reason reaches it), and the next connection is a port again.
dist_port_driver_outlives_connections(_Config) ->
    Select = ["-nifsock", "readiness", "select" | ?NO_RECONNECT],
    {PA, _A} = start_node(nifsock, "nifsock_dist_suite", Select),
    {_PB, B} = start_node(nifsock, "nifsock_dist_suite", Select),
    ?assertEqual(pong, peer:call(PA, net_adm, ping, [B], ?T)),
    [{B, Ctrl}] = peer:call(PA, erlang, system_info, [dist_ctrl], ?T),
    ?assert(is_port(Ctrl)),
    {links, Conn} = peer:call(PA, erlang, port_info, [Ctrl, links], ?T),
    true = peer:call(PA, erlang, disconnect_node, [B], ?T),
    ok = peer:call(PA, ?MODULE, await_no_connection_nodes, [10000], ?T),
    ?assertEqual(still_loaded, peer:call(PA, ?MODULE, await_driver_unloaded, [Conn, 2000], ?T)),
    ?assertEqual(true, peer:call(PA, net_kernel, connect_node, [B], ?T)),
    ?assertEqual(pong, peer:call(PA, net_adm, ping, [B], ?T)),
    [{B, Ctrl2}] = peer:call(PA, erlang, system_info, [dist_ctrl], ?T),
    ?assert(is_port(Ctrl2)),
    ok.

%%% ------------------------------------------------------------------
%%% Helpers

start_node(Carrier) ->
    start_node(Carrier, "nifsock_dist_suite").

start_node(Carrier, Cookie) ->
    start_node(Carrier, Cookie, []).

start_node(Carrier, Cookie, Extra) ->
    Dist = case Carrier of
               inet_tcp -> [];
               _ -> ["-proto_dist", atom_to_list(Carrier),
                     "-nifsock", "dist_carrier", atom_to_list(group_carrier())]
           end,
    Name = peer:random_name(lists:concat(["nsd_", Carrier])),
    {Peer, Node} = nifsock_test_lib:start_peer(#{name => Name, connection => standard_io,
                                                 args => Dist ++ ["-setcookie", Cookie] ++ Extra}),
    {module, _} = peer:call(Peer, code, ensure_loaded, [?MODULE], ?T),
    {Peer, Node}.

group_carrier() ->
    case get(dist_carrier) of
        undefined -> port;
        C -> C
    end.

strip_stack({badrpc, {'EXIT', {Reason, _Stack}}}) -> {badrpc, {'EXIT', {Reason, '_'}}};
strip_stack(Other) -> Other.

%% @doc In a peer: the registrations of this node's epoll sets whose target
%% is no open fd of the node with that inode: `[{EpollFd, TargetFd, Inode}]'.
stale_epoll_entries() ->
    {ok, Names} = file:list_dir("/proc/self/fd"),
    Fds = [list_to_integer(N) || N <- Names],
    Epolls = [Fd || Fd <- Fds,
                    file:read_link("/proc/self/fd/" ++ integer_to_list(Fd)) =:=
                        {ok, "anon_inode:[eventpoll]"}],
    [{Ep, Tfd, Ino} || Ep <- Epolls, {Tfd, Ino} <- epoll_targets(Ep),
                       fd_inode(Tfd) =/= {ok, Ino}].

epoll_targets(Ep) ->
    case file:read_file("/proc/self/fdinfo/" ++ integer_to_list(Ep)) of
        {ok, Info} ->
            [{binary_to_integer(Tfd), binary_to_integer(Ino, 16)}
             || Line <- binary:split(Info, <<"\n">>, [global]),
                {match, [Tfd, Ino]} <- [re:run(Line, "^tfd:\\s+(\\d+).*\\sino:([0-9a-f]+)",
                                               [{capture, all_but_first, binary}])]];
        {error, _} ->
            [] % closed since the listing
    end.

fd_inode(Fd) ->
    case file:read_file_info("/proc/self/fd/" ++ integer_to_list(Fd)) of
        {ok, #file_info{inode = Ino}} -> {ok, Ino};
        Error -> Error
    end.

%% @doc In a peer: waits until no node is connected.
await_no_connection_nodes(Timeout) when Timeout =< 0 ->
    {still, nodes()};
await_no_connection_nodes(Timeout) ->
    case nodes() of
        [] -> ok;
        _ -> timer:sleep(20), await_no_connection_nodes(Timeout - 20)
    end.

%% @doc In a peer: once the processes `Pids' are gone, whether nifsock's
%% driver gets unloaded within `Timeout' ms (`unloaded') or not (`still_loaded').
await_driver_unloaded(Pids, Timeout) ->
    Refs = [erlang:monitor(process, P) || P <- Pids, is_pid(P)],
    [receive {'DOWN', R, process, _, _} -> ok after 10000 -> ok end || R <- Refs],
    poll_driver_unloaded(Timeout).

poll_driver_unloaded(Timeout) ->
    {ok, Drivers} = erl_ddll:loaded_drivers(),
    case {lists:member("libnifsock", Drivers), Timeout =< 0} of
        {false, _} -> unloaded;
        {true, true} -> still_loaded;
        {true, false} -> timer:sleep(50), poll_driver_unloaded(Timeout - 50)
    end.
