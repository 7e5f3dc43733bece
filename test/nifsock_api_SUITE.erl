%%% Common Test suite for the public API of `nifsock', run over OTP's
%%% `socket' (group socket) and over `nifsock' (group nifsock), as Ranch's
%%% acceptor_SUITE runs its cases over two transports: init_per_group puts in
%%% Config the module under test (`mod'), the tag of its select/abort messages
%%% (`tag': '$socket' / '$nifsock') and the OTP release whose behaviour it has
%%% (`release': the running one for socket; 25 for nifsock, which keeps OTP
%%% 25's behaviour where socket's changed since). Both modules are held to
%%% the same assertions, so socket proves each test. Where nifsock
%%% deliberately differs (README, "Differences from socket"), a case asserts
%%% each module's documented behaviour (by_mod/3, not_owner_error/1,
%%% getopt_not_socket_reason/1, not_tuple_option_result/1, check_tail/3,
%%% is_sock/2, set_owner/3, api_exports/1, api_info_global/1); where socket's
%%% behaviour changed with the release, the behaviour of the group's release
%%% (release/1: api_recv_timeout_zero, api_recv_timeout_ms,
%%% api_recv_nowait_partial, api_tos_names).
%%%
%%% Run one group: rebar3 ct --suite test/nifsock_api_SUITE --group socket
%%% All traffic is on loopback (127.0.0.1, ::1, unix paths under /tmp).
-module(nifsock_api_SUITE).

-include_lib("common_test/include/ct.hrl").

-export([all/0, suite/0, groups/0, init_per_suite/1, end_per_suite/1,
         init_per_group/2, end_per_group/2, init_per_testcase/2, end_per_testcase/2]).

-export([api_exports/1, api_open_netns/1, api_send_cont_flags/1, api_sendfile_nowait_cont/1,
         api_open_variants/1,
         api_open_fd/1,
         api_echo_inet/1,
         api_echo_inet6/1,
         api_echo_local/1,
         api_local_unnamed_address/1,
         api_recv_zero_returns_available/1,
         api_recv_exact_length/1,
         api_recv_default_arities/1,
         api_recv_timeout_zero/1,
         api_recv_timeout_ms/1,
         api_recv_timeout_infinity/1,
         api_recv_nowait/1,
         api_recv_nowait_partial/1,
         api_recv_select_handle/1,
         api_accept_nowait/1,
         api_accept_timeout/1,
         api_connect_nowait/1,
         api_cancel_recv/1,
         api_cancel_accept/1,
         api_close_wakes_recv_waiter/1,
         api_close_wakes_accept_waiter/1,
         api_close_aborts_nowait_waiters/1,
         api_double_close/1,
         api_use_after_close/1,
         api_eof_closed/1,
         api_eof_with_partial_data/1,
         api_peer_reset_econnreset/1,
         api_bind_eaddrinuse/1,
         api_connect_econnrefused/1,
         api_owner_death_closes/1,
         api_controlling_process/1,
         api_concurrent_acceptors/1,
         api_badarg_wrong_types/1,
         api_invalid_values/1,
         api_setopt_getopt_roundtrip/1,
         api_setopt_getopt_errors/1,
         api_sockname_peername/1,
         api_shutdown_write/1,
         api_shutdown_read_write/1,
         api_is_socket/1,
         api_info_socket/1,
         api_info_counters/1,
         api_info_global/1,
         api_send_iolist/1,
         api_send_small_leaves_no_binary/1,
         api_send_partial_timeout/1,
         api_send_partial_nowait/1, api_sendfile/1,
         api_recv_nowait_after_short_read/1,
         api_send_partial_binary_rest/1,
         api_bind_local_ip_names/1,
         api_open_local_tcp/1,
         api_tos_names/1,
         api_setopt_controlling_process_not_owner/1,
         api_setopt_controlling_process_dead_owner/1,
         api_close_leaves_no_message/1,
         api_sockaddr_out_of_range/1,
         api_send_concurrent_writers_whole/1,
         api_sendfile_error_ends_turn/1]).

-import(nifsock_test_lib, [loopback/1, listener/2, pair/1, connect_accept/3, flush/0,
                           kill_and_wait/1, fd_count/0, socket_fds/0, tmp_path/1]).

-define(T, 5000).          % bound for anything that should happen "now"
-define(BIG, (4 * 1024 * 1024)).
-define(CLOSE_RACES, 100).  % per operation in api_close_leaves_no_message

%%--------------------------------------------------------------------
%% CT callbacks
%%--------------------------------------------------------------------

suite() -> [{timetrap, {seconds, 60}}].

all() -> [{group, socket}, {group, nifsock}].

groups() ->
    [{socket, [], cases()},
     {nifsock, [], cases()}].

cases() ->
    [api_exports,
     api_open_variants,
     api_open_netns,
     api_open_fd,
     api_echo_inet,
     api_echo_inet6,
     api_echo_local,
     api_local_unnamed_address,
     api_recv_zero_returns_available,
     api_recv_exact_length,
     api_recv_default_arities,
     api_recv_timeout_zero,
     api_recv_timeout_ms,
     api_recv_timeout_infinity,
     api_recv_nowait,
     api_recv_nowait_partial,
     api_recv_select_handle,
     api_accept_nowait,
     api_accept_timeout,
     api_connect_nowait,
     api_cancel_recv,
     api_cancel_accept,
     api_close_wakes_recv_waiter,
     api_close_wakes_accept_waiter,
     api_close_aborts_nowait_waiters,
     api_double_close,
     api_use_after_close,
     api_eof_closed,
     api_eof_with_partial_data,
     api_peer_reset_econnreset,
     api_bind_eaddrinuse,
     api_connect_econnrefused,
     api_owner_death_closes,
     api_controlling_process,
     api_concurrent_acceptors,
     api_badarg_wrong_types,
     api_invalid_values,
     api_setopt_getopt_roundtrip,
     api_setopt_getopt_errors,
     api_sockname_peername,
     api_shutdown_write,
     api_shutdown_read_write,
     api_is_socket,
     api_info_socket,
     api_info_counters,
     api_info_global,
     api_send_iolist,
     api_send_small_leaves_no_binary,
     api_send_partial_timeout,
     api_send_partial_nowait, api_send_cont_flags, api_sendfile, api_sendfile_nowait_cont,
     api_recv_nowait_after_short_read,
     api_send_partial_binary_rest,
     api_bind_local_ip_names,
     api_open_local_tcp,
     api_tos_names,
     api_setopt_controlling_process_not_owner,
     api_setopt_controlling_process_dead_owner,
     api_close_leaves_no_message,
     api_sockaddr_out_of_range,
     api_send_concurrent_writers_whole,
     api_sendfile_error_ends_turn].

init_per_suite(Config) -> Config.

end_per_suite(_Config) -> ok.

%% The group's module, its message tag and the OTP release whose behaviour
%% it has; fails the group if the module can't open a socket.
init_per_group(socket, Config) ->
    setup_mod(socket, '$socket', list_to_integer(erlang:system_info(otp_release)), Config);
init_per_group(nifsock, Config) ->
    setup_mod(nifsock, '$nifsock', 25, Config).

end_per_group(_Group, _Config) -> ok.

init_per_testcase(_Case, Config) ->
    %% Leftover select/abort messages from an earlier case must not leak in.
    flush(),
    Config.

end_per_testcase(_Case, _Config) -> ok.

setup_mod(Mod, Tag, Release, Config) ->
    case code:ensure_loaded(Mod) of
        {module, Mod} ->
            try Mod:open(inet, stream, tcp) of
                {ok, S} ->
                    ok = Mod:close(S),
                    [{mod, Mod}, {tag, Tag}, {release, Release} | Config];
                Other ->
                    {fail, {cannot_open_socket, Mod, Other}}
            catch C:R ->
                    {fail, {cannot_open_socket, Mod, {C, R}}}
            end;
        Error ->
            {fail, {cannot_load, Mod, Error}}
    end.

%%--------------------------------------------------------------------
%% Cases
%%--------------------------------------------------------------------

%% Ensures every function of the socket-compatible API (and the nifsock
%% extensions) is exported, and nifsock exports nothing this suite does not cover.
api_exports(Config) ->
    Mod = mod(Config),
    Exports = Mod:module_info(exports),
    Missing = [FA || FA <- common_api(), not lists:member(FA, Exports)],
    [] = Missing,
    case Mod of
        nifsock ->
            [] = [FA || FA <- nifsock_extensions(), not lists:member(FA, Exports)],
            Covered = common_api() ++ nifsock_extensions()
                ++ [{module_info, 0}, {module_info, 1}],
            Uncovered = [FA || FA <- Exports, not lists:member(FA, Covered)],
            [] = Uncovered;
        _ ->
            ok
    end.

%% Ensures open/2, open/3 (tcp, default protocol, or an options map) and
%% open/4 give distinct stream sockets for inet, inet6 and local.
api_open_variants(Config) ->
    Mod = mod(Config),
    Opened = [{ok, _} = Mod:open(inet, stream),
              {ok, _} = Mod:open(inet, stream, tcp),
              {ok, _} = Mod:open(inet, stream, default),
              {ok, _} = Mod:open(inet, stream, #{}),
              {ok, _} = Mod:open(inet, stream, tcp, #{}),
              {ok, _} = Mod:open(local, stream),
              {ok, _} = Mod:open(local, stream, default)]
        ++ case ipv6_ok(Mod) of
               true -> [{ok, _} = Mod:open(inet6, stream, tcp)];
               false -> []
           end,
    Socks = [S || {ok, S} <- Opened],
    true = lists:all(fun(S) -> is_sock(Mod, S) end, Socks),
    %% every one is distinct
    true = length(lists:usort(Socks)) =:= length(Socks),
    {ok, stream} = Mod:getopt(hd(Socks), {socket, type}),
    [ok = Mod:close(S) || S <- Socks],
    ok.

%% Ensures open/4's `netns' makes the socket in that network namespace and
%% leaves the calling thread in its own: a listener made there (its loopback
%% brought up) takes a connection from a socket made there, and refuses one
%% from a socket made without the option, which a listener here accepts.
%% A missing namespace file is enoent; a non-string netns is refused. Needs
%% root and iproute2 (`ip netns add'): skipped otherwise.
api_open_netns(Config) ->
    Mod = mod(Config),
    Name = "nifsock_ct_" ++ integer_to_list(erlang:unique_integer([positive])),
    case os:find_executable("ip") =/= false
        andalso os:cmd("ip netns add " ++ Name ++ " 2>&1 && echo ok") of
        "ok\n" ->
            try
                "" = os:cmd("ip netns exec " ++ Name ++ " ip link set lo up 2>&1"),
                netns_check(Mod, "/var/run/netns/" ++ Name)
            after
                os:cmd("ip netns del " ++ Name)
            end;
        Other ->
            {skip, {no_netns, Other}}
    end.

netns_check(Mod, Path) ->
    Loop = #{family => inet, addr => {127, 0, 0, 1}, port => 0},
    {ok, L} = Mod:open(inet, stream, tcp, #{netns => Path}),
    ok = Mod:bind(L, Loop),
    ok = Mod:listen(L),
    {ok, #{port := Port} = There} = Mod:sockname(L),
    {ok, In} = Mod:open(inet, stream, tcp, #{netns => Path}),
    ok = Mod:connect(In, There, ?T),
    {ok, A} = Mod:accept(L, ?T),
    %% sockets made afterwards without the option are here
    Here = [begin
                {ok, S} = Mod:open(inet, stream, tcp),
                {error, econnrefused} = Mod:connect(S, There, ?T),
                S
            end || _ <- lists:seq(1, 2 * erlang:system_info(schedulers))],
    {ok, L2} = Mod:open(inet, stream, tcp),
    ok = Mod:bind(L2, Loop#{port => Port}),
    ok = Mod:listen(L2),
    {ok, Out} = Mod:open(inet, stream, tcp),
    ok = Mod:connect(Out, There, ?T),
    {ok, A2} = Mod:accept(L2, ?T),
    {error, enoent} = Mod:open(inet, stream, tcp, #{netns => Path ++ "_none"}),
    case Mod of
        nifsock -> {error, {invalid, {netns, 42}}} = Mod:open(inet, stream, tcp, #{netns => 42});
        socket -> ok
    end,
    [ok = Mod:close(S) || S <- [L, In, A, L2, Out, A2 | Here]],
    ok.

%% Ensures open(FD, #{dup => true}) adopts a duplicate of an existing
%% listening fd (usable for accept; closing it leaves the original open).
api_open_fd(Config) ->
    Mod = mod(Config),
    %% The original fd comes from an OTP socket, whatever Mod is.
    {L0, Addr} = listener(socket, inet),
    {ok, Fd} = socket:getopt(L0, {otp, fd}),
    {ok, S} = Mod:open(Fd, #{dup => true}),
    true = is_sock(Mod, S),
    {ok, Addr} = Mod:sockname(S),
    {ok, true} = Mod:getopt(S, {socket, acceptconn}),
    {ok, C} = Mod:open(inet, stream, tcp),
    ok = Mod:connect(C, Addr),
    {ok, A} = Mod:accept(S, ?T),
    echo_roundtrip(Mod, C, A),
    ok = Mod:close(S),
    {ok, Addr} = socket:sockname(L0),
    close_all(Mod, [C, A]),
    ok = socket:close(L0).

%% Ensures a full echo exchange over IPv4 loopback (open/bind/listen/connect/
%% accept/send/recv/close).
api_echo_inet(Config) ->
    echo(mod(Config), inet).

%% Ensures a full echo exchange over IPv6 loopback (::1).
api_echo_inet6(Config) ->
    Mod = mod(Config),
    case ipv6_ok(Mod) of
        true -> echo(Mod, inet6);
        false -> {skip, no_ipv6}
    end.

%% Ensures a full echo exchange over a unix domain socket in a temp dir,
%% with the path given as a binary and as a string (socket takes both).
api_echo_local(Config) ->
    Mod = mod(Config),
    Dir = make_tmp_dir(),
    BinPath = list_to_binary(filename:join(Dir, "bin.sock")),
    StrPath = filename:join(Dir, "str.sock"),
    try
        [begin
             {L, Addr} = local_listener(Mod, Path),
             {ok, #{family := local, path := LPath}} = Mod:sockname(L),
             true = iolist_to_binary(Path) =:= iolist_to_binary(LPath),
             {C, A} = connect_accept(Mod, L, Addr),
             {ok, #{family := local, path := PeerPath}} = Mod:peername(C),
             true = iolist_to_binary(Path) =:= iolist_to_binary(PeerPath),
             echo_roundtrip(Mod, C, A),
             close_all(Mod, [C, A, L])
         end || Path <- [BinPath, StrPath]],
        ok
    after
        _ = file:delete(BinPath),
        _ = file:delete(StrPath),
        _ = file:del_dir(Dir)
    end.

%% The empty unix path is the unnamed address: bind autobinds to an abstract name (Linux), a connected client's name is it, connect to it is einval.
api_local_unnamed_address(Config) ->
    Mod = mod(Config),
    {L, _} = local_listener(Mod, <<>>),
    {ok, #{family := local, path := <<0, _/binary>> = Name}} = Mod:sockname(L),
    {C, A} = connect_accept(Mod, L, #{family => local, path => Name}),
    {ok, #{family := local, path := <<>>}} = Mod:sockname(C),
    {ok, #{family := local, path := <<>>}} = Mod:peername(A),
    echo_roundtrip(Mod, C, A),
    {ok, U} = Mod:open(local, stream),
    {error, einval} = Mod:connect(U, #{family => local, path => <<>>}),
    close_all(Mod, [C, A, L, U]).

%% Ensures recv(S, 0) returns what is available (a non-empty prefix) without
%% waiting for more, and all bytes eventually arrive in order.
api_recv_zero_returns_available(Config) ->
    Mod = mod(Config),
    {L, C, A} = pair(Mod),
    Data = rand:bytes(1000),
    ok = Mod:send(A, Data),
    {ok, First} = Mod:recv(C, 0),
    true = byte_size(First) > 0 andalso byte_size(First) =< 1000,
    First = binary:part(Data, 0, byte_size(First)),
    Rest = recv_exact(Mod, C, 1000 - byte_size(First)),
    Data = <<First/binary, Rest/binary>>,
    close_all(Mod, [C, A, L]).

%% Ensures recv(S, N) waits until exactly N bytes are there, across
%% separate sends, and leaves the remainder for the next recv.
api_recv_exact_length(Config) ->
    Mod = mod(Config),
    {L, C, A} = pair(Mod),
    ok = Mod:send(A, <<"hello">>),
    Sender = spawn_link(fun() -> timer:sleep(50), ok = Mod:send(A, <<"world!!">>) end),
    {ok, <<"helloworld">>} = Mod:recv(C, 10),
    {ok, <<"!!">>} = Mod:recv(C, 2, ?T),
    unlink(Sender),
    close_all(Mod, [C, A, L]).

%% Ensures recv/1, recv(S, Flags), recv(S, N, Flags) and recv/4 with []
%% flags behave like recv(S, 0) / recv(S, N).
api_recv_default_arities(Config) ->
    Mod = mod(Config),
    {L, C, A} = pair(Mod),
    ok = Mod:send(A, <<"one">>),
    {ok, <<"one">>} = recv_until(Mod, fun() -> Mod:recv(C) end, 3),
    ok = Mod:send(A, <<"two">>),
    {ok, <<"two">>} = recv_until(Mod, fun() -> Mod:recv(C, []) end, 3),
    ok = Mod:send(A, <<"three">>),
    {ok, <<"three">>} = Mod:recv(C, 5, []),
    ok = Mod:send(A, <<"four">>),
    {ok, <<"four">>} = Mod:recv(C, 4, [], ?T),
    close_all(Mod, [C, A, L]).

%% Ensures recv with timeout 0 never waits: {error, timeout} when nothing is
%% pending, the pending bytes otherwise; an exact length takes them even when
%% fewer than asked for: {ok, Data} as OTP 25's socket (and nifsock), {error,
%% {timeout, Data}} from OTP 26.
api_recv_timeout_zero(Config) ->
    Mod = mod(Config),
    {L, C, A} = pair(Mod),
    {error, timeout} = Mod:recv(C, 0, 0),
    {error, timeout} = Mod:recv(C, 4, 0),
    ok = Mod:send(A, <<"ping">>),
    {ok, <<"ping">>} = poll(fun() -> Mod:recv(C, 0, 0) end,
                            fun({error, timeout}) -> false; (_) -> true end),
    {error, timeout} = Mod:recv(C, 0, 0),
    %% an exact length with timeout 0 takes what is there, short or not
    ok = Mod:send(A, <<"abc">>),
    Short = poll(fun() -> Mod:recv(C, 10, 0) end,
                 fun({error, timeout}) -> false; (_) -> true end),
    case release(Config) >= 26 of
        true -> {error, {timeout, <<"abc">>}} = Short;
        false -> {ok, <<"abc">>} = Short
    end,
    {error, timeout} = Mod:recv(C, 10, 0),
    close_all(Mod, [C, A, L]).

%% Ensures recv with an N ms timeout gives {error, timeout} when nothing
%% comes and {error, {timeout, Partial}} when fewer than N bytes came, the
%% partial bytes consumed (OTP 27's socket: {error, timeout}, the bytes left
%% for the next recv).
api_recv_timeout_ms(Config) ->
    Mod = mod(Config),
    {L, C, A} = pair(Mod),
    {error, timeout} = Mod:recv(C, 0, 100),
    {error, timeout} = Mod:recv(C, 10, 100),
    ok = Mod:send(A, <<"abc">>),
    case release(Config) of
        27 ->
            {error, timeout} = Mod:recv(C, 10, 100),
            %% (read with length 0: OTP 27.3's recv(C, 3) returns the timed-out
            %% call's 10-byte buffer, uninitialised after the 3 bytes)
            {ok, <<"abc">>} = Mod:recv(C, 0, ?T);
        _ ->
            {error, {timeout, <<"abc">>}} = Mod:recv(C, 10, 100)
    end,
    ok = Mod:send(A, <<"0123456789">>),
    {ok, <<"0123456789">>} = Mod:recv(C, 10, ?T),
    close_all(Mod, [C, A, L]).

%% Ensures recv with timeout infinity blocks until data arrives.
api_recv_timeout_infinity(Config) ->
    Mod = mod(Config),
    {L, C, A} = pair(Mod),
    Self = self(),
    Reader = spawn_link(fun() -> Self ! {got, self(), Mod:recv(C, 6, infinity)} end),
    ok = Mod:send(A, <<"abc">>),
    timer:sleep(50),
    ok = Mod:send(A, <<"def">>),
    receive {got, Reader, R} -> {ok, <<"abcdef">>} = R
    after ?T -> ct:fail(recv_infinity_did_not_return)
    end,
    close_all(Mod, [C, A, L]).

%% Ensures recv nowait returns {select, {select_info, recv, Handle}}, the
%% select message arrives when data does, and the retry returns the data.
api_recv_nowait(Config) ->
    Mod = mod(Config),
    {L, C, A} = pair(Mod),
    {select, {select_info, recv, H}} = Mod:recv(C, 0, nowait),
    true = is_reference(H),
    assert_no_msg(Config, C, 100),
    ok = Mod:send(A, <<"data">>),
    expect_msg(Config, C, select, H),
    {ok, <<"data">>} = Mod:recv(C, 0, nowait),
    %% data already pending: nowait returns it at once
    ok = Mod:send(A, <<"more">>),
    {ok, <<"more">>} = poll(fun() -> Mod:recv(C, 0, nowait) end,
                            fun({ok, _}) -> true;
                               ({select, {select_info, recv, H2}}) ->
                                    %% raced the data: wait for it
                                    expect_msg(Config, C, select, H2), false
                            end),
    close_all(Mod, [C, A, L]).

%% Ensures recv(S, N, nowait) with fewer than N bytes pending returns
%% {select, {SelectInfo, Partial}} and the rest comes after the select message
%% (OTP 27's socket: {select, SelectInfo}, the partial bytes left in front of
%% the rest).
api_recv_nowait_partial(Config) ->
    Mod = mod(Config),
    {L, C, A} = pair(Mod),
    ok = Mod:send(A, <<"abc">>),
    {ok, <<"ab">>} = Mod:recv(C, 2, ?T),   % waits until data is there
    case release(Config) of
        27 ->
            {select, {select_info, recv, H}} = Mod:recv(C, 5, nowait),
            ok = Mod:send(A, <<"defg">>),
            expect_msg(Config, C, select, H),
            {ok, <<"cdefg">>} = Mod:recv(C, 5, ?T);
        _ ->
            {select, {{select_info, recv, H}, <<"c">>}} = Mod:recv(C, 5, nowait),
            ok = Mod:send(A, <<"defg">>),
            expect_msg(Config, C, select, H),
            {ok, <<"defg">>} = Mod:recv(C, 4, nowait)
    end,
    close_all(Mod, [C, A, L]).

%% Ensures a caller-supplied reference as timeout is used as the select handle.
api_recv_select_handle(Config) ->
    Mod = mod(Config),
    {L, C, A} = pair(Mod),
    Ref = make_ref(),
    {select, {select_info, recv, Ref}} = Mod:recv(C, 0, Ref),
    ok = Mod:send(A, <<"x">>),
    expect_msg(Config, C, select, Ref),
    {ok, <<"x">>} = Mod:recv(C, 0, nowait),
    close_all(Mod, [C, A, L]).

%% Ensures accept nowait returns {select, {select_info, accept, H}}, a select
%% message follows an incoming connection and the retry returns it.
api_accept_nowait(Config) ->
    Mod = mod(Config),
    {L, Addr} = listener(Mod, inet),
    {select, {select_info, accept, H}} = Mod:accept(L, nowait),
    true = is_reference(H),
    assert_no_msg(Config, L, 100),
    {ok, C} = Mod:open(inet, stream, tcp),
    ok = Mod:connect(C, Addr),
    expect_msg(Config, L, select, H),
    {ok, A} = Mod:accept(L, nowait),
    echo_roundtrip(Mod, C, A),
    close_all(Mod, [C, A, L]).

%% Ensures accept with a 0 or N ms timeout gives {error, timeout} when no
%% connection is pending, and accept/1 waits for one.
api_accept_timeout(Config) ->
    Mod = mod(Config),
    {L, Addr} = listener(Mod, inet),
    {error, timeout} = Mod:accept(L, 0),
    {error, timeout} = Mod:accept(L, 100),
    Self = self(),
    %% The acceptor owns the accepted socket, so it stays alive until told.
    Acc = spawn_link(fun() ->
                             {ok, A} = Mod:accept(L),
                             Self ! {accepted, self(), A},
                             receive done -> ok end
                     end),
    {ok, C} = Mod:open(inet, stream, tcp),
    ok = Mod:connect(C, Addr),
    receive {accepted, Acc, A} -> echo_roundtrip(Mod, C, A)
    after ?T -> ct:fail(accept_1_did_not_return)
    end,
    Acc ! done,
    close_all(Mod, [C, L]).

%% Ensures connect nowait returns {select, {select_info, connect, H}}, the
%% select message arrives and connect/1 completes the connection.
%% (A non-blocking TCP connect on Linux always gives EINPROGRESS, loopback too:
%% the SYN-ACK is processed only after the socket lock is released.)
api_connect_nowait(Config) ->
    Mod = mod(Config),
    {L, Addr} = listener(Mod, inet),
    {ok, C} = Mod:open(inet, stream, tcp),
    {select, {select_info, connect, H}} = Mod:connect(C, Addr, nowait),
    true = is_reference(H),
    expect_msg(Config, C, select, H),
    ok = Mod:connect(C),
    {ok, Addr} = Mod:peername(C),
    {ok, A} = Mod:accept(L, ?T),
    echo_roundtrip(Mod, C, A),
    close_all(Mod, [C, A, L]).

%% Ensures cancel/2 of a pending recv returns ok, no select message follows
%% when data arrives, the data is still readable, and a second cancel of the
%% same select info gives {error, {invalid, SelectInfo}}.
api_cancel_recv(Config) ->
    Mod = mod(Config),
    {L, C, A} = pair(Mod),
    {select, {select_info, recv, _} = SI} = Mod:recv(C, 0, nowait),
    ok = Mod:cancel(C, SI),
    ok = Mod:send(A, <<"x">>),
    assert_no_msg(Config, C, 200),
    {ok, <<"x">>} = Mod:recv(C, 0, ?T),
    {error, {invalid, SI}} = Mod:cancel(C, SI),
    close_all(Mod, [C, A, L]).

%% Ensures cancel/2 of a pending accept returns ok and no select message
%% follows an incoming connection, which a later accept still gets.
api_cancel_accept(Config) ->
    Mod = mod(Config),
    {L, Addr} = listener(Mod, inet),
    {select, {select_info, accept, _} = SI} = Mod:accept(L, nowait),
    ok = Mod:cancel(L, SI),
    {ok, C} = Mod:open(inet, stream, tcp),
    ok = Mod:connect(C, Addr),
    assert_no_msg(Config, L, 200),
    {ok, A} = Mod:accept(L, ?T),
    {error, {invalid, SI}} = Mod:cancel(L, SI),
    close_all(Mod, [C, A, L]).

%% Ensures closing a socket wakes a process blocked in recv(S, 0, infinity)
%% with {error, closed}.
api_close_wakes_recv_waiter(Config) ->
    Mod = mod(Config),
    {L, C, A} = pair(Mod),
    Self = self(),
    W = spawn_link(fun() -> Self ! {waiter, self(), Mod:recv(C, 0, infinity)} end),
    wait_blocked(W),
    ok = Mod:close(C),
    receive {waiter, W, R} -> {error, closed} = R
    after ?T -> ct:fail(recv_waiter_not_woken)
    end,
    close_all(Mod, [A, L]).

%% Ensures closing a listen socket wakes a process blocked in
%% accept(L, infinity) with {error, closed}.
api_close_wakes_accept_waiter(Config) ->
    Mod = mod(Config),
    {L, _Addr} = listener(Mod, inet),
    Self = self(),
    W = spawn_link(fun() -> Self ! {waiter, self(), Mod:accept(L, infinity)} end),
    wait_blocked(W),
    ok = Mod:close(L),
    receive {waiter, W, R} -> {error, closed} = R
    after ?T -> ct:fail(accept_waiter_not_woken)
    end.

%% Ensures nowait waiters (recv and accept, in other processes and in the
%% closing process itself) get {Tag, S, abort, {Handle, closed}} on close.
api_close_aborts_nowait_waiters(Config) ->
    Mod = mod(Config),
    {L, C, A} = pair(Mod),
    T = tag(Config),
    Self = self(),
    Forwarder = fun(Op) ->
                        spawn_link(fun() ->
                                           Self ! {res, self(), Op()},
                                           receive M -> Self ! {fwd, self(), M}
                                           after ?T -> Self ! {fwd, self(), none}
                                           end
                                   end)
                end,
    W1 = Forwarder(fun() -> Mod:recv(C, 0, nowait) end),
    W2 = Forwarder(fun() -> Mod:accept(L, nowait) end),
    H1 = receive {res, W1, {select, {select_info, recv, R1}}} -> R1
         after ?T -> ct:fail(no_recv_select) end,
    H2 = receive {res, W2, {select, {select_info, accept, R2}}} -> R2
         after ?T -> ct:fail(no_accept_select) end,
    ok = Mod:close(C),
    ok = Mod:close(L),
    receive {fwd, W1, M1} -> {T, C, abort, {H1, closed}} = M1
    after ?T -> ct:fail(no_forward_1) end,
    receive {fwd, W2, M2} -> {T, L, abort, {H2, closed}} = M2
    after ?T -> ct:fail(no_forward_2) end,
    ok = Mod:close(A),
    %% the closing process' own nowait recv
    {L2, C2, A2} = pair(Mod),
    {select, {select_info, recv, H3}} = Mod:recv(C2, 0, nowait),
    ok = Mod:close(C2),
    expect_msg(Config, C2, abort, {H3, closed}),
    close_all(Mod, [A2, L2]).

%% Ensures a second close returns {error, closed}.
api_double_close(Config) ->
    Mod = mod(Config),
    {L, C, A} = pair(Mod),
    ok = Mod:close(C),
    {error, closed} = Mod:close(C),
    ok = Mod:close(L),
    {error, closed} = Mod:close(L),
    {ok, X} = Mod:open(inet, stream, tcp),
    ok = Mod:close(X),
    {error, closed} = Mod:close(X),
    ok = Mod:close(A).

%% Ensures every operation on a closed socket returns {error, closed}.
api_use_after_close(Config) ->
    Mod = mod(Config),
    {L, C, A} = pair(Mod),
    {ok, Addr} = Mod:sockname(L),
    ok = Mod:close(C),
    ok = Mod:close(L),
    Ops = [{send, fun() -> Mod:send(C, <<"x">>) end},
           {send_nowait, fun() -> Mod:send(C, <<"x">>, nowait) end},
           {send_timeout, fun() -> Mod:send(C, <<"x">>, 100) end},
           {recv, fun() -> Mod:recv(C, 0) end},
           {recv_n, fun() -> Mod:recv(C, 5, ?T) end},
           {recv_zero, fun() -> Mod:recv(C, 0, 0) end},
           {recv_nowait, fun() -> Mod:recv(C, 0, nowait) end},
           {setopt, fun() -> Mod:setopt(C, {socket, keepalive}, true) end},
           {getopt, fun() -> Mod:getopt(C, {socket, keepalive}) end},
           {sockname, fun() -> Mod:sockname(C) end},
           {peername, fun() -> Mod:peername(C) end},
           {shutdown, fun() -> Mod:shutdown(C, write) end},
           {connect, fun() -> Mod:connect(C, Addr) end},
           {cancel, fun() -> Mod:cancel(C, {select_info, recv, make_ref()}) end},
           {accept, fun() -> Mod:accept(L, 0) end},
           {accept_nowait, fun() -> Mod:accept(L, nowait) end},
           {listen, fun() -> Mod:listen(L) end},
           {bind, fun() -> Mod:bind(L, #{family => inet, addr => {127,0,0,1},
                                         port => 0}) end}],
    check_table([{Name, {returned, {error, closed}}, F} || {Name, F} <- Ops]),
    true = is_map(Mod:info(C)),
    ok = Mod:close(A).

%% Ensures an orderly close by the peer reads as {error, closed}, repeatedly.
api_eof_closed(Config) ->
    Mod = mod(Config),
    {L, C, A} = pair(Mod),
    ok = Mod:close(A),
    {error, closed} = Mod:recv(C, 0, ?T),
    {error, closed} = Mod:recv(C, 0),
    {error, closed} = Mod:recv(C, 0, nowait),
    close_all(Mod, [C, L]).

%% Ensures recv(S, N) that hits EOF after fewer than N bytes returns
%% {error, {closed, Partial}}, then {error, closed}.
api_eof_with_partial_data(Config) ->
    Mod = mod(Config),
    {L, C, A} = pair(Mod),
    ok = Mod:send(A, <<"abc">>),
    ok = Mod:close(A),
    {error, {closed, <<"abc">>}} = Mod:recv(C, 10, ?T),
    {error, closed} = Mod:recv(C, 10, ?T),
    close_all(Mod, [C, L]).

%% Ensures a peer that closes with linger {true, 0} (RST) makes recv return
%% {error, econnreset}.
api_peer_reset_econnreset(Config) ->
    Mod = mod(Config),
    {L, C, A} = pair(Mod),
    ok = Mod:setopt(C, {socket, linger}, #{onoff => true, linger => 0}),
    ok = Mod:close(C),
    {error, econnreset} = Mod:recv(A, 0, ?T),
    close_all(Mod, [A, L]).

%% Ensures bind to an address in use (TCP port, unix path) is {error, eaddrinuse}.
api_bind_eaddrinuse(Config) ->
    Mod = mod(Config),
    {L, Addr} = listener(Mod, inet),
    {ok, X} = Mod:open(inet, stream, tcp),
    {error, eaddrinuse} = Mod:bind(X, Addr),
    Dir = make_tmp_dir(),
    Path = filename:join(Dir, "inuse.sock"),
    try
        {LL, LAddr} = local_listener(Mod, Path),
        {ok, Y} = Mod:open(local, stream),
        {error, eaddrinuse} = Mod:bind(Y, LAddr),
        close_all(Mod, [LL, Y])
    after
        _ = file:delete(Path),
        _ = file:del_dir(Dir)
    end,
    close_all(Mod, [X, L]).

%% Ensures connect to a loopback port nobody listens on is
%% {error, econnrefused}, with timeout infinity, N ms and nowait.
api_connect_econnrefused(Config) ->
    Mod = mod(Config),
    %% A bound but not listening socket reserves the port: connects get RST.
    {ok, B} = Mod:open(inet, stream, tcp),
    ok = Mod:bind(B, #{family => inet, addr => {127,0,0,1}, port => 0}),
    {ok, Addr} = Mod:sockname(B),
    {ok, X} = Mod:open(inet, stream, tcp),
    {error, econnrefused} = Mod:connect(X, Addr),
    {ok, Y} = Mod:open(inet, stream, tcp),
    {error, econnrefused} = Mod:connect(Y, Addr, 1000),
    {ok, Z} = Mod:open(inet, stream, tcp),
    {select, {select_info, connect, H}} = Mod:connect(Z, Addr, nowait),
    expect_msg(Config, Z, select, H),
    {error, econnrefused} = Mod:connect(Z),
    close_all(Mod, [B, X, Y, Z]).

%% Ensures the sockets of a killed owner process are closed and their file
%% descriptors released (/proc/self/fd back to baseline).
api_owner_death_closes(Config) ->
    Mod = mod(Config),
    Base = socket_fds(),
    BaseCount = fd_count(),
    Self = self(),
    Owner = spawn(fun() ->
                          {L, C, A} = pair(Mod),
                          Self ! {socks, self(), [L, C, A]},
                          receive never -> ok end
                  end),
    Socks = receive {socks, Owner, Ss} -> Ss after ?T -> ct:fail(no_owner) end,
    New = socket_fds() -- Base,
    true = length(New) >= 3,
    MRef = erlang:monitor(process, Owner),
    exit(Owner, kill),
    receive {'DOWN', MRef, process, Owner, _} -> ok after ?T -> ct:fail(owner_alive) end,
    ok = poll_true(fun() ->
                           Now = socket_fds(),
                           [] =:= [F || F <- New, lists:member(F, Now)]
                   end),
    ok = poll_true(fun() -> fd_count() =< BaseCount end),
    [{error, closed} = Mod:sockname(S) || S <- Socks],
    [{error, closed} = Mod:close(S) || S <- Socks],
    ok.

%% Ensures ownership moves with controlling_process (setopt {otp,
%% controlling_process} too; getopt reports the owner): only the owner may move
%% it (others get the not_owner error), killing the old owner no longer
%% closes it, killing the new owner does.
api_controlling_process(Config) ->
    Mod = mod(Config),
    O1 = spawn_link(fun server_loop/0),
    O2 = spawn_link(fun server_loop/0),
    {L, Addr} = do(O1, fun() -> listener(Mod, inet) end),
    NotOwner = not_owner_error(Mod),
    NotOwner = set_owner(Mod, L, self()),
    {error, {invalid, not_owner}} = Mod:setopt(L, {otp, controlling_process}, self()),
    {ok, O1} = Mod:getopt(L, {otp, controlling_process}),
    ok = do(O1, fun() -> set_owner(Mod, L, O2) end),
    {ok, O2} = Mod:getopt(L, {otp, controlling_process}),
    NotOwner = do(O1, fun() -> set_owner(Mod, L, O1) end),
    NotOwner = set_owner(Mod, L, self()),
    unlink(O1),
    kill_and_wait(O1),
    %% still open and usable after the old owner died
    {ok, Addr} = Mod:sockname(L),
    {C, A} = connect_accept(Mod, L, Addr),
    echo_roundtrip(Mod, C, A),
    %% a socket created here moves to O2 and dies with it
    ok = set_owner(Mod, C, O2),
    NotOwner = set_owner(Mod, C, self()),
    unlink(O2),
    kill_and_wait(O2),
    ok = poll_true(fun() -> Mod:sockname(L) =:= {error, closed} end),
    ok = poll_true(fun() -> Mod:sockname(C) =:= {error, closed} end),
    %% A is still ours
    {error, closed} = Mod:recv(A, 0, ?T),
    ok = Mod:close(A).

%% Ensures setopt {otp, controlling_process} to a dead process is taken, and
%% the new owner's death closes the socket at once (socket's behaviour; no raw
%% errno comes back).
api_setopt_controlling_process_dead_owner(Config) ->
    Mod = mod(Config),
    Dead = spawn(fun() -> ok end),
    Ref = erlang:monitor(process, Dead),
    receive {'DOWN', Ref, process, Dead, _} -> ok end,
    {L, _Addr} = listener(Mod, inet),
    ok = Mod:setopt(L, {otp, controlling_process}, Dead),
    ok = poll_true(fun() -> Mod:sockname(L) =:= {error, closed} end),
    {error, closed} = Mod:close(L).

%% Ensures 8 processes blocked in accept on one listener all get connections
%% (80 sequential connects), 80 more in a burst are each accepted exactly once,
%% and closing the listener wakes all 8 with {error, closed}.
api_concurrent_acceptors(Config) ->
    Mod = mod(Config),
    {L, Addr} = listener(Mod, inet),
    Self = self(),
    Acceptors = [spawn_link(fun() -> acceptor_loop(Mod, L, Self) end)
                 || _ <- lists:seq(1, 8)],
    [wait_blocked(P) || P <- Acceptors],
    %% phase 1: one connection at a time
    Phase1 = [begin
                  {ok, C} = Mod:open(inet, stream, tcp),
                  ok = Mod:connect(C, Addr),
                  {ok, #{port := CPort}} = Mod:sockname(C),
                  Who = receive {accepted, P, Port} when is_pid(P) -> {P, Port}
                        after ?T -> ct:fail({not_accepted, N}) end,
                  {_, CPort} = Who,
                  {element(1, Who), C}
              end || N <- lists:seq(1, 80)],
    Counts = [{P, length([x || {Q, _} <- Phase1, Q =:= P])} || P <- Acceptors],
    [] = [PC || {_, 0} = PC <- Counts],
    80 = lists:sum([Cnt || {_, Cnt} <- Counts]),
    %% phase 2: a burst
    Burst = [begin
                 {ok, C} = Mod:open(inet, stream, tcp),
                 ok = Mod:connect(C, Addr),
                 {ok, #{port := Port}} = Mod:sockname(C),
                 {Port, C}
             end || _ <- lists:seq(1, 80)],
    Got = [receive {accepted, P, Port} when is_pid(P) -> Port
           after ?T -> ct:fail({burst_not_accepted, length(Burst)}) end
           || _ <- Burst],
    Expected = lists:sort([Port || {Port, _} <- Burst]),
    Expected = lists:sort(Got),
    assert_no_accepts(100),
    ok = Mod:close(L),
    Ends = [receive {acceptor_done, P, R} -> R after ?T -> {P, no_exit} end
            || P <- Acceptors],
    [{error, closed}] = lists:usort(Ends),
    close_all(Mod, [C || {_, C} <- Phase1] ++ [C || {_, C} <- Burst]).

%% Ensures wrong argument types raise error:badarg, as socket does.
api_badarg_wrong_types(Config) ->
    Mod = mod(Config),
    {L, C, A} = pair(Mod),
    Addr = #{family => inet, addr => {127,0,0,1}, port => 1},
    SI = {select_info, recv, make_ref()},
    Cases =
        [{recv_not_socket, fun() -> Mod:recv(not_a_socket, 0) end},
         {recv_ref, fun() -> Mod:recv(make_ref(), 0) end},
         {send_atom, fun() -> Mod:send(C, atom) end},
         {send_int, fun() -> Mod:send(C, 42) end},
         {send_not_socket, fun() -> Mod:send(not_a_socket, <<"x">>) end},
         {recv_negative, fun() -> Mod:recv(C, -1) end},
         {recv_negative_t, fun() -> Mod:recv(C, -1, 100) end},
         {recv_float, fun() -> Mod:recv(C, 1.5) end},
         {recv_atom_len, fun() -> Mod:recv(C, foo) end},
         {close, fun() -> Mod:close(not_a_socket) end},
         {sockname, fun() -> Mod:sockname(not_a_socket) end},
         {peername, fun() -> Mod:peername(not_a_socket) end},
         {info, fun() -> Mod:info(not_a_socket) end},
         {shutdown, fun() -> Mod:shutdown(not_a_socket, write) end},
         {listen, fun() -> Mod:listen(not_a_socket) end},
         {listen_backlog, fun() -> Mod:listen(L, foo) end},
         {accept, fun() -> Mod:accept(not_a_socket, 0) end},
         {connect, fun() -> Mod:connect(not_a_socket, Addr) end},
         {connect_1, fun() -> Mod:connect(not_a_socket) end},
         {bind, fun() -> Mod:bind(not_a_socket, Addr) end},
         {setopt, fun() -> Mod:setopt(not_a_socket, {socket, keepalive}, true) end},
         {cancel_not_socket, fun() -> Mod:cancel(not_a_socket, SI) end},
         {cancel_bad_info, fun() -> Mod:cancel(C, not_select_info) end},
         {cancel_handle_not_ref, fun() -> Mod:cancel(C, {select_info, recv, ref}) end},
         {open_opts_not_map, fun() -> Mod:open(inet, stream, tcp, not_a_map) end}],
    %% getopt on a non-socket: socket fails with function_clause (no catch-all
    %% clause), nifsock raises badarg.
    check_table([{Name, {error, badarg}, F} || {Name, F} <- Cases]
                ++ [{getopt_not_socket, {error, getopt_not_socket_reason(Mod)},
                     fun() -> Mod:getopt(not_a_socket, {socket, keepalive}) end}]),
    close_all(Mod, [C, A, L]).

%% The expectation for OTP socket, or nifsock's documented one.
by_mod(socket, SocketExpect, _NifsockExpect) -> SocketExpect;
by_mod(_, _SocketExpect, NifsockExpect) -> NifsockExpect.

%% Ensures bad values of the right type give the {invalid, What} errors
%% socket gives (returned or raised exactly where socket returns or raises).
api_invalid_values(Config) ->
    Mod = mod(Config),
    {L, C, A} = pair(Mod),
    {ok, X} = Mod:open(inet, stream, tcp),
    BadAddr = #{family => inet, addr => bad, port => 0},
    SI = {select_info, recv, make_ref()},
    Table =
        [%% raised
         %% nifsock: data that isn't iodata is a wrong type: badarg (README, Differences)
         {send_bad_iolist, by_mod(Mod, {error, {invalid, {data, [atom]}}}, {error, badarg}),
          fun() -> Mod:send(C, [atom]) end},
         {send_bad_byte, by_mod(Mod, {error, {invalid, {data, [256]}}}, {error, badarg}),
          fun() -> Mod:send(C, [256]) end},
         %% a bitstring is not iodata, not even one of no whole byte (which
         %% ERTS's enif_inspect_iovec lets through as empty), nested or not
         {send_bad_bitstring, by_mod(Mod, {error, {invalid, {data, [<<"a">>, <<1:1>>]}}},
                                     {error, badarg}),
          fun() -> Mod:send(C, [<<"a">>, <<1:1>>]) end},
         {send_bad_bitstring_nested,
          by_mod(Mod, {error, {invalid, {data, [[<<"a">>], [<<"b">>, <<"c", 1:2>>]]}}},
                 {error, badarg}),
          fun() -> Mod:send(C, [[<<"a">>], [<<"b">>, <<"c", 1:2>>]]) end},
         {send_bad_bitstring_tail, by_mod(Mod, {error, {invalid, {data, [<<"a">> | <<1:1>>]}}},
                                          {error, badarg}),
          fun() -> Mod:send(C, [<<"a">> | <<1:1>>]) end},
         {recv_timeout_atom, {error, {invalid, {timeout, bad}}}, fun() -> Mod:recv(C, 0, bad) end},
         {recv_timeout_neg, {error, {invalid, {timeout, -5}}}, fun() -> Mod:recv(C, 0, -5) end},
         {send_timeout_neg, {error, {invalid, {timeout, -1}}}, fun() -> Mod:send(C, <<"x">>, -1) end},
         {send_timeout_atom, {error, {invalid, {timeout, bad}}}, fun() -> Mod:send(C, <<"x">>, bad) end},
         {accept_timeout_atom, {error, {invalid, {timeout, bad}}}, fun() -> Mod:accept(L, bad) end},
         {connect_timeout_neg, {error, {invalid, {timeout, -1}}},
          fun() -> Mod:connect(X, #{family => inet, addr => {127,0,0,1}, port => 1}, -1) end},
         %% nifsock returns bad values as {error, {invalid, What}} where socket raises
         {connect_bad_addr, by_mod(Mod, {error, {invalid, {sockaddr, bad}}},
                                   {returned, {error, {invalid, {sockaddr, bad}}}}),
          fun() -> Mod:connect(X, bad) end},
         {shutdown_bad_how, by_mod(Mod, {error, {invalid, {how, bad}}},
                                   {returned, {error, {invalid, {how, bad}}}}),
          fun() -> Mod:shutdown(C, bad) end},
         %% returned
         {open_bad_domain, {returned, {error, {invalid, {domain, bad}}}}, fun() -> Mod:open(bad, stream, tcp) end},
         {open_bad_type, {returned, {error, {invalid, {type, bad}}}}, fun() -> Mod:open(inet, bad, tcp) end},
         {open_bad_protocol, {returned, {error, {invalid, {protocol, bad}}}}, fun() -> Mod:open(inet, stream, bad) end},
         {bind_bad_atom, {returned, {error, {invalid, {sockaddr, bad}}}}, fun() -> Mod:bind(X, bad) end},
         {bind_bad_map, {returned, {error, {invalid, {sockaddr, BadAddr}}}}, fun() -> Mod:bind(X, BadAddr) end},
         {send_bad_flag, {returned, {error, {invalid, {msg_flag, bad}}}}, fun() -> Mod:send(C, <<"x">>, [bad]) end},
         {recv_bad_flag, {returned, {error, {invalid, {msg_flag, bad}}}}, fun() -> Mod:recv(C, 0, [bad], 0) end},
         {cancel_unknown_handle, {returned, {error, {invalid, SI}}}, fun() -> Mod:cancel(C, SI) end}],
    check_table(Table),
    close_all(Mod, [X, C, A, L]).

%% Ensures setopt/getopt round trip for reuseaddr, keepalive, nodelay,
%% rcvbuf, sndbuf and linger, and getopt reports the socket type/domain.
api_setopt_getopt_roundtrip(Config) ->
    Mod = mod(Config),
    {L, C, A} = pair(Mod),
    [begin
         ok = Mod:setopt(C, Opt, V),
         {ok, V} = Mod:getopt(C, Opt)
     end || Opt <- [{socket, reuseaddr}, {socket, keepalive}, {tcp, nodelay}],
            V <- [true, false, true]],
    %% the kernel may round buffer sizes up (Linux doubles them)
    [begin
         ok = Mod:setopt(C, Opt, 65536),
         {ok, Got} = Mod:getopt(C, Opt),
         true = is_integer(Got) andalso Got >= 65536 andalso Got =< 4 * 65536
     end || Opt <- [{socket, rcvbuf}, {socket, sndbuf}]],
    {ok, #{onoff := false}} = Mod:getopt(C, {socket, linger}),
    ok = Mod:setopt(C, {socket, linger}, #{onoff => true, linger => 3}),
    {ok, #{onoff := true, linger := 3}} = Mod:getopt(C, {socket, linger}),
    ok = Mod:setopt(C, {socket, linger}, #{onoff => false, linger => 0}),
    {ok, #{onoff := false}} = Mod:getopt(C, {socket, linger}),
    {ok, stream} = Mod:getopt(C, {socket, type}),
    {ok, inet} = Mod:getopt(C, {socket, domain}),
    {ok, tcp} = Mod:getopt(C, {socket, protocol}),
    {ok, true} = Mod:getopt(L, {socket, acceptconn}),
    {ok, false} = Mod:getopt(C, {socket, acceptconn}),
    close_all(Mod, [C, A, L]).

%% Ensures unknown options and bad option values give
%% {error, {invalid, {socket_option, ...}}}.
api_setopt_getopt_errors(Config) ->
    Mod = mod(Config),
    {L, C, A} = pair(Mod),
    Table =
        [{setopt_unknown, {returned, {error, {invalid, {socket_option, {socket, nonexist}}}}},
          fun() -> Mod:setopt(C, {socket, nonexist}, 1) end},
         {getopt_unknown, {returned, {error, {invalid, {socket_option, {socket, nonexist}}}}},
          fun() -> Mod:getopt(C, {socket, nonexist}) end},
         {setopt_bad_level, {returned, {error, {invalid, {socket_option, {bogus, rcvbuf}}}}},
          fun() -> Mod:setopt(C, {bogus, rcvbuf}, 1) end},
         {getopt_bad_level, {returned, {error, {invalid, {socket_option, {bogus, rcvbuf}}}}},
          fun() -> Mod:getopt(C, {bogus, rcvbuf}) end},
         {setopt_bool_not_bool, {returned, {error, {invalid, {socket_option, {socket, keepalive}, notbool}}}},
          fun() -> Mod:setopt(C, {socket, keepalive}, notbool) end},
         {setopt_bad_linger, {returned, {error, {invalid, {socket_option, {socket, linger}, bad}}}},
          fun() -> Mod:setopt(C, {socket, linger}, bad) end},
         {setopt_bad_linger_map, {returned, {error, {invalid, {socket_option, {socket, linger}, #{onoff => 1}}}}},
          fun() -> Mod:setopt(C, {socket, linger}, #{onoff => 1}) end},
         {setopt_int_not_int, {returned, {error, {invalid, {socket_option, {socket, rcvbuf}, big}}}},
          fun() -> Mod:setopt(C, {socket, rcvbuf}, big) end},
         {setopt_nodelay_int, {returned, {error, {invalid, {socket_option, {tcp, nodelay}, 1}}}},
          fun() -> Mod:setopt(C, {tcp, nodelay}, 1) end},
         %% an option that is not a {Level, Opt} tuple
         {getopt_not_tuple, not_tuple_option_result(Mod), fun() -> Mod:getopt(C, bad) end},
         {setopt_not_tuple, not_tuple_option_result(Mod), fun() -> Mod:setopt(C, bad, 1) end}],
    check_table(Table),
    close_all(Mod, [C, A, L]).

%% Ensures sockname/peername return #{family, addr, port} maps that agree
%% between the two ends, and peername of a listener is {error, enotconn}.
api_sockname_peername(Config) ->
    Mod = mod(Config),
    {L, C, A} = pair(Mod),
    {ok, #{family := inet, addr := {127,0,0,1}, port := LP} = LName} = Mod:sockname(L),
    true = is_integer(LP) andalso LP > 0,
    LName = #{family => inet, addr => {127,0,0,1}, port => LP},
    {ok, CName} = Mod:sockname(C),
    #{family := inet, addr := {127,0,0,1}, port := CP} = CName,
    CName = #{family => inet, addr => {127,0,0,1}, port => CP},
    {ok, CName} = Mod:peername(A),
    {ok, LName} = Mod:peername(C),
    {ok, LName} = Mod:sockname(A),
    {error, enotconn} = Mod:peername(L),
    {ok, X} = Mod:open(inet, stream, tcp),
    {error, enotconn} = Mod:peername(X),
    {ok, #{family := inet, port := 0}} = Mod:sockname(X),
    close_all(Mod, [X, C, A, L]).

%% Ensures shutdown(S, write) gives the peer {error, closed} while the other
%% direction still works, and further sends fail with epipe.
api_shutdown_write(Config) ->
    Mod = mod(Config),
    {L, C, A} = pair(Mod),
    ok = Mod:send(C, <<"last">>),
    ok = Mod:shutdown(C, write),
    {ok, <<"last">>} = Mod:recv(A, 4, ?T),
    {error, closed} = Mod:recv(A, 0, ?T),
    ok = Mod:send(A, <<"back">>),
    {ok, <<"back">>} = Mod:recv(C, 4, ?T),
    {error, epipe} = Mod:send(C, <<"x">>),
    ok = Mod:shutdown(C, write),
    close_all(Mod, [C, A, L]).

%% Ensures shutdown(S, read_write) makes the peer see EOF, read shutdown is
%% accepted, and shutdown of an unconnected socket is {error, enotconn}.
api_shutdown_read_write(Config) ->
    Mod = mod(Config),
    {L, C, A} = pair(Mod),
    ok = Mod:shutdown(C, read_write),
    {error, closed} = Mod:recv(A, 0, ?T),
    {error, epipe} = Mod:send(C, <<"x">>),
    {L2, C2, A2} = pair(Mod),
    ok = Mod:shutdown(C2, read),
    ok = Mod:send(C2, <<"still">>),
    {ok, <<"still">>} = Mod:recv(A2, 5, ?T),
    {ok, X} = Mod:open(inet, stream, tcp),
    {error, enotconn} = Mod:shutdown(X, write),
    close_all(Mod, [X, C, A, L, C2, A2, L2]).

%% Ensures is_socket/1 is true for sockets (open or closed) and false for
%% other terms (for socket, which has no is_socket/1, the helper checks the
%% documented {'$socket', Ref} representation).
api_is_socket(Config) ->
    Mod = mod(Config),
    {ok, S} = Mod:open(inet, stream, tcp),
    true = is_sock(Mod, S),
    ok = Mod:close(S),
    true = is_sock(Mod, S),
    [false = is_sock(Mod, X)
     || X <- [not_a_socket, make_ref(), self(), <<"s">>, {'$nifsock', x},
              {'$socket', x}, {}, 42, [], #{}]],
    ok.

%% Ensures info/1 returns a map with the keys socket:info/1 has (domain, type,
%% protocol, owner, counters, ...) and the right values for a TCP socket.
api_info_socket(Config) ->
    Mod = mod(Config),
    {L, C, A} = pair(Mod),
    Info = Mod:info(C),
    true = is_map(Info),
    %% the keys socket:info/1 has for a stream socket
    Keys = [domain, type, protocol, owner, counters, ctype, num_readers,
            num_writers, num_acceptors, rstates, wstates],
    [] = [K || K <- Keys, not maps:is_key(K, Info)],
    #{domain := inet, type := stream, protocol := tcp, owner := Owner,
      counters := Counters} = Info,
    Owner = self(),
    true = is_map(Counters),
    LInfo = Mod:info(L),
    true = is_map(LInfo),
    close_all(Mod, [C, A, L]).

%% Ensures the per-socket counters of info/1 count bytes, calls and the
%% largest transfer each way, and accepts on the listener, as socket's do:
%% two exact reads of 5 and 100 bytes, two sends of the same. A peek is
%% counted by socket; nifsock counts bytes once, when they are consumed.
api_info_counters(Config) ->
    Mod = mod(Config),
    {L, C, A} = pair(Mod),
    Big = binary:copy(<<"x">>, 100),
    ok = Mod:send(C, <<"hello">>),
    {ok, <<"hello">>} = Mod:recv(A, 5, ?T),
    ok = Mod:send(C, Big),
    {ok, Big} = Mod:recv(A, 100, ?T),
    #{counters := #{read_byte := 105, read_pkg := 2, read_pkg_max := 100,
                    write_byte := 0, write_pkg := 0}} = Mod:info(A),
    #{counters := #{write_byte := 105, write_pkg := 2, write_pkg_max := 100,
                    read_byte := 0, read_pkg := 0}} = Mod:info(C),
    #{counters := #{acc_success := 1, read_byte := 0}} = Mod:info(L),
    ok = Mod:send(C, <<"peek!">>),
    {ok, <<"pe">>} = Mod:recv(A, 2, [peek], ?T),
    {ok, <<"peek!">>} = Mod:recv(A, 5, ?T),
    #{counters := #{read_byte := ReadByte, read_pkg := ReadPkg}} = Mod:info(A),
    {ReadByte, ReadPkg} = case Mod of
                              socket -> {112, 4};
                              nifsock -> {110, 3}
                          end,
    close_all(Mod, [C, A, L]).

%% Ensures info/0 returns a map of integer counters.
api_info_global(Config) ->
    Mod = mod(Config),
    Info = Mod:info(),
    true = is_map(Info),
    Counters = case Mod of
                   socket -> maps:get(counters, Info);
                   _ -> Info
               end,
    true = is_map(Counters) andalso map_size(Counters) > 0,
    [] = [KV || {_, V} = KV <- maps:to_list(Counters), not is_integer(V)],
    ok.

%% Ensures send/2,3,4 accept binaries and nested iolists (binaries, bytes,
%% sub-lists) and the peer receives exactly the flattened bytes in order.
api_send_iolist(Config) ->
    Mod = mod(Config),
    {L, C, A} = pair(Mod),
    Parts = [<<"bin">>,
             [$a, [$b, <<"cd">>, [[]], <<>>], 0, 255],
             [[[<<"deep">>]], $!],
             [],
             [<<"x">> | <<"tail">>]],
    Sends = [fun(D) -> Mod:send(C, D) end,
             fun(D) -> Mod:send(C, D, []) end,
             fun(D) -> Mod:send(C, D, ?T) end,
             fun(D) -> Mod:send(C, D, infinity) end,
             fun(D) -> Mod:send(C, D, [], ?T) end,
             fun(D) -> Mod:send(C, D, nowait) end],
    Expected = iolist_to_binary([iolist_to_binary(Parts) || _ <- Sends]),
    [ok = Send(Parts) || Send <- Sends],
    Expected = recv_exact(Mod, A, byte_size(Expected)),
    ok = Mod:send(C, <<>>),
    ok = Mod:send(C, []),
    {error, timeout} = Mod:recv(A, 0, 100),
    close_all(Mod, [C, A, L]).

%% Ensures sends of short binaries (heap binaries, up to 64 bytes) and of
%% vectors of them (3, 5 and 20 binaries) leave no refc binary on the
%% sender's heap: the bytes go out from where they are (gathered on the
%% NIF's stack), not copied into a refc binary that waits for the sender's
%% next GC, as enif_inspect_iovec does; a vector of more pieces than fit (70
%% binaries of 256 bytes, not copied together: flat, nested, with a binary
%% tail) still goes out whole. The sender's heap is large enough that no GC
%% runs during the sends. socket: the same (its send of a binary inspects
%% the binary; a short list it sends as one binary).
api_send_small_leaves_no_binary(Config) ->
    Mod = mod(Config),
    {L, C, A} = pair(Mod),
    Reply = [<<"HTTP/1.1 200 OK\r\n">>, <<"content-length: 5\r\n\r\n">>, <<"hello">>],
    Many = [<<I>> || I <- lists:seq(1, 20)],  % more than go out one entry each
    Datas = [<<"0123456789">>, Reply, [Reply, [<<"x">> | <<"y">>]], Many],
    Rounds = 50,
    Parent = self(),
    {Pid, MRef} =
        spawn_opt(fun() ->
                          [ok = Mod:send(C, D) || _ <- lists:seq(1, Rounds), D <- Datas],
                          {binary, Bins} = process_info(self(), binary),
                          Parent ! {self(), Bins}
                  end, [monitor, {min_heap_size, 200000}]),
    Bins = receive {Pid, B} -> B after ?T -> ct:fail(sender_stuck) end,
    receive {'DOWN', MRef, process, Pid, normal} -> ok after ?T -> ct:fail(sender_down) end,
    [] = Bins,
    Expected = iolist_to_binary(lists:duplicate(Rounds, Datas)),
    Expected = recv_exact(Mod, A, byte_size(Expected)),
    Big = [binary:copy(<<I>>, 256) || I <- lists:seq(1, 70)],
    BigBin = iolist_to_binary(Big),
    [begin
         ok = Mod:send(C, D),
         BigBin = recv_exact(Mod, A, byte_size(BigBin))
     end || D <- [Big, [[B] || B <- Big], [Big | <<>>]]],
    close_all(Mod, [C, A, L]).

%% Ensures a send that cannot complete within timeout 0 / N ms returns
%% {error, {timeout, Rest}} with Rest the unsent tail (a send that writes
%% nothing gives {error, timeout}), and the peer receives exactly the
%% flattened bytes in order once it reads.
api_send_partial_timeout(Config) ->
    Mod = mod(Config),
    {L, C, A} = small_buf_pair(Mod),
    {Data, Flat} = big_iolist(),
    {error, {timeout, Rest1}} = Mod:send(C, Data, 0),
    check_tail(Mod, Rest1, Flat),
    %% Keep sending the tail with 100 ms timeouts until a call writes nothing
    %% (the kernel may still move some bytes to the peer meanwhile).
    Rest = send_until_stuck(Mod, C, Rest1, 100),
    Reader = start_reader(Mod, A, byte_size(Flat) + 3),
    ok = Mod:send(C, Rest),
    ok = Mod:send(C, [<<"e">>, "nd"]),
    Got = reader_result(Reader),
    Got = <<Flat/binary, "end">>,
    close_all(Mod, [C, A, L]).

%% Ensures send nowait of more than fits returns {select, {SelectInfo, Rest}}
%% (tag send), a select message comes when the peer reads, and continuing
%% with the select info delivers exactly the flattened bytes in order.
%% Ensures sendfile sends a file range (and to the end with Count 0) through a
%% small socket buffer, returning the byte count, with the bytes intact.
api_sendfile(Config) ->
    Mod = mod(Config),
    {L, C, A} = pair(Mod),
    Path = filename:join(?config(priv_dir, Config), "sendfile.bin"),
    Data = crypto:strong_rand_bytes(256 * 1024),
    ok = file:write_file(Path, Data),
    {ok, F} = file:open(Path, [raw, read, binary]),
    ok = Mod:setopt(A, {socket, sndbuf}, 4096),
    Self = self(),
    Reader = spawn_link(fun() -> Self ! {read, read_exact(Mod, C, 256 * 1024 - 1000 + 500)} end),
    {ok, 261144} = Mod:sendfile(A, F, 1000, 0, 10000),
    {ok, 500} = Mod:sendfile(A, F, 0, 500),
    <<_:1000/binary, Tail/binary>> = Data,
    <<Head:500/binary, _/binary>> = Data,
    Expected = <<Tail/binary, Head/binary>>,
    receive {read, Got} -> Expected = Got after 10000 -> ct:fail(sendfile_reader_timeout) end,
    unlink(Reader),
    ok = file:close(F),
    close_all(Mod, [C, A, L]).

%% Ensures a nowait sendfile that fills the socket answers {select, {SelectInfo,
%% Sent}} and goes on, as socket's, through sendfile(S, SelectInfo, Offset,
%% Count, nowait) with the same file until every byte is sent; a select info
%% of another operation is refused.
api_sendfile_nowait_cont(Config) ->
    Mod = mod(Config),
    {L, C, A} = small_buf_pair(Mod),
    Path = filename:join(?config(priv_dir, Config), "sendfile_cont.bin"),
    Size = 1024 * 1024,
    Data = crypto:strong_rand_bytes(Size),
    ok = file:write_file(Path, Data),
    {ok, F} = file:open(Path, [raw, read, binary]),
    {select, {{select_info, sendfile, H} = SI, Sent}} = Mod:sendfile(C, F, 0, 0, nowait),
    true = Sent < Size,
    Reader = start_reader(Mod, A, Size),
    Selects = sendfile_cont(Config, C, SI, H, Sent, Size, 0),
    true = Selects > 0,
    Data = reader_result(Reader),
    Other = {select_info, recv, make_ref()},
    {error, {invalid, Other}} = Mod:sendfile(C, Other, 0, 0, nowait),
    ok = file:close(F),
    close_all(Mod, [C, A, L]).

%% Continues a nowait sendfile from Sent to Size; returns the selects waited for.
sendfile_cont(Config, S, SI, H, Sent, Size, Selects) ->
    expect_msg(Config, S, select, H),
    case (mod(Config)):sendfile(S, SI, Sent, Size - Sent, nowait) of
        {ok, N} when Sent + N =:= Size ->
            Selects + 1;
        {select, {{select_info, sendfile, H2} = SI2, N}} ->
            sendfile_cont(Config, S, SI2, H2, Sent + N, Size, Selects + 1)
    end.

read_exact(Mod, S, N) ->
    {ok, B} = Mod:recv(S, N, 10000),
    B.

api_send_partial_nowait(Config) ->
    Mod = mod(Config),
    {L, C, A} = small_buf_pair(Mod),
    {Data, Flat} = big_iolist(),
    {select, {{select_info, Tag, H} = SI, Rest}} = Mod:send(C, Data, nowait),
    true = is_send_tag(Tag),
    true = is_reference(H),
    check_tail(Mod, Rest, Flat),
    Reader = start_reader(Mod, A, byte_size(Flat)),
    expect_msg(Config, C, select, H),
    ok = send_cont(Config, C, Rest, SI, 1000),
    Got = reader_result(Reader),
    Got = Flat,
    close_all(Mod, [C, A, L]).

%% Ensures the continuation of a nowait send goes on with the first call's
%% flags (nifsock keeps them in the select info's tag, as socket keeps its
%% encoded flags), delivers every byte, and that a select info of another
%% operation is refused as socket refuses it.
api_send_cont_flags(Config) ->
    Mod = mod(Config),
    {L, C, A} = small_buf_pair(Mod),
    Flat = rand:bytes(?BIG),
    {select, {{select_info, Tag, H} = SI, Rest}} = Mod:send(C, Flat, [nosignal], nowait),
    true = is_send_tag(Tag),
    case Mod of
        nifsock -> {send, [nosignal]} = Tag;
        socket -> ok
    end,
    Reader = start_reader(Mod, A, byte_size(Flat)),
    expect_msg(Config, C, select, H),
    ok = send_cont(Config, C, Rest, SI, 1000),
    Flat = reader_result(Reader),
    Other = {select_info, recv, make_ref()},
    {error, {invalid, Other}} = Mod:send(C, <<"x">>, Other, nowait),
    close_all(Mod, [C, A, L]).

%% Ensures a nowait recv (of what is there, and of an exact length) returns
%% data that arrived after a short read emptied the socket, not a select.
api_recv_nowait_after_short_read(Config) ->
    Mod = mod(Config),
    {L, C, A} = pair(Mod),
    ok = Mod:send(A, <<"abc">>),
    {ok, <<"abc">>} = Mod:recv(C, 0, ?T),   % fewer bytes than a full read: the queue is empty
    ok = Mod:send(A, <<"def">>),
    wait_pending(Mod, C, 3),
    {ok, <<"def">>} = Mod:recv(C, 0, nowait),
    ok = Mod:send(A, <<"gh">>),
    {ok, <<"gh">>} = Mod:recv(C, 0, ?T),
    ok = Mod:send(A, <<"ijkl">>),
    wait_pending(Mod, C, 4),
    {ok, <<"ijkl">>} = Mod:recv(C, 4, nowait),
    assert_no_msg(Config, C, 0),
    close_all(Mod, [C, A, L]).

%% Waits (bounded) until N bytes are readable on S, without reading them.
wait_pending(Mod, S, N) ->
    poll(fun() -> Mod:recv(S, 0, [peek], ?T) end,
         fun({ok, B}) -> byte_size(B) >= N end).

%% Ensures the unsent rest of a partial send of one binary is a binary (a
%% sub-binary for nifsock), as socket gives it: with nowait ({select,
%% {SelectInfo, Rest}}), timeout 0 and N ms ({error, {timeout, Rest}}).
api_send_partial_binary_rest(Config) ->
    Mod = mod(Config),
    Bin = rand:bytes(?BIG),
    Sends = [{nowait, fun(C) ->
                              {select, {{select_info, Tag, _}, Rest}} = Mod:send(C, Bin, nowait),
                              true = is_send_tag(Tag),
                              Rest
                      end},
             {zero, fun(C) -> {error, {timeout, Rest}} = Mod:send(C, Bin, 0), Rest end},
             {ms, fun(C) -> {error, {timeout, Rest}} = Mod:send(C, Bin, 100), Rest end}],
    [begin
         {L, C, A} = small_buf_pair(Mod),
         Rest = Send(C),
         {Name, true} = {Name, is_binary(Rest)},
         check_tail(Mod, Rest, Bin),
         close_all(Mod, [C, A, L])
     end || {Name, Send} <- Sends],
    ok.

%% Ensures bind(LocalSocket, any | loopback | broadcast) is {error,
%% eafnosupport}, and bind(Inet6Socket, broadcast) names the sockaddr, as
%% socket does.
api_bind_local_ip_names(Config) ->
    Mod = mod(Config),
    {ok, U} = Mod:open(local, stream),
    [{Name, {error, eafnosupport}} = {Name, Mod:bind(U, Name)}
     || Name <- [any, loopback, broadcast]],
    {error, {invalid, {sockaddr, bad}}} = Mod:bind(U, bad),
    ok = Mod:close(U),
    case ipv6_ok(Mod) of
        true ->
            {ok, S6} = Mod:open(inet6, stream, tcp),
            {error, {invalid, {sockaddr, #{family := inet6, addr := broadcast}}}} =
                Mod:bind(S6, broadcast),
            ok = Mod:close(S6);
        false ->
            ok
    end.

%% Ensures open(local, stream, tcp) (/3 and /4) is {error, eprotonosupport},
%% as the kernel answers socket.
api_open_local_tcp(Config) ->
    Mod = mod(Config),
    {error, eprotonosupport} = Mod:open(local, stream, tcp),
    {error, eprotonosupport} = Mod:open(local, stream, tcp, #{}),
    {error, eprotonosupport} = Mod:open(local, stream, 6),
    ok.

%% Ensures {ip, tos} takes the atoms lowdelay, throughput, reliability and
%% mincost or an integer, and getopt names the values that have an atom
%% (from OTP 29, socket's getopt gives a map of the value: #{native := Byte}).
api_tos_names(Config) ->
    Mod = mod(Config),
    {ok, S} = Mod:open(inet, stream, tcp),
    [begin
         ok = Mod:setopt(S, {ip, tos}, Set),
         {Set, {ok, Got}} = {Set, Mod:getopt(S, {ip, tos})},
         true = tos_read(Config, Got, Get, Byte)
     end || {Set, Get, Byte} <- [{lowdelay, lowdelay, 16#10}, {throughput, throughput, 16#08},
                                 {reliability, reliability, 16#04}, {16#10, lowdelay, 16#10},
                                 {16#08, throughput, 16#08}, {16#04, reliability, 16#04},
                                 {16#20, 16#20, 16#20}, {0, 0, 0}]],
    %% Linux keeps the two ECN bits of a TCP socket's TOS to itself: mincost
    %% (2) reads back as 0
    ok = Mod:setopt(S, {ip, tos}, mincost),
    {ok, Mincost} = Mod:getopt(S, {ip, tos}),
    true = tos_read(Config, Mincost, 0, 0),
    {error, {invalid, {socket_option, {ip, tos}, bad}}} = Mod:setopt(S, {ip, tos}, bad),
    ok = Mod:close(S).

%% Whether getopt {ip, tos} gave the group release's form of TOS byte Byte:
%% Name (an atom or Byte itself) up to OTP 28, a map with `native' from OTP 29.
tos_read(Config, Got, Name, Byte) ->
    case release(Config) >= 29 of
        true -> is_map(Got) andalso maps:get(native, Got, none) =:= Byte;
        false -> Got =:= Name
    end.

%% Ensures setopt(S, {otp, controlling_process}, V) by a non-owner is {error,
%% {invalid, not_owner}} whatever V is, and by the owner with a V that isn't a
%% pid {error, {invalid, {socket_option, Opt, V}}}, as socket says.
api_setopt_controlling_process_not_owner(Config) ->
    Mod = mod(Config),
    Opt = {otp, controlling_process},
    O = spawn_link(fun server_loop/0),
    S = do(O, fun() -> {ok, S0} = Mod:open(inet, stream, tcp), S0 end),
    {error, {invalid, not_owner}} = Mod:setopt(S, Opt, self()),
    {error, {invalid, not_owner}} = Mod:setopt(S, Opt, O),
    {error, {invalid, not_owner}} = Mod:setopt(S, Opt, bad),
    {ok, O} = Mod:getopt(S, Opt),
    {error, {invalid, {socket_option, Opt, bad}}} = do(O, fun() -> Mod:setopt(S, Opt, bad) end),
    Self = self(),
    ok = do(O, fun() -> Mod:setopt(S, Opt, Self) end),
    {ok, Self} = Mod:getopt(S, Opt),
    ok = Mod:close(S),
    unlink(O),
    kill_and_wait(O).

%% Ensures a process whose blocking send, recv or accept is ended by another
%% process's close holds no select or abort message of the socket afterwards:
%% ?CLOSE_RACES closes each, racing calls that keep waking up (a peer that
%% drains, trickles or connects).
%% Ensures concurrent blocking sends on one socket never interleave: with a
%% small send buffer every send is partial, and each one's bytes still arrive
%% whole, one send after another.
api_send_concurrent_writers_whole(Config) ->
    Mod = mod(Config),
    {L, #{port := Port}} = nifsock_test_lib:listener(Mod, inet),
    %% A reader with a small window, so sends stay partial for long.
    {ok, C} = gen_tcp:connect({127, 0, 0, 1}, Port, [binary, {active, false}, {recbuf, 4096}]),
    {ok, A} = Mod:accept(L, ?T),
    ok = Mod:setopt(A, {socket, sndbuf}, 4096),
    Senders = 8,
    Size = 1024 * 1024,
    Self = self(),
    [spawn_link(fun() -> ok = Mod:send(A, binary:copy(<<I>>, Size)), Self ! {sent, I} end)
     || I <- lists:seq(1, Senders)],
    %% Let every sender start (and most of them wait) before reading: the room
    %% the kernel frees as bytes move to the receive queue is what a sender
    %% that does not wait its turn would write into.
    timer:sleep(200),
    Data = recv_exactly(C, Senders * Size),
    [receive {sent, I} -> ok after ?T -> ct:fail({sender_stuck, I}) end
     || I <- lists:seq(1, Senders)],
    Runs = byte_runs(Data),
    ct:log("~p runs: ~p", [length(Runs), Runs]),
    Senders = length(Runs),
    true = lists:all(fun({_, Len}) -> Len =:= Size end, Runs),
    ok = gen_tcp:close(C),
    close_all(Mod, [A, L]).

%% Ensures a sendfile that fails while it is the current writer (it waited
%% for room, then the peer reset the connection) ends its turn: another
%% process's send then fails at once with the OS error, instead of queueing
%% behind the failed writer until its timeout.
api_sendfile_error_ends_turn(Config) ->
    Mod = mod(Config),
    {L, C, A} = small_buf_pair(Mod),
    Path = filename:join(?config(priv_dir, Config), "sendfile_reset.bin"),
    ok = file:write_file(Path, binary:copy(<<"x">>, 4 * 1024 * 1024)),
    Self = self(),
    Writer = spawn(fun() ->
                           %% a raw file is used by the process that opened it
                           {ok, F} = file:open(Path, [raw, read, binary]),
                           Self ! {opened, self()},
                           Self ! {sendfile, Mod:sendfile(C, F, 0, 0, ?T)},
                           receive stop -> file:close(F) end
                   end),
    receive {opened, Writer} -> ok after ?T -> ct:fail(writer_did_not_open) end,
    %% Blocked in its select wait: the socket buffers are full.
    ok = poll_true(fun() -> process_info(Writer, status) =:= {status, waiting} end),
    ok = Mod:setopt(A, {socket, linger}, #{onoff => true, linger => 0}),
    ok = Mod:close(A),
    Reason = receive
                 {sendfile, {error, {R, N}}} when is_integer(N), N > 0 -> R
             after ?T -> ct:fail(sendfile_did_not_fail)
             end,
    true = lists:member(Reason, [econnreset, epipe]),
    {error, After} = Mod:send(C, <<"after">>, 2000),
    ct:log("sendfile: ~p, send after it: ~p", [Reason, After]),
    true = lists:member(After, [econnreset, epipe]),
    Writer ! stop,
    close_all(Mod, [C, L]).

recv_exactly(S, N) ->
    recv_exactly(S, N, []).

recv_exactly(_S, 0, Acc) ->
    iolist_to_binary(lists:reverse(Acc));
recv_exactly(S, N, Acc) ->
    {ok, B} = gen_tcp:recv(S, 0, ?T),
    recv_exactly(S, N - byte_size(B), [B | Acc]).

%% [{Byte, RunLength}] of a binary.
byte_runs(<<>>) ->
    [];
byte_runs(<<B, _/binary>> = Data) ->
    Len = run_length(Data, B, 0),
    <<_:Len/binary, Rest/binary>> = Data,
    [{B, Len} | byte_runs(Rest)].

run_length(<<B, Rest/binary>>, B, N) -> run_length(Rest, B, N + 1);
run_length(_, _, N) -> N.

%% Ensures ports, octets and segments out of their range are refused by
%% nifsock ({invalid, {sockaddr, _}}), never truncated into another address;
%% OTP 25's socket truncates a port (70000 binds 4464) and refuses octets.
api_sockaddr_out_of_range(Config) ->
    Mod = mod(Config),
    {ok, S} = Mod:open(inet, stream, tcp),
    Port = #{family => inet, addr => loopback, port => 70000},
    case Mod of
        nifsock ->
            {error, {invalid, {sockaddr, Port}}} = Mod:bind(S, Port),
            [{error, {invalid, {sockaddr, A}}} = Mod:bind(S, A)
             || A <- [#{family => inet, addr => loopback, port => -1},
                      #{family => inet, addr => {127, 0, 0, 256}, port => 0},
                      #{family => inet, addr => {127, 0, -1, 1}, port => 0}]],
            {ok, S6} = Mod:open(inet6, stream, tcp),
            Seg = #{family => inet6, addr => {0, 0, 0, 0, 0, 0, 0, 65537}, port => 0},
            {error, {invalid, {sockaddr, Seg}}} = Mod:bind(S6, Seg),
            ok = Mod:close(S6);
        socket ->
            {error, {invalid, _}} =
                Mod:bind(S, #{family => inet, addr => {127, 0, 0, 256}, port => 0}),
            case Mod:bind(S, Port) of
                ok -> {ok, #{port := 4464}} = Mod:sockname(S);
                {error, eaddrinuse} -> ok  % 4464 (70000 truncated) is taken
            end
    end,
    ok = Mod:close(S).

api_close_leaves_no_message(Config) ->
    Mod = mod(Config),
    [close_race(Mod, Op) || Op <- [send, recv, accept], _ <- lists:seq(1, ?CLOSE_RACES)],
    ok.

close_race(Mod, Op) ->
    {Socks, Target, Waker} = close_race_setup(Mod, Op),
    Self = self(),
    W = spawn_link(fun() ->
                           R = close_race_call(Mod, Op, Target),
                           Self ! {ended, self(), R},
                           %% the close has returned: every message it sent is here
                           receive checked -> ok end,
                           {messages, Ms} = process_info(self(), messages),
                           Self ! {left, self(), Ms}
                   end),
    Peer = spawn_link(Waker),
    spin(rand:uniform(2000)),
    ok = Mod:close(Target),
    R = receive {ended, W, R0} -> R0 after ?T -> ct:fail({call_not_ended, Op}) end,
    true = is_closed_result(R),
    W ! checked,
    receive {left, W, Left} -> {Op, []} = {Op, Left} after ?T -> ct:fail(no_left) end,
    unlink(Peer),
    kill_and_wait(Peer),
    close_all(Mod, Socks).

close_race_setup(Mod, accept) ->
    {L, Addr} = listener(Mod, inet),
    {[L], L, fun() -> connect_forever(Mod, Addr) end};
close_race_setup(Mod, Op) ->
    {L, C, A} = small_buf_pair(Mod),
    Waker = case Op of
                send -> fun() -> drain_forever(Mod, A) end;
                recv -> fun() -> trickle_forever(Mod, A) end
            end,
    {[A, L], C, Waker}.

close_race_call(Mod, send, C) -> send_forever(Mod, C, rand:bytes(256 * 1024));
close_race_call(Mod, recv, C) -> Mod:recv(C, ?BIG);
close_race_call(Mod, accept, L) -> accept_forever(Mod, L).

send_forever(Mod, C, Bin) ->
    case Mod:send(C, Bin) of
        ok -> send_forever(Mod, C, Bin);
        Error -> Error
    end.

accept_forever(Mod, L) ->
    case Mod:accept(L) of
        {ok, A} -> _ = Mod:close(A), accept_forever(Mod, L);
        Error -> Error
    end.

%% (until the peer's close ends the stream)
drain_forever(Mod, A) ->
    case Mod:recv(A, 512) of
        {ok, _} -> drain_forever(Mod, A);
        _ -> ok
    end.

trickle_forever(Mod, A) ->
    case Mod:send(A, <<"t">>) of
        ok -> erlang:yield(), trickle_forever(Mod, A);
        _ -> ok
    end.

connect_forever(Mod, Addr) ->
    {ok, C} = Mod:open(inet, stream, tcp),
    _ = Mod:connect(C, Addr),
    _ = Mod:close(C),
    connect_forever(Mod, Addr).

is_closed_result({error, closed}) -> true;
is_closed_result({error, {closed, _}}) -> true;
is_closed_result(_) -> false.

spin(0) -> ok;
spin(N) -> erlang:yield(), spin(N - 1).

%%--------------------------------------------------------------------
%% Helpers
%%--------------------------------------------------------------------

mod(Config) ->
    case proplists:get_value(mod, Config) of
        undefined -> ct:fail(no_mod_in_config);
        Mod -> Mod
    end.

%% The tag of the group's select/abort messages.
tag(Config) ->
    ?config(tag, Config).

%% The OTP release whose behaviour the group's module has: socket's changes
%% with the running release, nifsock keeps OTP 25's.
release(Config) ->
    ?config(release, Config).

%% The socket-compatible part of the API (name/arity).
common_api() ->
    [{open, 1}, {open, 2}, {open, 3}, {open, 4},
     {bind, 2},
     {connect, 1}, {connect, 2}, {connect, 3},
     {listen, 1}, {listen, 2},
     {accept, 1}, {accept, 2},
     {send, 2}, {send, 3}, {send, 4},
     {sendfile, 2}, {sendfile, 3}, {sendfile, 4}, {sendfile, 5},
     {recv, 1}, {recv, 2}, {recv, 3}, {recv, 4},
     {close, 1}, {shutdown, 2},
     {setopt, 3}, {getopt, 2},
     {sockname, 1}, {peername, 1},
     {cancel, 2},
     {info, 0}, {info, 1}].

%% nifsock functions socket does not have.
nifsock_extensions() ->
    [{controlling_process, 2}, {is_socket, 1}].

is_sock(nifsock, X) -> nifsock:is_socket(X);
is_sock(socket, {'$socket', R}) -> is_reference(R);
is_sock(socket, _) -> false.

set_owner(nifsock, S, Pid) -> nifsock:controlling_process(S, Pid);
set_owner(socket, S, Pid) -> socket:setopt(S, {otp, controlling_process}, Pid).

%% socket has no controlling_process/2; its setopt({otp, controlling_process})
%% says {error, {invalid, not_owner}}, and so does nifsock's.
%% nifsock:controlling_process/2 follows gen_tcp: {error, not_owner}.
not_owner_error(nifsock) -> {error, not_owner};
not_owner_error(socket) -> {error, {invalid, not_owner}}.

getopt_not_socket_reason(socket) -> function_clause;
getopt_not_socket_reason(nifsock) -> badarg.

%% socket:getopt(S, bad) / setopt(S, bad, V) *throw* {invalid, {socket_option,
%% bad}} (from prim_socket); nifsock raises badarg (the option is not a tuple).
not_tuple_option_result(socket) -> {throw, {invalid, {socket_option, bad}}};
not_tuple_option_result(nifsock) -> {error, badarg}.

%% Table of {Name, Expected, Fun}: Expected is what raised(Fun) gives. Fails
%% listing every mismatch as {Name, {expected, E}, {got, G}}.
check_table(Table) ->
    Bad = [{Name, {expected, Exp}, {got, Got}}
           || {Name, Exp, F} <- Table, (Got = raised(F)) =/= Exp],
    case Bad of
        [] -> ok;
        _ -> ct:fail({mismatches, Bad})
    end.

is_send_tag(send) -> true;
is_send_tag({send, _}) -> true;
is_send_tag(_) -> false.

raised(F) ->
    try F() of
        V -> {returned, V}
    catch
        error:R -> {error, R};
        throw:R -> {throw, R};
        exit:R -> {exit, R}
    end.

local_listener(Mod, Path) ->
    {ok, L} = Mod:open(local, stream),
    Addr = #{family => local, path => Path},
    ok = Mod:bind(L, Addr),
    ok = Mod:listen(L),
    {L, Addr}.

%% A connected pair whose sender C has a small send buffer and whose
%% receiver A a small receive buffer, so big sends block quickly.
small_buf_pair(Mod) ->
    {ok, L} = Mod:open(inet, stream, tcp),
    ok = Mod:setopt(L, {socket, rcvbuf}, 4096),
    ok = Mod:bind(L, #{family => inet, addr => {127,0,0,1}, port => 0}),
    ok = Mod:listen(L),
    {ok, Addr} = Mod:sockname(L),
    {ok, C} = Mod:open(inet, stream, tcp),
    ok = Mod:setopt(C, {socket, sndbuf}, 4096),
    ok = Mod:connect(C, Addr),
    {ok, A} = Mod:accept(L, ?T),
    ok = Mod:setopt(A, {socket, rcvbuf}, 4096),
    {L, C, A}.

%% A nested iolist of about 4 MiB (random bytes, so reordering would show)
%% and its flattening.
big_iolist() ->
    Half = rand:bytes(?BIG div 2),
    Data = [<<"head:">>,
            [$a, [$b, Half], 0, 255],
            [[<<"mid">>], rand:bytes(?BIG div 2 - 7)],
            <<"tail">>],
    {Data, iolist_to_binary(Data)}.

%% socket returns the unsent rest of a partial send as a binary; nifsock
%% documents it as iodata (the remaining part of its iovec, not flattened).
check_tail(Mod, Rest0, Flat0) ->
    case Mod of
        socket -> true = is_binary(Rest0);
        nifsock -> true = is_binary(Rest0) orelse is_list(Rest0)
    end,
    Rest = iolist_to_binary(Rest0),
    Flat = iolist_to_binary(Flat0),
    Sz = byte_size(Rest),
    true = Sz > 0 andalso Sz < byte_size(Flat),
    Rest = binary:part(Flat, byte_size(Flat) - Sz, Sz),
    ok.

%% Send Rest with a 100 ms timeout until a call writes nothing
%% ({error, timeout}); each partial write must return the exact unsent tail.
send_until_stuck(_Mod, _S, _Rest, 0) ->
    ct:fail(send_never_blocked);
send_until_stuck(Mod, S, Rest, N) ->
    case Mod:send(S, Rest, 100) of
        {error, timeout} ->
            Rest;
        {error, {timeout, Rest2}} ->
            check_tail(Mod, Rest2, Rest),
            send_until_stuck(Mod, S, Rest2, N - 1);
        Other ->
            ct:fail({send_until_stuck, Other})
    end.

%% Continue a partial nowait send with its select info until all is sent.
send_cont(_Config, _S, _Rest, _SI, 0) ->
    ct:fail(send_never_finished);
send_cont(Config, S, Rest, SI, N) ->
    Mod = mod(Config),
    case Mod:send(S, Rest, SI, nowait) of
        ok ->
            ok;
        {select, {{select_info, Tag, H} = SI2, Rest2}} ->
            true = is_send_tag(Tag),
            check_tail(Mod, Rest2, Rest),
            expect_msg(Config, S, select, H),
            send_cont(Config, S, Rest2, SI2, N - 1);
        {select, {select_info, Tag, H} = SI2} ->
            true = is_send_tag(Tag),
            expect_msg(Config, S, select, H),
            send_cont(Config, S, Rest, SI2, N - 1);
        Other ->
            ct:fail({send_cont, Other})
    end.

start_reader(Mod, S, N) ->
    Self = self(),
    spawn_link(fun() -> Self ! {read, self(), recv_exact(Mod, S, N)} end).

reader_result(Reader) ->
    receive {read, Reader, Bin} -> Bin
    after 30000 -> ct:fail(reader_timeout)
    end.

%% Receive exactly N bytes with recv(S, 0, ...) calls.
recv_exact(Mod, S, N) ->
    recv_exact(Mod, S, N, []).
recv_exact(_Mod, _S, 0, Acc) ->
    iolist_to_binary(lists:reverse(Acc));
recv_exact(Mod, S, N, Acc) when N > 0 ->
    case Mod:recv(S, 0, ?T) of
        {ok, B} when byte_size(B) =< N -> recv_exact(Mod, S, N - byte_size(B), [B | Acc]);
        {ok, B} -> ct:fail({recv_too_much, byte_size(B), N});
        Other -> ct:fail({recv_exact, Other, N})
    end.

%% Call F until it returns {ok, Bin} of N bytes (accumulating).
recv_until(Mod, F, N) ->
    recv_until(Mod, F, N, <<>>).
recv_until(_Mod, _F, N, Acc) when byte_size(Acc) >= N ->
    {ok, Acc};
recv_until(Mod, F, N, Acc) ->
    {ok, B} = F(),
    recv_until(Mod, F, N, <<Acc/binary, B/binary>>).

echo(Mod, Fam) ->
    {L, Addr} = listener(Mod, Fam),
    {ok, #{family := Fam, addr := Loop, port := P}} = Mod:sockname(L),
    Loop = loopback(Fam),
    true = P > 0,
    {C, A} = connect_accept(Mod, L, Addr),
    {ok, CName} = Mod:sockname(C),
    {ok, CName} = Mod:peername(A),
    {ok, #{family := Fam, addr := Loop, port := P}} = Mod:peername(C),
    echo_roundtrip(Mod, C, A),
    close_all(Mod, [C, A, L]).

%% Spawn an echo process on A, send from C, check the bytes come back.
echo_roundtrip(Mod, C, A) ->
    Msg = rand:bytes(10000),
    Self = self(),
    Echo = spawn_link(fun() ->
                              B = recv_exact(Mod, A, byte_size(Msg)),
                              ok = Mod:send(A, B),
                              Self ! {echoed, self()}
                      end),
    ok = Mod:send(C, Msg),
    Msg = recv_exact(Mod, C, byte_size(Msg)),
    receive {echoed, Echo} -> ok after ?T -> ct:fail(echo_stuck) end,
    ok.

close_all(Mod, Socks) ->
    [_ = (catch Mod:close(S)) || S <- Socks],
    ok.

ipv6_ok(Mod) ->
    try Mod:open(inet6, stream, tcp) of
        {ok, S} ->
            R = Mod:bind(S, #{family => inet6, addr => {0,0,0,0,0,0,0,1}, port => 0}),
            _ = Mod:close(S),
            R =:= ok;
        _ ->
            false
    catch _:_ ->
            false
    end.

make_tmp_dir() ->
    Dir = tmp_path("nifsock_ct"),
    ok = file:make_dir(Dir),
    Dir.

expect_msg(Config, S, Kind, Info) ->
    T = tag(Config),
    receive {T, S, Kind, Info} -> ok
    after ?T ->
            {messages, Ms} = process_info(self(), messages),
            ct:fail({missing_message, {T, S, Kind, Info}, Ms})
    end.

assert_no_msg(Config, S, Ms) ->
    T = tag(Config),
    receive {T, S, _, _} = M -> ct:fail({unexpected_message, M})
    after Ms -> ok
    end.

assert_no_accepts(Ms) ->
    receive {accepted, _, _} = M -> ct:fail({unexpected_accept, M})
    after Ms -> ok
    end.

%% Give P (bounded, up to ~1 s) the chance to block in its call, i.e. sit in
%% a receive. This only orders events; it asserts nothing (an implementation
%% that blocks some other way is still tested, just with less certainty that
%% the call was already waiting).
wait_blocked(P) ->
    wait_blocked(P, 100).
wait_blocked(P, 0) ->
    ct:log("~p never reached status waiting", [P]);
wait_blocked(P, N) ->
    case process_info(P, status) of
        {status, waiting} -> ok;
        undefined -> ct:fail({process_died, P});
        _ -> timer:sleep(10), wait_blocked(P, N - 1)
    end.

%% Retry F until Done(Result) is true (bounded: 200 x 10 ms).
poll(F, Done) -> poll(F, Done, 200).
poll(_F, _Done, 0) -> ct:fail(poll_timeout);
poll(F, Done, N) ->
    R = F(),
    case Done(R) of
        true -> R;
        false -> timer:sleep(10), poll(F, Done, N - 1)
    end.

poll_true(F) ->
    true = poll(F, fun(B) -> B end),
    ok.

server_loop() ->
    receive
        {do, From, Ref, F} -> From ! {Ref, F()}, server_loop()
    end.

do(Pid, F) ->
    Ref = make_ref(),
    Pid ! {do, self(), Ref, F},
    receive {Ref, R} -> R after ?T -> ct:fail({no_reply, Pid}) end.

acceptor_loop(Mod, L, Parent) ->
    case Mod:accept(L, infinity) of
        {ok, A} ->
            {ok, #{port := Port}} = Mod:peername(A),
            Parent ! {accepted, self(), Port},
            _ = Mod:close(A),
            acceptor_loop(Mod, L, Parent);
        Other ->
            Parent ! {acceptor_done, self(), Other}
    end.
