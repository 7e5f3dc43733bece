%%% Common Test suite for `nifsock_ranch', the Ranch 2.x transport.
%%%
%%% Ranch itself is not available here, so the suite drives the transport the
%%% way Ranch and Cowboy do, with a small stand-in for each:
%%%   - acceptors: N processes looping on accept(L, infinity) on one listen
%%%     socket (ranch_acceptor): controlling_process to the connection
%%%     supervisor, then a synchronous start_protocol call; they exit on
%%%     {error, closed} and report any message they did not expect;
%%%   - the connection supervisor (ranch_conns_sup): spawns the connection
%%%     process, passes the socket on with controlling_process (the socket's
%%%     second hand-over) and sends it {handshake, Ref, Transport, S, Timeout};
%%%   - the connection process (cowboy_http-like): handshake/3, then
%%%     {active, 100} re-armed on {nifsock_passive, S}; HTTP/1.1-like requests
%%%     with content-length; request bodies read with {active, false} + recv
%%%     (flow control); responses sent as iolists or with sendfile;
%%%     "connection: close" answered, then shutdown(S, write) and a wait for
%%%     {nifsock_closed, S}.
%%% Clients are plain gen_tcp sockets or nifsock_ranch:connect/3,4 sockets.
%%% All traffic is on loopback (and one unix socket under /tmp).
-module(nifsock_ranch_SUITE).

-include_lib("common_test/include/ct.hrl").

-export([all/0, suite/0, init_per_suite/1, end_per_suite/1,
         init_per_testcase/2, end_per_testcase/2]).

-export([ranch_exports_transport_callbacks/1,
         ranch_identity/1,
         ranch_listen_defaults/1,
         ranch_inherit_options/1,
         ranch_listen_filters_disallowed/1,
         ranch_listen_errors/1,
         ranch_listen_local/1,
         ranch_listen_reuseport/1,
         ranch_accept_timeout_and_closed/1,
         ranch_handshake_variants/1,
         ranch_connect/1,
         ranch_controlling_process_twice/1,
         ranch_http_many_clients/1,
         ranch_active_n_rearm/1,
         ranch_pipelined_requests/1,
         ranch_connection_churn_no_leak/1,
         ranch_flow_control_active_false/1,
         ranch_shutdown_write_then_closed/1,
         ranch_send_iolist/1,
         ranch_send_iolist_many_binaries/1,
         ranch_sendfile/1,
         ranch_sendfile_after_send_timeout/1,
         ranch_sendfile_256k_over_http/1,
         ranch_recv_proxy_header_v1/1,
         ranch_recv_proxy_header_v1_split/1,
         ranch_recv_proxy_header_v1_errors/1,
         ranch_recv_proxy_header_v2/1,
         ranch_recv_proxy_header_v2_errors/1,
         ranch_recv_proxy_header_timeout_closed/1,
         ranch_getstat/1,
         ranch_peername_sockname/1,
         ranch_owner_exit_closes/1]).

-import(nifsock_test_lib, [flush/0, proxy_tlv/2, proxy_v2/2, tmp_path/1]).

-define(T, 5000).
-define(ACTIVE_N, 100).
-define(FILE_SIZE, (256 * 1024)).
-define(ACCEPTORS, 10).
-define(TR, nifsock_ranch).

%%--------------------------------------------------------------------
%% CT callbacks
%%--------------------------------------------------------------------

suite() -> [{timetrap, {seconds, 120}}].

all() ->
    [ranch_exports_transport_callbacks,
     ranch_identity,
     ranch_listen_defaults,
     ranch_inherit_options,
     ranch_listen_filters_disallowed,
     ranch_listen_errors,
     ranch_listen_local,
     ranch_listen_reuseport,
     ranch_accept_timeout_and_closed,
     ranch_handshake_variants,
     ranch_connect,
     ranch_controlling_process_twice,
     ranch_http_many_clients,
     ranch_active_n_rearm,
     ranch_pipelined_requests,
     ranch_connection_churn_no_leak,
     ranch_flow_control_active_false,
     ranch_shutdown_write_then_closed,
     ranch_send_iolist,
     ranch_send_iolist_many_binaries,
     ranch_sendfile,
     ranch_sendfile_after_send_timeout,
     ranch_sendfile_256k_over_http,
     ranch_recv_proxy_header_v1,
     ranch_recv_proxy_header_v1_split,
     ranch_recv_proxy_header_v1_errors,
     ranch_recv_proxy_header_v2,
     ranch_recv_proxy_header_v2_errors,
     ranch_recv_proxy_header_timeout_closed,
     ranch_getstat,
     ranch_peername_sockname,
     ranch_owner_exit_closes].

init_per_suite(Config) ->
    {module, ?TR} = code:ensure_loaded(?TR),
    File = filename:join(?config(priv_dir, Config), "sendfile_256k.bin"),
    Content = rand:bytes(?FILE_SIZE),
    ok = file:write_file(File, Content),
    %% The server side of GET /file/... finds the file here.
    persistent_term:put({?MODULE, file}, File),
    %% The test's CRC-32C must be right for the v2 checksum cases to mean anything.
    16#E3069283 = crc32c(<<"123456789">>),
    [{file, File}, {content, Content} | Config].

end_per_suite(_Config) ->
    _ = persistent_term:erase({?MODULE, file}),
    ok.

init_per_testcase(_Case, Config) ->
    flush(),
    Config.

end_per_testcase(_Case, _Config) ->
    flush(),
    ok.

%%--------------------------------------------------------------------
%% The transport module itself
%%--------------------------------------------------------------------

%% Every ranch_transport callback (Ranch 2.x) and every ranch_tcp export is exported with its arity.
ranch_exports_transport_callbacks(_Config) ->
    Callbacks = [{name, 0}, {secure, 0}, {messages, 0}, {listen, 1}, {accept, 2},
                 {handshake, 3}, {connect, 3}, {connect, 4}, {recv, 3}, {send, 2},
                 {sendfile, 2}, {sendfile, 4}, {sendfile, 5}, {setopts, 2}, {getopts, 2},
                 {getstat, 1}, {getstat, 2}, {controlling_process, 2}, {peername, 1},
                 {sockname, 1}, {shutdown, 2}, {close, 1}],
    RanchTcpExtra = [{disallowed_listen_options, 0}, {handshake, 2}, {handshake_continue, 2},
                     {handshake_continue, 3}, {handshake_cancel, 1}, {recv_proxy_header, 2},
                     {cleanup, 1}],
    Exports = ?TR:module_info(exports),
    [] = (Callbacks ++ RanchTcpExtra) -- Exports,
    ok.

%% name/0 is nifsock, secure/0 false, messages/0 the four nifsock tags, disallowed options as ranch_tcp plus nifsock_tcp's tags.
ranch_identity(_Config) ->
    nifsock = ?TR:name(),
    false = ?TR:secure(),
    {nifsock, nifsock_closed, nifsock_error, nifsock_passive} = ?TR:messages(),
    [active, header, mode, packet, packet_size, line_delimiter, reuseaddr, tags] =
        ?TR:disallowed_listen_options().

%% listen/1 with no options: passive, raw, binary, reuseaddr, nodelay, send_timeout 30000, port chosen by the kernel.
ranch_listen_defaults(_Config) ->
    {ok, L} = ?TR:listen(#{socket_opts => [{ip, {127, 0, 0, 1}}]}),
    {ok, Opts} = ?TR:getopts(L, [active, packet, mode, reuseaddr, nodelay, send_timeout]),
    [{active, false}, {packet, 0}, {mode, binary}, {reuseaddr, true}, {nodelay, true},
     {send_timeout, 30000}] = Opts,
    {ok, {{127, 0, 0, 1}, Port}} = ?TR:sockname(L),
    true = Port > 0,
    %% An explicit port is used; the transport options map may be empty too.
    ok = ?TR:close(L),
    {ok, L2} = ?TR:listen(#{socket_opts => [{ip, {127, 0, 0, 1}}, {port, Port}]}),
    {ok, {{127, 0, 0, 1}, Port}} = ?TR:sockname(L2),
    ok = ?TR:close(L2),
    {ok, L3} = ?TR:listen(#{}),
    {ok, {_, Port3}} = ?TR:sockname(L3),
    true = Port3 > 0,
    ok = ?TR:close(L3),
    %% Accepted sockets start the same way.
    {ok, L4} = ?TR:listen(#{socket_opts => [{ip, {127, 0, 0, 1}}, {send_timeout, 1234}]}),
    {ok, {_, Port4}} = ?TR:sockname(L4),
    {ok, C} = gen_tcp:connect({127, 0, 0, 1}, Port4, []),
    {ok, S} = ?TR:accept(L4, ?T),
    {ok, [{active, false}, {packet, 0}, {mode, binary}, {nodelay, true}, {send_timeout, 1234}]} =
        ?TR:getopts(S, [active, packet, mode, nodelay, send_timeout]),
    ok = ?TR:close(S), ok = ?TR:close(L4), gen_tcp:close(C).

%% Ranch's acceptor_SUITE:tcp_inherit_options: an accepted socket reads the listener's nodelay and send_timeout_close (ranch_tcp's default send_timeout_close true too), and getopts/setopts pass gen_tcp's other options through.
ranch_inherit_options(_Config) ->
    {ok, L} = ?TR:listen(#{socket_opts => [{ip, {127, 0, 0, 1}}, {nodelay, false},
                                           {send_timeout_close, false}]}),
    {ok, {_, Port}} = ?TR:sockname(L),
    {ok, C} = gen_tcp:connect({127, 0, 0, 1}, Port, []),
    {ok, S} = ?TR:accept(L, ?T),
    {ok, [{nodelay, false}, {send_timeout_close, false}]} =
        ?TR:getopts(S, [nodelay, send_timeout_close]),
    Opts = [{header, 0}, {delay_send, true}, {high_watermark, 65536}, {low_watermark, 32768},
            {show_econnreset, true}, {deliver, term}, {send_timeout_close, true}],
    ok = ?TR:setopts(S, Opts),
    {ok, Opts} = ?TR:getopts(S, [N || {N, _} <- Opts]),
    ok = ?TR:close(S), ok = ?TR:close(L), gen_tcp:close(C),
    {ok, L2} = ?TR:listen(#{socket_opts => [{ip, {127, 0, 0, 1}}]}),
    {ok, [{send_timeout_close, true}]} = ?TR:getopts(L2, [send_timeout_close]),
    ok = ?TR:close(L2).

%% Disallowed user options (active, packet, mode, reuseaddr, list, tags...) are dropped; allowed ones (nodelay false, backlog) are kept.
ranch_listen_filters_disallowed(_Config) ->
    {ok, L} = ?TR:listen(#{logger => false,
                           socket_opts => [{ip, {127, 0, 0, 1}}, {active, true}, {packet, 2},
                                           {mode, list}, list, {reuseaddr, false},
                                           {packet_size, 10}, {nodelay, false}, {backlog, 7},
                                           {keepalive, true}, {inet_backend, socket},
                                           {tags, gen_tcp}]}),
    {ok, [{active, false}, {packet, 0}, {mode, binary}, {reuseaddr, true}, {nodelay, false},
          {keepalive, true}, {packet_size, 0},
          {tags, {nifsock, nifsock_closed, nifsock_error, nifsock_passive}}]} =
        ?TR:getopts(L, [active, packet, mode, reuseaddr, nodelay, keepalive, packet_size, tags]),
    ok = ?TR:close(L).

%% listen/1 errors are {error, Reason}: a port in use, an unknown option.
ranch_listen_errors(_Config) ->
    {ok, L} = ?TR:listen(#{socket_opts => [{ip, {127, 0, 0, 1}}]}),
    {ok, {_, Port}} = ?TR:sockname(L),
    {error, eaddrinuse} = ?TR:listen(#{socket_opts => [{ip, {127, 0, 0, 1}}, {port, Port}]}),
    {error, einval} = ?TR:listen(#{logger => false,
                                   socket_opts => [{ip, {127, 0, 0, 1}}, {no_such, 1}]}),
    ok = ?TR:close(L).

%% {ip, {local, Path}}: listens on a unix socket (a stale file is removed first), connect({local, Path}, 0, []) works, cleanup/1 removes the file.
ranch_listen_local(_Config) ->
    Path = unique_sock_path(),
    ok = file:write_file(Path, <<"stale">>),
    TransOpts = #{socket_opts => [{ip, {local, Path}}]},
    {ok, L} = ?TR:listen(TransOpts),
    {ok, {local, Path}} = ?TR:sockname(L),
    {ok, C} = ?TR:connect({local, Path}, 0, []),
    {ok, S} = ?TR:accept(L, ?T),
    ok = ?TR:send(C, <<"over unix">>),
    {ok, <<"over unix">>} = ?TR:recv(S, 9, ?T),
    {ok, {local, Path}} = ?TR:peername(C),
    {ok, {local, _}} = ?TR:peername(S),
    [ok = ?TR:close(X) || X <- [C, S, L]],
    ok = ?TR:cleanup(TransOpts),
    {error, enoent} = file:read_file_info(Path),
    ok = ?TR:cleanup(#{}).

%% Two listen sockets on one port with {reuseport, true} (Ranch's num_listen_sockets): connections reach both.
ranch_listen_reuseport(_Config) ->
    {ok, L1} = ?TR:listen(#{socket_opts => [{ip, {127, 0, 0, 1}}, {reuseport, true}]}),
    {ok, {_, Port}} = ?TR:sockname(L1),
    {ok, L2} = ?TR:listen(#{socket_opts => [{ip, {127, 0, 0, 1}}, {port, Port}, {reuseport, true}]}),
    {ok, {_, Port}} = ?TR:sockname(L2),
    Clients = [begin {ok, C} = gen_tcp:connect({127, 0, 0, 1}, Port, []), C end
               || _ <- lists:seq(1, 32)],
    Count = fun Count(L, Acc) ->
                    case ?TR:accept(L, 200) of
                        {ok, S} -> Count(L, [S | Acc]);
                        {error, timeout} -> Acc
                    end
            end,
    A1 = Count(L1, []),
    A2 = Count(L2, []),
    ct:log("accepted on L1: ~p, on L2: ~p", [length(A1), length(A2)]),
    32 = length(A1) + length(A2),
    true = A1 =/= [] andalso A2 =/= [],
    [ok = ?TR:close(S) || S <- A1 ++ A2 ++ [L1, L2]],
    [gen_tcp:close(C) || C <- Clients],
    ok.

%% accept/2 times out with {error, timeout}; an acceptor blocked in accept(L, infinity) gets {error, closed} when L closes, and so does a later accept.
ranch_accept_timeout_and_closed(_Config) ->
    {ok, L} = ?TR:listen(#{socket_opts => [{ip, {127, 0, 0, 1}}]}),
    {error, timeout} = ?TR:accept(L, 50),
    Self = self(),
    Acceptors = [spawn_link(fun() -> Self ! {accepted, self(), ?TR:accept(L, infinity)} end)
                 || _ <- lists:seq(1, 3)],
    timer:sleep(100),
    ok = ?TR:close(L),
    [receive {accepted, A, R} -> {error, closed} = R after ?T -> ct:fail(acceptor_stuck) end
     || A <- Acceptors],
    {error, closed} = ?TR:accept(L, 100).

%% handshake/2,3 return the socket; handshake_continue/2,3 and handshake_cancel/1 raise not_supported, as ranch_tcp.
ranch_handshake_variants(_Config) ->
    {C, S} = pair(),
    {ok, S} = ?TR:handshake(S, ?T),
    {ok, S} = ?TR:handshake(S, [], ?T),
    {'EXIT', {not_supported, _}} = (catch ?TR:handshake_continue(S, ?T)),
    {'EXIT', {not_supported, _}} = (catch ?TR:handshake_continue(S, [], ?T)),
    {'EXIT', {not_supported, _}} = (catch ?TR:handshake_cancel(S)),
    ok = ?TR:close(S), ok = ?TR:close(C).

%% connect/3,4: by address or "localhost", passive raw binary whatever Opts say; {inet_backend, _} (gen_tcp's backend choice, which Ranch's own suites pass) is dropped; econnrefused; unknown option {error, einval}.
ranch_connect(_Config) ->
    {ok, L} = ?TR:listen(#{socket_opts => [{ip, {127, 0, 0, 1}}]}),
    {ok, {_, Port}} = ?TR:sockname(L),
    {ok, C1} = ?TR:connect({127, 0, 0, 1}, Port, []),
    {ok, C2} = ?TR:connect("localhost", Port, [{active, true}, list, {packet, 2}], ?T),
    {ok, S1} = ?TR:accept(L, ?T),
    {ok, S2} = ?TR:accept(L, ?T),
    [{ok, [{active, false}, {packet, 0}, {mode, binary}]} = ?TR:getopts(C, [active, packet, mode])
     || C <- [C1, C2]],
    ok = ?TR:send(S2, <<"to c2">>),
    {ok, <<"to c2">>} = ?TR:recv(C2, 5, ?T),
    ok = ?TR:send(C1, <<"to s1">>),
    {ok, <<"to s1">>} = ?TR:recv(S1, 5, ?T),
    {ok, C3} = ?TR:connect({127, 0, 0, 1}, Port, [{inet_backend, socket}], ?T),
    {ok, S3} = ?TR:accept(L, ?T),
    ok = ?TR:send(C3, <<"to s3">>),
    {ok, <<"to s3">>} = ?TR:recv(S3, 5, ?T),
    [ok = ?TR:close(X) || X <- [C1, C2, C3, S1, S2, S3, L]],
    {error, econnrefused} = ?TR:connect({127, 0, 0, 1}, Port, [], ?T),
    {error, einval} = ?TR:connect({127, 0, 0, 1}, Port, [{no_such, 1}]).

%% The socket goes acceptor -> supervisor -> connection process; data sent before the hand-overs is all read by the connection process, and nobody else gets a message.
ranch_controlling_process_twice(Config) ->
    Self = self(),
    Handler = fun(S) ->
                      {ok, Early} = ?TR:recv(S, 5, ?T),
                      ok = ?TR:setopts(S, [{active, once}]),
                      Late = receive {nifsock, S, D} -> D after ?T -> none end,
                      Self ! {handler, Early, Late},
                      ok = ?TR:send(S, <<"done">>),
                      ?TR:close(S)
              end,
    Lst = start_listener(Config, #{handler => Handler, acceptors => 2}),
    {ok, C} = gen_tcp:connect({127, 0, 0, 1}, port(Lst), [binary, {active, false}]),
    ok = gen_tcp:send(C, <<"early">>),
    timer:sleep(50),
    ok = gen_tcp:send(C, <<"late">>),
    receive {handler, E, La} -> {<<"early">>, <<"late">>} = {E, La}
    after ?T -> ct:fail(no_handler_report)
    end,
    {ok, <<"done">>} = gen_tcp:recv(C, 4, ?T),
    gen_tcp:close(C),
    Stats = stop_listener(Lst),
    0 = maps:get(unexpected, Stats, 0),
    1 = maps:get(accepted, Stats, 0).

%%--------------------------------------------------------------------
%% Cowboy-like HTTP loop
%%--------------------------------------------------------------------

%% 10 acceptors, 200 concurrent clients (gen_tcp and nifsock_ranch), 5 keep-alive requests and a closing one each: every answer is right, every connection ends by shutdown(write) + closed.
ranch_http_many_clients(Config) ->
    Lst = start_listener(Config, #{}),
    Port = port(Lst),
    NClients = 200,
    Self = self(),
    Pids = [spawn_link(fun() ->
                               Kind = case I rem 2 of 0 -> gen_tcp; 1 -> ?TR end,
                               Self ! {client_done, self(), client_run(Kind, Port, I, 5)}
                       end) || I <- lists:seq(1, NClients)],
    Results = [receive {client_done, P, R} -> R after 60000 -> {timeout, P} end || P <- Pids],
    check_clients(Lst, Results),
    Stats = wait_stats(Lst, closed_after_shutdown, NClients),
    ct:log("stats ~p", [Stats]),
    NClients = maps:get(accepted, Stats),
    NClients = maps:get(closed_after_shutdown, Stats),
    Requests = NClients * 6,
    Requests = maps:get(requests, Stats),
    0 = maps:get(unexpected, Stats, 0),
    0 = maps:get(conn_errors, Stats, 0).

%% A connection making 250 ping-pong requests goes passive every 100 messages and is re-armed with {active, 100}; nothing is lost.
ranch_active_n_rearm(Config) ->
    Lst = start_listener(Config, #{}),
    Port = port(Lst),
    Self = self(),
    Pids = [spawn_link(fun() -> Self ! {client_done, self(), client_run(gen_tcp, Port, I, 250)} end)
            || I <- lists:seq(1, 10)],
    Results = [receive {client_done, P, R} -> R after 60000 -> {timeout, P} end || P <- Pids],
    check_clients(Lst, Results),
    Stats = wait_stats(Lst, closed_after_shutdown, 10),
    ct:log("stats ~p", [Stats]),
    true = maps:get(passive, Stats, 0) >= 10 * 2,
    2510 = maps:get(requests, Stats),
    0 = maps:get(conn_errors, Stats, 0).

%% 300 requests written at once (pipelined, several per TCP segment and split across segments) are answered in order.
ranch_pipelined_requests(Config) ->
    Lst = start_listener(Config, #{}),
    {ok, C} = gen_tcp:connect({127, 0, 0, 1}, port(Lst), [binary, {active, false}]),
    N = 300,
    Reqs = [request(<<"/echo/p", (integer_to_binary(I))/binary>>,
                    case I of N -> [{<<"connection">>, <<"close">>}]; _ -> [] end, <<>>)
            || I <- lists:seq(1, N)],
    ok = gen_tcp:send(C, Reqs),
    Recv = fun(T) -> gen_tcp:recv(C, 0, T) end,
    Rest = lists:foldl(fun(I, Buf) ->
                               Expected = <<"hello p", (integer_to_binary(I))/binary>>,
                               {ok, {200, _, Expected, Buf1}} = read_response(Recv, Buf),
                               Buf1
                       end, <<>>, lists:seq(1, N)),
    <<>> = Rest,
    {error, closed} = gen_tcp:recv(C, 0, ?T),
    gen_tcp:close(C),
    Stats = wait_stats(Lst, closed_after_shutdown, 1),
    N = maps:get(requests, Stats),
    0 = maps:get(conn_errors, Stats, 0).

%% 2000 short connections (20 clients at a time, one closing request each): all served, and nifsock's socket and fd counts come back to where they were.
ranch_connection_churn_no_leak(Config) ->
    %% Earlier cases' socket objects may still sit in some heap, or in a process
    %% that is still exiting (its heap is freed later, after the process is gone
    %% from processes/0; seen on OTP 29): start from a settled count, so that
    %% nothing of the baseline goes away during the case.
    #{sockets := Sockets0, fds := Fds0} = settled_info(40),
    Lst = start_listener(Config, #{}),
    Port = port(Lst),
    Self = self(),
    Pids = [spawn_link(fun() ->
                               Kind = case W rem 2 of 0 -> gen_tcp; 1 -> ?TR end,
                               R = [client_run(Kind, Port, W * 1000 + K, 0) || K <- lists:seq(1, 100)],
                               Self ! {client_done, self(), lists:usort(R)}
                       end) || W <- lists:seq(1, 20)],
    [receive {client_done, P, R} -> [ok] = R after 60000 -> ct:fail({timeout, P}) end || P <- Pids],
    Stats = wait_stats(Lst, closed_after_shutdown, 2000),
    2000 = maps:get(accepted, Stats),
    0 = maps:get(conn_errors, Stats, 0),
    %% stop_listener closed the listen socket; every connection has closed its socket.
    Back = fun Back(0, _GC) ->
                   nifsock:info();
               Back(Tries, GC) ->
                   case nifsock:info() of
                       #{sockets := S, fds := F} = I when S =< Sockets0, F =< Fds0 -> I;
                       _ -> GC(), timer:sleep(50), Back(Tries - 1, GC)
                   end
           end,
    %% Every fd is closed once the connections are over.
    #{fds := Fds1, sockets := Sockets1} = Back(40, fun() -> ok end),
    %% Socket objects go when no process refers to them any more: a garbage
    %% collection of this process alone is not enough if another (long-lived)
    %% process still has one of the socket terms in its heap.
    #{sockets := Sockets2} = Back(20, fun() -> erlang:garbage_collect() end),
    Pumps = [P || P <- processes(),
                  case process_info(P, registered_name) of
                      {registered_name, Name} -> lists:prefix("nifsock_tcp_pump_", atom_to_list(Name));
                      _ -> false
                  end],
    #{sockets := SocketsP} = Back(20, fun() -> [erlang:garbage_collect(P) || P <- Pumps] end),
    #{sockets := Sockets3} = Back(20, fun() -> [erlang:garbage_collect(P) || P <- processes()] end),
    ct:log("socket objects alive: before ~p, after the connections ~p, after GC of this "
           "process ~p, after GC of the ~p pumps ~p, after GC of all processes ~p",
           [Sockets0, Sockets1, Sockets2, length(Pumps), SocketsP, Sockets3]),
    true = Fds1 =< Fds0,
    true = Sockets3 =< Sockets0.

%% nifsock:info() once two readings 50 ms apart, each after a garbage
%% collection of every process, agree (or after Tries readings).
settled_info(Tries) ->
    [erlang:garbage_collect(P) || P <- processes()],
    I = nifsock:info(),
    timer:sleep(50),
    [erlang:garbage_collect(P) || P <- processes()],
    case nifsock:info() of
        #{sockets := S, fds := F} = J when Tries =< 1; map_get(sockets, I) =:= S, map_get(fds, I) =:= F -> J;
        _ -> settled_info(Tries - 1)
    end.

%% Request bodies (1 MiB, sent in pieces) are read with {active, false} + recv, then {active, 100} again; the stream stays in sync.
ranch_flow_control_active_false(Config) ->
    Lst = start_listener(Config, #{}),
    Port = port(Lst),
    Self = self(),
    Pids = [spawn_link(fun() -> Self ! {client_done, self(), upload_client(Port, I)} end)
            || I <- lists:seq(1, 8)],
    Results = [receive {client_done, P, R} -> R after 60000 -> {timeout, P} end || P <- Pids],
    check_clients(Lst, Results),
    Stats = wait_stats(Lst, closed_after_shutdown, 8),
    ct:log("stats ~p", [Stats]),
    %% Under load a whole body may already have been delivered when the server
    %% looks; usually each upload needs a passive read.
    true = maps:get(passive_reads, Stats, 0) >= 1,
    0 = maps:get(conn_errors, Stats, 0).

%% "connection: close": the server answers, shuts down writing, the client sees EOF, writes a little, closes; the server gets {nifsock_closed, S} (active) or recv {error, closed} (passive linger).
ranch_shutdown_write_then_closed(Config) ->
    Lst = start_listener(Config, #{}),
    lists:foreach(
      fun({Linger, N}) ->
              {ok, C} = gen_tcp:connect({127, 0, 0, 1}, port(Lst),
                                        [binary, {active, false}, {exit_on_close, false}]),
              ok = gen_tcp:send(C, request(<<"/echo/bye">>, [{<<"connection">>, <<"close">>},
                                                            {<<"x-linger">>, Linger}], <<>>)),
              {ok, {200, _, <<"hello bye">>, <<>>}} =
                  read_response(fun(T) -> gen_tcp:recv(C, 0, T) end, <<>>),
              %% The server shut down its side: EOF, but our side can still write.
              {error, closed} = gen_tcp:recv(C, 0, ?T),
              timer:sleep(50),
              Stats0 = stats(Lst),
              N = maps:get(closed_after_shutdown, Stats0, 0) + 1,
              ok = gen_tcp:send(C, <<"trailing bytes the server ignores">>),
              ok = gen_tcp:close(C),
              wait_counter(Lst, closed_after_shutdown, N)
      end, [{<<"active">>, 1}, {<<"passive">>, 2}]),
    Stats = stop_listener(Lst),
    2 = maps:get(closed_after_shutdown, Stats),
    1 = maps:get(linger_passive, Stats),
    0 = maps:get(conn_errors, Stats, 0).

%% Responses built as deep iolists (chars, binaries, nested lists, empty parts) arrive byte for byte.
ranch_send_iolist(_Config) ->
    {C, S} = pair(),
    IoList = [<<"HTTP/1.1 ">>, "200", $\s, [<<"OK">>, [[], <<>>]], "\r\n",
              [[<<"x-n: ">>, integer_to_list(N), "\r\n"] || N <- lists:seq(1, 50)],
              "\r\n", [binary:copy(<<"b">>, 1000), [$a, [$b, [$c]]]]],
    ok = ?TR:send(S, IoList),
    Expected = iolist_to_binary(IoList),
    {ok, Expected} = ?TR:recv(C, byte_size(Expected), ?T),
    ok = ?TR:close(S), ok = ?TR:close(C).

%% An iolist of 3000 separate binaries (more than IOV_MAX iovecs) is sent whole and in order.
ranch_send_iolist_many_binaries(_Config) ->
    {C, S} = pair(),
    Parts = [<<I:32, (rand:bytes(196))/binary>> || I <- lists:seq(1, 3000)],
    Self = self(),
    spawn_link(fun() -> Self ! {sent, ?TR:send(S, Parts)} end),
    Expected = iolist_to_binary(Parts),
    {ok, Got} = ?TR:recv(C, byte_size(Expected), ?T),
    receive {sent, R} -> ok = R after ?T -> ct:fail(send_stuck) end,
    Expected = Got,
    ok = ?TR:close(S), ok = ?TR:close(C).

%% sendfile/2,4,5 of a 256 KiB file: by name, by raw fd (with offset and count, file position untouched), by a non-raw fd (fallback); bytes arrive intact.
ranch_sendfile(Config) ->
    File = ?config(file, Config),
    Content = ?config(content, Config),
    {C, S} = pair(),
    Recv = fun(N) -> {ok, B} = ?TR:recv(C, N, ?T), B end,
    %% By name.
    {ok, ?FILE_SIZE} = ?TR:sendfile(S, File),
    Content = Recv(?FILE_SIZE),
    %% By raw fd, a range; the fd's position doesn't move.
    {ok, Fd} = file:open(File, [raw, read, binary]),
    {ok, 10} = file:position(Fd, 10),
    {ok, 5000} = ?TR:sendfile(S, Fd, 1000, 5000),
    Range = binary:part(Content, 1000, 5000),
    Range = Recv(5000),
    {ok, 10} = file:position(Fd, cur),
    %% By raw fd, to the end from an offset, with options.
    {ok, Rest} = ?TR:sendfile(S, Fd, 200000, 0, [{chunk_size, 4096}]),
    Rest = ?FILE_SIZE - 200000,
    Tail = binary:part(Content, 200000, Rest),
    Tail = Recv(Rest),
    ok = file:close(Fd),
    %% A file that is not raw: read-and-send fallback.
    {ok, Slow} = file:open(File, [read, binary]),
    {ok, 70000} = ?TR:sendfile(S, Slow, 3, 70000, [{chunk_size, 10000}]),
    Slice = binary:part(Content, 3, 70000),
    Slice = Recv(70000),
    ok = file:close(Slow),
    %% Missing file.
    {error, enoent} = ?TR:sendfile(S, File ++ ".missing"),
    ok = ?TR:close(S), ok = ?TR:close(C).

%% With {send_timeout_close, false}, the bytes of a timed-out send stay queued and go out before a later sendfile's: the peer gets every send's bytes, then the file, in order.
ranch_sendfile_after_send_timeout(Config) ->
    File = ?config(file, Config),
    Content = ?config(content, Config),
    {ok, L} = ?TR:listen(#{socket_opts => [{ip, {127, 0, 0, 1}}, {send_timeout, 200},
                                           {send_timeout_close, false}, {sndbuf, 16384}]}),
    {ok, {_, Port}} = ?TR:sockname(L),
    {ok, C} = gen_tcp:connect({127, 0, 0, 1}, Port, [binary, {active, false}, {recbuf, 16384}]),
    {ok, S} = ?TR:accept(L, ?T),
    ok = ?TR:close(L),
    Chunks = sends_until_timeout(S, 1, []),
    Sent = iolist_to_binary(Chunks),
    Self = self(),
    Total = byte_size(Sent) + ?FILE_SIZE,
    spawn_link(fun() -> Self ! {read, gen_tcp:recv(C, Total, 30000)} end),
    {ok, ?FILE_SIZE} = ?TR:sendfile(S, File),
    receive {read, {ok, Got}} -> Got = <<Sent/binary, Content/binary>> end,
    ok = ?TR:close(S), gen_tcp:close(C).

%% 64 KiB sends, each of its own byte, until one times out (its bytes stay queued).
sends_until_timeout(S, N, Acc) when N < 1000 ->
    Chunk = binary:copy(<<N>>, 65536),
    case ?TR:send(S, Chunk) of
        ok -> sends_until_timeout(S, N + 1, [Chunk | Acc]);
        {error, timeout} -> lists:reverse([Chunk | Acc])
    end.

%% GET /file over the HTTP loop: 64 clients get the 256 KiB body by sendfile, intact, on keep-alive connections.
ranch_sendfile_256k_over_http(Config) ->
    Content = ?config(content, Config),
    Lst = start_listener(Config, #{}),
    Port = port(Lst),
    Self = self(),
    Pids = [spawn_link(fun() -> Self ! {client_done, self(), file_client(Port, Content)} end)
            || _ <- lists:seq(1, 64)],
    Results = [receive {client_done, P, R} -> R after 60000 -> {timeout, P} end || P <- Pids],
    check_clients(Lst, Results),
    Stats = wait_stats(Lst, closed_after_shutdown, 64),
    128 = maps:get(sendfiles, Stats),
    0 = maps:get(conn_errors, Stats, 0).

%%--------------------------------------------------------------------
%% PROXY protocol
%%--------------------------------------------------------------------

%% recv_proxy_header/2 parses v1 TCP4, TCP6 and UNKNOWN headers and leaves what follows in the socket.
ranch_recv_proxy_header_v1(_Config) ->
    Cases =
        [{<<"PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n">>,
          #{version => 1, command => proxy, transport_family => ipv4, transport_protocol => stream,
            src_address => {192, 168, 0, 1}, src_port => 56324,
            dest_address => {192, 168, 0, 11}, dest_port => 443}},
         {<<"PROXY TCP6 2001:db8::1 ::1 4124 80\r\n">>,
          #{version => 1, command => proxy, transport_family => ipv6, transport_protocol => stream,
            src_address => {16#2001, 16#db8, 0, 0, 0, 0, 0, 1}, src_port => 4124,
            dest_address => {0, 0, 0, 0, 0, 0, 0, 1}, dest_port => 80}},
         {<<"PROXY TCP4 255.255.255.255 255.255.255.255 65535 65535\r\n">>,
          #{version => 1, command => proxy, transport_family => ipv4, transport_protocol => stream,
            src_address => {255, 255, 255, 255}, src_port => 65535,
            dest_address => {255, 255, 255, 255}, dest_port => 65535}},
         {<<"PROXY UNKNOWN\r\n">>,
          #{version => 1, command => proxy, transport_family => undefined,
            transport_protocol => undefined}},
         {<<"PROXY UNKNOWN ffff:f::1 ffff::2 65535 65535\r\n">>,
          #{version => 1, command => proxy, transport_family => undefined,
            transport_protocol => undefined}}],
    lists:foreach(
      fun({Header, Expected}) ->
              {C, S} = pair(),
              Body = <<"GET / HTTP/1.1\r\nhost: example\r\n\r\n">>,
              ok = ?TR:send(C, [Header, Body]),
              {ok, Expected} = ?TR:recv_proxy_header(S, ?T),
              {ok, Body} = ?TR:recv(S, byte_size(Body), ?T),
              {error, timeout} = ?TR:recv(S, 0, 50),
              ok = ?TR:close(S), ok = ?TR:close(C)
      end, Cases).

%% A v1 header arriving in pieces (one byte at first, then the rest, then the request) is read whole, nothing more.
ranch_recv_proxy_header_v1_split(_Config) ->
    {C, S} = pair(),
    Header = <<"PROXY TCP4 10.0.0.1 10.0.0.2 1000 2000\r\n">>,
    Self = self(),
    spawn_link(fun() ->
                       [begin ok = ?TR:send(C, P), timer:sleep(40) end
                        || P <- [<<"P">>, <<"ROX">>, binary:part(Header, 4, 20),
                                 binary:part(Header, 24, byte_size(Header) - 24), <<"after">>]],
                       Self ! sent
               end),
    {ok, #{src_address := {10, 0, 0, 1}, dest_port := 2000}} = ?TR:recv_proxy_header(S, ?T),
    receive sent -> ok end,
    {ok, <<"after">>} = ?TR:recv(S, 5, ?T),
    ok = ?TR:close(S), ok = ?TR:close(C).

%% Malformed v1 headers and non-PROXY data are {error, protocol_error, Reason} with an atom reason.
ranch_recv_proxy_header_v1_errors(_Config) ->
    Bad = [<<"GET / HTTP/1.1\r\n\r\n">>,
           <<"PROXY TCP4 192.1638.0.1 192.168.0.11 56324 443\r\n">>,
           <<"PROXY TCP4 192.168.0.1 192.168.0.11 1111111 443\r\n">>,
           <<"PROXY TCP6 2001:0db8:00;0::1 ::2 4124 443\r\n">>,
           <<"PROXY TCP6 ::1 ::2 4124 foo\r\n">>,
           <<"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n">>,
           <<"PROXY TCP4 1.2.3.4\r\n">>,
           <<"PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n">>,
           <<"PROXY TCP4 1.2.3.4 5.6.7.8 0 2\r\n">>,
           %% No CRLF within 107 bytes.
           <<"PROXY TCP4 ", (binary:copy(<<"1">>, 120))/binary, "\r\n">>],
    lists:foreach(
      fun(Header) ->
              {C, S} = pair(),
              ok = ?TR:send(C, Header),
              {error, protocol_error, Reason} = ?TR:recv_proxy_header(S, ?T),
              true = is_atom(Reason),
              ok = ?TR:close(S), ok = ?TR:close(C)
      end, Bad).

%% v2 headers: PROXY over IPv4 and IPv6 with TLVs (ALPN, authority, SSL, netns, unknown, a right CRC32C), LOCAL, UNSPEC; what follows stays.
ranch_recv_proxy_header_v2(_Config) ->
    Sig = <<"\r\n\r\n\0\r\nQUIT\n">>,
    Addr4 = <<127, 0, 0, 1, 192, 168, 0, 1, 444:16, 443:16>>,
    SSLTLV = ssl_tlv(),
    TLVs = [proxy_tlv(1, <<"h2">>), proxy_tlv(2, <<"example.com">>), SSLTLV,
            proxy_tlv(16#30, <<"ns1">>), proxy_tlv(16#ea, <<1, "id">>), proxy_tlv(4, <<0, 0, 0>>)],
    V4 = proxy_v2(16#11, [Addr4 | TLVs]),
    V4Crc = with_crc(16#11, [Addr4 | TLVs]),
    Addr6 = <<16#2001:16, 16#db8:16, 0:80, 1:16, 0:112, 1:16, 1000:16, 2000:16>>,
    V6 = proxy_v2(16#21, [Addr6]),
    Local = <<Sig/binary, 16#20, 0, 0:16>>,
    Unspec = <<Sig/binary, 16#21, 0, 3:16, "xyz">>,
    Base4 = #{version => 2, command => proxy, transport_family => ipv4,
              transport_protocol => stream, src_address => {127, 0, 0, 1}, src_port => 444,
              dest_address => {192, 168, 0, 1}, dest_port => 443},
    Full4 = Base4#{alpn => <<"h2">>, authority => <<"example.com">>, netns => <<"ns1">>,
                   raw_tlvs => [{16#ea, <<1, "id">>}],
                   ssl => #{client => [ssl, cert_conn], verified => true,
                            version => <<"TLSv1.3">>, cn => <<"client">>}},
    Cases = [{V4, Full4},
             {V4Crc, Full4},
             {V6, #{version => 2, command => proxy, transport_family => ipv6,
                    transport_protocol => stream,
                    src_address => {16#2001, 16#db8, 0, 0, 0, 0, 0, 1}, src_port => 1000,
                    dest_address => {0, 0, 0, 0, 0, 0, 0, 1}, dest_port => 2000}},
             {Local, #{version => 2, command => local}},
             {Unspec, #{version => 2, command => proxy, transport_family => undefined,
                        transport_protocol => undefined}}],
    lists:foreach(
      fun({Header, Expected}) ->
              {C, S} = pair(),
              ok = ?TR:send(C, [Header, <<"GET / HTTP/1.1\r\n">>]),
              {ok, Got} = ?TR:recv_proxy_header(S, ?T),
              {Expected, Expected} = {Expected, Got},
              {ok, <<"GET / HTTP/1.1\r\n">>} = ?TR:recv(S, 16, ?T),
              ok = ?TR:close(S), ok = ?TR:close(C)
      end, Cases),
    %% A v2 header split over writes.
    {C, S} = pair(),
    Self = self(),
    spawn_link(fun() ->
                       [begin ok = ?TR:send(C, P), timer:sleep(30) end
                        || P <- [binary:part(V4, 0, 5), binary:part(V4, 5, 12),
                                 binary:part(V4, 17, byte_size(V4) - 17), <<"tail">>]],
                       Self ! sent
               end),
    {ok, Full4} = ?TR:recv_proxy_header(S, ?T),
    receive sent -> ok end,
    {ok, <<"tail">>} = ?TR:recv(S, 4, ?T),
    ok = ?TR:close(S), ok = ?TR:close(C).

%% Bad v2 headers: wrong CRC32C, bad version, command, family, protocol, short address block, bad TLV length.
ranch_recv_proxy_header_v2_errors(_Config) ->
    Sig = <<"\r\n\r\n\0\r\nQUIT\n">>,
    Addr4 = <<127, 0, 0, 1, 192, 168, 0, 1, 444:16, 443:16>>,
    Good = with_crc(16#11, [Addr4]),
    %% The CRC32C TLV is last: flip a bit of its value.
    BadCrc = <<(binary:part(Good, 0, byte_size(Good) - 1))/binary, (binary:last(Good) bxor 1)>>,
    Bad = [BadCrc,
           <<Sig/binary, 16#31, 16#11, 12:16, Addr4/binary>>,     % version 3
           <<Sig/binary, 16#22, 16#11, 12:16, Addr4/binary>>,     % command 2
           <<Sig/binary, 16#21, 16#41, 12:16, Addr4/binary>>,     % family 4
           <<Sig/binary, 16#21, 16#13, 12:16, Addr4/binary>>,     % protocol 3
           <<Sig/binary, 16#21, 16#11, 8:16, 1, 2, 3, 4, 5, 6, 7, 8>>,      % short IPv4 block
           <<Sig/binary, 16#21, 16#11, 15:16, Addr4/binary, 1, 0, 9>>],     % TLV runs past the end
    lists:foreach(
      fun(Header) ->
              {C, S} = pair(),
              ok = ?TR:send(C, Header),
              {error, protocol_error, Reason} = ?TR:recv_proxy_header(S, ?T),
              true = is_atom(Reason),
              ok = ?TR:close(S), ok = ?TR:close(C)
      end, Bad),
    %% The good one passes.
    {C, S} = pair(),
    ok = ?TR:send(C, Good),
    {ok, #{version := 2, src_port := 444}} = ?TR:recv_proxy_header(S, ?T),
    ok = ?TR:close(S), ok = ?TR:close(C).

%% recv_proxy_header/2 gives {error, timeout} when nothing (or half a header) comes, {error, closed} when the peer closes, {error, einval} on an active socket.
ranch_recv_proxy_header_timeout_closed(_Config) ->
    {C1, S1} = pair(),
    {error, timeout} = ?TR:recv_proxy_header(S1, 100),
    ok = ?TR:send(C1, <<"PROXY TCP4 1.2.3.4">>),
    {error, timeout} = ?TR:recv_proxy_header(S1, 100),
    ok = ?TR:close(C1),
    {error, closed} = ?TR:recv_proxy_header(S1, ?T),
    ok = ?TR:close(S1),
    {C2, S2} = pair(),
    ok = ?TR:setopts(S2, [{active, once}]),
    {error, einval} = ?TR:recv_proxy_header(S2, 100),
    ok = ?TR:close(S2), ok = ?TR:close(C2).

%%--------------------------------------------------------------------
%% The rest
%%--------------------------------------------------------------------

%% getstat/1,2: inet-named counters that match the traffic; send_pend is 0.
ranch_getstat(_Config) ->
    {C, S} = pair(),
    ok = ?TR:send(C, <<"12345">>),
    {ok, <<"12345">>} = ?TR:recv(S, 5, ?T),
    ok = ?TR:send(S, <<"abc">>),
    {ok, <<"abc">>} = ?TR:recv(C, 3, ?T),
    {ok, Stats} = ?TR:getstat(S),
    5 = proplists:get_value(recv_oct, Stats),
    3 = proplists:get_value(send_oct, Stats),
    0 = proplists:get_value(send_pend, Stats),
    {ok, [{recv_oct, 5}]} = ?TR:getstat(S, [recv_oct]),
    ok.

%% peername/1 and sockname/1 give {IP, Port} tuples that match on both ends.
ranch_peername_sockname(_Config) ->
    {C, S} = pair(),
    {ok, {{127, 0, 0, 1}, CP}} = ?TR:sockname(C),
    {ok, {{127, 0, 0, 1}, CP}} = ?TR:peername(S),
    {ok, {{127, 0, 0, 1}, SP}} = ?TR:sockname(S),
    {ok, {{127, 0, 0, 1}, SP}} = ?TR:peername(C),
    ok = ?TR:close(S),
    {error, _} = ?TR:peername(S),
    ok = ?TR:close(C).

%% The connection process dying (as a crashed protocol) closes the socket: the client sees end of stream.
ranch_owner_exit_closes(Config) ->
    Handler = fun(_S) -> exit(crash) end,
    Lst = start_listener(Config, #{handler => Handler}),
    {ok, C} = gen_tcp:connect({127, 0, 0, 1}, port(Lst), [binary, {active, false}]),
    {error, closed} = gen_tcp:recv(C, 0, ?T),
    gen_tcp:close(C),
    stop_listener(Lst).

%%--------------------------------------------------------------------
%% Mini Ranch: listener, acceptors, connection supervisor
%%--------------------------------------------------------------------

%% Starts a listen socket, a connection supervisor and the acceptors.
%% Opts: acceptors (10), handler (fun(S) run after the handshake; default the
%% HTTP loop).
start_listener(_Config, Opts) ->
    {ok, L} = ?TR:listen(#{socket_opts => [{ip, {127, 0, 0, 1}}]}),
    Stats = ets:new(ranch_stats, [public, set, {write_concurrency, true}]),
    Handler = maps:get(handler, Opts, fun http_init/2),
    Parent = self(),
    Sup = spawn_link(fun() -> conns_sup(Parent, Stats, Handler) end),
    %% Not linked: acceptors exit with `closed' when the listen socket closes.
    Acceptors = [spawn(fun() -> acceptor(L, Sup, Stats) end)
                 || _ <- lists:seq(1, maps:get(acceptors, Opts, ?ACCEPTORS))],
    #{l => L, sup => Sup, acceptors => Acceptors, stats => Stats}.

stop_listener(#{l := L, sup := Sup, acceptors := Acceptors} = Lst) ->
    Refs = [monitor(process, A) || A <- Acceptors],
    ok = ?TR:close(L),
    %% Acceptors exit on {error, closed}, as ranch_acceptor does.
    [receive {'DOWN', R, process, _, _} -> ok after ?T -> ct:fail(acceptor_did_not_exit) end
     || R <- Refs],
    Stats = stats(Lst),
    unlink(Sup),
    exit(Sup, kill),
    Stats.

port(#{l := L}) ->
    nifsock_test_lib:port(?TR, L).

stats(#{stats := Tab}) ->
    maps:from_list([KV || {K, _} = KV <- ets:tab2list(Tab), is_atom(K)]).

%% What every connection process of the listener is doing, for failure reports.
diagnose(#{stats := Tab}) ->
    [begin
         Info = process_info(Pid, [status, current_stacktrace, messages, dictionary]),
         Sock = try {nifsock:info(S), ?TR:getopts(S, [active, packet, mode])}
                catch C:R -> {C, R} end,
         ct:pal("connection ~p~n~p~nsocket ~p", [Pid, Info, Sock])
     end || {{conn, Pid}, S} <- ets:tab2list(Tab), is_process_alive(Pid)],
    ok.

bump(Tab, Key) ->
    ets:update_counter(Tab, Key, 1, {Key, 0}).

%% All clients said ok; otherwise report what the connections are doing and fail.
check_clients(Lst, Results) ->
    case [R || R <- Results, R =/= ok] of
        [] ->
            ok;
        Failed ->
            diagnose(Lst),
            ct:fail({clients_failed, length(Failed), hd(Failed)})
    end.

%% Waits until counter Key reaches N, leaving the listener running.
wait_counter(Lst, Key, N) ->
    wait_counter(Lst, Key, N, 100).

wait_counter(Lst, Key, N, 0) ->
    ct:fail({counter_not_reached, Key, N, stats(Lst)});
wait_counter(Lst, Key, N, Tries) ->
    case maps:get(Key, stats(Lst), 0) >= N of
        true -> ok;
        false -> timer:sleep(50), wait_counter(Lst, Key, N, Tries - 1)
    end.

%% Waits until counter Key reaches N (connections end asynchronously), then
%% stops the listener and returns the counters.
wait_stats(Lst, Key, N) ->
    wait_stats(Lst, Key, N, 100).

wait_stats(Lst, Key, N, 0) ->
    Stats = stats(Lst),
    ct:fail({counter_not_reached, Key, N, Stats});
wait_stats(Lst, Key, N, Tries) ->
    Stats = stats(Lst),
    case maps:get(Key, Stats, 0) >= N of
        true -> stop_listener(Lst);
        false -> timer:sleep(50), wait_stats(Lst, Key, N, Tries - 1)
    end.

%% ranch_acceptor:loop/5.
acceptor(L, Sup, Stats) ->
    case ?TR:accept(L, infinity) of
        {ok, CS} ->
            bump(Stats, accepted),
            case ?TR:controlling_process(CS, Sup) of
                ok -> start_protocol(Sup, CS);
                {error, _} -> bump(Stats, cp_errors), ?TR:close(CS)
            end;
        {error, closed} ->
            exit(closed);
        {error, _} ->
            bump(Stats, accept_errors)
    end,
    flush_unexpected(Stats),
    acceptor(L, Sup, Stats).

%% ranch_conns_sup:start_protocol/3: a synchronous call.
start_protocol(Sup, CS) ->
    Ref = monitor(process, Sup),
    Sup ! {start_protocol, self(), Ref, CS},
    receive
        {Ref, started} -> demonitor(Ref, [flush]), ok;
        {'DOWN', Ref, process, Sup, Reason} -> exit({conns_sup_down, Reason})
    end.

flush_unexpected(Stats) ->
    receive
        Msg ->
            ct:pal("acceptor got an unexpected message: ~p", [Msg]),
            bump(Stats, unexpected),
            flush_unexpected(Stats)
    after 0 ->
            ok
    end.

%% ranch_conns_sup: starts the protocol process and hands it the socket.
conns_sup(Parent, Stats, Handler) ->
    process_flag(trap_exit, true),
    put(parent, Parent),
    conns_sup_loop(Stats, Handler).

conns_sup_loop(Stats, Handler) ->
    Parent = get(parent),
    receive
        {'EXIT', Parent, Reason} ->
            exit(Reason);
        {start_protocol, From, Ref, CS} ->
            Pid = spawn_link(fun() -> conn_init(Stats, Handler) end),
            case ?TR:controlling_process(CS, Pid) of
                ok ->
                    Pid ! {handshake, ranch_ref, ?TR, CS, ?T};
                {error, _} ->
                    bump(Stats, cp_errors),
                    ?TR:close(CS),
                    exit(Pid, kill)
            end,
            From ! {Ref, started},
            conns_sup_loop(Stats, Handler);
        {'EXIT', _Pid, normal} ->
            conns_sup_loop(Stats, Handler);
        {'EXIT', _Pid, crash} ->
            conns_sup_loop(Stats, Handler);
        {'EXIT', Pid, Reason} ->
            ct:pal("connection ~p exited: ~p", [Pid, Reason]),
            bump(Stats, conn_errors),
            conns_sup_loop(Stats, Handler);
        Msg ->
            ct:pal("conns_sup got an unexpected message: ~p", [Msg]),
            bump(Stats, unexpected),
            conns_sup_loop(Stats, Handler)
    end.

%% The protocol's start: ranch:handshake/1.
conn_init(Stats, Handler) ->
    receive
        {handshake, ranch_ref, Transport, CS, Timeout} ->
            {ok, S} = Transport:handshake(CS, [], Timeout),
            %% Known while it runs, for diagnose/1 (forgotten after: the entry
            %% would keep the socket object alive).
            ets:insert(Stats, {{conn, self()}, S}),
            try
                case erlang:fun_info(Handler, arity) of
                    {arity, 1} -> Handler(S);
                    {arity, 2} -> Handler(S, Stats)
                end
            after
                ets:delete(Stats, {conn, self()})
            end
    after ?T ->
            exit(no_handshake)
    end.

%%--------------------------------------------------------------------
%% The HTTP-like protocol (server side), cowboy_http style
%%--------------------------------------------------------------------

http_init(S, Stats) ->
    ok = ?TR:setopts(S, [{active, ?ACTIVE_N}]),
    http_loop(#{s => S, buf => <<>>, stats => Stats}).

http_loop(#{s := S, buf := Buf, stats := Stats} = St) ->
    put(phase, {loop, byte_size(Buf)}),
    {OK, Closed, Error, Passive} = ?TR:messages(),
    receive
        {OK, S, Data} ->
            http_parse(St#{buf => <<Buf/binary, Data/binary>>});
        {Passive, S} ->
            bump(Stats, passive),
            ok = ?TR:setopts(S, [{active, ?ACTIVE_N}]),
            http_loop(St);
        {Closed, S} ->
            bump(Stats, closed_by_peer),
            ?TR:close(S);
        {Error, S, Reason} ->
            exit({socket_error, Reason})
    after 30000 ->
            exit(idle_timeout)
    end.

http_parse(#{s := S, buf := Buf, stats := Stats} = St) ->
    case binary:match(Buf, <<"\r\n\r\n">>) of
        nomatch ->
            http_loop(St);
        {Pos, 4} ->
            <<Head:Pos/binary, _:4/binary, Rest/binary>> = Buf,
            [RequestLine | HeaderLines] = binary:split(Head, <<"\r\n">>, [global]),
            [Method, Path, <<"HTTP/1.1">>] = binary:split(RequestLine, <<" ">>, [global]),
            Headers = [begin
                           [K, V] = binary:split(Line, <<": ">>),
                           {string:lowercase(K), V}
                       end || Line <- HeaderLines],
            Len = binary_to_integer(proplists:get_value(<<"content-length">>, Headers, <<"0">>)),
            {Body, Rest1} = http_body(S, Stats, Len, Rest),
            bump(Stats, requests),
            http_respond(S, Stats, Method, Path, Body),
            case proplists:get_value(<<"connection">>, Headers) of
                <<"close">> ->
                    http_close(S, Stats, case proplists:get_value(<<"x-linger">>, Headers) of
                                             <<"passive">> -> passive;
                                             _ -> active
                                         end);
                _ -> http_parse(St#{buf => Rest1})
            end
    end.

%% The body: from the buffer if it is all there; otherwise flow control as
%% cowboy does when it reads a body: passive, take what was already delivered
%% from the mailbox, recv the rest, then active again.
http_body(_S, _Stats, Len, Buf) when byte_size(Buf) >= Len ->
    <<Body:Len/binary, Rest/binary>> = Buf,
    {Body, Rest};
http_body(S, Stats, Len, Buf) ->
    {OK, _, _, Passive} = ?TR:messages(),
    ok = ?TR:setopts(S, [{active, false}]),
    Delivered = drain_data(S, OK, Passive),
    Have = <<Buf/binary, Delivered/binary>>,
    Body = case byte_size(Have) >= Len of
               true ->
                   Have;
               false ->
                   bump(Stats, passive_reads),
                   put(phase, {body_recv, Len, byte_size(Buf), byte_size(Delivered)}),
                   {ok, More} = ?TR:recv(S, Len - byte_size(Have), ?T),
                   put(phase, body_done),
                   <<Have/binary, More/binary>>
           end,
    ok = ?TR:setopts(S, [{active, ?ACTIVE_N}]),
    <<B:Len/binary, Rest/binary>> = Body,
    {B, Rest}.

drain_data(S, OK, Passive) ->
    receive
        {OK, S, D} -> <<D/binary, (drain_data(S, OK, Passive))/binary>>;
        {Passive, S} -> drain_data(S, OK, Passive)
    after 0 -> <<>>
    end.

http_respond(S, Stats, <<"GET">>, <<"/echo/", Name/binary>>, _Body) ->
    ok = ?TR:send(S, response(200, [<<"hello ">>, Name])),
    bump(Stats, responses);
http_respond(S, Stats, <<"POST">>, <<"/upload">>, Body) ->
    ok = ?TR:send(S, response(200, integer_to_list(erlang:crc32(Body)))),
    bump(Stats, responses);
http_respond(S, Stats, <<"GET">>, <<"/file/", How/binary>>, _Body) ->
    File = persistent_term:get({?MODULE, file}),
    ok = ?TR:send(S, [<<"HTTP/1.1 200 OK\r\n">>,
                      [<<"content-length: ">>, integer_to_list(?FILE_SIZE), <<"\r\n">>],
                      <<"\r\n">>]),
    {ok, ?FILE_SIZE} =
        case How of
            <<"name">> ->
                ?TR:sendfile(S, File);
            <<"fd">> ->
                {ok, Fd} = file:open(File, [raw, read, binary]),
                try ?TR:sendfile(S, Fd, 0, ?FILE_SIZE) after file:close(Fd) end
        end,
    bump(Stats, sendfiles).

response(Status, Body) ->
    [<<"HTTP/1.1 ">>, integer_to_list(Status), <<" OK\r\n">>,
     [<<"content-length: ">>, integer_to_list(iolist_size(Body)), <<"\r\n">>],
     <<"server: nifsock_ranch_SUITE\r\n">>,
     <<"\r\n">>, Body].

%% cowboy's terminate with linger: shut down writing, wait for the peer's close
%% (passively, with recv, as cowboy_http:terminate_linger does, when the
%% request said "x-linger: passive"; else with active messages).
http_close(S, Stats, passive) ->
    ok = ?TR:shutdown(S, write),
    ok = ?TR:setopts(S, [{active, false}]),
    {OK, _, _, Passive} = ?TR:messages(),
    _ = drain_data(S, OK, Passive),
    Linger = fun Linger() ->
                     case ?TR:recv(S, 0, ?T) of
                         {ok, _} -> Linger();
                         {error, closed} -> bump(Stats, closed_after_shutdown);
                         {error, Reason} -> exit({recv_error_after_shutdown, Reason})
                     end
             end,
    Linger(),
    bump(Stats, linger_passive),
    ?TR:close(S);
http_close(S, Stats, active) ->
    ok = ?TR:shutdown(S, write),
    {OK, Closed, Error, Passive} = ?TR:messages(),
    Wait = fun Wait() ->
                   receive
                       {OK, S, _} -> Wait();
                       {Passive, S} -> ok = ?TR:setopts(S, [{active, ?ACTIVE_N}]), Wait();
                       {Closed, S} -> bump(Stats, closed_after_shutdown);
                       {Error, S, Reason} -> exit({socket_error_after_shutdown, Reason})
                   after ?T ->
                           exit(no_closed_after_shutdown)
                   end
           end,
    Wait(),
    ?TR:close(S).

%%--------------------------------------------------------------------
%% Clients
%%--------------------------------------------------------------------

%% N keep-alive requests and a closing one, checking every answer, then EOF.
client_run(Kind, Port, I, N) ->
    try
        {Send, Recv, Close} = client_connect(Kind, Port),
        Id = integer_to_binary(I),
        Buf = lists:foldl(
                fun(K, Buf0) ->
                        Name = <<Id/binary, "-", (integer_to_binary(K))/binary>>,
                        ok = Send(request(<<"/echo/", Name/binary>>, [], <<>>)),
                        Expected = <<"hello ", Name/binary>>,
                        {ok, {200, _, Expected, Buf1}} = read_response(Recv, Buf0),
                        Buf1
                end, <<>>, lists:seq(1, N)),
        ok = Send(request(<<"/echo/", Id/binary, "-last">>, [{<<"connection">>, <<"close">>}], <<>>)),
        Last = <<"hello ", Id/binary, "-last">>,
        {ok, {200, _, Last, <<>>}} = read_response(Recv, Buf),
        {error, closed} = Recv(?T),
        Close(),
        ok
    catch
        C:R:St -> {C, R, St}
    end.

%% A 1 MiB upload in pieces, a GET on the same connection, then a closing upload.
upload_client(Port, I) ->
    try
        {Send, Recv, Close} = client_connect(gen_tcp, Port),
        Body = rand:bytes(1024 * 1024),
        Crc = integer_to_binary(erlang:crc32(Body)),
        Head = request(<<"/upload">>, [{<<"content-length">>, integer_to_binary(byte_size(Body))}], <<>>),
        ok = Send([Head, binary:part(Body, 0, 1000)]),
        timer:sleep(20),
        [ok = Send(binary:part(Body, Off, min(65536, byte_size(Body) - Off)))
         || Off <- lists:seq(1000, byte_size(Body) - 1, 65536)],
        {ok, {200, _, Crc, Buf}} = read_response(Recv, <<>>),
        Name = <<"up", (integer_to_binary(I))/binary>>,
        ok = Send(request(<<"/echo/", Name/binary>>, [], <<>>)),
        Hello = <<"hello ", Name/binary>>,
        {ok, {200, _, Hello, Buf2}} = read_response(Recv, Buf),
        Small = rand:bytes(300000),
        SmallCrc = integer_to_binary(erlang:crc32(Small)),
        ok = Send([request(<<"/upload">>, [{<<"content-length">>, <<"300000">>},
                                           {<<"connection">>, <<"close">>}], <<>>)]),
        timer:sleep(20),
        ok = Send(Small),
        {ok, {200, _, SmallCrc, <<>>}} = read_response(Recv, Buf2),
        {error, closed} = Recv(?T),
        Close(),
        ok
    catch
        C:R:St -> {C, R, St}
    end.

%% GET /file/name and /file/fd on one connection, the second closing.
file_client(Port, Content) ->
    try
        {Send, Recv, Close} = client_connect(gen_tcp, Port),
        ok = Send(request(<<"/file/name">>, [], <<>>)),
        {ok, {200, _, Content, Buf}} = read_response(Recv, <<>>),
        ok = Send(request(<<"/file/fd">>, [{<<"connection">>, <<"close">>}], <<>>)),
        {ok, {200, _, Content, <<>>}} = read_response(Recv, Buf),
        {error, closed} = Recv(?T),
        Close(),
        ok
    catch
        C:R:St -> {C, R, St}
    end.

client_connect(gen_tcp, Port) ->
    {ok, C} = gen_tcp:connect({127, 0, 0, 1}, Port, [binary, {active, false}, {nodelay, true}], ?T),
    {fun(D) -> gen_tcp:send(C, D) end,
     fun(T) -> gen_tcp:recv(C, 0, T) end,
     fun() -> gen_tcp:close(C) end};
client_connect(?TR, Port) ->
    {ok, C} = ?TR:connect({127, 0, 0, 1}, Port, [{nodelay, true}], ?T),
    {fun(D) -> ?TR:send(C, D) end,
     fun(T) -> ?TR:recv(C, 0, T) end,
     fun() -> ?TR:close(C) end}.

request(Path, Headers, Body) ->
    Method = case lists:keymember(<<"content-length">>, 1, Headers) of
                 true -> <<"POST">>;
                 false -> <<"GET">>
             end,
    [Method, <<" ">>, Path, <<" HTTP/1.1\r\nhost: localhost\r\n">>,
     [[K, <<": ">>, V, <<"\r\n">>] || {K, V} <- Headers],
     <<"\r\n">>, Body].

%% {ok, {Status, Headers, Body, Rest}} from a buffer and a recv fun.
read_response(Recv, Buf) ->
    case binary:match(Buf, <<"\r\n\r\n">>) of
        nomatch ->
            case Recv(?T) of
                {ok, D} -> read_response(Recv, <<Buf/binary, D/binary>>);
                Error -> Error
            end;
        {Pos, 4} ->
            <<Head:Pos/binary, _:4/binary, Rest/binary>> = Buf,
            [<<"HTTP/1.1 ", Code:3/binary, _/binary>> | Lines] = binary:split(Head, <<"\r\n">>, [global]),
            Headers = [list_to_tuple(binary:split(L, <<": ">>)) || L <- Lines],
            Len = binary_to_integer(proplists:get_value(<<"content-length">>, Headers)),
            case read_body(Recv, Rest, Len) of
                {ok, Body, Rest1} -> {ok, {binary_to_integer(Code), Headers, Body, Rest1}};
                Error -> Error
            end
    end.

read_body(_Recv, Buf, Len) when byte_size(Buf) >= Len ->
    <<Body:Len/binary, Rest/binary>> = Buf,
    {ok, Body, Rest};
read_body(Recv, Buf, Len) ->
    case Recv(?T) of
        {ok, D} -> read_body(Recv, <<Buf/binary, D/binary>>, Len);
        Error -> Error
    end.

%%--------------------------------------------------------------------
%% Helpers
%%--------------------------------------------------------------------

%% A connected pair through the transport: {Client, Server}.
pair() ->
    {ok, L} = ?TR:listen(#{socket_opts => [{ip, {127, 0, 0, 1}}]}),
    {ok, {_, Port}} = ?TR:sockname(L),
    {ok, C} = ?TR:connect({127, 0, 0, 1}, Port, []),
    {ok, S} = ?TR:accept(L, ?T),
    ok = ?TR:close(L),
    {C, S}.

ssl_tlv() ->
    Subs = [proxy_tlv(16#21, <<"TLSv1.3">>), proxy_tlv(16#22, <<"client">>)],
    Value = iolist_to_binary([<<3, 0:32>> | Subs]),
    proxy_tlv(16#20, Value).

%% A v2 header with a CRC32C TLV appended, computed independently of the transport.
with_crc(FamProto, Parts) ->
    Zeroed = proxy_v2(FamProto, Parts ++ [<<3, 4:16, 0:32>>]),
    Crc = crc32c(Zeroed),
    Size = byte_size(Zeroed) - 4,
    <<Head:Size/binary, 0:32>> = Zeroed,
    <<Head/binary, Crc:32>>.

%% CRC-32C by the table-free textbook definition (polynomial 0x1EDC6F41, reflected).
crc32c(Bin) ->
    lists:foldl(fun(Byte, Crc0) ->
                        lists:foldl(fun(_, C) ->
                                            case C band 1 of
                                                1 -> (C bsr 1) bxor 16#82F63B78;
                                                0 -> C bsr 1
                                            end
                                    end, Crc0 bxor Byte, lists:seq(1, 8))
                end, 16#FFFFFFFF, binary_to_list(Bin)) bxor 16#FFFFFFFF.

unique_sock_path() ->
    list_to_binary(tmp_path("nifsock_ranch") ++ ".sock").
