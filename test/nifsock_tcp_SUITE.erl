%%% Common Test suite for `nifsock_tcp', the gen_tcp-shaped layer.
%%%
%%% Every behaviour case runs twice: in group `gen_tcp' (the reference: the
%%% expectations were checked there) and in group `nifsock_tcp', with the
%%% module under test and the active-message tags taken from Config:
%%%   gen_tcp:     tcp / tcp_closed / tcp_error / tcp_passive
%%%   nifsock_tcp: nifsock / nifsock_closed / nifsock_error / nifsock_passive
%%% Options go through inet:setopts/getopts for gen_tcp and through
%%% nifsock_tcp:setopts/getopts for nifsock_tcp.
%%%
%%% Where a case needs a dumb peer (to control exactly which bytes are written
%%% when, e.g. a packet header split over several TCP writes with sleeps in
%%% between), the peer is a plain gen_tcp socket in `{packet, raw}' passive
%%% binary mode, whichever module is under test.
%%%
%%% Group `kernel' records what Linux itself copies from a listener to an
%%% accepted socket, at the nifsock (OTP socket API) level, without nifsock_tcp.
%%% All traffic is on loopback.
-module(nifsock_tcp_SUITE).

-include_lib("common_test/include/ct.hrl").

-export([all/0, groups/0, suite/0, init_per_suite/1, end_per_suite/1,
         init_per_group/2, end_per_group/2, init_per_testcase/2, end_per_testcase/2]).

-export([tcp_listen_accept_connect_ip/1, tcp_passive_recv_exact_timeout_zero/1, tcp_packet_size_any_integer/1, tcp_listen_bad_value_einval/1, tcp_active_close_while_streaming/1,
         tcp_active_reply_echo_in_order/1,
         tcp_reply_yield_then_passive_recv_elsewhere/1,
         tcp_reply_yield_then_close/1,
         tcp_reply_yield_off_heap_owner/1,
         tcp_local_names/1,
         tcp_connect_hostname/1,
         tcp_connect_inet6/1,
         tcp_binary_mode/1,
         tcp_list_mode/1,
         tcp_passive_recv_zero/1,
         tcp_getstat/1,
         tcp_passive_recv_exact/1,
         tcp_passive_recv_timeout/1,
         tcp_passive_recv_timeout_keeps_partial/1,
         tcp_passive_recv_timeout_then_recv_zero/1,
         tcp_passive_recv_timeout_then_longer_recv/1,
         tcp_active_true/1,
         tcp_active_once/1,
         tcp_active_n/1,
         tcp_active_n_additive/1,
         tcp_active_zero_passive/1,
         tcp_active_negative_total_passive/1,
         tcp_active_n_out_of_range/1,
         tcp_active_messages_one_sender/1,
         tcp_packet_send_header/1,
         tcp_packet_recv_split_passive/1,
         tcp_packet_recv_split_active/1,
         tcp_packet_several_in_one_write/1,
         tcp_packet_roundtrip/1,
         tcp_packet_line/1,
         tcp_packet_size_active/1,
         tcp_packet_size_passive/1,
         tcp_peer_close_active/1,
         tcp_peer_close_active_partial_packet/1,
         tcp_peer_close_passive/1,
         tcp_recv_on_active_einval/1,
         tcp_setopts_active_closed_einval/1,
         tcp_controlling_process_moves_delivery/1,
         tcp_controlling_process_not_owner/1,
         tcp_controlling_process_dead_pid/1,
         tcp_controlling_process_passive_owner_exit/1,
         tcp_controlling_process_while_streaming/1,
         tcp_controlling_process_flip_stress/1,
         tcp_controlling_process_no_late_messages/1,
         tcp_accept_inherits_tcp_options/1,
         tcp_accept_inherits_active_n/1,
         tcp_accept_inherits_sockopts/1,
         tcp_accept_inherits_priority/1,
         tcp_getopts_setopts_roundtrip/1,
         tcp_setopts_invalid/1,
         tcp_large_data_active/1, tcp_active_n_large_stream/1,
         tcp_active_false_stops_delivery_stress/1,
         tcp_active_false_no_late_messages/1,
         tcp_large_packet_active/1,
         tcp_data_before_active_once/1,
         tcp_shutdown_write_half_close/1,
         tcp_accept_timeout_and_refused/1,
         tcp_packet_recv_length_einval/1,
         tcp_pending_packets_delivered_on_activate/1,
         tcp_active_once_then_passive_recv/1,
         tcp_peer_reset_active/1,
         tcp_peer_reset_passive/1,
         tcp_close_sends_no_message/1,
         tcp_owner_exit_closes/1,
         tcp_send_timeout/1,
         tcp_packet_size_active_then_closed/1,
         tcp_packet_line_too_long/1,
         tcp_closed_message_closes_socket/1,
         tcp_send_after_peer_close/1,
         tcp_ops_after_close/1,
         tcp_packet_header_too_large_passive/1,
         tcp_packet_header_too_large_active/1,
         tcp_packet_too_large_exit_on_close_false/1,
         tcp_packet_line_longer_than_buffer/1,
         tcp_packet_line_size_limit/1,
         tcp_line_delimiter/1,
         tcp_line_delimiter_listen_getopts/1,
         tcp_shutdown_listener_enotconn/1,
         tcp_active_n_listener/1,
         tcp_options_bad_type_exit/1,
         tcp_options_good_values_taken/1,
         tcp_setopts_creation_only_einval/1,
         tcp_bad_port_or_address_exit/1,
         tcp_getopts_layer_defaults/1,
         tcp_getopts_reads_every_setopt/1,
         tcp_watermarks_move_together/1,
         tcp_accept_inherits_layer_options/1,
         tcp_header_delivery/1, tcp_once_message_then_passive/1,
         tcp_closed_message_then_closed/1, tcp_close_leaves_no_closed_message/1,
         tcp_send_timeout_keeps_rest/1,
         tcp_send_binary_waits_for_peer/1,
         tcp_send_binary_timeout_keeps_tail/1,
         tcp_send_iodata_shapes/1,
         tcp_send_iodata_waits_for_peer/1,
         tcp_send_short_iodata_fills_buffers/1,
         tcp_send_iodata_timeout_keeps_tail/1,
         tcp_send_timeout_close_closes/1,
         tcp_close_flushes_closed_message/1,
         tcp_controlling_process_hands_over_queued/1,
         tcp_show_econnreset_active/1,
         tcp_show_econnreset_passive/1,
         tcp_show_econnreset_after_send/1,
         tcp_tags_gen_tcp_inherited/1,
         tcp_tags_set_later/1,
         tcp_tags_custom_tuple/1,
         tcp_tags_bad_values_rejected/1,
         tcp_tags_close_flushes_custom_closed/1,
         tcp_tags_controlling_process_hands_over_custom/1,
         tcp_getopts_raw_buffer/1,
         tcp_tclass_inet6/1,
         tcp_ifaddr_sockaddr_map/1,
         tcp_local_address_forms/1,
         tcp_kernel_default_options/1,
         tcp_address_tuple_family/1,
         tcp_kernel_accept_inheritance/1]).

-define(T, 5000).         % bound for anything that should happen "now"
-define(QUIET, 200).      % how long "no message" is watched for
-define(BIG, (4 * 1024 * 1024)).
-define(FRAME, 65536).    % payload of the {packet, 4} frames of the send-timeout cases
%% gen_tcp's defaults for the options nifsock_tcp keeps itself
-define(LAYER_DEFAULTS,
        [{header, 0}, {delay_send, false}, {high_watermark, 8192}, {low_watermark, 4096},
         {high_msgq_watermark, 8192}, {low_msgq_watermark, 4096}, {send_timeout_close, false},
         {show_econnreset, false}, {deliver, term}, {exit_on_close, true},
         {send_timeout, infinity}, {packet_size, 0}]).

%%--------------------------------------------------------------------
%% CT callbacks
%%--------------------------------------------------------------------

suite() -> [{timetrap, {seconds, 60}}].

all() -> [{group, gen_tcp}, {group, nifsock_tcp}, {group, kernel}].

groups() ->
    [{gen_tcp, [], cases()},
     {nifsock_tcp, [], cases()},
     {kernel, [], [tcp_kernel_accept_inheritance]}].

cases() ->
    [tcp_listen_accept_connect_ip,
     tcp_local_names,
     tcp_connect_hostname,
     tcp_connect_inet6,
     tcp_binary_mode,
     tcp_list_mode,
     tcp_passive_recv_zero,
     tcp_getstat,
     tcp_passive_recv_exact,
     tcp_passive_recv_timeout,
     tcp_passive_recv_timeout_keeps_partial,
     tcp_passive_recv_exact_timeout_zero,
     tcp_packet_size_any_integer,
     tcp_listen_bad_value_einval,
     tcp_passive_recv_timeout_then_recv_zero,
     tcp_passive_recv_timeout_then_longer_recv,
     tcp_active_true,
     tcp_active_close_while_streaming,
     tcp_active_once,
     tcp_active_n,
     tcp_active_n_additive,
     tcp_active_zero_passive,
     tcp_active_negative_total_passive,
     tcp_active_n_out_of_range,
     tcp_active_messages_one_sender,
     tcp_active_reply_echo_in_order,
     tcp_reply_yield_then_passive_recv_elsewhere,
     tcp_reply_yield_then_close,
     tcp_reply_yield_off_heap_owner,
     tcp_packet_send_header,
     tcp_packet_recv_split_passive,
     tcp_packet_recv_split_active,
     tcp_packet_several_in_one_write,
     tcp_packet_roundtrip,
     tcp_packet_line,
     tcp_packet_size_active,
     tcp_packet_size_passive,
     tcp_peer_close_active,
     tcp_peer_close_active_partial_packet,
     tcp_peer_close_passive,
     tcp_recv_on_active_einval,
     tcp_setopts_active_closed_einval,
     tcp_controlling_process_moves_delivery,
     tcp_controlling_process_not_owner,
     tcp_controlling_process_dead_pid,
     tcp_controlling_process_passive_owner_exit,
     tcp_controlling_process_while_streaming,
     tcp_controlling_process_flip_stress,
     tcp_controlling_process_no_late_messages,
     tcp_accept_inherits_tcp_options,
     tcp_accept_inherits_active_n,
     tcp_accept_inherits_sockopts,
     tcp_accept_inherits_priority,
     tcp_getopts_setopts_roundtrip,
     tcp_setopts_invalid,
     tcp_large_data_active,
     tcp_active_n_large_stream,
     tcp_active_false_stops_delivery_stress,
     tcp_active_false_no_late_messages,
     tcp_large_packet_active,
     tcp_data_before_active_once,
     tcp_shutdown_write_half_close,
     tcp_accept_timeout_and_refused,
     tcp_packet_recv_length_einval,
     tcp_pending_packets_delivered_on_activate,
     tcp_active_once_then_passive_recv,
     tcp_peer_reset_active,
     tcp_peer_reset_passive,
     tcp_close_sends_no_message,
     tcp_owner_exit_closes,
     tcp_send_timeout,
     tcp_packet_size_active_then_closed,
     tcp_packet_line_too_long,
     tcp_closed_message_closes_socket,
     tcp_send_after_peer_close,
     tcp_ops_after_close,
     tcp_packet_header_too_large_passive,
     tcp_packet_header_too_large_active,
     tcp_packet_too_large_exit_on_close_false,
     tcp_packet_line_longer_than_buffer,
     tcp_packet_line_size_limit,
     tcp_line_delimiter,
     tcp_line_delimiter_listen_getopts,
     tcp_shutdown_listener_enotconn,
     tcp_active_n_listener,
     tcp_options_bad_type_exit,
     tcp_options_good_values_taken,
     tcp_setopts_creation_only_einval,
     tcp_bad_port_or_address_exit,
     tcp_getopts_layer_defaults,
     tcp_getopts_reads_every_setopt,
     tcp_watermarks_move_together,
     tcp_accept_inherits_layer_options,
     tcp_header_delivery,
     tcp_once_message_then_passive,
     tcp_closed_message_then_closed,
     tcp_close_leaves_no_closed_message,
     tcp_send_timeout_keeps_rest,
     tcp_send_binary_waits_for_peer,
     tcp_send_binary_timeout_keeps_tail,
     tcp_send_iodata_shapes,
     tcp_send_iodata_waits_for_peer,
     tcp_send_short_iodata_fills_buffers,
     tcp_send_iodata_timeout_keeps_tail,
     tcp_send_timeout_close_closes,
     tcp_close_flushes_closed_message,
     tcp_controlling_process_hands_over_queued,
     tcp_show_econnreset_active,
     tcp_show_econnreset_passive,
     tcp_show_econnreset_after_send,
     tcp_tags_gen_tcp_inherited,
     tcp_tags_set_later,
     tcp_tags_custom_tuple,
     tcp_tags_bad_values_rejected,
     tcp_tags_close_flushes_custom_closed,
     tcp_tags_controlling_process_hands_over_custom,
     tcp_getopts_raw_buffer,
     tcp_tclass_inet6,
     tcp_ifaddr_sockaddr_map,
     tcp_local_address_forms,
     tcp_kernel_default_options,
     tcp_address_tuple_family].

init_per_suite(Config) ->
    case code:ensure_loaded(nifsock_tcp) of
        {module, nifsock_tcp} -> Config;
        Error -> {fail, {cannot_load, nifsock_tcp, Error}}
    end.

end_per_suite(_Config) -> ok.

init_per_group(gen_tcp, Config) ->
    [{mod, gen_tcp}, {tags, {tcp, tcp_closed, tcp_error, tcp_passive}} | Config];
init_per_group(nifsock_tcp, Config) ->
    [{mod, nifsock_tcp},
     {tags, {nifsock, nifsock_closed, nifsock_error, nifsock_passive}} | Config];
init_per_group(kernel, Config) ->
    Config.

end_per_group(_Group, _Config) -> ok.

%% The white-box cases of the yields after replies run on nifsock_tcp over a
%% readiness set, with the yields on.
init_per_testcase(Case, Config) when Case =:= tcp_reply_yield_then_passive_recv_elsewhere;
                                     Case =:= tcp_reply_yield_then_close ->
    case mod(Config) =:= nifsock_tcp andalso nifsock_readiness:mode() =/= select of
        true ->
            ok = nifsock_nif:reply_yield(true),
            flush_all(),
            Config;
        false ->
            {skip, "nifsock_tcp on a readiness set only"}
    end;
init_per_testcase(_Case, Config) ->
    flush_all(),
    Config.

end_per_testcase(Case, _Config) when Case =:= tcp_reply_yield_then_passive_recv_elsewhere;
                                     Case =:= tcp_reply_yield_then_close ->
    ok = reply_yield_as_configured(),
    flush_all(),
    ok;
end_per_testcase(_Case, _Config) ->
    flush_all(),
    ok.

%%--------------------------------------------------------------------
%% Connections and addresses
%%--------------------------------------------------------------------

%% A unix socket's names are {local, Path} (inet's shape; ssl over nifsock_tcp needs it), the listener's path on the listener, the accepted socket and the client's peer.
tcp_local_names(Config) ->
    M = mod(Config),
    Path = nifsock_test_lib:tmp_path("nifsock_tcp_local"),
    BinPath = list_to_binary(Path),
    {ok, L} = M:listen(0, [binary, {active, false}, {ifaddr, {local, Path}}]),
    {ok, {local, BinPath}} = sockname(Config, L),
    {ok, C} = M:connect({local, Path}, 0, [local, binary, {active, false}]),
    {ok, S} = M:accept(L, ?T),
    {ok, {local, BinPath}} = sockname(Config, S),
    {ok, {local, BinPath}} = peername(Config, C),
    {ok, {local, CName}} = sockname(Config, C),
    {ok, {local, CName}} = peername(Config, S),
    ok = M:send(C, <<"unix">>),
    {ok, <<"unix">>} = M:recv(S, 4, ?T),
    close_all(M, [C, S, L]),
    ok = file:delete(Path).

%% Listens on {127,0,0,1} with {ip, IP}, connects to {IP, Port}, accepts; both ends agree on the addresses.
tcp_listen_accept_connect_ip(Config) ->
    M = mod(Config),
    {ok, L} = M:listen(0, [binary, {active, false}, {ip, {127, 0, 0, 1}}]),
    {ok, {{127, 0, 0, 1}, Port}} = sockname(Config, L),
    true = Port > 0,
    {ok, C} = M:connect({127, 0, 0, 1}, Port, [binary, {active, false}]),
    {ok, S} = M:accept(L, ?T),
    {ok, {{127, 0, 0, 1}, CPort}} = sockname(Config, C),
    {ok, {{127, 0, 0, 1}, CPort}} = peername(Config, S),
    {ok, {{127, 0, 0, 1}, Port}} = peername(Config, C),
    {ok, {{127, 0, 0, 1}, Port}} = sockname(Config, S),
    ok = M:send(C, <<"ping">>),
    {ok, <<"ping">>} = M:recv(S, 4, ?T),
    ok = M:send(S, <<"pong">>),
    {ok, <<"pong">>} = M:recv(C, 4, ?T),
    close_all(M, [C, S, L]).

%% Connects by host name: "localhost" (a string) and localhost (an atom).
tcp_connect_hostname(Config) ->
    M = mod(Config),
    {ok, L} = M:listen(0, [binary, {active, false}, {ip, {127, 0, 0, 1}}]),
    Port = port(Config, L),
    lists:foreach(
      fun(Host) ->
              {ok, C} = M:connect(Host, Port, [binary, {active, false}], ?T),
              {ok, S} = M:accept(L, ?T),
              {ok, {{127, 0, 0, 1}, Port}} = peername(Config, C),
              ok = M:send(C, <<"hi">>),
              {ok, <<"hi">>} = M:recv(S, 2, ?T),
              close_all(M, [C, S])
      end, ["localhost", localhost]),
    ok = M:close(L).

%% inet6 listen on ::1 and connect to {0,0,0,0,0,0,0,1}.
tcp_connect_inet6(Config) ->
    M = mod(Config),
    case M:listen(0, [inet6, binary, {active, false}, {ip, {0, 0, 0, 0, 0, 0, 0, 1}}]) of
        {ok, L} ->
            Port = port(Config, L),
            {ok, C} = M:connect({0, 0, 0, 0, 0, 0, 0, 1}, Port, [inet6, binary, {active, false}]),
            {ok, S} = M:accept(L, ?T),
            {ok, {{0, 0, 0, 0, 0, 0, 0, 1}, _}} = peername(Config, S),
            ok = M:send(S, <<"six">>),
            {ok, <<"six">>} = M:recv(C, 3, ?T),
            close_all(M, [C, S, L]);
        {error, eaddrnotavail} ->
            {skip, no_ipv6_loopback}
    end.

%%--------------------------------------------------------------------
%% Modes
%%--------------------------------------------------------------------

%% `binary': passive recv and active messages carry binaries.
tcp_binary_mode(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}]),
    ok = gen_tcp:send(Peer, <<"abc">>),
    {ok, <<"abc">>} = M:recv(S, 3, ?T),
    ok = setopts(Config, S, [{active, once}]),
    ok = gen_tcp:send(Peer, <<"def">>),
    <<"def">> = data(Config, S),
    {ok, [{mode, binary}]} = getopts(Config, S, [mode]),
    close_all(M, [S]), gen_tcp:close(Peer).

%% `list': passive recv and active messages carry byte lists; setopts switches modes both ways.
tcp_list_mode(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [list, {active, false}]),
    ok = gen_tcp:send(Peer, <<"abc">>),
    {ok, "abc"} = M:recv(S, 3, ?T),
    ok = gen_tcp:send(Peer, <<"xy">>),
    {ok, "xy"} = recv_all(M, S, 2),
    ok = setopts(Config, S, [{active, once}]),
    ok = gen_tcp:send(Peer, <<"def">>),
    "def" = data(Config, S),
    {ok, [{mode, list}]} = getopts(Config, S, [mode]),
    ok = setopts(Config, S, [binary]),
    ok = gen_tcp:send(Peer, <<"ghi">>),
    {ok, <<"ghi">>} = M:recv(S, 3, ?T),
    ok = setopts(Config, S, [{mode, list}]),
    ok = gen_tcp:send(Peer, <<"jk">>),
    {ok, "jk"} = M:recv(S, 2, ?T),
    close_all(M, [S]), gen_tcp:close(Peer).

%%--------------------------------------------------------------------
%% Passive
%%--------------------------------------------------------------------

%% {active, false} recv(S, 0) returns what is there (at least one byte, no more than was sent).
tcp_passive_recv_zero(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}]),
    ok = gen_tcp:send(Peer, <<"hello">>),
    {ok, <<"hello">>} = recv_all(M, S, 5),
    %% recv(S, 0) waits for data that is not there yet.
    Self = self(),
    spawn_link(fun() -> timer:sleep(100), ok = gen_tcp:send(Peer, <<"later">>), Self ! sent end),
    {ok, Later} = M:recv(S, 0, ?T),
    true = byte_size(Later) > 0,
    receive sent -> ok end,
    {ok, <<"later">>} = recv_more(M, S, Later, 5),
    close_all(M, [S]), gen_tcp:close(Peer).

%% getstat counts bytes, calls and the largest transfer each way (two exact
%% reads of 5 and 100 bytes, one send of 3); send_pend is 0 once a send has
%% returned; all of inet:stats() can be asked for at once (ssl:getstat/1
%% does); an unknown name and a closed socket are {error, einval}.
tcp_getstat(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}]),
    Big = binary:copy(<<"y">>, 100),
    ok = gen_tcp:send(Peer, <<"hello">>),
    {ok, <<"hello">>} = M:recv(S, 5, ?T),
    ok = gen_tcp:send(Peer, Big),
    {ok, Big} = M:recv(S, 100, ?T),
    ok = M:send(S, <<"abc">>),
    {ok, <<"abc">>} = gen_tcp:recv(Peer, 3, ?T),
    {ok, Stats} = getstat(M, S),
    ct:pal("~p: ~p", [M, Stats]),
    [{recv_oct, 105}, {recv_cnt, 2}, {recv_max, 100}, {recv_avg, 52},
     {send_oct, 3}, {send_cnt, 1}, {send_max, 3}, {send_avg, 3}, {send_pend, 0}] =
        [lists:keyfind(K, 1, Stats) || K <- [recv_oct, recv_cnt, recv_max, recv_avg,
                                             send_oct, send_cnt, send_max, send_avg,
                                             send_pend]],
    {ok, [{send_oct, 3}, {recv_oct, 105}]} = getstat(M, S, [send_oct, recv_oct]),
    {ok, InetStats} = getstat(M, S, inet:stats()),
    true = [N || {N, V} <- InetStats, is_integer(V), V >= 0] =:= inet:stats(),
    {error, einval} = getstat(M, S, [recv_oct, no_such_stat]),
    %% an improper list raises (gen_tcp: function_clause; nifsock_tcp: badarg)
    {'EXIT', {Improper, _}} = catch getstat(M, S, [recv_oct | send_oct]),
    true = M =:= gen_tcp orelse Improper =:= badarg,
    ok = M:close(S),
    {error, einval} = getstat(M, S),
    gen_tcp:close(Peer),
    %% an active socket, whose readiness is still being watched, once closed
    {Peer2, S2} = raw_pair(Config, [binary, {active, true}]),
    {ok, _} = getstat(M, S2),
    ok = M:close(S2),
    {error, einval} = getstat(M, S2),
    gen_tcp:close(Peer2).

getstat(gen_tcp, S) -> inet:getstat(S);
getstat(M, S) -> M:getstat(S).

getstat(gen_tcp, S, Names) -> inet:getstat(S, Names);
getstat(M, S, Names) -> M:getstat(S, Names).

%% {active, false} recv(S, N) returns exactly N bytes, waiting across several writes, leaving the rest.
tcp_passive_recv_exact(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}]),
    Self = self(),
    spawn_link(fun() ->
                       [begin ok = gen_tcp:send(Peer, B), timer:sleep(30) end
                        || B <- [<<"01">>, <<"234">>, <<"56789AB">>]],
                       Self ! sent
               end),
    {ok, <<"0123456789">>} = M:recv(S, 10, ?T),
    receive sent -> ok end,
    {ok, <<"AB">>} = M:recv(S, 2, ?T),
    close_all(M, [S]), gen_tcp:close(Peer).

%% recv(S, 0, T) and recv(S, N, T) with nothing there return {error, timeout}; the socket still works.
tcp_passive_recv_timeout(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}]),
    T0 = erlang:monotonic_time(millisecond),
    {error, timeout} = M:recv(S, 0, 100),
    {error, timeout} = M:recv(S, 5, 100),
    {error, timeout} = M:recv(S, 0, 0),
    Elapsed = erlang:monotonic_time(millisecond) - T0,
    true = Elapsed >= 190,
    ok = gen_tcp:send(Peer, <<"after">>),
    {ok, <<"after">>} = M:recv(S, 5, ?T),
    close_all(M, [S]), gen_tcp:close(Peer).

%% A recv(S, N, T) that times out with part of N there loses nothing: the next recv(S, N) gets all N bytes.
tcp_passive_recv_timeout_keeps_partial(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}]),
    ok = gen_tcp:send(Peer, <<"01234">>),
    {error, timeout} = M:recv(S, 10, 200),
    ok = gen_tcp:send(Peer, <<"56789">>),
    {ok, <<"0123456789">>} = M:recv(S, 10, ?T),
    close_all(M, [S]), gen_tcp:close(Peer).

%% recv(S, N, 0) with part of N there is {error, timeout} and keeps the part:
%% the next recv(S, N, 0), once the rest came, gets all N bytes; so does a
%% list-mode socket.
tcp_passive_recv_exact_timeout_zero(Config) ->
    M = mod(Config),
    [begin
         {Peer, S} = raw_pair(Config, [Mode, {active, false}]),
         ok = gen_tcp:send(Peer, <<"01234">>),
         timer:sleep(50),
         {Mode, {error, timeout}} = {Mode, M:recv(S, 10, 0)},
         {Mode, {error, timeout}} = {Mode, M:recv(S, 10, 0)},
         ok = gen_tcp:send(Peer, <<"56789ab">>),
         timer:sleep(50),
         Want = case Mode of binary -> <<"0123456789">>; list -> "0123456789" end,
         {Mode, {ok, Want}} = {Mode, M:recv(S, 10, 0)},
         Rest = case Mode of binary -> <<"ab">>; list -> "ab" end,
         {Mode, {ok, Rest}} = {Mode, M:recv(S, 0, ?T)},
         close_all(M, [S]), gen_tcp:close(Peer)
     end || Mode <- [binary, list]],
    ok.

%% packet_size takes any non-negative integer, as inet (which keeps its low
%% 32 bits): setopts and listen say ok, and frames keep flowing.
tcp_packet_size_any_integer(Config) ->
    M = mod(Config),
    {ok, L} = M:listen(0, [{ip, {127, 0, 0, 1}}, {packet_size, 1 bsl 64}]),
    ok = M:close(L),
    {Peer, S} = raw_pair(Config, [binary, {active, false}, {packet, 2}]),
    ok = setopts(Config, S, [{packet_size, (1 bsl 40) + 100}]),
    ok = gen_tcp:send(Peer, <<3:16, "abc">>),
    {ok, <<"abc">>} = M:recv(S, 0, ?T),
    close_all(M, [S]), gen_tcp:close(Peer).

%% A value of the right type that no socket takes: nifsock_tcp's listen and
%% connect answer {error, einval}, as its setopts does, never {error,
%% {invalid, _}} (a reason gen_tcp never returns); gen_tcp passes the
%% number on truncated to 32 bits and says ok (a documented difference).
tcp_listen_bad_value_einval(Config) ->
    M = mod(Config),
    Want = case M of gen_tcp -> ok; nifsock_tcp -> {error, einval} end,
    Bad = [{buffer, 1 bsl 40}, {sndbuf, 1 bsl 31}],
    Result = fun({ok, S}) -> ok = M:close(S);
                (Error) -> Error
             end,
    {ok, L} = M:listen(0, [{ip, {127, 0, 0, 1}}]),
    [begin
         {Opt, Want} = {Opt, Result(M:listen(0, [{ip, {127, 0, 0, 1}}, Opt]))},
         {Opt, Want} = {Opt, Result(M:connect({127, 0, 0, 1}, port(Config, L), [Opt], ?T))},
         {ok, S} = M:listen(0, [{ip, {127, 0, 0, 1}}]),
         {Opt, Want} = {Opt, setopts(Config, S, [Opt])},
         ok = M:close(S)
     end || Opt <- Bad],
    ok = M:close(L).

%% After a recv(S, N, T) times out with part of N there, recv(S, 0) returns those bytes first.
tcp_passive_recv_timeout_then_recv_zero(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}]),
    ok = gen_tcp:send(Peer, <<"01234">>),
    {error, timeout} = M:recv(S, 10, 200),
    ok = gen_tcp:send(Peer, <<"56789">>),
    timer:sleep(50),
    {ok, <<"0123456789">>} = recv_all(M, S, 10),
    close_all(M, [S]), gen_tcp:close(Peer).

%% After a recv(S, 4, T) times out with 2 bytes there, recv(S, 8) returns those 2 bytes and 6 more.
tcp_passive_recv_timeout_then_longer_recv(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}]),
    ok = gen_tcp:send(Peer, <<"ab">>),
    {error, timeout} = M:recv(S, 4, 200),
    ok = gen_tcp:send(Peer, <<"cdefgh">>),
    {ok, <<"abcdefgh">>} = M:recv(S, 8, ?T),
    close_all(M, [S]), gen_tcp:close(Peer).

%%--------------------------------------------------------------------
%% Active modes
%%--------------------------------------------------------------------

%% {active, true}: every arrival is a message, without re-arming; the socket stays active.
tcp_active_true(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, true}]),
    Sent = [<<"one">>, <<"two">>, <<"three">>],
    [begin ok = gen_tcp:send(Peer, B), B = data(Config, S) end || B <- Sent],
    {ok, [{active, true}]} = getopts(Config, S, [active]),
    ok = gen_tcp:send(Peer, <<"four">>),
    <<"four">> = collect(Config, S, 4),
    close_all(M, [S]), gen_tcp:close(Peer).

%% {active, true} with the peer streaming at full speed, closed by another
%% process while deliveries run: the owner never gets an error message for
%% it (a read that finds the fd taken by the close is no socket error). Many
%% rounds, so some closes land inside a delivery's reads.
tcp_active_close_while_streaming(Config) ->
    M = mod(Config),
    {_, _, Error, _} = tags(Config),
    Chunk = binary:copy(<<"s">>, 65536),
    [begin
         %% small reads: many per delivery, so a close often lands between two
         {Peer, S} = raw_pair(Config, [binary, {active, true}, {buffer, 512}]),
         Streamer = spawn(fun() -> stream(Peer, Chunk) end),
         ok = gen_tcp:controlling_process(Peer, Streamer),
         _ = data(Config, S),
         Closer = spawn_link(fun() -> ok = M:close(S) end),
         Ref = monitor(process, Closer),
         receive {'DOWN', Ref, process, Closer, _} -> ok end,
         exit(Streamer, kill),
         timer:sleep(5),
         Errors = flush_errors(Error, S),
         {I, []} = {I, Errors}
     end || I <- lists:seq(1, 200)],
    ok.

stream(Peer, Chunk) ->
    case gen_tcp:send(Peer, Chunk) of
        ok -> stream(Peer, Chunk);
        {error, _} -> ok
    end.

flush_errors(Error, S) ->
    receive
        {Error, S, Reason} -> [Reason | flush_errors(Error, S)];
        {_, S, _} -> flush_errors(Error, S);
        {_, S} -> flush_errors(Error, S)
    after 0 -> []
    end.

%% {active, once}: one message, then passive until setopts([{active, once}]) re-arms it.
tcp_active_once(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}]),
    ok = setopts(Config, S, [{active, once}]),
    {ok, [{active, once}]} = getopts(Config, S, [active]),
    ok = gen_tcp:send(Peer, <<"first">>),
    <<"first">> = data(Config, S),
    {ok, [{active, false}]} = getopts(Config, S, [active]),
    ok = gen_tcp:send(Peer, <<"second">>),
    no_msg(S),
    ok = setopts(Config, S, [{active, once}]),
    <<"second">> = collect(Config, S, 6),
    {ok, [{active, false}]} = getopts(Config, S, [active]),
    %% No passive message in once mode.
    no_msg(S),
    close_all(M, [S]), gen_tcp:close(Peer).

%% {active, N}: N messages, then {Passive, S} and passive mode; the count shows in getopts.
tcp_active_n(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}]),
    ok = setopts(Config, S, [{active, 3}]),
    {ok, [{active, 3}]} = getopts(Config, S, [active]),
    ok = gen_tcp:send(Peer, <<"a">>),
    <<"a">> = data(Config, S),
    {ok, [{active, 2}]} = getopts(Config, S, [active]),
    ok = gen_tcp:send(Peer, <<"b">>),
    <<"b">> = data(Config, S),
    ok = gen_tcp:send(Peer, <<"c">>),
    <<"c">> = data(Config, S),
    passive(Config, S),
    {ok, [{active, false}]} = getopts(Config, S, [active]),
    ok = gen_tcp:send(Peer, <<"d">>),
    no_msg(S),
    {ok, <<"d">>} = M:recv(S, 1, ?T),
    close_all(M, [S]), gen_tcp:close(Peer).

%% {active, N} adds to the current count: 2 then 3 gives 5 messages before {Passive, S}.
tcp_active_n_additive(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}]),
    ok = setopts(Config, S, [{active, 2}]),
    ok = setopts(Config, S, [{active, 3}]),
    {ok, [{active, 5}]} = getopts(Config, S, [active]),
    [begin ok = gen_tcp:send(Peer, <<I>>), <<I>> = data(Config, S) end || I <- lists:seq(1, 5)],
    passive(Config, S),
    ok = gen_tcp:send(Peer, <<"x">>),
    no_msg(S),
    %% Re-arming from passive starts counting from zero again.
    ok = setopts(Config, S, [{active, 1}]),
    <<"x">> = data(Config, S),
    passive(Config, S),
    close_all(M, [S]), gen_tcp:close(Peer).

%% {active, 0} makes the socket passive at once with {Passive, S}, from passive or active N.
tcp_active_zero_passive(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}]),
    ok = setopts(Config, S, [{active, 0}]),
    passive(Config, S),
    {ok, [{active, false}]} = getopts(Config, S, [active]),
    ok = setopts(Config, S, [{active, 4}]),
    ok = setopts(Config, S, [{active, 0}]),
    %% Adding zero keeps the count.
    {ok, [{active, 4}]} = getopts(Config, S, [active]),
    no_msg(S),
    close_all(M, [S]), gen_tcp:close(Peer).

%% A negative {active, N} whose total is =< 0 makes the socket passive at once with {Passive, S}.
tcp_active_negative_total_passive(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}]),
    ok = setopts(Config, S, [{active, 5}]),
    ok = setopts(Config, S, [{active, -2}]),
    {ok, [{active, 3}]} = getopts(Config, S, [active]),
    no_msg(S),
    ok = setopts(Config, S, [{active, -10}]),
    passive(Config, S),
    {ok, [{active, false}]} = getopts(Config, S, [active]),
    ok = gen_tcp:send(Peer, <<"x">>),
    no_msg(S),
    {ok, <<"x">>} = M:recv(S, 1, ?T),
    close_all(M, [S]), gen_tcp:close(Peer).

%% {active, N} outside -32768..32767, or a total above 32767, is {error, einval}.
tcp_active_n_out_of_range(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}]),
    {error, einval} = setopts(Config, S, [{active, 32768}]),
    {error, einval} = setopts(Config, S, [{active, -32769}]),
    ok = setopts(Config, S, [{active, 32767}]),
    {error, einval} = setopts(Config, S, [{active, 1}]),
    {ok, [{active, 32767}]} = getopts(Config, S, [active]),
    close_all(M, [S]), gen_tcp:close(Peer).

%%--------------------------------------------------------------------
%% Packet framing
%%--------------------------------------------------------------------

%% {packet, 1|2|4}: send puts a big-endian length header in front of the payload (iodata too).
tcp_packet_send_header(Config) ->
    M = mod(Config),
    lists:foreach(
      fun(N) ->
              {Peer, S} = raw_pair(Config, [binary, {active, false}, {packet, N}]),
              ok = M:send(S, [<<"he">>, "llo", [<<>>]]),
              ok = M:send(S, <<>>),
              {ok, <<5:N/unit:8, "hello", 0:N/unit:8>>} = gen_tcp:recv(Peer, 2 * N + 5, ?T),
              close_all(M, [S]), gen_tcp:close(Peer)
      end, [1, 2, 4]).

%% {packet, 1|2|4}, passive: recv(S, 0) returns whole packets though header and body arrive in pieces.
tcp_packet_recv_split_passive(Config) ->
    M = mod(Config),
    lists:foreach(
      fun(N) ->
              {Peer, S} = raw_pair(Config, [binary, {active, false}, {packet, N}]),
              Body = <<"split payload">>,
              Self = self(),
              spawn_link(fun() -> write_split(Peer, N, Body), Self ! sent end),
              {ok, Body} = M:recv(S, 0, ?T),
              receive sent -> ok end,
              close_all(M, [S]), gen_tcp:close(Peer)
      end, [1, 2, 4]).

%% {packet, 1|2|4}, active: one message per whole packet though header and body arrive in pieces.
tcp_packet_recv_split_active(Config) ->
    M = mod(Config),
    lists:foreach(
      fun(N) ->
              {Peer, S} = raw_pair(Config, [binary, {active, true}, {packet, N}]),
              Body = <<"split payload">>,
              write_split(Peer, N, Body),
              Body = data(Config, S),
              %% And a second packet the same way: nothing was left half-framed.
              write_split(Peer, N, <<"again">>),
              <<"again">> = data(Config, S),
              no_msg(S),
              close_all(M, [S]), gen_tcp:close(Peer)
      end, [1, 2, 4]).

%% Several packets in one TCP write, and a zero-length packet, come out as separate packets.
tcp_packet_several_in_one_write(Config) ->
    M = mod(Config),
    lists:foreach(
      fun(N) ->
              {Peer, S} = raw_pair(Config, [binary, {active, true}, {packet, N}]),
              Bodies = [<<"a">>, <<>>, <<"bcd">>, binary:copy(<<"z">>, 200)],
              ok = gen_tcp:send(Peer, [[<<(byte_size(B)):N/unit:8>>, B] || B <- Bodies]),
              Bodies = [data(Config, S) || _ <- Bodies],
              ok = setopts(Config, S, [{active, false}]),
              ok = gen_tcp:send(Peer, [[<<(byte_size(B)):N/unit:8>>, B] || B <- Bodies]),
              Bodies = [begin {ok, B} = M:recv(S, 0, ?T), B end || _ <- Bodies],
              close_all(M, [S]), gen_tcp:close(Peer)
      end, [1, 2, 4]).

%% {packet, N} on both ends: send/recv round trip of packets of many sizes.
tcp_packet_roundtrip(Config) ->
    M = mod(Config),
    lists:foreach(
      fun(N) ->
              {C, S} = pair(Config, [binary, {active, false}, {packet, N}]),
              Max = case N of 1 -> 255; 2 -> 65535; 4 -> 300000 end,
              Sizes = [0, 1, 2, 100, 255, Max],
              [begin
                   B = rand_bytes(Size),
                   ok = M:send(C, B),
                   {ok, B} = M:recv(S, 0, ?T)
               end || Size <- Sizes],
              close_all(M, [C, S])
      end, [1, 2, 4]).

%% {packet, line}: one packet per line (newline included), lines split over writes or several per write.
tcp_packet_line(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}, {packet, line}]),
    ok = gen_tcp:send(Peer, <<"one\ntwo\nthr">>),
    {ok, <<"one\n">>} = M:recv(S, 0, ?T),
    {ok, <<"two\n">>} = M:recv(S, 0, ?T),
    Self = self(),
    spawn_link(fun() ->
                       timer:sleep(50), ok = gen_tcp:send(Peer, <<"e">>),
                       timer:sleep(50), ok = gen_tcp:send(Peer, <<"e\nfour\n">>),
                       Self ! sent
               end),
    {ok, <<"three\n">>} = M:recv(S, 0, ?T),
    receive sent -> ok end,
    ok = setopts(Config, S, [{active, true}]),
    <<"four\n">> = data(Config, S),
    ok = gen_tcp:send(Peer, <<"fi">>),
    no_msg(S),
    ok = gen_tcp:send(Peer, <<"ve\n\n">>),
    <<"five\n">> = data(Config, S),
    <<"\n">> = data(Config, S),
    close_all(M, [S]), gen_tcp:close(Peer).

%% {packet_size, N}: a longer packet header gives {Error, S, emsgsize} in active mode.
tcp_packet_size_active(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, true}, {packet, 2}, {packet_size, 10}]),
    ok = gen_tcp:send(Peer, <<3:16, "abc">>),
    <<"abc">> = data(Config, S),
    ok = gen_tcp:send(Peer, <<100:16, (binary:copy(<<"y">>, 100))/binary>>),
    {_, _, ErrorTag, _} = tags(Config),
    receive
        {ErrorTag, S, emsgsize} -> ok
    after ?T ->
            ct:fail({no_emsgsize, flush_all()})
    end,
    close_all(M, [S]), gen_tcp:close(Peer).

%% Active mode: every message of a socket's deliveries (data, passive, error, closed) is sent by one port (gen_tcp's socket; nifsock's readiness driver port), so ERTS, which orders signals per sender, keeps their order.
tcp_active_messages_one_sender(Config) ->
    M = mod(Config),
    {DT, CT, ET, PT} = tags(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, 2}, {show_econnreset, true}]),
    case active_sender(M, S) of
        undefined ->
            close_all(M, [S]), gen_tcp:close(Peer),
            {skip, not_driver_readiness};
        Sender ->
            1 = erlang:trace(Sender, true, [send]),
            ok = gen_tcp:send(Peer, <<"a">>),
            A = next_of(S),
            ok = gen_tcp:send(Peer, <<"b">>),
            B = next_of(S),
            P = next_of(S),
            ok = setopts(Config, S, [{active, true}]),
            ok = gen_tcp:send(Peer, <<"c">>),
            C = next_of(S),
            ok = inet:setopts(Peer, [{linger, {true, 0}}]),
            ok = gen_tcp:close(Peer),
            E = next_of(S),
            Cl = next_of(S),
            Got = [A, B, P, C, E, Cl],
            [{DT, S, <<"a">>}, {DT, S, <<"b">>}, {PT, S}, {DT, S, <<"c">>},
             {ET, S, econnreset}, {CT, S}] = Got,
            Traced = traced_sends(Sender, S, length(Got)),
            _ = (catch erlang:trace(Sender, false, [send])),
            {Got, Got} = {Got, Traced},
            M:close(S)
    end.

%% An active echo whose owner replies to each message it gets (on nifsock's
%% readiness set the reply's send yields and the owner reads the peer's next
%% bytes itself): the peer writes 400 numbered records, two at a time with
%% no wait and the rest as each echo comes back, under {active, 5} renewed
%% at each passive message and under {active, true}; every byte reaches the
%% owner once and in order, and comes back so. With `reply_yield' on, on the
%% readiness set the replies yielded (nifsock:info/0's reply_yields); with
%% it off (the default) none did.
tcp_active_reply_echo_in_order(Config) ->
    %% off by default: no reply yields
    Yields0 = reply_yields(),
    echo_run(Config, 5, [], 100),
    0 = reply_yields() - Yields0,
    with_reply_yield(fun() -> tcp_active_reply_echo_in_order_(Config) end).

tcp_active_reply_echo_in_order_(Config) ->
    M = mod(Config),
    Yields0 = reply_yields(),
    [echo_run(Config, Mode, [], 400) || Mode <- [5, true]],
    Yields = reply_yields() - Yields0,
    case M =:= nifsock_tcp andalso nifsock_readiness:mode() =/= select of
        true when Yields > 0 -> ok;
        true -> ct:fail({no_reply_yields, Yields});
        false -> 0 = Yields
    end.

%% As tcp_active_reply_echo_in_order, with an owner whose messages are off
%% its heap (`{message_queue_data, off_heap}'): ERTS may buffer such a
%% process's messages per sender and hand them over in buffer order, so its
%% replies make no read after their yield (its own messages and the
%% readiness port's could then arrive out of order): the first reply that
%% would yield turns yields off for the socket. Every byte still arrives
%% once and in order.
tcp_reply_yield_off_heap_owner(Config) ->
    with_reply_yield(fun() -> tcp_reply_yield_off_heap_owner_(Config) end).

tcp_reply_yield_off_heap_owner_(Config) ->
    M = mod(Config),
    Yields0 = reply_yields(),
    echo_run(Config, 5, [{message_queue_data, off_heap}], 300),
    Yields = reply_yields() - Yields0,
    case M =:= nifsock_tcp andalso nifsock_readiness:mode() =/= select of
        true when Yields =:= 1 -> ok;
        true -> ct:fail({off_heap_owner_yields, Yields});
        false -> 0 = Yields
    end.

%% One echo connection: the owner (spawned with SpawnOpts) in `{active,
%% Mode}', the peer writing N numbered records, two at once and then one per
%% record echoed back; checks both directions' bytes.
echo_run(Config, Mode, SpawnOpts, N) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}]),
    Self = self(),
    Owner = spawn_opt(fun() ->
                              receive go -> ok end,
                              ok = setopts(Config, S, [{active, Mode}]),
                              echo_owner(Config, S, Mode, N * 8, <<>>, Self)
                      end, [link | SpawnOpts]),
    ok = M:controlling_process(S, Owner),
    Owner ! go,
    Records = [<<I:64>> || I <- lists:seq(1, N)],
    Sent = iolist_to_binary(Records),
    ok = gen_tcp:send(Peer, lists:sublist(Records, 2)),
    Back = echo_peer(Peer, lists:nthtail(2, Records), <<>>, byte_size(Sent)),
    {Sent, Sent} = {Sent, Back},
    receive
        {echoed, Owner, Got} -> {Sent, Sent} = {Sent, Got}
    after ?T -> ct:fail(no_echo_report)
    end,
    gen_tcp:close(Peer).

%% The owner: echoes each data message, renews {active, N} at its passive
%% message, and reports all it got once Total bytes came.
echo_owner(Config, S, _Mode, Total, Acc, Report) when byte_size(Acc) >= Total ->
    M = mod(Config),
    Report ! {echoed, self(), Acc},
    M:close(S);
echo_owner(Config, S, Mode, Total, Acc, Report) ->
    M = mod(Config),
    {DT, _, _, PT} = tags(Config),
    receive
        {DT, S, D} ->
            ok = M:send(S, D),
            echo_owner(Config, S, Mode, Total, <<Acc/binary, D/binary>>, Report);
        {PT, S} ->
            ok = setopts(Config, S, [{active, Mode}]),
            echo_owner(Config, S, Mode, Total, Acc, Report)
    after ?T ->
            ct:fail({owner_stalled, byte_size(Acc), flush_all()})
    end.

%% The peer: reads echoes; for each whole record that came back, writes the
%% next one, until Total bytes came back.
echo_peer(_Peer, _Rest, Acc, Total) when byte_size(Acc) >= Total ->
    Acc;
echo_peer(Peer, Rest, Acc, Total) ->
    {ok, D} = gen_tcp:recv(Peer, 0, ?T),
    Acc1 = <<Acc/binary, D/binary>>,
    Whole = byte_size(Acc1) div 8 - byte_size(Acc) div 8,
    {Now, Later} = lists:split(min(Whole, length(Rest)), Rest),
    ok = gen_tcp:send(Peer, Now),
    echo_peer(Peer, Later, Acc1, Total).

reply_yields() ->
    maps:get(reply_yields, nifsock:info(), 0).

%% Runs F with the yields after replies on (application env `reply_yield',
%% off by default), then back as configured.
with_reply_yield(F) ->
    ok = nifsock_nif:reply_yield(true),
    try F()
    after
        ok = reply_yield_as_configured()
    end.

%% The yields after replies back as the application env says (as the NIF's
%% load sets them).
reply_yield_as_configured() ->
    nifsock_nif:reply_yield(application:get_env(nifsock, reply_yield, false) =:= true).

%% nifsock_tcp on the readiness set: a reply's send answered `yield' (the
%% read wait disarmed until the owner's read after the yield); before that
%% read, another process makes the socket passive and waits in recv(S, 0):
%% it gets the bytes that came meanwhile, not stuck behind the disarmed
%% wait; the owner's late read then delivers nothing. (White-box: the
%% owner's two calls made by hand.)
tcp_reply_yield_then_passive_recv_elsewhere(Config) ->
    {Peer, S} = reply_yield_pair(Config),
    Self = self(),
    Other = spawn_link(fun() ->
                               ok = nifsock_tcp:setopts(S, [{active, false}]),
                               Self ! passive_now,
                               Self ! {got, nifsock_tcp:recv(S, 0, ?T)}
                       end),
    receive passive_now -> ok after ?T -> ct:fail(no_setopts) end,
    ok = gen_tcp:send(Peer, <<"next">>),
    receive
        {got, Got} -> {ok, <<"next">>} = Got
    after ?T -> ct:fail({recv_stuck, flush_all()})
    end,
    ok = nifsock_nif:tcp_read_after_yield(S, true),
    no_msg(S),
    unlink(Other),
    ok = nifsock_tcp:close(S),
    gen_tcp:close(Peer).

%% As above, but the socket is closed before the owner's read after its
%% yield: that read does nothing, and nothing is left open.
tcp_reply_yield_then_close(Config) ->
    {Peer, S} = reply_yield_pair(Config),
    #{fds := Fds0} = nifsock:info(),
    ok = gen_tcp:send(Peer, <<"late">>),
    Closer = spawn(fun() -> nifsock_tcp:close(S) end),
    Ref = monitor(process, Closer),
    receive {'DOWN', Ref, process, Closer, _} -> ok end,
    ok = nifsock_nif:tcp_read_after_yield(S, true),
    no_msg(S),
    {error, closed} = nifsock_tcp:send(S, <<"x">>),
    #{fds := Fds1} = nifsock:info(),
    {Fds0, Fds0} = {Fds0, Fds1 + 1},
    gen_tcp:close(Peer).

%% An active nifsock_tcp socket owned by this process that has had data
%% delivered and whose reply's send answered `yield' (read after it not yet
%% made); for cases that init_per_testcase runs on a readiness set, with the
%% yields on.
reply_yield_pair(Config) ->
    {Peer, S} = raw_pair(Config, [binary, {active, 10}]),
    %% the first reply does not yield: data after a reply must have come
    %% before (request/response)
    ok = gen_tcp:send(Peer, <<"first">>),
    <<"first">> = data(Config, S),
    ok = nifsock_nif:tcp_send(S, [<<"reply">>], make_ref()),
    {ok, <<"reply">>} = gen_tcp:recv(Peer, 5, ?T),
    ok = gen_tcp:send(Peer, <<"request">>),
    <<"request">> = data(Config, S),
    yield = nifsock_nif:tcp_send(S, [<<"reply">>], make_ref()),
    {ok, <<"reply">>} = gen_tcp:recv(Peer, 5, ?T),
    {Peer, S}.

%% The port that sends S's active messages: the socket itself (gen_tcp), the
%% readiness driver's port (nifsock_tcp on the driver readiness source).
active_sender(gen_tcp, S) -> S;
active_sender(_, _) ->
    case nifsock_readiness:mode() of
        driver ->
            case [P || P <- erlang:ports(),
                       erlang:port_info(P, name) =:= {name, "libnifsock"}] of
                [P] -> P;
                _ -> undefined
            end;
        _ ->
            undefined
    end.

%% The next message about S (not a trace message).
next_of(S) ->
    receive
        Msg when is_tuple(Msg), element(1, Msg) =/= trace, tuple_size(Msg) >= 2,
                 element(2, Msg) =:= S ->
            Msg
    after ?T ->
            ct:fail({no_message, flush_all()})
    end.

%% The first N messages about S that Sender was traced sending to this process.
traced_sends(_Sender, _S, 0) -> [];
traced_sends(Sender, S, N) ->
    Self = self(),
    receive
        {trace, Sender, send, Msg, Self} when is_tuple(Msg), tuple_size(Msg) >= 2,
                                              element(2, Msg) =:= S ->
            [Msg | traced_sends(Sender, S, N - 1)]
    after ?T ->
            []
    end.

%% {packet_size, N}: a longer packet header gives {error, emsgsize} from a passive recv.
tcp_packet_size_passive(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}, {packet, 4}, {packet_size, 10}]),
    ok = gen_tcp:send(Peer, <<10:32, "0123456789">>),
    {ok, <<"0123456789">>} = M:recv(S, 0, ?T),
    ok = gen_tcp:send(Peer, <<11:32, "0123456789X">>),
    {error, emsgsize} = M:recv(S, 0, ?T),
    close_all(M, [S]), gen_tcp:close(Peer).

%%--------------------------------------------------------------------
%% Closing
%%--------------------------------------------------------------------

%% Peer close in active mode: the data first, then {Closed, S}.
tcp_peer_close_active(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, true}]),
    ok = gen_tcp:send(Peer, <<"last words">>),
    ok = gen_tcp:close(Peer),
    <<"last words">> = collect(Config, S, 10),
    closed(Config, S),
    no_msg(S),
    close_all(M, [S]).

%% Peer close in {active, true}, {packet, 2} after half a packet: {Closed, S} (no partial packet).
tcp_peer_close_active_partial_packet(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, true}, {packet, 2}]),
    ok = gen_tcp:send(Peer, <<10:16, "abc">>),
    timer:sleep(50),
    ok = gen_tcp:close(Peer),
    closed(Config, S),
    no_msg(S),
    close_all(M, [S]).

%% Peer close in passive mode: data first, then recv gives {error, closed}, again and again.
tcp_peer_close_passive(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}]),
    ok = gen_tcp:send(Peer, <<"bye">>),
    ok = gen_tcp:close(Peer),
    {ok, <<"bye">>} = M:recv(S, 3, ?T),
    {error, closed} = M:recv(S, 0, ?T),
    %% Later calls fail too (gen_tcp, having closed the port on exit_on_close, says enotconn).
    {error, E} = M:recv(S, 5, ?T),
    true = E =:= closed orelse E =:= enotconn,
    close_all(M, [S]).

%% setopts of the active mode alone on a closed socket is {error, einval}, as of any option with it.
tcp_setopts_active_closed_einval(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}]),
    ok = M:close(S),
    [{error, einval} = setopts(Config, S, Opts)
     || A <- [true, false, once, 5, -1], Opts <- [[{active, A}], [{active, A}, {nodelay, true}]]],
    gen_tcp:close(Peer).

%% recv on an active socket (true, once, N) is {error, einval}.
tcp_recv_on_active_einval(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, true}]),
    {error, einval} = M:recv(S, 0, 100),
    ok = setopts(Config, S, [{active, once}]),
    {error, einval} = M:recv(S, 0, 100),
    ok = setopts(Config, S, [{active, false}]),
    ok = setopts(Config, S, [{active, 7}]),
    {error, einval} = M:recv(S, 3, 100),
    ok = setopts(Config, S, [{active, false}]),
    {error, timeout} = M:recv(S, 0, 50),
    close_all(M, [S]), gen_tcp:close(Peer).

%%--------------------------------------------------------------------
%% Ownership
%%--------------------------------------------------------------------

%% controlling_process/2: active messages for data that arrives after the call go to the new owner.
tcp_controlling_process_moves_delivery(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, true}]),
    ok = gen_tcp:send(Peer, <<"mine">>),
    <<"mine">> = data(Config, S),
    Fwd = forwarder(self()),
    ok = M:controlling_process(S, Fwd),
    ok = gen_tcp:send(Peer, <<"yours">>),
    {DT, CT, _, _} = tags(Config),
    receive {via, Fwd, {DT, S, <<"yours">>}} -> ok
    after ?T -> ct:fail({not_forwarded, flush_all()})
    end,
    no_msg(S),
    ok = gen_tcp:close(Peer),
    receive {via, Fwd, {CT, S}} -> ok
    after ?T -> ct:fail({closed_not_forwarded, flush_all()})
    end,
    Fwd ! stop,
    close_all(M, [S]).

%% Only the owner may call controlling_process/2: others get {error, not_owner}; passing it back works.
tcp_controlling_process_not_owner(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}]),
    Self = self(),
    Other = spawn_link(fun() ->
                               Self ! {tried, M:controlling_process(S, self())},
                               receive {give_back, To} ->
                                       Self ! {gave_back, M:controlling_process(S, To)}
                               end,
                               receive stop -> ok end
                       end),
    receive {tried, R1} -> {error, not_owner} = R1 end,
    ok = M:controlling_process(S, Other),
    {error, not_owner} = M:controlling_process(S, self()),
    Other ! {give_back, Self},
    receive {gave_back, R2} -> ok = R2 end,
    %% Giving it to the owner itself is fine.
    ok = M:controlling_process(S, self()),
    Other ! stop,
    %% The owner is alive and well: the socket still works for us.
    ok = setopts(Config, S, [{active, once}]),
    ok = gen_tcp:send(Peer, <<"back">>),
    <<"back">> = data(Config, S),
    close_all(M, [S]), gen_tcp:close(Peer).

%% controlling_process to a dead pid: {error, badarg}; the socket stays ours, passive, and works.
tcp_controlling_process_dead_pid(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, true}]),
    Dead = spawn(fun() -> ok end),
    Ref = erlang:monitor(process, Dead),
    receive {'DOWN', Ref, process, Dead, _} -> ok end,
    {error, badarg} = M:controlling_process(S, Dead),
    {ok, [{active, false}]} = getopts(Config, S, [active]),
    ok = gen_tcp:send(Peer, <<"still ours">>),
    {ok, <<"still ours">>} = M:recv(S, 10, 5000),
    ok = M:send(S, <<"back">>),
    {ok, <<"back">>} = gen_tcp:recv(Peer, 4, 5000),
    close_all(M, [S]), gen_tcp:close(Peer).

%% A passive socket given away with nothing in our mailbox: to a dead pid, {error, badarg} and it stays ours and works; to a live process, that process owns it: its exit closes the socket (the peer reads the end of the stream).
tcp_controlling_process_passive_owner_exit(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}]),
    _ = flush_all(),
    Dead = spawn(fun() -> ok end),
    Ref = erlang:monitor(process, Dead),
    receive {'DOWN', Ref, process, Dead, _} -> ok end,
    {error, badarg} = M:controlling_process(S, Dead),
    ok = M:send(S, <<"ours">>),
    {ok, <<"ours">>} = gen_tcp:recv(Peer, 4, 5000),
    Owner = spawn(fun() -> receive stop -> ok end end),
    ORef = erlang:monitor(process, Owner),
    ok = M:controlling_process(S, Owner),
    {error, not_owner} = M:controlling_process(S, self()),
    Owner ! stop,
    receive {'DOWN', ORef, process, Owner, _} -> ok end,
    {error, closed} = gen_tcp:recv(Peer, 0, 5000),
    gen_tcp:close(Peer).

%% Ownership changes while data streams in: old owner's messages then new owner's are the whole stream, in order.
tcp_controlling_process_while_streaming(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, true}]),
    Total = 2 * 1024 * 1024,
    Stream = rand_bytes(Total),
    Writer = spawn_link(fun() -> write_chunks(Peer, Stream, 4096) end),
    {DT, _, _, _} = tags(Config),
    %% Take a few messages, then hand the socket over mid-stream.
    First = [receive {DT, S, D} -> D after ?T -> ct:fail(no_data) end || _ <- lists:seq(1, 5)],
    Collector = collector(self(), S, DT),
    ok = M:controlling_process(S, Collector),
    %% The hand-over moved the data messages already in our mailbox to the
    %% collector (both modules): anything still here is ours.
    Mine = iolist_to_binary([First | drain(DT, S)]),
    Collector ! {want, Total - byte_size(Mine)},
    receive
        {collected, Collector, Theirs} ->
            Stream = <<Mine/binary, Theirs/binary>>
    after 30000 -> ct:fail({collector_timeout, byte_size(Mine)})
    end,
    unlink(Writer),
    close_all(M, [S]), gen_tcp:close(Peer).

%% Ownership flips back and forth (A -> B -> A ...) while 2 MiB stream in (paced writes): after each controlling_process/2 returns, the old owner gets no more data messages, and the pieces make up the stream.
tcp_controlling_process_flip_stress(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, true}]),
    Total = 2 * 1024 * 1024,
    Stream = rand_bytes(Total),
    Writer = spawn_link(fun() -> write_paced(Peer, Stream, 4096) end),
    {DT, _, _, _} = tags(Config),
    Self = self(),
    B = spawn_link(fun() -> flip_b(M, S, DT, Self) end),
    {Parts, Late, Flips} = flip_a(M, S, DT, B, Total, [], [], 0),
    B ! stop,
    ct:log("~p flips, late messages to a former owner: ~p", [Flips, length(Late)]),
    true = Flips >= 5,
    unlink(Writer),
    close_all(M, [S]), gen_tcp:close(Peer),
    [] = [{late, byte_size(D)} || D <- Late],
    Stream = iolist_to_binary(Parts).

-define(FLIP_MSGS, 2).
-define(FLIP_QUIET, 10).

%% A's turn: take a few messages, hand over to B, drain, watch for late ones, let B run.
flip_a(M, S, DT, B, Total, Parts, Late, Flips) ->
    Mine = take_msgs(S, DT, ?FLIP_MSGS),
    ok = M:controlling_process(S, B),
    Drained = drain(DT, S),
    Late1 = quiet_late(S, DT),
    Parts1 = [Drained, Mine | Parts],
    case iolist_size(Parts1) >= Total of
        true ->
            {lists:reverse(Parts1), Late ++ Late1, Flips};
        false ->
            B ! {your_turn, self()},
            receive
                {back, B, Theirs, LateB} ->
                    Parts2 = [Theirs | Parts1],
                    case iolist_size(Parts2) >= Total of
                        true -> {lists:reverse(Parts2), Late ++ Late1 ++ LateB, Flips + 1};
                        false -> flip_a(M, S, DT, B, Total, Parts2, Late ++ Late1 ++ LateB, Flips + 1)
                    end
            after 30000 ->
                    ct:fail(b_stuck)
            end
    end.

flip_b(M, S, DT, A) ->
    receive
        {your_turn, A} ->
            Mine = take_msgs(S, DT, ?FLIP_MSGS),
            ok = M:controlling_process(S, A),
            Drained = drain(DT, S),
            Late = quiet_late(S, DT),
            A ! {back, self(), [Mine, Drained], Late},
            flip_b(M, S, DT, A);
        stop ->
            ok
    end.

take_msgs(_S, _DT, 0) -> [];
take_msgs(S, DT, N) ->
    receive {DT, S, D} -> [D | take_msgs(S, DT, N - 1)]
    after 2000 -> []
    end.

quiet_late(S, DT) ->
    receive {DT, S, D} -> [D | quiet_late(S, DT)]
    after ?FLIP_QUIET -> []
    end.

%% Peers stream (paced) into {active, true} sockets (binary and list mode) passed back and forth between two processes: once controlling_process/2 returned and the old owner drained its mailbox, it gets no data message.
tcp_controlling_process_no_late_messages(Config) ->
    M = mod(Config),
    {DT, _, _, _} = tags(Config),
    no_late_messages(Config, true, "data messages to a former owner per connection (150 round trips each)",
                     fun(S) ->
                             Other = spawn_link(fun() -> pass_back(M, S, DT) end),
                             pass_loop(M, S, DT, Other, 150, 0)
                     end).

%% Four connections (binary, list, binary, list) opened with {active, Active},
%% each fed by a paced peer and handed to its own owner process, which runs
%% Loop(S) and returns how many data messages came late: none may.
no_late_messages(Config, Active, What, Loop) ->
    M = mod(Config),
    Self = self(),
    Runs = [begin
                {Peer, S} = raw_pair(Config, [Mode, {active, Active}]),
                %% Paced: in {active, true} nothing slows a flooding peer down, and
                %% mailboxes would grow without bound.
                Writer = spawn_link(fun() -> flood_paced(Peer, 0) end),
                Owner = spawn_link(fun() ->
                                           receive go -> ok end,
                                           Self ! {late, self(), Mode, Loop(S)}
                                   end),
                ok = M:controlling_process(S, Owner),
                Owner ! go,
                {Mode, Peer, S, Writer, Owner}
            end || Mode <- [binary, list, binary, list]],
    Late = [receive {late, O, Mode, N} -> {Mode, N} after 60000 -> ct:fail(owner_stuck) end
            || {Mode, _, _, _, O} <- Runs],
    ct:log(What ++ ": ~p", [Late]),
    [begin unlink(W), M:close(S), gen_tcp:close(P) end || {_, P, S, W, _} <- Runs],
    [] = [ML || {_, N} = ML <- Late, N > 0].

%% A gives S to B, drains, counts late messages; B gives it back and reports its own.
pass_loop(_M, _S, _DT, Other, 0, Late) ->
    unlink(Other),
    exit(Other, kill),
    Late;
pass_loop(M, S, DT, Other, N, Late) ->
    _ = take_msgs(S, DT, 2),
    _ = drain(DT, S),   % keeps mailboxes short (gen_tcp moves them on every hand-over)
    ok = M:controlling_process(S, Other),
    _ = drain(DT, S),
    LateA = length(quiet_late(S, DT)),
    Other ! {take, self()},
    receive {given_back, Other, LateB} -> ok end,
    pass_loop(M, S, DT, Other, N - 1, Late + LateA + LateB).

pass_back(M, S, DT) ->
    receive
        {take, From} ->
            _ = take_msgs(S, DT, 2),
            _ = drain(DT, S),
            ok = M:controlling_process(S, From),
            _ = drain(DT, S),
            LateB = length(quiet_late(S, DT)),
            From ! {given_back, self(), LateB},
            pass_back(M, S, DT)
    end.

%%--------------------------------------------------------------------
%% Accept inheritance
%%--------------------------------------------------------------------

%% Accepted sockets inherit active, packet and mode from the listener, and data that came with the connection is delivered.
tcp_accept_inherits_tcp_options(Config) ->
    M = mod(Config),
    {ok, L} = M:listen(0, [list, {active, true}, {packet, 2}, {ip, {127, 0, 0, 1}}]),
    {ok, Peer} = gen_tcp:connect({127, 0, 0, 1}, port(Config, L), [binary, {active, false}]),
    ok = gen_tcp:send(Peer, <<5:16, "early">>),
    timer:sleep(50),
    {ok, S} = M:accept(L, ?T),
    {ok, [{active, true}, {packet, 2}, {mode, list}]} = getopts(Config, S, [active, packet, mode]),
    "early" = data(Config, S),
    ok = gen_tcp:send(Peer, <<4:16, "late">>),
    "late" = data(Config, S),
    ok = M:send(S, "back"),
    {ok, <<4:16, "back">>} = gen_tcp:recv(Peer, 6, ?T),
    close_all(M, [S, L]), gen_tcp:close(Peer).

%% A listener in {active, N} hands N to each accepted socket, which then goes passive after N messages.
tcp_accept_inherits_active_n(Config) ->
    M = mod(Config),
    {ok, L} = M:listen(0, [binary, {active, 2}, {ip, {127, 0, 0, 1}}]),
    lists:foreach(
      fun(_) ->
              {ok, Peer} = gen_tcp:connect({127, 0, 0, 1}, port(Config, L), [binary, {active, false}]),
              {ok, S} = M:accept(L, ?T),
              {ok, [{active, 2}]} = getopts(Config, S, [active]),
              ok = gen_tcp:send(Peer, <<"a">>),
              <<"a">> = data(Config, S),
              ok = gen_tcp:send(Peer, <<"b">>),
              <<"b">> = data(Config, S),
              passive(Config, S),
              close_all(M, [S]), gen_tcp:close(Peer)
      end, [1, 2]),
    close_all(M, [L]).

%% Socket options set on the listener are found on accepted sockets: reuseaddr, keepalive, nodelay, buffers, linger, tos.
tcp_accept_inherits_sockopts(Config) ->
    M = mod(Config),
    Names = [reuseaddr, keepalive, nodelay, recbuf, sndbuf, linger, tos],
    {ok, L} = M:listen(0, [binary, {active, false}, {ip, {127, 0, 0, 1}},
                           {reuseaddr, true}, {keepalive, true}, {nodelay, true},
                           {recbuf, 32768}, {sndbuf, 65536}, {linger, {true, 7}},
                           {tos, 16}]),
    {ok, LOpts} = getopts(Config, L, Names),
    {ok, C} = gen_tcp:connect({127, 0, 0, 1}, port(Config, L), []),
    {ok, S} = M:accept(L, ?T),
    {ok, SOpts} = getopts(Config, S, Names),
    ct:log("listener ~p~naccepted ~p", [LOpts, SOpts]),
    [{reuseaddr, true}, {keepalive, true}, {nodelay, true}, {recbuf, _}, {sndbuf, _},
     {linger, {true, 7}}, {tos, 16}] = LOpts,
    LOpts = SOpts,
    close_all(M, [S, L]), gen_tcp:close(C).

%% {priority, P} set on the listener is found on accepted sockets (gen_tcp: yes; Linux itself does not copy it).
tcp_accept_inherits_priority(Config) ->
    M = mod(Config),
    {ok, L} = M:listen(0, [binary, {active, false}, {ip, {127, 0, 0, 1}}, {priority, 3}]),
    {ok, [{priority, 3}]} = getopts(Config, L, [priority]),
    {ok, C} = gen_tcp:connect({127, 0, 0, 1}, port(Config, L), []),
    {ok, S} = M:accept(L, ?T),
    Got = getopts(Config, S, [priority]),
    close_all(M, [S, L]), gen_tcp:close(C),
    {ok, [{priority, 3}]} = Got.

%%--------------------------------------------------------------------
%% Options
%%--------------------------------------------------------------------

%% setopts then getopts gives back what was set, for the layer's own options and socket options.
tcp_getopts_setopts_roundtrip(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}]),
    Opts = [{active, false}, {packet, 2}, {packet_size, 1000}, {mode, list},
            {nodelay, true}, {keepalive, true}, {reuseaddr, true}, {linger, {true, 5}},
            {send_timeout, 3000}, {priority, 2}, {tos, 8}],
    ok = setopts(Config, S, Opts),
    Names = [Name || {Name, _} <- Opts],
    {ok, Opts} = getopts(Config, S, Names),
    Opts2 = [{active, once}, {packet, raw}, {packet_size, 0}, {mode, binary},
             {nodelay, false}, {keepalive, false}, {reuseaddr, false}, {linger, {false, 0}},
             {send_timeout, infinity}, {priority, 0}, {tos, 0}],
    ok = setopts(Config, S, Opts2),
    {ok, Got2} = getopts(Config, S, Names),
    %% Turning linger off keeps the old timeout in the kernel ({false, 5}): gen_tcp shows it too.
    %% {packet, raw} reads back as {packet, 0} (ssl keeps what getopts says).
    [{packet, 0}] = [O || {packet, _} = O <- Got2],
    Opts2 = [case O of
                 {linger, {false, _}} -> {linger, {false, 0}};
                 {packet, 0} -> {packet, raw};
                 _ -> O
             end || O <- Got2],
    %% Buffer sizes: Linux doubles what is asked (and getopts shows the doubled value).
    ok = setopts(Config, S, [{recbuf, 20000}, {sndbuf, 20000}]),
    {ok, [{recbuf, 40000}, {sndbuf, 40000}]} = getopts(Config, S, [recbuf, sndbuf]),
    close_all(M, [S]), gen_tcp:close(Peer).

%% Unknown or ill-typed options: setopts gives {error, einval} and changes nothing.
tcp_setopts_invalid(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}]),
    {error, einval} = setopts(Config, S, [{packet, 3}]),
    {error, einval} = setopts(Config, S, [{active, 'maybe'}]),
    {error, einval} = setopts(Config, S, [{no_such_option, 1}]),
    {error, einval} = setopts(Config, S, [{mode, text}]),
    {ok, [{active, false}, {packet, P}, {mode, binary}]} = getopts(Config, S, [active, packet, mode]),
    true = P =:= raw orelse P =:= 0,
    {error, einval} = getopts(Config, S, [no_such_option]),
    close_all(M, [S]), gen_tcp:close(Peer).

%%--------------------------------------------------------------------
%% Volume and timing
%%--------------------------------------------------------------------

%% 4 MiB in {active, true} arrive complete and in order.
tcp_large_data_active(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, true}]),
    Data = rand_bytes(?BIG),
    Writer = spawn_link(fun() -> ok = gen_tcp:send(Peer, Data) end),
    Data = collect(Config, S, ?BIG),
    no_msg(S),
    unlink(Writer),
    close_all(M, [S]), gen_tcp:close(Peer).

%% 4 MiB in {active, 3} raw binary mode, re-armed on each passive message, arrive complete and in order, each passive message after exactly 3 data messages.
tcp_active_n_large_stream(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}]),
    Data = rand_bytes(?BIG),
    ok = setopts(Config, S, [{active, 3}]),
    Writer = spawn_link(fun() -> ok = gen_tcp:send(Peer, Data) end),
    Data = collect_rearming(Config, S, ?BIG, 3, []),
    unlink(Writer),
    close_all(M, [S]), gen_tcp:close(Peer).

%% Data messages until Len bytes; after each N-th the next message must be
%% the passive one, and the count is re-armed.
collect_rearming(Config, S, Len, N, Acc) ->
    collect_rearming(Config, S, Len, N, N, 0, Acc).

collect_rearming(_Config, _S, Len, _N, _Left, Got, Acc) when Got >= Len ->
    iolist_to_binary(lists:reverse(Acc));
collect_rearming(Config, S, Len, N, 0, Got, Acc) ->
    {_, _, _, PT} = tags(Config),
    receive
        {PT, S} -> ok;
        Other when is_tuple(Other), element(2, Other) =:= S -> ct:fail({not_passive, Got, Other})
    after ?T ->
            ct:fail({no_passive_message, Got, flush_all()})
    end,
    ok = setopts(Config, S, [{active, N}]),
    collect_rearming(Config, S, Len, N, N, Got, Acc);
collect_rearming(Config, S, Len, N, Left, Got, Acc) ->
    D = data(Config, S),
    collect_rearming(Config, S, Len, N, Left - 1, Got + byte_size(D), [D | Acc]).

%% While data streams in, {active, true} -> {active, false} -> recv -> {active, true} many times: once setopts([{active, false}]) returns no data message comes, and messages + recv results make up the stream in order.
tcp_active_false_stops_delivery_stress(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, true}]),
    Total = 2 * 1024 * 1024,
    Stream = rand_bytes(Total),
    Writer = spawn_link(fun() -> write_paced(Peer, Stream, 4096) end),
    {DT, _, _, _} = tags(Config),
    {Parts, Late, Toggles} = toggle_loop(Config, M, S, DT, Total, [], [], 0),
    ct:log("~p toggles, data messages after {active, false} returned: ~p", [Toggles, length(Late)]),
    unlink(Writer),
    close_all(M, [S]), gen_tcp:close(Peer),
    [] = [{late, byte_size(D)} || D <- Late],
    true = Toggles >= 5,
    Stream = iolist_to_binary(Parts).

toggle_loop(Config, M, S, DT, Total, Parts, Late, Toggles) ->
    Active = take_msgs(S, DT, 2),
    ok = setopts(Config, S, [{active, false}]),
    Drained = drain(DT, S),
    Late1 = quiet_late(S, DT),
    Parts1 = [Drained, Active | Parts],
    case iolist_size(Parts1) >= Total of
        true ->
            {lists:reverse(Parts1), Late ++ Late1, Toggles};
        false ->
            Passive = case M:recv(S, 0, 2000) of
                          {ok, D} -> D;
                          {error, timeout} -> <<>>
                      end,
            Parts2 = [Passive | Parts1],
            case iolist_size(Parts2) >= Total of
                true ->
                    {lists:reverse(Parts2), Late ++ Late1, Toggles + 1};
                false ->
                    ok = setopts(Config, S, [{active, true}]),
                    toggle_loop(Config, M, S, DT, Total, Parts2, Late ++ Late1, Toggles + 1)
            end
    end.

%% Peers stream (paced) into {active, true} sockets (binary and list mode, 2 connections each) whose owners flip to {active, false}: no data message may arrive once setopts returned and the mailbox was drained.
tcp_active_false_no_late_messages(Config) ->
    M = mod(Config),
    {DT, _, _, _} = tags(Config),
    no_late_messages(Config, false, "late data messages per connection (150 flips each)",
                     fun(S) -> late_loop(Config, M, S, DT, 150, 0) end).

late_loop(_Config, _M, _S, _DT, 0, Late) ->
    Late;
late_loop(Config, M, S, DT, N, Late) ->
    ok = setopts(Config, S, [{active, true}]),
    _ = take_msgs(S, DT, 3),
    ok = setopts(Config, S, [{active, false}]),
    _ = drain(DT, S),
    Late1 = length(quiet_late(S, DT)),
    {ok, _} = M:recv(S, 0, ?T),
    late_loop(Config, M, S, DT, N - 1, Late + Late1).

flood_paced(Peer, I) ->
    case I band 3 of 0 -> timer:sleep(1); _ -> ok end,
    case gen_tcp:send(Peer, binary:copy(<<I>>, 8192)) of
        ok -> flood_paced(Peer, (I + 1) band 255);
        {error, _} -> ok
    end.

%% A 4 MiB {packet, 4} packet sent with send/2 arrives as one active message.
tcp_large_packet_active(Config) ->
    M = mod(Config),
    {C, S} = pair(Config, [binary, {active, false}, {packet, 4}]),
    ok = setopts(Config, S, [{active, once}]),
    Data = rand_bytes(?BIG),
    Writer = spawn_link(fun() -> ok = M:send(C, Data) end),
    Data = data(Config, S),
    unlink(Writer),
    close_all(M, [C, S]).

%% Data that arrived while passive is delivered as soon as setopts([{active, once}]) is called.
tcp_data_before_active_once(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}]),
    ok = gen_tcp:send(Peer, <<"waiting">>),
    timer:sleep(100),
    ok = setopts(Config, S, [{active, once}]),
    {DT, _, _, _} = tags(Config),
    receive {DT, S, <<"waiting">>} -> ok
    after ?T -> ct:fail({not_delivered_at_once, flush_all()})
    end,
    close_all(M, [S]), gen_tcp:close(Peer).

%% shutdown(S, write): the peer sees end of stream, and S still receives.
tcp_shutdown_write_half_close(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}]),
    ok = M:send(S, <<"req">>),
    ok = M:shutdown(S, write),
    {ok, <<"req">>} = gen_tcp:recv(Peer, 3, ?T),
    {error, closed} = gen_tcp:recv(Peer, 0, ?T),
    ok = gen_tcp:send(Peer, <<"resp">>),
    ok = gen_tcp:close(Peer),
    ok = setopts(Config, S, [{active, true}]),
    <<"resp">> = collect(Config, S, 4),
    closed(Config, S),
    close_all(M, [S]).

%% accept with a timeout and nobody connecting is {error, timeout}; connecting to a closed port is {error, econnrefused}.
tcp_accept_timeout_and_refused(Config) ->
    M = mod(Config),
    {ok, L} = M:listen(0, [binary, {active, false}, {ip, {127, 0, 0, 1}}]),
    Port = port(Config, L),
    {error, timeout} = M:accept(L, 100),
    {error, timeout} = M:accept(L, 0),
    ok = M:close(L),
    {error, econnrefused} = M:connect({127, 0, 0, 1}, Port, [binary], ?T).

%% In {packet, N} mode recv(S, Length > 0) is {error, einval} (Length is for raw mode only); recv(S, 0) gets whole packets.
tcp_packet_recv_length_einval(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}, {packet, 2}]),
    ok = gen_tcp:send(Peer, <<6:16, "packet", 2:16, "xy">>),
    {error, einval} = M:recv(S, 3, ?T),
    {ok, <<"packet">>} = M:recv(S, 0, ?T),
    {ok, <<"xy">>} = M:recv(S, 0, ?T),
    close_all(M, [S]), gen_tcp:close(Peer).

%% Packets already read (framed but not yet delivered) go out at once when the socket turns active.
tcp_pending_packets_delivered_on_activate(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}, {packet, 2}]),
    ok = gen_tcp:send(Peer, <<1:16, "a", 1:16, "b", 1:16, "c">>),
    {ok, <<"a">>} = M:recv(S, 0, ?T),
    ok = setopts(Config, S, [{active, once}]),
    <<"b">> = data(Config, S),
    no_msg(S),
    {ok, <<"c">>} = M:recv(S, 0, ?T),
    close_all(M, [S]), gen_tcp:close(Peer).

%% {active, once} with nothing there, then {active, false}: a passive recv gets the next data.
tcp_active_once_then_passive_recv(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}]),
    ok = setopts(Config, S, [{active, once}]),
    ok = setopts(Config, S, [{active, false}]),
    Self = self(),
    spawn_link(fun() -> timer:sleep(100), ok = gen_tcp:send(Peer, <<"now">>), Self ! sent end),
    {ok, <<"now">>} = M:recv(S, 3, ?T),
    receive sent -> ok end,
    no_msg(S),
    %% And the other way round: a timed-out passive recv, then active once.
    {error, timeout} = M:recv(S, 0, 50),
    ok = setopts(Config, S, [{active, once}]),
    ok = gen_tcp:send(Peer, <<"then">>),
    <<"then">> = data(Config, S),
    close_all(M, [S]), gen_tcp:close(Peer).

%% A peer reset in active mode is {Closed, S} (gen_tcp's default show_econnreset false: no error message).
tcp_peer_reset_active(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, true}]),
    ok = inet:setopts(Peer, [{linger, {true, 0}}]),
    ok = gen_tcp:close(Peer),
    {_, CT, _, _} = tags(Config),
    receive
        Msg when element(2, Msg) =:= S -> {CT, S} = Msg
    after ?T -> ct:fail(no_message)
    end,
    no_msg(S),
    close_all(M, [S]).

%% A peer reset seen by a passive recv is {error, closed} (gen_tcp's default show_econnreset false).
tcp_peer_reset_passive(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}]),
    ok = inet:setopts(Peer, [{linger, {true, 0}}]),
    ok = gen_tcp:close(Peer),
    timer:sleep(50),
    {error, closed} = M:recv(S, 0, ?T),
    close_all(M, [S]).

%% Closing an active socket ourselves sends us no closed message.
tcp_close_sends_no_message(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, true}]),
    ok = M:close(S),
    no_msg(S),
    {error, closed} = gen_tcp:recv(Peer, 0, ?T),
    gen_tcp:close(Peer).

%% When the owner exits the socket is closed: the peer sees end of stream.
tcp_owner_exit_closes(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, true}]),
    Self = self(),
    Owner = spawn(fun() -> receive go -> Self ! ready, receive stop -> ok end end end),
    ok = M:controlling_process(S, Owner),
    Owner ! go,
    receive ready -> ok end,
    Ref = monitor(process, Owner),
    Owner ! stop,
    receive {'DOWN', Ref, process, Owner, _} -> ok end,
    {error, closed} = gen_tcp:recv(Peer, 0, ?T),
    gen_tcp:close(Peer).

%% {send_timeout, T}: send to a peer that doesn't read returns {error, timeout} after about T.
tcp_send_timeout(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}, {send_timeout, 200}, {sndbuf, 16384}]),
    ok = inet:setopts(Peer, [{recbuf, 16384}]),
    Chunk = binary:copy(<<"z">>, 65536),
    T0 = erlang:monotonic_time(millisecond),
    {error, timeout} = send_until_error(M, S, Chunk, 1000),
    Elapsed = erlang:monotonic_time(millisecond) - T0,
    true = Elapsed >= 200,
    true = Elapsed < ?T,
    close_all(M, [S]), gen_tcp:close(Peer).

send_until_error(_M, _S, _Chunk, 0) ->
    never_blocked;
send_until_error(M, S, Chunk, N) ->
    case M:send(S, Chunk) of
        ok -> send_until_error(M, S, Chunk, N - 1);
        Error -> Error
    end.

%% After {Error, S, emsgsize} in active mode the socket is closed, as gen_tcp: {Closed, S} follows and send fails.
tcp_packet_size_active_then_closed(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, true}, {packet, 2}, {packet_size, 10}]),
    ok = gen_tcp:send(Peer, <<100:16, (binary:copy(<<"y">>, 100))/binary>>),
    {_, _, ErrorTag, _} = tags(Config),
    receive {ErrorTag, S, emsgsize} -> ok after ?T -> ct:fail(no_emsgsize) end,
    closed(Config, S),
    {error, closed} = M:send(S, <<"x">>),
    close_all(M, [S]), gen_tcp:close(Peer).

%% {packet, line} with {packet_size, N}: a line longer than N is {error, emsgsize}, as gen_tcp.
tcp_packet_line_too_long(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}, {packet, line}, {packet_size, 5}]),
    ok = gen_tcp:send(Peer, <<"abc\n">>),
    {ok, <<"abc\n">>} = M:recv(S, 0, ?T),
    ok = gen_tcp:send(Peer, <<"abcdefghij\nxy\n">>),
    {error, emsgsize} = M:recv(S, 0, ?T),
    close_all(M, [S]), gen_tcp:close(Peer).

%% {Closed, S} in active mode means the socket is closed (exit_on_close defaults to true): send is {error, closed}, setopts fails, no second closed message.
tcp_closed_message_closes_socket(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, true}]),
    ok = gen_tcp:close(Peer),
    closed(Config, S),
    {error, closed} = M:send(S, <<"x">>),
    {error, _} = setopts(Config, S, [{active, once}]),
    no_msg(S),
    close_all(M, [S]).

%% Sending to a peer that has closed ends in {error, closed} (gen_tcp maps EPIPE/ECONNRESET to closed).
tcp_send_after_peer_close(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}]),
    ok = gen_tcp:close(Peer),
    timer:sleep(50),
    {error, closed} = send_until_error(M, S, <<"x">>, 10, 20),
    close_all(M, [S]).

send_until_error(_M, _S, _Data, 0, _Sleep) ->
    never_failed;
send_until_error(M, S, Data, N, Sleep) ->
    case M:send(S, Data) of
        ok -> timer:sleep(Sleep), send_until_error(M, S, Data, N - 1, Sleep);
        Error -> Error
    end.

%% After close/1 every call on the socket fails: send and recv with {error, closed}, getopts, setopts and controlling_process with an error.
tcp_ops_after_close(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}]),
    ok = M:close(S),
    {error, closed} = M:send(S, <<"x">>),
    {error, closed} = M:recv(S, 0, 100),
    {error, _} = getopts(Config, S, [active]),
    {error, _} = setopts(Config, S, [{packet, 2}]),
    {error, _} = setopts(Config, S, [{active, once}]),
    {error, _} = M:controlling_process(S, self()),
    no_msg(S),
    gen_tcp:close(Peer).

%%--------------------------------------------------------------------
%% Packet limits, line_delimiter, listeners, option checks
%%--------------------------------------------------------------------

%% {packet, 4}: a header whose frame can't fit a C int (length 2^31 - 4 and up) is {error, emsgsize} at once, without packet_size, and closes the socket; a length just below waits for its bytes.
tcp_packet_header_too_large_passive(Config) ->
    M = mod(Config),
    lists:foreach(
      fun(Len) ->
              {Peer, S} = raw_pair(Config, [binary, {active, false}, {packet, 4}]),
              ok = gen_tcp:send(Peer, <<Len:32, "abc">>),
              {error, emsgsize} = M:recv(S, 0, ?T),
              %% exit_on_close: closed, the peer sees it (later calls: gen_tcp
              %% enotconn, nifsock_tcp closed; neither waits)
              {error, closed} = gen_tcp:recv(Peer, 0, ?T),
              {error, E} = M:recv(S, 0, ?T),
              true = E =:= closed orelse E =:= enotconn,
              {error, _} = M:send(S, <<"x">>),
              close_all(M, [S]), gen_tcp:close(Peer)
      end, [16#7FFFFFFC, 16#80000000, 16#FFFFFFFF]),
    {Peer, S} = raw_pair(Config, [binary, {active, false}, {packet, 4}]),
    ok = gen_tcp:send(Peer, <<16#7FFFFFFB:32, "abc">>),
    {error, timeout} = M:recv(S, 0, ?QUIET),
    ok = M:send(S, <<"x">>),
    {ok, <<1:32, "x">>} = gen_tcp:recv(Peer, 5, ?T),
    close_all(M, [S]), gen_tcp:close(Peer).

%% A header too large for any packet (4 bytes) or for packet_size (1 byte) in {active, true | once | N}: {Error, S, emsgsize}, then {Closed, S}, and the socket is closed.
tcp_packet_header_too_large_active(Config) ->
    M = mod(Config),
    {_, _, ErrorTag, _} = tags(Config),
    lists:foreach(
      fun({Active, Opts, Bad}) ->
              {Peer, S} = raw_pair(Config, [binary, {active, false} | Opts]),
              ok = gen_tcp:send(Peer, Bad),
              ok = setopts(Config, S, [{active, Active}]),
              receive
                  {ErrorTag, S, emsgsize} -> ok
              after ?T ->
                      ct:fail({no_emsgsize, Active, Opts, flush_all()})
              end,
              closed(Config, S),
              {error, closed} = M:send(S, <<"x">>),
              {error, closed} = gen_tcp:recv(Peer, 0, ?T),
              no_msg(S),
              close_all(M, [S]), gen_tcp:close(Peer)
      end, [{A, O, B} || A <- [true, once, 2],
                         {O, B} <- [{[{packet, 4}], <<16#80000000:32, "abc">>},
                                    {[{packet, 1}, {packet_size, 3}], <<4, "abcd">>}]]).

%% With {exit_on_close, false} a too-large packet leaves the socket open: its bytes (and what came with them) are dropped, what comes later is read, send works; active mode still gets {Error, S, emsgsize} and {Closed, S}.
tcp_packet_too_large_exit_on_close_false(Config) ->
    M = mod(Config),
    Opts = [binary, {packet, 2}, {packet_size, 10}, {exit_on_close, false}],
    Bad = <<11:16, "abc">>,
    {Peer, S} = raw_pair(Config, [{active, false} | Opts]),
    ok = gen_tcp:send(Peer, <<Bad/binary, 2:16, "ok">>),
    {error, emsgsize} = M:recv(S, 0, ?T),
    {error, timeout} = M:recv(S, 0, ?QUIET),
    ok = gen_tcp:send(Peer, <<2:16, "ok">>),
    {ok, <<"ok">>} = M:recv(S, 0, ?T),
    ok = M:send(S, <<"x">>),
    {ok, <<1:16, "x">>} = gen_tcp:recv(Peer, 3, ?T),
    close_all(M, [S]), gen_tcp:close(Peer),
    {_, _, ErrorTag, _} = tags(Config),
    {Peer2, S2} = raw_pair(Config, [{active, true} | Opts]),
    ok = gen_tcp:send(Peer2, Bad),
    receive {ErrorTag, S2, emsgsize} -> ok after ?T -> ct:fail({no_emsgsize, flush_all()}) end,
    closed(Config, S2),
    ok = M:send(S2, <<"x">>),
    {ok, <<1:16, "x">>} = gen_tcp:recv(Peer2, 3, ?T),
    close_all(M, [S2]), gen_tcp:close(Peer2).

%% {packet, line}: a line longer than `buffer' (set on the listener, which accepted sockets inherit) comes in pieces of `buffer' bytes, passive and active.
tcp_packet_line_longer_than_buffer(Config) ->
    M = mod(Config),
    Lines = <<"0123456789abcdefghijklmn\nxy\n">>,
    Pieces = [<<"0123456789">>, <<"abcdefghij">>, <<"klmn\n">>, <<"xy\n">>],
    {Peer, S} = raw_pair(Config, [binary, {active, false}, {packet, line}, {buffer, 10}]),
    {ok, [{buffer, 10}]} = getopts(Config, S, [buffer]),
    ok = gen_tcp:send(Peer, Lines),
    Pieces = [begin {ok, P} = M:recv(S, 0, ?T), P end || _ <- Pieces],
    ok = setopts(Config, S, [{active, true}]),
    ok = gen_tcp:send(Peer, Lines),
    Pieces = [data(Config, S) || _ <- Pieces],
    no_msg(S),
    close_all(M, [S]), gen_tcp:close(Peer).

%% {packet, line} with packet_size: more than packet_size bytes without a delimiter, or a line longer than packet_size, is emsgsize, packet_size bytes wait; with a buffer below packet_size the limit is never reached (pieces).
tcp_packet_line_size_limit(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}, {packet, line}, {packet_size, 5}]),
    ok = gen_tcp:send(Peer, <<"abcde">>),
    {error, timeout} = M:recv(S, 0, ?QUIET),
    ok = gen_tcp:send(Peer, <<"\n">>),
    {error, emsgsize} = M:recv(S, 0, ?T),
    close_all(M, [S]), gen_tcp:close(Peer),
    {Peer2, S2} = raw_pair(Config, [binary, {active, false}, {packet, line}, {packet_size, 5}]),
    ok = gen_tcp:send(Peer2, <<"abcd\n">>),
    {ok, <<"abcd\n">>} = M:recv(S2, 0, ?T),
    ok = gen_tcp:send(Peer2, <<"abcdef">>),
    {error, emsgsize} = M:recv(S2, 0, ?T),
    close_all(M, [S2]), gen_tcp:close(Peer2),
    {Peer3, S3} = raw_pair(Config, [binary, {active, false}, {packet, line},
                                    {packet_size, 5}, {buffer, 3}]),
    ok = gen_tcp:send(Peer3, <<"abcdefgh\n">>),
    [{ok, <<"abc">>}, {ok, <<"def">>}, {ok, <<"gh\n">>}] = [M:recv(S3, 0, ?T) || _ <- [1, 2, 3]],
    close_all(M, [S3]), gen_tcp:close(Peer3).

%% {line_delimiter, C} (setopts or connect): lines end at C, in passive and active mode, list mode too; it survives {packet, raw}; an integer above 255 counts by its low byte, as inet.
tcp_line_delimiter(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}, {packet, line}]),
    ok = setopts(Config, S, [{line_delimiter, $;}]),
    ok = gen_tcp:send(Peer, <<"ab;cd\nef;gh">>),
    {ok, <<"ab;">>} = M:recv(S, 0, ?T),
    {ok, <<"cd\nef;">>} = M:recv(S, 0, ?T),
    ok = setopts(Config, S, [{packet, raw}]),
    {ok, <<"gh">>} = M:recv(S, 0, ?T),
    ok = setopts(Config, S, [{packet, line}, {active, true}]),
    ok = gen_tcp:send(Peer, <<"x;y\n;">>),
    <<"x;">> = data(Config, S),
    <<"y\n;">> = data(Config, S),
    ok = setopts(Config, S, [{line_delimiter, 256 + $|}, list]),
    ok = gen_tcp:send(Peer, <<"12|34|">>),
    "12|" = data(Config, S),
    "34|" = data(Config, S),
    no_msg(S),
    close_all(M, [S]), gen_tcp:close(Peer),
    {ok, L} = M:listen(0, [binary, {active, false}, {ip, {127, 0, 0, 1}}]),
    {ok, C} = M:connect({127, 0, 0, 1}, port(Config, L), [binary, {active, false},
                                                         {packet, line}, {line_delimiter, 0}], ?T),
    {ok, A} = M:accept(L, ?T),
    ok = M:send(A, <<"a", 0, "b", 0>>),
    [{ok, <<"a", 0>>}, {ok, <<"b", 0>>}] = [M:recv(C, 0, ?T) || _ <- [1, 2]],
    close_all(M, [C, A, L]).

%% line_delimiter as a listen option, on accepted sockets and in getopts: nifsock_tcp takes it in listen, accepted sockets inherit it and getopts reads it; OTP 25's gen_tcp exits with badarg in listen, does not inherit it and getopts says einval.
tcp_line_delimiter_listen_getopts(Config) ->
    M = mod(Config),
    Opts = [binary, {active, false}, {packet, line}, {ip, {127, 0, 0, 1}}],
    case M of
        gen_tcp ->
            {'EXIT', badarg} = (catch M:listen(0, [{line_delimiter, $;} | Opts])),
            {ok, L} = M:listen(0, Opts),
            ok = setopts(Config, L, [{line_delimiter, $;}]),
            {error, einval} = getopts(Config, L, [line_delimiter]),
            Expect = [{ok, <<"ab;cd\n">>}];
        _ ->
            {ok, L} = M:listen(0, [{line_delimiter, $;} | Opts]),
            {ok, [{line_delimiter, $;}]} = getopts(Config, L, [line_delimiter]),
            Expect = [{ok, <<"ab;">>}, {ok, <<"cd\n;">>}]
    end,
    {ok, Peer} = gen_tcp:connect({127, 0, 0, 1}, port(Config, L), [binary, {active, false}]),
    {ok, S} = M:accept(L, ?T),
    ok = gen_tcp:send(Peer, <<"ab;cd\n;">>),
    Expect = [M:recv(S, 0, ?T) || _ <- Expect],
    case M of
        gen_tcp -> {error, einval} = getopts(Config, S, [line_delimiter]);
        _ -> {ok, [{line_delimiter, $;}]} = getopts(Config, S, [line_delimiter])
    end,
    close_all(M, [S, L]), gen_tcp:close(Peer).

%% shutdown/2 on a listening socket is {error, enotconn} for read, write and read_write, and the listener goes on accepting; once it is closed, shutdown is {error, closed}.
tcp_shutdown_listener_enotconn(Config) ->
    M = mod(Config),
    {ok, L} = M:listen(0, [binary, {active, false}, {ip, {127, 0, 0, 1}}]),
    [{error, enotconn} = M:shutdown(L, How) || How <- [read, write, read_write]],
    {ok, Peer} = gen_tcp:connect({127, 0, 0, 1}, port(Config, L), [binary, {active, false}], ?T),
    {ok, S} = M:accept(L, ?T),
    ok = M:send(S, <<"up">>),
    {ok, <<"up">>} = gen_tcp:recv(Peer, 2, ?T),
    close_all(M, [S, L]), gen_tcp:close(Peer),
    %% once closed, a listener's shutdown is {error, closed}
    {error, closed} = M:shutdown(L, read_write).

%% {active, N} on a listener adds to the listener's own count: 2 - 3 makes it passive (with {Passive, L}) and accepted sockets passive; 3 + 2 is 5 for it and them; 5 + 0 stays 5 without a message.
tcp_active_n_listener(Config) ->
    M = mod(Config),
    Accepted = fun(L) ->
                       {ok, Peer} = gen_tcp:connect({127, 0, 0, 1}, port(Config, L), [], ?T),
                       {ok, S} = M:accept(L, ?T),
                       {ok, [A]} = getopts(Config, S, [active]),
                       close_all(M, [S]), gen_tcp:close(Peer),
                       A
               end,
    {ok, L} = M:listen(0, [binary, {active, 2}, {ip, {127, 0, 0, 1}}]),
    ok = setopts(Config, L, [{active, -3}]),
    passive(Config, L),
    {ok, [{active, false}]} = getopts(Config, L, [active]),
    {active, false} = Accepted(L),
    ok = setopts(Config, L, [{active, 3}]),
    ok = setopts(Config, L, [{active, 2}]),
    {ok, [{active, 5}]} = getopts(Config, L, [active]),
    {active, 5} = Accepted(L),
    ok = setopts(Config, L, [{active, 0}]),
    {ok, [{active, 5}]} = getopts(Config, L, [active]),
    {error, einval} = setopts(Config, L, [{active, 32767}]),
    {ok, [{active, 5}]} = getopts(Config, L, [active]),
    no_msg(L),
    close_all(M, [L]).

%% An option inet refuses (unknown, or a value of the wrong type, raw included) makes listen and connect exit with badarg and setopts return {error, einval}.
tcp_options_bad_type_exit(Config) ->
    M = mod(Config),
    {ok, L} = M:listen(0, [binary, {active, false}, {ip, {127, 0, 0, 1}}, {backlog, 100}]),
    Port = port(Config, L),
    {ok, C} = M:connect({127, 0, 0, 1}, Port, [binary, {active, false}], ?T),
    Bad = [{active, 'maybe'}, {active, 40000}, bogus, {bogus, 1}, {packet, 3}, {packet, x},
           {packet_size, -1}, {packet_size, a}, {mode, text}, {reuseaddr, 1}, {nodelay, yes},
           {keepalive, 1}, {ipv6_v6only, 1}, {buffer, a}, {recbuf, a}, {priority, a}, {tos, a},
           {linger, {true, a}}, {linger, x}, {send_timeout, -1}, {send_timeout, a},
           {exit_on_close, 1}, {send_timeout_close, 1}, {delay_send, 1}, {high_watermark, a},
           {low_watermark, a}, {header, a}, {deliver, a}, {show_econnreset, a},
           {line_delimiter, a}, {raw, x, 3, <<1:32/native>>}, {raw, 1, x, <<>>}, {raw, 1, 2, a},
           {raw, 1, 2, 3}, {raw, 1, 2, [1]}, {ip, bad}, {ifaddr, bad}, {port, a}, {port, 70000}],
    Got = [{Opt,
            catch M:listen(0, [{ip, {127, 0, 0, 1}}, Opt]),
            catch M:connect({127, 0, 0, 1}, Port, [Opt], ?T),
            setopts(Config, C, [Opt])} || Opt <- Bad],
    [] = [G || {Opt, _, _, _} = G <- Got, G =/= {Opt, {'EXIT', badarg}, {'EXIT', badarg},
                                                 {error, einval}}],
    close_all(M, [C, L]).

%% Values inet takes stay taken: a binary raw option, {buffer, 0} (as 1), any integer line_delimiter.
tcp_options_good_values_taken(Config) ->
    M = mod(Config),
    Raw = {raw, 1, 2, <<1:32/native>>},       % SOL_SOCKET, SO_REUSEADDR
    {ok, L} = M:listen(0, [binary, {active, false}, {ip, {127, 0, 0, 1}}, Raw, {buffer, 0}]),
    {ok, [{reuseaddr, true}, {buffer, 1}]} = getopts(Config, L, [reuseaddr, buffer]),
    {ok, C} = M:connect({127, 0, 0, 1}, port(Config, L), [Raw, {line_delimiter, 256}], ?T),
    ok = setopts(Config, C, [Raw, {buffer, -5}, {line_delimiter, -1}]),
    {ok, [{buffer, 1}]} = getopts(Config, C, [buffer]),
    close_all(M, [C, L]).

%% Options only listen and connect take ({ip, _}, {port, _}, {backlog, _}, inet, {tcp_module, _}) make setopts return {error, einval}.
tcp_setopts_creation_only_einval(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}]),
    [{error, einval} = setopts(Config, S, [Opt])
     || Opt <- [{ip, {127, 0, 0, 1}}, {ifaddr, {127, 0, 0, 1}}, {port, 0}, {backlog, 5}, inet,
                {tcp_module, inet_tcp}]],
    close_all(M, [S]), gen_tcp:close(Peer).

%% A port outside 0..65535 or not an integer, or an address tuple that is no address, makes listen and connect exit (gen_tcp: badarg, or function_clause for connect's port range).
tcp_bad_port_or_address_exit(Config) ->
    M = mod(Config),
    {ok, L} = M:listen(0, [binary, {active, false}, {ip, {127, 0, 0, 1}}]),
    Port = port(Config, L),
    Exits = fun(F) -> try F() of R -> {returned, R} catch exit:_ -> exit end end,
    [exit = Exits(fun() -> M:listen(P, []) end) || P <- [-1, 65536, 70000, a]],
    [exit = Exits(fun() -> M:connect({127, 0, 0, 1}, P, [], ?T) end) || P <- [-1, 70000, a]],
    exit = Exits(fun() -> M:connect({1, 2, 3}, Port, [], ?T) end),
    exit = Exits(fun() -> M:connect({127, 0, 0, 256}, Port, [], ?T) end),
    close_all(M, [L]).

%% gen_tcp's own options, send timeouts, close and hand-over
%%--------------------------------------------------------------------

%% A fresh listener, connected and accepted socket read gen_tcp's defaults for the options the layer keeps itself (header, delay_send, the watermarks, send_timeout_close, show_econnreset, deliver...).
tcp_getopts_layer_defaults(Config) ->
    M = mod(Config),
    {ok, L} = M:listen(0, [binary, {active, false}, {ip, {127, 0, 0, 1}}]),
    {ok, C} = M:connect({127, 0, 0, 1}, port(Config, L), [binary, {active, false}], ?T),
    {ok, S} = M:accept(L, ?T),
    Names = [N || {N, _} <- ?LAYER_DEFAULTS],
    [{X, {ok, ?LAYER_DEFAULTS}} = {X, getopts(Config, X, Names)} || X <- [L, C, S]],
    close_all(M, [C, S, L]).

%% Every option setopts takes reads back from getopts with the value set (one unknown name would fail the whole call); listen/connect-only options are {error, einval}.
tcp_getopts_reads_every_setopt(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}]),
    Opts = [{header, 2}, {delay_send, true}, {high_watermark, 100000}, {low_watermark, 50000},
            {high_msgq_watermark, 100000}, {low_msgq_watermark, 5000},
            {send_timeout_close, true}, {show_econnreset, true}, {exit_on_close, false},
            {send_timeout, 1000}, {packet, 2}, {packet_size, 100}, {mode, list},
            {keepalive, true}, {nodelay, true}, {reuseaddr, true}, {dontroute, true},
            {nopush, true}, {priority, 3}, {tos, 8}, {ttl, 33}, {linger, {true, 3}},
            {buffer, 4000}, {active, once}, {deliver, port}],
    [{O, ok} = {O, setopts(Config, S, [O])} || O <- Opts],
    Names = [N || {N, _} <- Opts],
    {ok, Opts} = getopts(Config, S, Names),
    %% raw options read back as the bytes the kernel has (TCP_NODELAY here)
    Raw = {raw, 6, 1, <<0:32/native>>},
    ok = setopts(Config, S, [Raw]),
    {ok, [Raw]} = getopts(Config, S, [{raw, 6, 1, 4}]),
    case setopts(Config, S, [{bind_to_device, <<"lo">>}]) of
        ok -> {ok, [{bind_to_device, <<"lo">>}]} = getopts(Config, S, [bind_to_device]);
        {error, eperm} -> ok
    end,
    [{O, {error, einval}} = {O, setopts(Config, S, [O])}
     || O <- [inet, inet6, local, {ip, {127, 0, 0, 1}}, {ifaddr, {127, 0, 0, 1}}, {port, 0},
              {backlog, 5}, {tcp_module, inet_tcp}]],
    close_all(M, [S]), gen_tcp:close(Peer).

%% The watermark pairs follow inet_drv's rules: a high set below the low lowers the low, a low set above the high raises the high; values are C ints: a negative send-queue one is 0, a message-queue one of 0 or -1 is {error, einval}, one above 2^31-1 is 2^31-1.
tcp_watermarks_move_together(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}]),
    Get = fun() ->
                  {ok, V} = getopts(Config, S, [high_watermark, low_watermark,
                                                high_msgq_watermark, low_msgq_watermark]),
                  [X || {_, X} <- V]
          end,
    ok = setopts(Config, S, [{high_watermark, 100}]),
    [100, 100, 8192, 4096] = Get(),
    ok = setopts(Config, S, [{low_watermark, 20000}]),
    [20000, 20000, 8192, 4096] = Get(),
    ok = setopts(Config, S, [{low_watermark, 5}]),
    [20000, 5, 8192, 4096] = Get(),
    ok = setopts(Config, S, [{high_watermark, -5}]),
    [0, 0, 8192, 4096] = Get(),
    ok = setopts(Config, S, [{high_watermark, 16#7fffffff}]),
    [16#7fffffff, 0, 8192, 4096] = Get(),
    ok = setopts(Config, S, [{high_watermark, 16#80000000}]),
    [0, 0, 8192, 4096] = Get(),
    ok = setopts(Config, S, [{high_msgq_watermark, 1}]),
    [0, 0, 1, 1] = Get(),
    ok = setopts(Config, S, [{low_msgq_watermark, 200}]),
    [0, 0, 200, 200] = Get(),
    {error, einval} = setopts(Config, S, [{low_msgq_watermark, 0}]),
    {error, einval} = setopts(Config, S, [{high_msgq_watermark, -1}]),
    [0, 0, 200, 200] = Get(),
    ok = setopts(Config, S, [{high_msgq_watermark, 16#80000000}]),
    [0, 0, 16#7fffffff, 200] = Get(),
    %% one setopts call applies its options last to first, as inet:setopts
    ok = setopts(Config, S, [{low_watermark, 50}, {high_watermark, 30}]),
    [50, 50, 16#7fffffff, 200] = Get(),
    close_all(M, [S]), gen_tcp:close(Peer).

%% An accepted socket inherits the listener's gen_tcp-layer options (Ranch's tcp_inherit_options: nodelay and send_timeout_close, and the rest).
tcp_accept_inherits_layer_options(Config) ->
    M = mod(Config),
    Opts = [{header, 2}, {delay_send, true}, {high_watermark, 100000}, {low_watermark, 50000},
            {high_msgq_watermark, 100000}, {low_msgq_watermark, 5000},
            {send_timeout_close, true}, {show_econnreset, true}, {deliver, port},
            {exit_on_close, false}, {nodelay, false}],
    {ok, L} = M:listen(0, [binary, {active, false}, {ip, {127, 0, 0, 1}} | Opts]),
    {ok, C} = gen_tcp:connect({127, 0, 0, 1}, port(Config, L), [], ?T),
    {ok, S} = M:accept(L, ?T),
    Names = [N || {N, _} <- Opts],
    {ok, Opts} = getopts(Config, L, Names),
    {ok, Opts} = getopts(Config, S, Names),
    {ok, [{nodelay, false}, {send_timeout_close, false}]} =
        begin
            {ok, L2} = M:listen(0, [binary, {active, false}, {ip, {127, 0, 0, 1}},
                                    {nodelay, false}, {send_timeout_close, false}]),
            {ok, C2} = gen_tcp:connect({127, 0, 0, 1}, port(Config, L2), [], ?T),
            {ok, S2} = M:accept(L2, ?T),
            R = getopts(Config, S2, [nodelay, send_timeout_close]),
            close_all(M, [S2, L2]), gen_tcp:close(C2),
            R
        end,
    close_all(M, [S, L]), gen_tcp:close(C).

%% {header, N} in binary mode: a packet of N bytes or more comes as [B1, ..., BN | Rest], a shorter one as a plain list, passive and active, framed or raw; list mode is unaffected.
tcp_header_delivery(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}, {header, 3}]),
    ok = gen_tcp:send(Peer, <<"abcdef">>),
    {ok, [$a, $b, $c | <<"def">>]} = M:recv(S, 6, ?T),
    ok = gen_tcp:send(Peer, <<"xy">>),
    {ok, "xy"} = M:recv(S, 2, ?T),
    ok = gen_tcp:send(Peer, <<"xyz">>),
    {ok, [$x, $y, $z | <<>>]} = M:recv(S, 3, ?T),
    ok = setopts(Config, S, [{active, once}]),
    ok = gen_tcp:send(Peer, <<"ghijk">>),
    [$g, $h, $i | <<"jk">>] = data(Config, S),
    ok = setopts(Config, S, [{packet, 2}, {header, 2}]),
    ok = gen_tcp:send(Peer, <<3:16, "abc", 1:16, "z">>),
    {ok, [$a, $b | <<"c">>]} = M:recv(S, 0, ?T),
    {ok, "z"} = M:recv(S, 0, ?T),
    ok = setopts(Config, S, [list]),
    ok = gen_tcp:send(Peer, <<3:16, "abc">>),
    {ok, "abc"} = M:recv(S, 0, ?T),
    close_all(M, [S]), gen_tcp:close(Peer).

%% {active, once}: by the time the owner has the data message the socket is passive, at once: getopts says {active, false} and recv is served (here: times out), never einval. 3000 rounds, each with the deliverer (pump, readiness port) possibly still in its call on the other scheduler (a CI pump pass once caught recv answering einval there).
tcp_once_message_then_passive(Config) ->
    M = mod(Config),
    {DT, _, _, _} = tags(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}, {packet, 2}]),
    Round = fun(I) ->
                    ok = setopts(Config, S, [{active, once}]),
                    ok = gen_tcp:send(Peer, <<2:16, I:16>>),
                    ok = spin_for({DT, S, <<I:16>>}, erlang:monotonic_time(millisecond) + ?T),
                    {I, {ok, [{active, false}]}} = {I, getopts(Config, S, [active])},
                    {I, {error, timeout}} = {I, M:recv(S, 0, 0)}
            end,
    lists:foreach(Round, lists:seq(1, 3000)),
    close_all(M, [S]), gen_tcp:close(Peer).

%% {Closed, S} in active mode with exit_on_close (the default): by the time the owner has the message the socket is closed, at once, as gen_tcp's port is: send is {error, closed}, setopts fails. 1000 connections, the peer closing after the accept (so the end of the stream is delivered by the pump or the readiness port, not inside the accept call), the owner polling its mailbox so it runs while the deliverer may still be in its call on the other scheduler.
tcp_closed_message_then_closed(Config) ->
    {M, CT, L, Port} = active_listener(Config),
    Round = fun(I) ->
                    S = accepted_peer_closed(M, L, Port),
                    ok = spin_for({CT, S}, erlang:monotonic_time(millisecond) + ?T),
                    ok = closed_send(M, I, M:send(S, <<"x">>)),
                    {I, {error, _}} = {I, setopts(Config, S, [{active, once}])},
                    ok = M:close(S)
            end,
    lists:foreach(Round, lists:seq(1, 1000)),
    ok = M:close(L).

%% A send after the closed message: {error, closed}. gen_tcp (the reference
%% group) also answers {error, einval} when its port is already gone:
%% prim_inet:send/3 turns port_command's badarg into einval (a CI run on
%% 2026-12-06 met it once in 1000 rounds); nifsock_tcp must say closed.
closed_send(_, _, {error, closed}) -> ok;
closed_send(gen_tcp, _, {error, einval}) -> ok;
closed_send(M, I, Other) -> ct:fail({M, I, Other}).

%% close/1 just after the peer's close, while the end of the stream may be being delivered (by the pump or the readiness port, on the other scheduler): once close/1 has returned no {Closed, S} comes (close/1 took the one sent, if any), as gen_tcp's. 1000 connections, the close made after 0..63 steps of a busy loop to sweep the window.
tcp_close_leaves_no_closed_message(Config) ->
    {M, CT, L, Port} = active_listener(Config),
    Round = fun(I) ->
                    S = accepted_peer_closed(M, L, Port),
                    busy(I rem 64),
                    ok = M:close(S),
                    S
            end,
    Socks = lists:map(Round, lists:seq(1, 1000)),
    ok = M:close(L),
    timer:sleep(200),
    Late = [Msg || {Tag, S} = Msg <- flush_all(), Tag =:= CT, lists:member(S, Socks)],
    {[], _} = {Late, length(Late)}.

%% The group's module, its closed tag, an {active, true} listener on loopback
%% and its port.
active_listener(Config) ->
    M = mod(Config),
    {_, CT, _, _} = tags(Config),
    {ok, L} = M:listen(0, [{ip, {127, 0, 0, 1}}, binary, {active, true}]),
    {M, CT, L, port(Config, L)}.

%% A socket accepted from L whose peer has closed its end.
accepted_peer_closed(M, L, Port) ->
    {ok, Peer} = gen_tcp:connect({127, 0, 0, 1}, Port, [binary, {active, false}], ?T),
    {ok, S} = M:accept(L, ?T),
    ok = gen_tcp:close(Peer),
    S.

busy(0) -> ok;
busy(N) -> _ = erlang:unique_integer(), busy(N - 1).

%% Takes Msg from the mailbox, polling without sleeping (so the process is
%% running, on its own scheduler, when the message lands).
spin_for(Msg, Deadline) ->
    receive Msg -> ok
    after 0 ->
            case erlang:monotonic_time(millisecond) > Deadline of
                true -> ct:fail({no_message, Msg, flush_all()});
                false -> spin_for(Msg, Deadline)
            end
    end.

%% {send_timeout, T} to a {packet, 4} peer that stops reading: a send that times out keeps its unsent bytes queued (send_pend > 0), the next send (from another process, 2 MiB: a rest copied on a dirty scheduler) times out too instead of overtaking them, and once the peer drains, a last send finishes the queue first: every frame arrives whole and in order.
tcp_send_timeout_keeps_rest(Config) ->
    M = mod(Config),
    {Peer, S} = slow_reader_pair(Config, [{send_timeout, 200}]),
    {ok, Sent} = send_frames_until_timeout(M, S, 1, 1000),
    {ok, [{send_pend, Pend}]} = getstat(M, S, [send_pend]),
    true = Pend > 0,
    Self = self(),
    spawn_link(fun() -> Self ! {second, M:send(S, frame(Sent + 1, 2 * 1024 * 1024))} end),
    receive {second, Second} -> {error, timeout} = Second end,
    Last = Sent + 2,
    Reader = spawn_link(fun() -> Self ! {frames, read_frames(Peer, Last, [])} end),
    spawn_link(fun() -> Self ! {last, M:send(S, frame(Last))} end),
    receive {last, R} -> ok = R end,
    Frames = receive {frames, F} -> F after 30000 -> ct:fail(reader_stuck) end,
    unlink(Reader),
    Expected = lists:seq(1, Last),
    Expected = [Seq || {Seq, _} <- Frames],
    [] = [Seq || {Seq, Intact} <- Frames, not Intact],
    {ok, [{send_pend, 0}]} = getstat(M, S, [send_pend]),
    close_all(M, [S]), gen_tcp:close(Peer).

%% A raw binary larger than both socket buffers is sent whole once the peer reads: send/2 waits for room and writes the rest in order.
tcp_send_binary_waits_for_peer(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}, {sndbuf, 16384}]),
    ok = inet:setopts(Peer, [{recbuf, 16384}]),
    Big = pattern(1024 * 1024),
    Self = self(),
    spawn_link(fun() -> Self ! {read, read_bytes(Peer, byte_size(Big), [])} end),
    ok = M:send(S, Big),
    receive {read, Got} -> Big = Got after 30000 -> ct:fail(reader_stuck) end,
    close_all(M, [S]), gen_tcp:close(Peer).

%% Raw binary sends to a peer that doesn't read end in {error, timeout}; the timed-out send's unwritten tail stays queued, so the peer then reads every binary whole, in order, followed by what the next send writes.
tcp_send_binary_timeout_keeps_tail(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}, {send_timeout, 200}, {sndbuf, 16384}]),
    ok = inet:setopts(Peer, [{recbuf, 16384}]),
    Sent = send_until_timeout(M, S, fun chunk64k/1, 999),
    ok = setopts(Config, S, [{send_timeout, 30000}]),
    Expected = iolist_to_binary([Sent, <<"end">>]),
    Self = self(),
    spawn_link(fun() -> Self ! {read, read_bytes(Peer, byte_size(Expected), [])} end),
    ok = M:send(S, <<"end">>),
    receive {read, Got} -> Expected = Got after 30000 -> ct:fail(reader_stuck) end,
    close_all(M, [S]), gen_tcp:close(Peer).

%% Sends Make(1), Make(2), ... (iodata) until a send times out, at most Max
%% sends; the iodata sent (the timed-out send's included).
send_until_timeout(M, S, Make, Max) ->
    send_until_timeout(M, S, Make, 1, Max, []).

send_until_timeout(_M, _S, _Make, I, Max, _Acc) when I > Max ->
    ct:fail(never_timed_out);
send_until_timeout(M, S, Make, I, Max, Acc) ->
    Data = Make(I),
    case M:send(S, Data) of
        ok -> send_until_timeout(M, S, Make, I + 1, Max, [Data | Acc]);
        {error, timeout} -> lists:reverse([Data | Acc])
    end.

%% Chunk I of the 64 KiB chunks sent until a timeout: each its own bytes.
chunk64k(I) ->
    << <<((I + J) rem 251)>> || J <- lists:seq(1, 65536) >>.

%% Iodata of every shape arrives as its bytes, in order: nested lists of binaries (a Cowboy response's shape), a binary tail, empty binaries and lists, byte integers, more than 64 binaries, lists nested deeper than 16, small and larger binaries interleaved; data holding a bitstring is refused and sends nothing.
tcp_send_iodata_shapes(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}]),
    Many = [<<I>> || I <- lists:seq(1, 100)],
    Deep = lists:foldl(fun(I, Acc) -> [<<I>>, Acc, <<"|">>] end, <<"core">>, lists:seq(1, 40)),
    Shapes = [[[<<"HTTP/1.1">>, <<" ">>, <<"200 OK">>, <<"\r\n">>,
                [[<<"server">>, <<": ">>, <<"Cowboy">>, <<"\r\n">>]], <<"\r\n">>],
               <<"Hello world!">>],
              [<<"head">> | <<"tail">>],
              [[], <<>>, [[<<>>]], <<"x">>, [[] | <<"y">>]],
              [<<"ab">>, $c, [$d, <<"ef">>] | <<"g">>],
              Many, [Many, [Many]], Deep, [], [[[]]],
              %% small and larger binaries interleaved, more small bytes than
              %% nifsock's 1 KiB gather buffer holds
              [[binary:copy(<<I>>, 100), binary:copy(<<(I + 100)>>, 300)] || I <- lists:seq(1, 12)]],
    [begin
         ok = M:send(S, Data),
         ok = M:send(S, <<"$">>),
         Want = <<(iolist_to_binary(Data))/binary, "$">>,
         Want = read_bytes(Peer, byte_size(Want), [])
     end || Data <- Shapes],
    %% A bitstring anywhere is not iodata, even one of no whole byte: gen_tcp
    %% says einval, nifsock_tcp raises badarg; neither sends any of it.
    Bits = [[<<"a">>, <<1:1>>], [[<<"a">>], [<<"b">>, <<"c", 1:2>>]], [<<"a">> | <<1:1>>],
            [Many, <<1:1>>]],
    [case catch M:send(S, Data) of
         {error, einval} when M =:= gen_tcp -> ok;
         {'EXIT', {badarg, _}} when M =/= gen_tcp -> ok
     end || Data <- Bits],
    ok = M:send(S, <<"after">>),
    <<"after">> = read_bytes(Peer, 5, []),
    close_all(M, [S]), gen_tcp:close(Peer).

%% Iodata larger than both socket buffers (nested lists of 48 binaries) is sent whole once the peer reads: send/2 waits for room and writes the rest in order.
tcp_send_iodata_waits_for_peer(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}, {sndbuf, 16384}]),
    ok = inet:setopts(Peer, [{recbuf, 16384}]),
    Big = pattern(24 * 65536),
    Data = [[binary_part(Big, I * 65536, 32768), [binary_part(Big, I * 65536 + 32768, 32768)]]
            || I <- lists:seq(0, 23)],
    Self = self(),
    spawn_link(fun() -> Self ! {read, read_bytes(Peer, byte_size(Big), [])} end),
    ok = M:send(S, Data),
    receive {read, Got} -> Big = Got after 30000 -> ct:fail(reader_stuck) end,
    close_all(M, [S]), gen_tcp:close(Peer).

%% Short iodata (at most 1 KiB: nifsock_tcp copies it together before sending) sent faster than the peer reads fills both socket buffers: sends written in part wait for room and write their rest, and with a send_timeout the timed-out one keeps its rest queued; the peer reads every send whole, in order.
tcp_send_short_iodata_fills_buffers(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}, {sndbuf, 4096}]),
    ok = inet:setopts(Peer, [{recbuf, 4096}]),
    Chunk = fun(I) -> P = pattern(700 + I rem 300),
                      <<A:100/binary, B:300/binary, C/binary>> = P,
                      [[A, $-], [[B], C] | <<I:16>>] end,
    Chunks = [Chunk(I) || I <- lists:seq(1, 400)],
    true = lists:all(fun(C) -> iolist_size(C) =< 1024 end, Chunks),
    Expected = iolist_to_binary(Chunks),
    Self = self(),
    spawn_link(fun() -> timer:sleep(200),
                        Self ! {read, read_bytes(Peer, byte_size(Expected), [])} end),
    [ok = M:send(S, C) || C <- Chunks],
    receive {read, Got} -> Expected = Got after 30000 -> ct:fail(reader_stuck) end,
    %% a peer that doesn't read: the short sends end in {error, timeout}, and
    %% what the timed-out one didn't write goes out before the next send
    ok = setopts(Config, S, [{send_timeout, 200}]),
    Sent = send_until_timeout(M, S, Chunk, 20000),
    ok = setopts(Config, S, [{send_timeout, 30000}]),
    Expected2 = iolist_to_binary([Sent, <<"end">>]),
    spawn_link(fun() -> Self ! {read, read_bytes(Peer, byte_size(Expected2), [])} end),
    ok = M:send(S, [[<<"e">>], <<"nd">>]),
    receive {read, Got2} -> Expected2 = Got2 after 30000 -> ct:fail(reader_stuck) end,
    close_all(M, [S]), gen_tcp:close(Peer).

%% Iodata sends (nested lists of binaries) to a peer that doesn't read end in {error, timeout}; the timed-out send's unwritten rest stays queued, so the peer then reads every chunk whole, in order, followed by what the next send writes.
tcp_send_iodata_timeout_keeps_tail(Config) ->
    M = mod(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, false}, {send_timeout, 200}, {sndbuf, 16384}]),
    ok = inet:setopts(Peer, [{recbuf, 16384}]),
    Shape = fun(<<A:1000/binary, B:30000/binary, C/binary>>) -> [[A], [[B], C]] end,
    Sent = send_until_timeout(M, S, fun(I) -> Shape(chunk64k(I)) end, 999),
    ok = setopts(Config, S, [{send_timeout, 30000}]),
    Expected = iolist_to_binary([Sent, <<"end">>]),
    Self = self(),
    spawn_link(fun() -> Self ! {read, read_bytes(Peer, byte_size(Expected), [])} end),
    ok = M:send(S, [[<<"e">>], <<"nd">>]),
    receive {read, Got} -> Expected = Got after 30000 -> ct:fail(reader_stuck) end,
    close_all(M, [S]), gen_tcp:close(Peer).

%% N bytes that differ from one offset to the next (a misplaced byte shows).
pattern(N) ->
    << <<(I rem 251)>> || I <- lists:seq(1, N) >>.

%% Exactly N bytes from a passive gen_tcp peer, or what came before it closed.
read_bytes(_Peer, 0, Acc) ->
    iolist_to_binary(lists:reverse(Acc));
read_bytes(Peer, N, Acc) ->
    case gen_tcp:recv(Peer, 0, 30000) of
        {ok, B} when byte_size(B) =< N -> read_bytes(Peer, N - byte_size(B), [B | Acc]);
        {ok, B} -> iolist_to_binary(lists:reverse([B | Acc]));
        {error, _} -> iolist_to_binary(lists:reverse(Acc))
    end.

%% {send_timeout_close, true}: a send that times out closes the socket; later sends and recvs fail (closed, or gen_tcp's enotconn), and the {packet, 4} peer gets whole frames, then the end of the stream.
tcp_send_timeout_close_closes(Config) ->
    M = mod(Config),
    {Peer, S} = slow_reader_pair(Config, [{send_timeout, 200}, {send_timeout_close, true}]),
    {ok, Sent} = send_frames_until_timeout(M, S, 1, 1000),
    {error, E1} = M:send(S, <<"x">>),
    true = E1 =:= closed orelse E1 =:= enotconn,
    {error, E2} = M:recv(S, 0, 100),
    true = E2 =:= closed orelse E2 =:= enotconn,
    Frames = read_frames(Peer, none, []),
    true = length(Frames) =< Sent,
    Whole = [Seq || {Seq, true} <- Frames],
    Whole = lists:seq(1, length(Frames)),
    no_msg(S),
    M:close(S), gen_tcp:close(Peer).

%% A {packet, 4} sender with small buffers (and `Opts') and a gen_tcp
%% {packet, 4} peer that doesn't read until told to.
slow_reader_pair(Config, Opts) ->
    M = mod(Config),
    {ok, L} = gen_tcp:listen(0, [binary, {active, false}, {packet, 4}, {recbuf, 16384},
                                 {ip, {127, 0, 0, 1}}]),
    {ok, S} = M:connect({127, 0, 0, 1}, port_of(L), [binary, {active, false}, {packet, 4},
                                                   {sndbuf, 16384} | Opts], ?T),
    {ok, Peer} = gen_tcp:accept(L, ?T),
    ok = gen_tcp:close(L),
    {Peer, S}.

port_of(L) ->
    {ok, P} = inet:port(L),
    P.

%% Frame N: its sequence number and size, then Size (default ?FRAME) bytes of
%% N's low byte.
frame(N) ->
    frame(N, ?FRAME).

frame(N, Size) ->
    [<<N:32, Size:32>>, binary:copy(<<(N band 255)>>, Size)].

send_frames_until_timeout(_M, _S, _N, 0) ->
    never_timed_out;
send_frames_until_timeout(M, S, N, Left) ->
    case M:send(S, frame(N)) of
        ok -> send_frames_until_timeout(M, S, N + 1, Left - 1);
        {error, timeout} -> {ok, N};
        Other -> {unexpected, N, Other}
    end.

%% {Seq, Intact} of each frame until frame Last, or the end of the stream.
read_frames(Peer, Last, Acc) ->
    case gen_tcp:recv(Peer, 0, ?T) of
        {ok, <<Seq:32, Size:32, Body/binary>>} ->
            Acc1 = [{Seq, Body =:= binary:copy(<<(Seq band 255)>>, Size)} | Acc],
            case Seq of
                Last -> lists:reverse(Acc1);
                _ -> read_frames(Peer, Last, Acc1)
            end;
        {ok, Short} ->
            read_frames(Peer, Last, [{{short, byte_size(Short)}, false} | Acc]);
        {error, _} ->
            lists:reverse(Acc)
    end.

%% close/1 takes one {Closed, S} out of the caller's mailbox, as gen_tcp's, and leaves the data messages of S (exit_on_close true and false).
tcp_close_flushes_closed_message(Config) ->
    M = mod(Config),
    {DT, CT, _, _} = tags(Config),
    lists:foreach(
      fun(ExitOnClose) ->
              {Peer, S} = raw_pair(Config, [binary, {active, true}, {exit_on_close, ExitOnClose}]),
              ok = gen_tcp:send(Peer, <<"data">>),
              ok = gen_tcp:close(Peer),
              wait_for_msg({CT, S}),
              ok = M:close(S),
              [{DT, S, <<"data">>}] = msgs_of(S),
              flush_all()
      end, [true, false]),
    %% exactly one closed message goes
    {Peer2, S2} = raw_pair(Config, [binary, {active, false}]),
    self() ! {CT, S2}, self() ! {CT, S2},
    ok = M:close(S2),
    [{CT, S2}] = msgs_of(S2),
    flush_all(),
    gen_tcp:close(Peer2).

%% controlling_process/2 hands over the data and closed messages of S already in the caller's mailbox (data delivered inline at accept too), in order, and restores the active mode for the new owner; passive messages stay, as gen_tcp's.
tcp_controlling_process_hands_over_queued(Config) ->
    M = mod(Config),
    {DT, CT, _, PT} = tags(Config),
    %% data delivered to the acceptor before the hand-over
    {ok, L} = M:listen(0, [binary, {active, true}, {ip, {127, 0, 0, 1}}]),
    {ok, Peer} = gen_tcp:connect({127, 0, 0, 1}, port(Config, L), [binary, {active, false}]),
    ok = gen_tcp:send(Peer, <<"early">>),
    {ok, S} = M:accept(L, ?T),
    wait_for_msg({DT, S, <<"early">>}),
    Fwd = forwarder(self()),
    ok = M:controlling_process(S, Fwd),
    [] = msgs_of(S),
    receive {via, Fwd, {DT, S, <<"early">>}} -> ok after ?T -> ct:fail(not_handed_over) end,
    {ok, [{active, true}]} = getopts(Config, S, [active]),
    ok = gen_tcp:send(Peer, <<"later">>),
    receive {via, Fwd, {DT, S, <<"later">>}} -> ok after ?T -> ct:fail(not_active) end,
    Fwd ! stop,
    close_all(M, [S, L]), gen_tcp:close(Peer),
    %% {active, 1}: the data goes, the passive message stays
    {Peer2, S2} = raw_pair(Config, [binary, {active, false}]),
    ok = setopts(Config, S2, [{active, 1}]),
    ok = gen_tcp:send(Peer2, <<"one">>),
    wait_for_msg({PT, S2}),
    Fwd2 = forwarder(self()),
    ok = M:controlling_process(S2, Fwd2),
    [{PT, S2}] = msgs_of(S2),
    receive {via, Fwd2, {DT, S2, <<"one">>}} -> ok after ?T -> ct:fail(not_handed_over) end,
    {ok, [{active, false}]} = getopts(Config, S2, [active]),
    Fwd2 ! stop, flush_all(),
    close_all(M, [S2]), gen_tcp:close(Peer2),
    %% exit_on_close false: the data and the closed message go, in order
    {Peer3, S3} = raw_pair(Config, [binary, {active, true}, {exit_on_close, false}]),
    ok = gen_tcp:send(Peer3, <<"last">>),
    ok = gen_tcp:close(Peer3),
    wait_for_msg({CT, S3}),
    Fwd3 = forwarder(self()),
    ok = M:controlling_process(S3, Fwd3),
    [] = msgs_of(S3),
    receive {via, Fwd3, Got1} -> {DT, S3, <<"last">>} = Got1 after ?T -> ct:fail(no_data) end,
    receive {via, Fwd3, Got2} -> {CT, S3} = Got2 after ?T -> ct:fail(no_closed) end,
    Fwd3 ! stop,
    M:close(S3).

%% {show_econnreset, true} (inherited from the listener), active: a peer reset is {Error, S, econnreset} then {Closed, S}, after the data that came before it; with {active, once} set after the reset too.
tcp_show_econnreset_active(Config) ->
    M = mod(Config),
    {DT, CT, ET, _} = tags(Config),
    lists:foreach(
      fun({Active, Data}) ->
              {Peer, S} = raw_pair(Config, [binary, {active, Active}, {show_econnreset, true}]),
              {ok, [{show_econnreset, true}]} = getopts(Config, S, [show_econnreset]),
              [ok = gen_tcp:send(Peer, Data) || Data =/= <<>>],
              ok = inet:setopts(Peer, [{linger, {true, 0}}]),
              ok = gen_tcp:close(Peer),
              case Active of
                  false -> timer:sleep(50), ok = setopts(Config, S, [{active, once}]);
                  _ -> ok
              end,
              [begin
                   receive {DT, S, D} -> Data = D after ?T -> ct:fail(no_data) end
               end || Data =/= <<>>],
              receive Msg1 -> {ET, S, econnreset} = Msg1 after ?T -> ct:fail(no_error) end,
              receive Msg2 -> {CT, S} = Msg2 after ?T -> ct:fail(no_closed) end,
              no_msg(S),
              M:close(S)
      end, [{true, <<>>}, {true, <<"hello">>}, {false, <<>>}]).

%% {show_econnreset, true}, passive: recv after a peer reset is {error, econnreset} (the data before it first); a send after one is {error, econnreset}; without the option both are {error, closed}.
tcp_show_econnreset_passive(Config) ->
    M = mod(Config),
    Reset = fun(Opts) ->
                    {Peer, S} = raw_pair(Config, [binary, {active, false} | Opts]),
                    ok = gen_tcp:send(Peer, <<"hello">>),
                    ok = inet:setopts(Peer, [{linger, {true, 0}}]),
                    ok = gen_tcp:close(Peer),
                    timer:sleep(50),
                    S
            end,
    S1 = Reset([{show_econnreset, true}]),
    {ok, <<"hello">>} = M:recv(S1, 0, ?T),
    {error, econnreset} = M:recv(S1, 0, ?T),
    {error, E} = M:recv(S1, 0, ?T),
    true = E =:= closed orelse E =:= enotconn,
    M:close(S1),
    S2 = Reset([{show_econnreset, true}]),
    {error, econnreset} = M:send(S2, <<"x">>),
    M:close(S2),
    S3 = Reset([]),
    {ok, <<"hello">>} = M:recv(S3, 0, ?T),
    {error, closed} = M:recv(S3, 0, ?T),
    M:close(S3),
    S4 = Reset([]),
    {error, closed} = M:send(S4, <<"x">>),
    M:close(S4).

%% {show_econnreset, true}: a send that meets the peer's reset returns {error, econnreset}, and the reset is still reported after it: a passive recv returns {error, econnreset}, an active socket gets {Error, S, econnreset} then {Closed, S} (the kernel reports a reset once; the socket remembers it).
tcp_show_econnreset_after_send(Config) ->
    M = mod(Config),
    {_, CT, ET, _} = tags(Config),
    Reset = fun() ->
                    {Peer, S} = raw_pair(Config, [binary, {active, false}, {show_econnreset, true}]),
                    ok = inet:setopts(Peer, [{linger, {true, 0}}]),
                    ok = gen_tcp:close(Peer),
                    timer:sleep(50),
                    {error, econnreset} = M:send(S, <<"x">>),
                    S
            end,
    S1 = Reset(),
    {error, econnreset} = M:recv(S1, 0, ?T),
    M:close(S1),
    S2 = Reset(),
    ok = setopts(Config, S2, [{active, once}]),
    receive Msg1 -> {ET, S2, econnreset} = Msg1 after ?T -> ct:fail(no_error) end,
    receive Msg2 -> {CT, S2} = Msg2 after ?T -> ct:fail(no_closed) end,
    no_msg(S2),
    M:close(S2).

%% Waits (bounded) for Msg and puts it back, behind what else is in the
%% mailbox (a receive: process_info(self(), messages) may not show messages
%% still in the process's signal queue).
wait_for_msg(Msg) ->
    receive Msg -> self() ! Msg
    after ?T -> ct:fail({never_arrived, Msg, flush_all()})
    end.

%% Takes the messages about S out of the mailbox, in order.
msgs_of(S) ->
    receive
        Msg when is_tuple(Msg), tuple_size(Msg) >= 2, element(2, Msg) =:= S -> [Msg | msgs_of(S)]
    after 0 -> []
    end.

%%--------------------------------------------------------------------
%% Message tags ({tags, T}: nifsock_tcp only; gen_tcp's messages always carry
%% gen_tcp's tags, so the gen_tcp group checks the shapes expected of
%% {tags, gen_tcp} against the real thing)
%%--------------------------------------------------------------------

-define(GEN_TCP_TAGS, {tcp, tcp_closed, tcp_error, tcp_passive}).
-define(CUSTOM_TAGS, {my_data, my_closed, my_error, my_passive}).

%% {tags, gen_tcp} set on a listener is inherited and readable: {tcp, S, D}, {tcp_passive, S}, {tcp_error, S, econnreset} and {tcp_closed, S}, and no message with other tags.
tcp_tags_gen_tcp_inherited(Config) ->
    M = mod(Config),
    {ok, L} = M:listen(0, [binary, {active, 1}, {show_econnreset, true}, {ip, {127, 0, 0, 1}}
                           | tags_opts(Config, gen_tcp)]),
    ok = check_tags(Config, L, ?GEN_TCP_TAGS),
    {ok, Peer} = gen_tcp:connect({127, 0, 0, 1}, port(Config, L), [binary, {active, false}]),
    ok = gen_tcp:send(Peer, <<"one">>),
    {ok, S} = M:accept(L, ?T),
    ok = M:close(L),
    ok = check_tags(Config, S, ?GEN_TCP_TAGS),
    receive Msg1 -> {tcp, S, <<"one">>} = Msg1 after ?T -> ct:fail(no_data) end,
    receive Msg2 -> {tcp_passive, S} = Msg2 after ?T -> ct:fail(no_passive) end,
    ok = setopts(Config, S, [{active, true}]),
    ok = inet:setopts(Peer, [{linger, {true, 0}}]),
    ok = gen_tcp:close(Peer),
    receive Msg3 -> {tcp_error, S, econnreset} = Msg3 after ?T -> ct:fail(no_error) end,
    receive Msg4 -> {tcp_closed, S} = Msg4 after ?T -> ct:fail(no_closed) end,
    no_msg(S),
    M:close(S).

%% {tags, T} set later with setopts changes the tags of the messages that follow (the earlier ones keep the old tags), and getopts reads it back; {tags, nifsock} restores the default.
tcp_tags_set_later(Config) ->
    M = mod(Config),
    {DT, _, _, _} = tags(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, true}]),
    ok = gen_tcp:send(Peer, <<"before">>),
    receive Msg1 -> {DT, S, <<"before">>} = Msg1 after ?T -> ct:fail(no_data) end,
    ok = setopts(Config, S, tags_opts(Config, gen_tcp)),
    ok = check_tags(Config, S, ?GEN_TCP_TAGS),
    ok = gen_tcp:send(Peer, <<"after">>),
    receive Msg2 -> {tcp, S, <<"after">>} = Msg2 after ?T -> ct:fail(no_data) end,
    ok = setopts(Config, S, [{active, false} | tags_opts(Config, nifsock)]),
    ok = check_tags(Config, S, tags(Config)),
    ok = setopts(Config, S, [{active, true} | tags_opts(Config, gen_tcp)]),
    ok = gen_tcp:close(Peer),
    receive Msg3 -> {tcp_closed, S} = Msg3 after ?T -> ct:fail(no_closed) end,
    no_msg(S),
    M:close(S).

%% {tags, {Data, Closed, Error, Passive}} given to connect names any four atoms: data, passive, error (a packet too large) and closed messages carry them, getopts reads the tuple.
tcp_tags_custom_tuple(Config) ->
    M = mod(Config),
    {TagOpts, {DT, CT, ET, PT} = Tags} = custom_tags(Config),
    {ok, L} = M:listen(0, [binary, {active, false}, {ip, {127, 0, 0, 1}}]),
    {ok, C} = M:connect({127, 0, 0, 1}, port(Config, L),
                        [binary, {active, 2}, {packet, 1}, {packet_size, 4} | TagOpts], ?T),
    {ok, S} = M:accept(L, ?T),
    ok = M:close(L),
    ok = check_tags(Config, C, Tags),
    ok = M:send(S, <<1, "a", 1, "b">>),
    receive Msg1 -> {DT, C, <<"a">>} = Msg1 after ?T -> ct:fail(no_data) end,
    receive Msg2 -> {DT, C, <<"b">>} = Msg2 after ?T -> ct:fail(no_data) end,
    receive Msg3 -> {PT, C} = Msg3 after ?T -> ct:fail(no_passive) end,
    ok = M:send(S, <<9, "too large">>),
    ok = setopts(Config, C, [{active, once}]),
    receive Msg4 -> {ET, C, emsgsize} = Msg4 after ?T -> ct:fail(no_error) end,
    receive Msg5 -> {CT, C} = Msg5 after ?T -> ct:fail(no_closed) end,
    no_msg(C),
    close_all(M, [C, S]).

%% Bad {tags, T} values: listen and connect exit with badarg, setopts is {error, einval}, as gen_tcp for an option it doesn't take; the socket keeps its tags.
tcp_tags_bad_values_rejected(Config) ->
    M = mod(Config),
    Bad = [foo, {tcp, tcp_closed, tcp_error}, {tcp, tcp_closed, tcp_error, 1},
           {tcp, tcp_closed, tcp_error, tcp_passive, x}, "gen_tcp", [tcp, tcp_closed, tcp_error, tcp_passive]],
    {ok, L} = M:listen(0, [binary, {active, false}, {ip, {127, 0, 0, 1}}]),
    lists:foreach(
      fun(V) ->
              {'EXIT', badarg} = (catch M:listen(0, [{tags, V}])),
              {'EXIT', badarg} = (catch M:connect({127, 0, 0, 1}, port(Config, L), [{tags, V}], ?T)),
              {error, einval} = setopts(Config, L, [{tags, V}])
      end, Bad),
    ok = check_tags(Config, L, tags(Config)),
    M:close(L).

%% close/1 takes one {Closed, S} of the socket's custom tags out of the mailbox (also once exit_on_close closed the socket) and leaves its data messages.
tcp_tags_close_flushes_custom_closed(Config) ->
    M = mod(Config),
    {TagOpts, {DT, CT, _, _}} = custom_tags(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, true} | TagOpts]),
    ok = gen_tcp:send(Peer, <<"data">>),
    ok = gen_tcp:close(Peer),
    wait_for_msg({CT, S}),
    ok = M:close(S),
    [{DT, S, <<"data">>}] = msgs_of(S),
    {Peer2, S2} = raw_pair(Config, [binary, {active, false} | TagOpts]),
    self() ! {CT, S2}, self() ! {CT, S2},
    ok = M:close(S2),
    [{CT, S2}] = msgs_of(S2),
    gen_tcp:close(Peer2).

%% controlling_process/2 hands over the data and closed messages of the socket's custom tags, in order, and the new owner gets the later ones with the same tags.
tcp_tags_controlling_process_hands_over_custom(Config) ->
    M = mod(Config),
    {TagOpts, {DT, CT, _, _}} = custom_tags(Config),
    {Peer, S} = raw_pair(Config, [binary, {active, true}, {exit_on_close, false} | TagOpts]),
    ok = gen_tcp:send(Peer, <<"first">>),
    wait_for_msg({DT, S, <<"first">>}),
    Fwd = forwarder(self()),
    ok = M:controlling_process(S, Fwd),
    [] = msgs_of(S),
    receive {via, Fwd, Got1} -> {DT, S, <<"first">>} = Got1 after ?T -> ct:fail(no_data) end,
    ok = gen_tcp:send(Peer, <<"second">>),
    receive {via, Fwd, Got2} -> {DT, S, <<"second">>} = Got2 after ?T -> ct:fail(no_data) end,
    ok = gen_tcp:close(Peer),
    receive {via, Fwd, Got3} -> {CT, S} = Got3 after ?T -> ct:fail(no_closed) end,
    Fwd ! stop,
    M:close(S).

%% The options that ask for tags T: {tags, T} for nifsock_tcp, none for gen_tcp.
tags_opts(Config, T) ->
    case mod(Config) of
        gen_tcp -> [];
        _ -> [{tags, T}]
    end.

%% Options for custom tags and the tags the messages then carry (gen_tcp's own, under gen_tcp).
custom_tags(Config) ->
    case mod(Config) of
        gen_tcp -> {[], ?GEN_TCP_TAGS};
        _ -> {[{tags, ?CUSTOM_TAGS}], ?CUSTOM_TAGS}
    end.

%% getopts reads the socket's tags (nifsock_tcp; gen_tcp has no such option: einval).
check_tags(Config, S, Tags) ->
    case mod(Config) of
        gen_tcp -> {error, einval} = inet:getopts(S, [tags]), ok;
        M -> {ok, [{tags, Tags}]} = M:getopts(S, [tags]), ok
    end.

%%--------------------------------------------------------------------
%% gen_tcp's remaining forms (OTP's inet_sockopt_SUITE and gen_tcp_api_SUITE)
%%--------------------------------------------------------------------

-define(SOL_SOCKET, 1).
-define(SO_KEEPALIVE, 9).
-define(SO_LINGER, 13).
-define(IPPROTO_TCP, 6).
-define(TCP_INFO, 11).

%% getopts {raw, Level, Opt, Size | Bin} reads the bytes getsockopt wrote into a buffer of that size: the kernel's length (a C int, a struct linger, TCP_INFO's struct), einval above 65522 bytes, and an option the kernel refuses left out, as inet.
tcp_getopts_raw_buffer(Config) ->
    {C, S} = pair(Config, [{active, false}, {raw, ?SOL_SOCKET, ?SO_KEEPALIVE, <<1:32/native>>}]),
    Keep = {raw, ?SOL_SOCKET, ?SO_KEEPALIVE, <<1:32/native>>},
    {ok, [Keep]} = getopts(Config, C, [{raw, ?SOL_SOCKET, ?SO_KEEPALIVE, 4}]),
    {ok, [Keep]} = getopts(Config, S, [{raw, ?SOL_SOCKET, ?SO_KEEPALIVE, <<0:32>>}]),
    {ok, [{keepalive, true}]} = getopts(Config, C, [keepalive]),
    ok = setopts(Config, C, [{raw, ?SOL_SOCKET, ?SO_KEEPALIVE, <<0:32/native>>}]),
    {ok, [{keepalive, false}, {raw, ?SOL_SOCKET, ?SO_KEEPALIVE, <<0:32/native>>}, {nodelay, false}]} =
        getopts(Config, C, [keepalive, {raw, ?SOL_SOCKET, ?SO_KEEPALIVE, 4}, nodelay]),
    %% a buffer larger than the value: the value's length
    ok = setopts(Config, C, [{linger, {true, 10}}]),
    {ok, [{raw, ?SOL_SOCKET, ?SO_LINGER, Linger}]} =
        getopts(Config, C, [{raw, ?SOL_SOCKET, ?SO_LINGER, 1024}]),
    <<1:32/native, 10:32/native>> = Linger,
    {ok, [{raw, ?SOL_SOCKET, ?SO_LINGER, Linger}]} =
        getopts(Config, C, [{raw, ?SOL_SOCKET, ?SO_LINGER, <<7:64, 0:64>>}]),
    %% a buffer shorter than the value: what fits
    {ok, [{raw, ?SOL_SOCKET, ?SO_LINGER, <<1:32/native>>}]} =
        getopts(Config, C, [{raw, ?SOL_SOCKET, ?SO_LINGER, 4}]),
    {ok, [{raw, ?SOL_SOCKET, ?SO_LINGER, <<>>}]} =
        getopts(Config, C, [{raw, ?SOL_SOCKET, ?SO_LINGER, 0}]),
    %% a struct larger than 64 bytes
    {ok, [{raw, ?IPPROTO_TCP, ?TCP_INFO, Info}]} =
        getopts(Config, C, [{raw, ?IPPROTO_TCP, ?TCP_INFO, 4096}]),
    true = byte_size(Info) > 100 andalso byte_size(Info) < 4096,
    {ok, [{raw, ?IPPROTO_TCP, ?TCP_INFO, _}]} =
        getopts(Config, C, [{raw, ?IPPROTO_TCP, ?TCP_INFO, 65522}]),
    {error, einval} = getopts(Config, C, [{raw, ?IPPROTO_TCP, ?TCP_INFO, 65523}]),
    {error, einval} = getopts(Config, C, [{raw, ?IPPROTO_TCP, ?TCP_INFO, binary:copy(<<0>>, 65523)}]),
    {error, einval} = getopts(Config, C, [{raw, ?IPPROTO_TCP, ?TCP_INFO, -1}]),
    {error, einval} = getopts(Config, C, [{raw, x, ?TCP_INFO, 4}]),
    %% an option getsockopt refuses is left out
    {ok, [{nodelay, false}]} = getopts(Config, C, [{raw, ?SOL_SOCKET, 99999, 4}, nodelay]),
    close_all(mod(Config), [C, S]).

%% {tclass, N} sets and reads IPV6_TCLASS on an inet6 socket and an accepted socket inherits it; out of range is einval; on an inet socket listen refuses it (einval) and getopts leaves it out.
tcp_tclass_inet6(Config) ->
    M = mod(Config),
    Loop6 = {0, 0, 0, 0, 0, 0, 0, 1},
    case M:listen(0, [inet6, {ip, Loop6}, {active, false}, {tclass, 184}]) of
        {ok, L} ->
            {ok, [{tclass, 184}]} = getopts(Config, L, [tclass]),
            {ok, C} = M:connect(Loop6, port(Config, L), [inet6, {active, false}]),
            {ok, S} = M:accept(L, ?T),
            {ok, [{tclass, 184}]} = getopts(Config, S, [tclass]),
            {ok, [{tclass, 0}]} = getopts(Config, C, [tclass]),
            ok = setopts(Config, C, [{tclass, 16}]),
            {ok, [{active, false}, {tclass, 16}]} = getopts(Config, C, [active, tclass]),
            {error, einval} = setopts(Config, C, [{tclass, 256}]),
            {ok, [{tclass, 16}]} = getopts(Config, C, [tclass]),
            {error, einval} = M:listen(0, [inet, {ip, {127, 0, 0, 1}}, {tclass, 8}]),
            {C4, S4} = pair(Config, [{active, false}]),
            {ok, [{active, false}]} = getopts(Config, C4, [tclass, active]),
            close_all(M, [C, S, L, C4, S4]);
        {error, eaddrnotavail} ->
            {skip, no_ipv6_loopback}
    end.

%% {ifaddr, SockaddrMap} (a socket:sockaddr() map) binds listen and connect, and connect/2,3 take the peer as a map, for inet and (where there is a loopback) inet6.
tcp_ifaddr_sockaddr_map(Config) ->
    M = mod(Config),
    Addrs = [{inet, {127, 0, 0, 1}} | [{inet6, {0, 0, 0, 0, 0, 0, 0, 1}} || has_inet6_loopback()]],
    [begin
         SA = #{family => Family, addr => IP, port => 0},
         {ok, L} = M:listen(0, [{ifaddr, SA}, binary, {active, false}]),
         {ok, {IP, Port}} = sockname(Config, L),
         {ok, C1} = M:connect(SA#{port => Port}, [{ifaddr, SA}, binary, {active, false}]),
         {ok, C2} = M:connect(SA#{port => Port}, [binary, {active, false}], ?T),
         {ok, S1} = M:accept(L, ?T),
         {ok, S2} = M:accept(L, ?T),
         {ok, {IP, _}} = sockname(Config, C1),
         ok = M:send(C1, <<"one">>),
         ok = M:send(C2, <<"two">>),
         {ok, <<"one">>} = M:recv(S1, 3, ?T),
         {ok, <<"two">>} = M:recv(S2, 3, ?T),
         close_all(M, [C1, C2, S1, S2, L])
     end || {Family, IP} <- Addrs],
    %% the map's family is the socket's: another family option conflicts
    {error, eafnosupport} =
        M:listen(0, [inet, {ifaddr, #{family => inet6, addr => {0, 0, 0, 0, 0, 0, 0, 1}, port => 0}}]),
    ok.

%% AF_LOCAL through gen_tcp's addresses: connect({local, Path}, 0, Opts) is a unix connect without the local option, an unbound client's name is {local, <<>>}, and {local, <<>>} binds to an abstract autobind name.
tcp_local_address_forms(Config) ->
    M = mod(Config),
    Path = nifsock_test_lib:tmp_path("nifsock_tcp_forms"),
    SAddr = {local, list_to_binary(Path)},
    {ok, L} = M:listen(0, [{ifaddr, SAddr}, binary, {active, false}]),
    {ok, SAddr} = sockname(Config, L),
    {error, enotconn} = peername(Config, L),
    {ok, C} = M:connect(SAddr, 0, [binary, {active, false}]),
    {ok, S} = M:accept(L, ?T),
    {ok, {local, <<>>}} = sockname(Config, C),
    {ok, {local, <<>>}} = peername(Config, S),
    {ok, SAddr} = peername(Config, C),
    ok = M:send(C, <<"path">>),
    {ok, <<"path">>} = M:recv(S, 4, ?T),
    close_all(M, [C, S, L]),
    ok = file:delete(Path),
    %% the abstract namespace: {local, <<>>} autobinds
    {ok, AL} = M:listen(0, [{ifaddr, {local, <<>>}}, binary, {active, false}]),
    {ok, {local, <<0, _/binary>>} = AAddr} = sockname(Config, AL),
    {ok, AC} = M:connect(AAddr, 0, [{ifaddr, {local, <<>>}}, binary, {active, false}]),
    {ok, {local, <<0, _/binary>>} = CAddr} = sockname(Config, AC),
    true = CAddr =/= AAddr,
    {ok, AS} = M:accept(AL, ?T),
    {ok, CAddr} = peername(Config, AS),
    {ok, AAddr} = peername(Config, AC),
    ok = M:send(AS, <<"abstract">>),
    {ok, <<"abstract">>} = M:recv(AC, 8, ?T),
    close_all(M, [AC, AS, AL]).

%% The kernel's inet_default_connect_options / inet_default_listen_options (a list or one option) come before the caller's options, less active; an accepted socket inherits the listener's.
tcp_kernel_default_options(Config) ->
    M = mod(Config),
    Keys = [inet_default_connect_options, inet_default_listen_options],
    Saved = [{K, application:get_env(kernel, K)} || K <- Keys],
    Delays = fun(ListenOpts, ConnectOpts) ->
                     {ok, L} = M:listen(0, [{ip, {127, 0, 0, 1}} | ListenOpts]),
                     {ok, C} = M:connect({127, 0, 0, 1}, port(Config, L), ConnectOpts, ?T),
                     {ok, S} = M:accept(L, ?T),
                     {ok, [{delay_send, DC}, {active, AC}]} = getopts(Config, C, [delay_send, active]),
                     {ok, [{delay_send, DL}]} = getopts(Config, L, [delay_send]),
                     {ok, [{delay_send, DS}]} = getopts(Config, S, [delay_send]),
                     close_all(M, [C, S, L]),
                     {DC, DL, DS, AC}
             end,
    try
        {false, false, false, true} = Delays([], []),
        ok = application:set_env(kernel, inet_default_connect_options,
                                 [{active, false}, {delay_send, true}]),
        {true, false, false, true} = Delays([], []),
        {false, false, false, true} = Delays([], [{delay_send, false}]),
        ok = application:unset_env(kernel, inet_default_connect_options),
        ok = application:set_env(kernel, inet_default_listen_options, {delay_send, true}),
        {false, true, true, true} = Delays([], []),
        {false, false, false, true} = Delays([{delay_send, false}], []),
        ok = application:set_env(kernel, inet_default_listen_options, {active, false}),
        {false, false, false, true} = Delays([], [])
    after
        [case V of
             {ok, Value} -> application:set_env(kernel, K, Value);
             undefined -> application:unset_env(kernel, K)
         end || {K, V} <- Saved]
    end,
    ok.

%% As gen_tcp, an address tuple gives the family: {ip, IPv6} listens and an IPv6 address connects without inet6; a family option that contradicts the peer's address is eafnosupport, the {ip, _} option's badarg.
tcp_address_tuple_family(Config) ->
    M = mod(Config),
    Loop6 = {0, 0, 0, 0, 0, 0, 0, 1},
    case has_inet6_loopback() of
        true ->
            {ok, L} = M:listen(0, [{ip, Loop6}, binary, {active, false}]),
            {ok, {Loop6, Port}} = sockname(Config, L),
            {ok, C} = M:connect(Loop6, Port, [binary, {active, false}]),
            {ok, S} = M:accept(L, ?T),
            {ok, {Loop6, _}} = sockname(Config, C),
            ok = M:send(C, <<"v6">>),
            {ok, <<"v6">>} = M:recv(S, 2, ?T),
            {error, eafnosupport} = M:connect(Loop6, Port, [inet]),
            {'EXIT', badarg} = catch M:listen(0, [inet, {ip, Loop6}]),
            {'EXIT', badarg} = catch M:listen(0, [inet6, {ip, {127, 0, 0, 1}}]),
            {L4, P4} = listen_any(Config, [{ip, {127, 0, 0, 1}}]),
            {error, eafnosupport} = M:connect({127, 0, 0, 1}, P4, [inet6]),
            close_all(M, [C, S, L, L4]);
        false ->
            {skip, no_ipv6_loopback}
    end.

listen_any(Config, Opts) ->
    {ok, L} = (mod(Config)):listen(0, Opts),
    {L, port(Config, L)}.

has_inet6_loopback() ->
    case gen_tcp:listen(0, [inet6, {ip, {0, 0, 0, 0, 0, 0, 0, 1}}]) of
        {ok, L} -> ok = gen_tcp:close(L), true;
        {error, _} -> false
    end.

%%--------------------------------------------------------------------
%% What Linux copies at accept (nifsock level, no nifsock_tcp)
%%--------------------------------------------------------------------

%% Linux copies reuseaddr, reuseport, keepalive, nodelay, cork, rcvbuf, sndbuf, linger, tos, ttl, dontroute, keepidle, tclass from listener to accepted socket; not priority.
tcp_kernel_accept_inheritance(_Config) ->
    Opts = [{{socket, reuseaddr}, true}, {{socket, reuseport}, true},
            {{socket, keepalive}, true}, {{tcp, nodelay}, true}, {{tcp, cork}, true},
            {{socket, rcvbuf}, 32768}, {{socket, sndbuf}, 65536},
            {{socket, linger}, #{onoff => true, linger => 7}},
            {{ip, tos}, 16}, {{ip, ttl}, 33}, {{socket, dontroute}, true},
            {{tcp, keepidle}, 77}, {{socket, priority}, 3}],
    Inherit = fun(Domain, Extra) ->
                      {ok, L} = nifsock:open(Domain, stream, tcp),
                      [ok = nifsock:setopt(L, O, V) || {O, V} <- Opts ++ Extra],
                      ok = nifsock:bind(L, #{family => Domain, addr => loopback, port => 0}),
                      ok = nifsock:listen(L, 5),
                      {ok, #{port := Port}} = nifsock:sockname(L),
                      Addr = case Domain of inet -> {127, 0, 0, 1}; inet6 -> {0, 0, 0, 0, 0, 0, 0, 1} end,
                      {ok, C} = gen_tcp:connect(Addr, Port, [Domain]),
                      {ok, A} = nifsock:accept(L, ?T),
                      R = [{O, nifsock:getopt(L, O), nifsock:getopt(A, O)} || {O, _} <- Opts ++ Extra],
                      ok = gen_tcp:close(C), ok = nifsock:close(A), ok = nifsock:close(L),
                      R
              end,
    Check = fun(Domain, Rows) ->
                    Copied = [O || {O, LV, AV} <- Rows, LV =:= AV],
                    NotCopied = [{O, LV, AV} || {O, LV, AV} <- Rows, LV =/= AV],
                    ct:log("~p: copied ~p~nnot copied ~p", [Domain, Copied, NotCopied]),
                    %% These are what nifsock_tcp relies on the kernel for.
                    Pinned = [{socket, reuseaddr}, {socket, reuseport}, {socket, keepalive},
                              {tcp, nodelay}, {tcp, cork}, {socket, rcvbuf}, {socket, sndbuf},
                              {socket, linger}, {ip, tos}, {ip, ttl}, {socket, dontroute},
                              {tcp, keepidle}],
                    [] = Pinned -- Copied,
                    %% SO_PRIORITY is not copied (accepted sockets start at 0): a
                    %% layer promising gen_tcp semantics must set it itself.
                    {ok, 0} = element(3, lists:keyfind({socket, priority}, 1, Rows)),
                    NotCopied
            end,
    NC4 = Check(inet, Inherit(inet, [])),
    NC6 = case nifsock:open(inet6, stream, tcp) of
              {ok, S6} ->
                  ok = nifsock:close(S6),
                  Check(inet6, Inherit(inet6, [{{ipv6, tclass}, 32}]));
              _ ->
                  []
          end,
    {comment, lists:flatten(io_lib:format("not copied by Linux: ~p",
                                          [lists:usort([O || {O, _, _} <- NC4 ++ NC6])]))}.

%%--------------------------------------------------------------------
%% Helpers
%%--------------------------------------------------------------------

mod(Config) -> proplists:get_value(mod, Config).
tags(Config) -> proplists:get_value(tags, Config).

setopts(Config, S, Opts) ->
    case mod(Config) of
        gen_tcp -> inet:setopts(S, Opts);
        M -> M:setopts(S, Opts)
    end.

getopts(Config, S, Names) ->
    case mod(Config) of
        gen_tcp -> inet:getopts(S, Names);
        M -> M:getopts(S, Names)
    end.

sockname(Config, S) ->
    case mod(Config) of
        gen_tcp -> inet:sockname(S);
        M -> M:sockname(S)
    end.

peername(Config, S) ->
    case mod(Config) of
        gen_tcp -> inet:peername(S);
        M -> M:peername(S)
    end.

port(Config, L) ->
    nifsock_test_lib:port(mod(Config), L).

%% Listener and both ends, all with the module under test and the same options.
pair(Config, Opts) ->
    M = mod(Config),
    {ok, L} = M:listen(0, [{ip, {127, 0, 0, 1}} | Opts]),
    {ok, C} = M:connect({127, 0, 0, 1}, port(Config, L), Opts, ?T),
    {ok, S} = M:accept(L, ?T),
    ok = M:close(L),
    {C, S}.

%% A plain gen_tcp raw passive peer and a server end accepted by the module under test.
raw_pair(Config, ServerOpts) ->
    M = mod(Config),
    {ok, L} = M:listen(0, [{ip, {127, 0, 0, 1}} | ServerOpts]),
    {ok, Peer} = gen_tcp:connect({127, 0, 0, 1}, port(Config, L),
                                 [binary, {active, false}, {packet, raw}, {nodelay, true},
                                  {exit_on_close, false}], ?T),
    {ok, S} = M:accept(L, ?T),
    ok = M:close(L),
    {Peer, S}.

close_all(M, Socks) ->
    [ok = M:close(S) || S <- Socks],
    ok.

%% Header and body in pieces, a TCP write each, with sleeps between.
write_split(Peer, N, Body) ->
    Header = <<(byte_size(Body)):N/unit:8>>,
    Pieces = case N of
                 1 -> [Header];
                 _ -> [binary:part(Header, 0, 1), binary:part(Header, 1, N - 1)]
             end
        ++ [binary:part(Body, 0, 3), binary:part(Body, 3, byte_size(Body) - 3)],
    [begin ok = gen_tcp:send(Peer, P), timer:sleep(40) end || P <- Pieces],
    ok.

write_chunks(_Peer, <<>>, _Size) ->
    ok;
write_chunks(Peer, Bin, Size) ->
    N = min(Size, byte_size(Bin)),
    <<Chunk:N/binary, Rest/binary>> = Bin,
    case gen_tcp:send(Peer, Chunk) of
        ok -> write_chunks(Peer, Rest, Size);
        {error, _} -> ok
    end.

%% Chunks with a short sleep every 2 of them, so the reader sees many small arrivals.
write_paced(Peer, Bin, Size) ->
    write_paced(Peer, Bin, Size, 0).

write_paced(_Peer, <<>>, _Size, _I) ->
    ok;
write_paced(Peer, Bin, Size, I) ->
    N = min(Size, byte_size(Bin)),
    <<Chunk:N/binary, Rest/binary>> = Bin,
    case I rem 2 of 1 -> timer:sleep(1); _ -> ok end,
    case gen_tcp:send(Peer, Chunk) of
        ok -> write_paced(Peer, Rest, Size, I + 1);
        {error, _} -> ok
    end.

%% One data message.
data(Config, S) ->
    {DT, _, _, _} = tags(Config),
    receive
        {DT, S, D} -> D
    after ?T ->
            ct:fail({no_data_message, flush_all()})
    end.

%% Data messages until Len bytes (binary or list, as delivered).
collect(Config, S, Len) ->
    collect(Config, S, Len, []).

collect(Config, S, Len, Acc) ->
    Got = iolist_size(Acc),
    if
        Got >= Len ->
            Bin = iolist_to_binary(lists:reverse(Acc)),
            case lists:all(fun is_binary/1, Acc) of
                true -> Bin;
                false -> binary_to_list(Bin)
            end;
        true ->
            collect(Config, S, Len, [data(Config, S) | Acc])
    end.

passive(Config, S) ->
    {_, _, _, PT} = tags(Config),
    receive
        {PT, S} -> ok
    after ?T ->
            ct:fail({no_passive_message, flush_all()})
    end.

closed(Config, S) ->
    {_, CT, _, _} = tags(Config),
    receive
        {CT, S} -> ok
    after ?T ->
            ct:fail({no_closed_message, flush_all()})
    end.

%% No message about S for a while.
no_msg(S) ->
    receive
        Msg when is_tuple(Msg), tuple_size(Msg) >= 2, element(2, Msg) =:= S ->
            ct:fail({unexpected_message, Msg})
    after ?QUIET ->
            ok
    end.

%% recv(S, 0) until Len bytes.
recv_all(M, S, Len) ->
    recv_more(M, S, <<>>, Len).

recv_more(M, S, Acc, Len) ->
    Size = iolist_size(Acc),
    if
        Size >= Len ->
            {ok, Acc};
        true ->
            case M:recv(S, 0, ?T) of
                {ok, D} when is_binary(D) -> recv_more(M, S, <<Acc/binary, D/binary>>, Len);
                {ok, D} when is_list(D) -> recv_more(M, S, to_list(Acc) ++ D, Len);
                Error -> Error
            end
    end.

to_list(B) when is_binary(B) -> binary_to_list(B);
to_list(L) -> L.

forwarder(To) ->
    spawn_link(fun Loop() ->
                       receive
                           stop -> ok;
                           Msg -> To ! {via, self(), Msg}, Loop()
                       end
               end).

%% Takes active data for S until told how much to expect, then reports it.
collector(To, S, DT) ->
    spawn_link(fun() ->
                       Want = receive {want, W} -> W end,
                       To ! {collected, self(), collect_n(S, DT, Want, [])}
               end).

collect_n(_S, _DT, Want, Acc) when Want =< 0 ->
    iolist_to_binary(lists:reverse(Acc));
collect_n(S, DT, Want, Acc) ->
    receive
        {DT, S, D} -> collect_n(S, DT, Want - byte_size(D), [D | Acc])
    after 20000 ->
            iolist_to_binary(lists:reverse(Acc))
    end.

drain(DT, S) ->
    receive {DT, S, D} -> [D | drain(DT, S)]
    after 0 -> []
    end.

rand_bytes(N) ->
    rand:bytes(N).

flush_all() ->
    receive M -> [M | flush_all()] after 0 -> [] end.
