%%% Parity suite: the behaviours of nifsock_api_SUITE run against OTP's
%%% `socket' (group socket) and `nifsock' (group nifsock). The module is chosen
%%% in init_per_group and stored in Config as `mod'; each case here runs the
%%% same-named api_ case of nifsock_api_SUITE with that Config, so both
%%% modules are held to exactly the same assertions. Select/abort messages are
%%% matched with the tag of the module under test ('$socket' / '$nifsock').
%%% Where nifsock deliberately differs from socket, the api_ case asserts each
%%% module's documented behaviour (see the per-module helpers in
%%% nifsock_api_SUITE: not_owner_error/1, getopt_not_socket_reason/1,
%%% not_tuple_option_result/1, check_tail/3, is_sock/2, set_owner/3, and
%%% api_info_global/1).
%%%
%%% Run one group: rebar3 ct --suite test/nifsock_parity_SUITE --group socket
-module(nifsock_parity_SUITE).

-include_lib("common_test/include/ct.hrl").

-export([all/0, suite/0, groups/0,
         init_per_suite/1, end_per_suite/1,
         init_per_group/2, end_per_group/2,
         init_per_testcase/2, end_per_testcase/2]).

-export([exports/1,
         open_variants/1,
         open_fd/1,
         echo_inet/1,
         echo_inet6/1,
         echo_local/1,
         recv_zero_returns_available/1,
         recv_exact_length/1,
         recv_default_arities/1,
         recv_timeout_zero/1,
         recv_timeout_ms/1,
         recv_timeout_infinity/1,
         recv_nowait/1,
         recv_nowait_partial/1,
         recv_select_handle/1,
         accept_nowait/1,
         accept_timeout/1,
         connect_nowait/1,
         cancel_recv/1,
         cancel_accept/1,
         close_wakes_recv_waiter/1,
         close_wakes_accept_waiter/1,
         close_aborts_nowait_waiters/1,
         double_close/1,
         use_after_close/1,
         eof_closed/1,
         eof_with_partial_data/1,
         peer_reset_econnreset/1,
         bind_eaddrinuse/1,
         connect_econnrefused/1,
         owner_death_closes/1,
         controlling_process/1,
         concurrent_acceptors/1,
         badarg_wrong_types/1,
         invalid_values/1,
         setopt_getopt_roundtrip/1,
         setopt_getopt_errors/1,
         sockname_peername/1,
         shutdown_write/1,
         shutdown_read_write/1,
         is_socket/1,
         info_socket/1,
         info_counters/1,
         info_global/1,
         send_iolist/1,
         send_partial_timeout/1,
         send_partial_nowait/1, sendfile/1,
         recv_nowait_after_short_read/1,
         send_partial_binary_rest/1,
         bind_local_ip_names/1,
         open_local_tcp/1,
         tos_names/1,
         setopt_controlling_process_not_owner/1,
         close_leaves_no_message/1]).


suite() -> [{timetrap, {seconds, 60}}].

all() -> [{group, socket}, {group, nifsock}].

groups() ->
    [{socket, [], cases()},
     {nifsock, [], cases()}].

cases() ->
    [exports,
     open_variants,
     open_fd,
     echo_inet,
     echo_inet6,
     echo_local,
     recv_zero_returns_available,
     recv_exact_length,
     recv_default_arities,
     recv_timeout_zero,
     recv_timeout_ms,
     recv_timeout_infinity,
     recv_nowait,
     recv_nowait_partial,
     recv_select_handle,
     accept_nowait,
     accept_timeout,
     connect_nowait,
     cancel_recv,
     cancel_accept,
     close_wakes_recv_waiter,
     close_wakes_accept_waiter,
     close_aborts_nowait_waiters,
     double_close,
     use_after_close,
     eof_closed,
     eof_with_partial_data,
     peer_reset_econnreset,
     bind_eaddrinuse,
     connect_econnrefused,
     owner_death_closes,
     controlling_process,
     concurrent_acceptors,
     badarg_wrong_types,
     invalid_values,
     setopt_getopt_roundtrip,
     setopt_getopt_errors,
     sockname_peername,
     shutdown_write,
     shutdown_read_write,
     is_socket,
     info_socket,
     info_counters,
     info_global,
     send_iolist,
     send_partial_timeout,
     send_partial_nowait, sendfile,
     recv_nowait_after_short_read,
     send_partial_binary_rest,
     bind_local_ip_names,
     open_local_tcp,
     tos_names,
     setopt_controlling_process_not_owner,
     close_leaves_no_message].

init_per_suite(Config) -> Config.

end_per_suite(_Config) -> ok.

init_per_group(Mod, Config) when Mod =:= socket; Mod =:= nifsock ->
    nifsock_api_SUITE:setup_mod(Mod, Config).

end_per_group(_Group, _Config) -> ok.

init_per_testcase(Case, Config) ->
    nifsock_api_SUITE:init_per_testcase(Case, Config).

end_per_testcase(Case, Config) ->
    nifsock_api_SUITE:end_per_testcase(Case, Config).

run(Case, Config) ->
    nifsock_api_SUITE:Case(Config).

%%--------------------------------------------------------------------
%% Cases (each runs nifsock_api_SUITE:api_<name>/1 with the group's module)
%%--------------------------------------------------------------------

%% Ensures every function of the socket-compatible API (and the nifsock
%% extensions) is exported, and nifsock exports nothing this suite does not
%% cover.
exports(Config) -> run(api_exports, Config).

%% Ensures open/2, open/3 (tcp, default protocol, or an options map) and
%% open/4 give distinct stream sockets for inet, inet6 and local.
open_variants(Config) -> run(api_open_variants, Config).

%% Ensures open(FD, #{dup => true}) adopts a duplicate of an existing
%% listening fd (usable for accept; closing it leaves the original open).
open_fd(Config) -> run(api_open_fd, Config).

%% Ensures a full echo exchange over IPv4 loopback (open/bind/listen/connect/
%% accept/send/recv/close).
echo_inet(Config) -> run(api_echo_inet, Config).

%% Ensures a full echo exchange over IPv6 loopback (::1).
echo_inet6(Config) -> run(api_echo_inet6, Config).

%% Ensures a full echo exchange over a unix domain socket in a temp dir, with
%% the path given as a binary and as a string (socket takes both).
echo_local(Config) -> run(api_echo_local, Config).

%% Ensures recv(S, 0) returns what is available (a non-empty prefix) without
%% waiting for more, and all bytes eventually arrive in order.
recv_zero_returns_available(Config) -> run(api_recv_zero_returns_available, Config).

%% Ensures recv(S, N) waits until exactly N bytes are there, across separate
%% sends, and leaves the remainder for the next recv.
recv_exact_length(Config) -> run(api_recv_exact_length, Config).

%% Ensures recv/1, recv(S, Flags), recv(S, N, Flags) and recv/4 with [] flags
%% behave like recv(S, 0) / recv(S, N).
recv_default_arities(Config) -> run(api_recv_default_arities, Config).

%% Ensures recv with timeout 0 never waits: {error, timeout} when nothing is
%% pending, the pending bytes otherwise.
recv_timeout_zero(Config) -> run(api_recv_timeout_zero, Config).

%% Ensures recv with an N ms timeout gives {error, timeout} when nothing comes
%% and {error, {timeout, Partial}} when fewer than N bytes came; the partial
%% bytes are consumed.
recv_timeout_ms(Config) -> run(api_recv_timeout_ms, Config).

%% Ensures recv with timeout infinity blocks until data arrives.
recv_timeout_infinity(Config) -> run(api_recv_timeout_infinity, Config).

%% Ensures recv nowait returns {select, {select_info, recv, Handle}}, the
%% select message arrives when data does, and the retry returns the data.
recv_nowait(Config) -> run(api_recv_nowait, Config).

%% Ensures recv(S, N, nowait) with fewer than N bytes pending returns {select,
%% {SelectInfo, Partial}} and the rest comes after the select message.
recv_nowait_partial(Config) -> run(api_recv_nowait_partial, Config).

%% Ensures a caller-supplied reference as timeout is used as the select
%% handle.
recv_select_handle(Config) -> run(api_recv_select_handle, Config).

%% Ensures accept nowait returns {select, {select_info, accept, H}}, a select
%% message follows an incoming connection and the retry returns it.
accept_nowait(Config) -> run(api_accept_nowait, Config).

%% Ensures accept with a 0 or N ms timeout gives {error, timeout} when no
%% connection is pending, and accept/1 waits for one.
accept_timeout(Config) -> run(api_accept_timeout, Config).

%% Ensures connect nowait returns {select, {select_info, connect, H}}, the
%% select message arrives and connect/1 completes the connection. (A
%% non-blocking TCP connect on Linux always gives EINPROGRESS, loopback too:
%% the SYN-ACK is processed only after the socket lock is released.)
connect_nowait(Config) -> run(api_connect_nowait, Config).

%% Ensures cancel/2 of a pending recv returns ok, no select message follows
%% when data arrives, the data is still readable, and a second cancel of the
%% same select info gives {error, {invalid, SelectInfo}}.
cancel_recv(Config) -> run(api_cancel_recv, Config).

%% Ensures cancel/2 of a pending accept returns ok and no select message
%% follows an incoming connection, which a later accept still gets.
cancel_accept(Config) -> run(api_cancel_accept, Config).

%% Ensures closing a socket wakes a process blocked in recv(S, 0, infinity)
%% with {error, closed}.
close_wakes_recv_waiter(Config) -> run(api_close_wakes_recv_waiter, Config).

%% Ensures closing a listen socket wakes a process blocked in accept(L,
%% infinity) with {error, closed}.
close_wakes_accept_waiter(Config) -> run(api_close_wakes_accept_waiter, Config).

%% Ensures nowait waiters (recv and accept, in other processes and in the
%% closing process itself) get {Tag, S, abort, {Handle, closed}} on close.
close_aborts_nowait_waiters(Config) -> run(api_close_aborts_nowait_waiters, Config).

%% Ensures a second close returns {error, closed}.
double_close(Config) -> run(api_double_close, Config).

%% Ensures every operation on a closed socket returns {error, closed}.
use_after_close(Config) -> run(api_use_after_close, Config).

%% Ensures an orderly close by the peer reads as {error, closed}, repeatedly.
eof_closed(Config) -> run(api_eof_closed, Config).

%% Ensures recv(S, N) that hits EOF after fewer than N bytes returns {error,
%% {closed, Partial}}, then {error, closed}.
eof_with_partial_data(Config) -> run(api_eof_with_partial_data, Config).

%% Ensures a peer that closes with linger {true, 0} (RST) makes recv return
%% {error, econnreset}.
peer_reset_econnreset(Config) -> run(api_peer_reset_econnreset, Config).

%% Ensures bind to an address in use (TCP port, unix path) is {error,
%% eaddrinuse}.
bind_eaddrinuse(Config) -> run(api_bind_eaddrinuse, Config).

%% Ensures connect to a loopback port nobody listens on is {error,
%% econnrefused}, with timeout infinity, N ms and nowait.
connect_econnrefused(Config) -> run(api_connect_econnrefused, Config).

%% Ensures the sockets of a killed owner process are closed and their file
%% descriptors released (/proc/self/fd back to baseline).
owner_death_closes(Config) -> run(api_owner_death_closes, Config).

%% Ensures ownership moves with controlling_process (setopt {otp,
%% controlling_process} too; getopt reports the owner): only the owner may
%% move it (others get the not_owner error), killing the old owner no longer
%% closes it, killing the new owner does.
controlling_process(Config) -> run(api_controlling_process, Config).

%% Ensures 8 processes blocked in accept on one listener all get connections
%% (80 sequential connects), 80 more in a burst are each accepted exactly
%% once, and closing the listener wakes all 8 with {error, closed}.
concurrent_acceptors(Config) -> run(api_concurrent_acceptors, Config).

%% Ensures wrong argument types raise error:badarg, as socket does.
badarg_wrong_types(Config) -> run(api_badarg_wrong_types, Config).

%% Ensures bad values of the right type give the {invalid, What} errors socket
%% gives (returned or raised exactly where socket returns or raises).
invalid_values(Config) -> run(api_invalid_values, Config).

%% Ensures setopt/getopt round trip for reuseaddr, keepalive, nodelay, rcvbuf,
%% sndbuf and linger, and getopt reports the socket type/domain.
setopt_getopt_roundtrip(Config) -> run(api_setopt_getopt_roundtrip, Config).

%% Ensures unknown options and bad option values give {error, {invalid,
%% {socket_option, ...}}}.
setopt_getopt_errors(Config) -> run(api_setopt_getopt_errors, Config).

%% Ensures sockname/peername return #{family, addr, port} maps that agree
%% between the two ends, and peername of a listener is {error, enotconn}.
sockname_peername(Config) -> run(api_sockname_peername, Config).

%% Ensures shutdown(S, write) gives the peer {error, closed} while the other
%% direction still works, and further sends fail with epipe.
shutdown_write(Config) -> run(api_shutdown_write, Config).

%% Ensures shutdown(S, read_write) makes the peer see EOF, read shutdown is
%% accepted, and shutdown of an unconnected socket is {error, enotconn}.
shutdown_read_write(Config) -> run(api_shutdown_read_write, Config).

%% Ensures is_socket/1 is true for sockets (open or closed) and false for
%% other terms (for socket, which has no is_socket/1, the helper checks the
%% documented {'$socket', Ref} representation).
is_socket(Config) -> run(api_is_socket, Config).

%% Ensures info/1 returns a map with the keys socket:info/1 has (domain, type,
%% protocol, owner, counters, ...) and the right values for a TCP socket.
info_socket(Config) -> run(api_info_socket, Config).

%% Ensures the per-socket counters of info/1 count bytes, calls, the largest
%% transfer and accepts the same way.
info_counters(Config) -> run(api_info_counters, Config).

%% Ensures info/0 returns a map of integer counters.
info_global(Config) -> run(api_info_global, Config).

%% Ensures send/2,3,4 accept binaries and nested iolists (binaries, bytes,
%% sub-lists) and the peer receives exactly the flattened bytes in order.
send_iolist(Config) -> run(api_send_iolist, Config).

%% Ensures a send that cannot complete within timeout 0 / N ms returns {error,
%% {timeout, Rest}} with Rest the unsent tail (a send that writes nothing
%% gives {error, timeout}), and the peer receives exactly the flattened bytes
%% in order once it reads.
send_partial_timeout(Config) -> run(api_send_partial_timeout, Config).

%% Ensures send nowait of more than fits returns {select, {SelectInfo, Rest}}
%% (tag send), a select message comes when the peer reads, and continuing with
%% the select info delivers exactly the flattened bytes in order.
send_partial_nowait(Config) -> run(api_send_partial_nowait, Config).
sendfile(Config) -> run(api_sendfile, Config).

%% Ensures a nowait recv (of what is there, and of an exact length) returns
%% data that arrived after a short read emptied the socket, not a select.
recv_nowait_after_short_read(Config) -> run(api_recv_nowait_after_short_read, Config).

%% Ensures the unsent rest of a partial send of one binary is a binary, with
%% nowait, timeout 0 and N ms.
send_partial_binary_rest(Config) -> run(api_send_partial_binary_rest, Config).

%% Ensures bind(LocalSocket, any | loopback | broadcast) is {error,
%% eafnosupport}, and bind(Inet6Socket, broadcast) names the sockaddr.
bind_local_ip_names(Config) -> run(api_bind_local_ip_names, Config).

%% Ensures open(local, stream, tcp) is {error, eprotonosupport}.
open_local_tcp(Config) -> run(api_open_local_tcp, Config).

%% Ensures {ip, tos} takes lowdelay, throughput, reliability, mincost or an
%% integer, and getopt names the values that have an atom.
tos_names(Config) -> run(api_tos_names, Config).

%% Ensures setopt(S, {otp, controlling_process}, V) by a non-owner is {error,
%% {invalid, not_owner}}, and by the owner with a non-pid V an invalid option.
setopt_controlling_process_not_owner(Config) -> run(api_setopt_controlling_process_not_owner, Config).

%% Ensures a blocking send, recv or accept ended by another process's close
%% leaves no select or abort message behind (100 races each).
close_leaves_no_message(Config) -> run(api_close_leaves_no_message, Config).
