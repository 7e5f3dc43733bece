%% @private
%% @doc NIF stubs of nifsock. Nothing but stubs and the loader: the public API,
%% argument checks and timeout loops are in `nifsock' (its waits in
%% `nifsock_wait').
-module(nifsock_nif).

-export([open/4, adopt/2, bind/2, listen/2, accept/3, connect/4, connect_finish/1,
         recv/5, take_partial/1, send/5, sendfile/6, close/1, finish_close/1, shutdown/2,
         setopt/4, getopt/3, tcp_getopt_raw/4, sockname/1, peername/1, cancel/3,
         controlling_process/2, info/1, stats/0,
         tcp_accept/4, tcp_deliver/1, tcp_set_active/3, tcp_set_format/7,
         tcp_send_info/1, tcp_send/3, tcp_send_flat/3, tcp_getopts/1, tcp_recv/4, tcp_ended/2, tcp_unread/2,
         tcp_shutdown/2, tcp_setopts/2, tcp_send_timeout/2, tcp_send_timeout_dirty/2,
         tcp_flush/3, tcp_pause/1, tcp_move/2, tcp_tags/1, tcp_peername/1,
         tcp_sockname/1,
         readiness_pump/1, readiness_pump_drain/0, readiness_port_hold/1, dist_attach/2,
         recv_yield/1, reply_yield/1, tcp_read_after_yield/2]).

-nifs([open/4, adopt/2, bind/2, listen/2, accept/3, connect/4, connect_finish/1,
       recv/5, take_partial/1, send/5, sendfile/6, close/1, finish_close/1, shutdown/2,
       setopt/4, getopt/3, tcp_getopt_raw/4, sockname/1, peername/1, cancel/3,
       controlling_process/2, info/1, stats/0,
         tcp_accept/4, tcp_deliver/1, tcp_set_active/3, tcp_set_format/7,
         tcp_send_info/1, tcp_send/3, tcp_send_flat/3, tcp_getopts/1, tcp_recv/4, tcp_ended/2, tcp_unread/2,
         tcp_shutdown/2, tcp_setopts/2, tcp_send_timeout/2, tcp_send_timeout_dirty/2,
         tcp_flush/3, tcp_pause/1, tcp_move/2, tcp_tags/1, tcp_peername/1,
         tcp_sockname/1,
         readiness_pump/1, readiness_pump_drain/0, readiness_port_hold/1, dist_attach/2,
         recv_yield/1, reply_yield/1, tcp_read_after_yield/2]).

-on_load(load/0).

-type sock() :: nifsock:socket().
-type mode() :: wait | nowait | zero.
%% recv after its `yield' reply and erlang:yield(): reads first.
-type recv_mode() :: mode() | yielded.

-spec load() -> ok | {error, term()}.
load() ->
    Dir = case code:priv_dir(nifsock) of
              {error, bad_name} ->
                  filename:join(filename:dirname(filename:dirname(code:which(?MODULE))), "priv");
              D ->
                  D
          end,
    %% Loading this module again (a release upgrade, `code:load_file/1')
    %% upgrades the library in place when Dir's file is another copy than
    %% the loaded one: see "Upgrades" in the README.
    case erlang:load_nif(filename:join(Dir, "libnifsock"), 0) of
        ok ->
            %% Blocking recv(S, 0) calls may yield before they read
            %% (application env `recv_yield', default true; see nifsock:recv/4).
            _ = application:load(nifsock),
            ok = recv_yield(application:get_env(nifsock, recv_yield, true) =/= false),
            %% An active socket's owner may yield after its reply and read
            %% the next request itself (application env `reply_yield',
            %% default false; see nifsock_tcp:send/2).
            ok = reply_yield(application:get_env(nifsock, reply_yield, false) =:= true),
            %% Which hot sockets the readiness port holds (application env
            %% `port_hold', default `alone': nifsock_readiness:port_hold/0).
            ok = readiness_port_hold(nifsock_readiness:port_hold()),
            %% The readiness source (application env `readiness', see
            %% nifsock_readiness): the driver path unless configured otherwise.
            nifsock_readiness:on_load();
        {error, {upgrade, Text}} = Error ->
            logger:error("nifsock: the NIF library was not upgraded: ~ts (~ts)",
                         [Text, upgrade_refusal(Text)]),
            Error;
        Error ->
            Error
    end.

%% What the upgrade callback's veto code (sys/entry.rs) means.
upgrade_refusal(Text) ->
    case re:run(Text, "\\(([0-9]+)\\)", [{capture, all_but_first, list}]) of
        {match, ["1"]} -> "the loaded library predates upgrade support";
        {match, ["2"]} -> "the new build lays sockets out differently: restart the node";
        {match, ["3"]} -> "the readiness source is in use: restart the node";
        _ -> "registering the resource types failed"
    end.

-spec open(atom(), atom(), atom() | integer(), undefined | binary()) ->
          {ok, sock()} | {error, term()}.
open(_Domain, _Type, _Protocol, _Netns) -> erlang:nif_error(nif_not_loaded).

-spec adopt(integer(), boolean()) -> {ok, sock()} | {error, term()}.
adopt(_Fd, _Dup) -> erlang:nif_error(nif_not_loaded).

-spec bind(sock(), term()) -> ok | {error, term()}.
bind(_S, _Addr) -> erlang:nif_error(nif_not_loaded).

-spec listen(sock(), integer()) -> ok | {error, term()}.
listen(_S, _Backlog) -> erlang:nif_error(nif_not_loaded).

-spec accept(sock(), term(), mode()) -> {ok, sock()} | select | {error, term()}.
accept(_L, _Handle, _Mode) -> erlang:nif_error(nif_not_loaded).

-spec connect(sock(), term(), term(), mode()) -> ok | select | {error, term()}.
connect(_S, _Addr, _Handle, _Mode) -> erlang:nif_error(nif_not_loaded).

-spec connect_finish(sock()) -> ok | {error, term()}.
connect_finish(_S) -> erlang:nif_error(nif_not_loaded).

-spec recv(sock(), non_neg_integer(), list(), term(), recv_mode()) ->
          {ok, binary()} | select | {select, binary()} | more | yield | {error, term()}.
recv(_S, _Len, _Flags, _Handle, _Mode) -> erlang:nif_error(nif_not_loaded).

-spec take_partial(sock()) -> binary().
take_partial(_S) -> erlang:nif_error(nif_not_loaded).

%% `iovec': nothing sent, the data is not binaries alone or has more pieces
%% than the NIF gathers (nifsock:send/4 flattens it and calls again).
-spec send(sock(), iodata(), list(), term(), mode()) ->
          ok | {select, non_neg_integer()} | {more, non_neg_integer()} | iovec | {error, term()}.
send(_S, _Data, _Flags, _Handle, _Mode) -> erlang:nif_error(nif_not_loaded).

-spec sendfile(sock(), integer(), integer(), non_neg_integer(), term(), mode()) ->
          {ok, non_neg_integer()} | {more | select, non_neg_integer()} | {error, term()}.
sendfile(_S, _FileFd, _Offset, _Count, _Handle, _Mode) -> erlang:nif_error(nif_not_loaded).

-spec close(sock()) -> ok | linger | {error, term()}.
close(_S) -> erlang:nif_error(nif_not_loaded).

-spec finish_close(sock()) -> ok.
finish_close(_S) -> erlang:nif_error(nif_not_loaded).

-spec shutdown(sock(), read | write | read_write) -> ok | {error, term()}.
shutdown(_S, _How) -> erlang:nif_error(nif_not_loaded).

-spec setopt(sock(), term(), term(), term()) -> ok | {error, term()}.
setopt(_S, _Level, _Name, _Value) -> erlang:nif_error(nif_not_loaded).

-spec getopt(sock(), term(), term()) -> {ok, term()} | {error, term()}.
getopt(_S, _Level, _Name) -> erlang:nif_error(nif_not_loaded).

-spec tcp_getopt_raw(sock(), integer(), integer(), binary()) -> {ok, binary()} | {error, term()}.
tcp_getopt_raw(_S, _Level, _Name, _Init) -> erlang:nif_error(nif_not_loaded).

-spec sockname(sock()) -> {ok, map()} | {error, term()}.
sockname(_S) -> erlang:nif_error(nif_not_loaded).

-spec peername(sock()) -> {ok, map()} | {error, term()}.
peername(_S) -> erlang:nif_error(nif_not_loaded).

-spec cancel(sock(), atom(), term()) -> ok | select_sent | not_found | {error, term()}.
cancel(_S, _Op, _Handle) -> erlang:nif_error(nif_not_loaded).

-spec controlling_process(sock(), pid()) -> ok | {error, term()}.
controlling_process(_S, _Pid) -> erlang:nif_error(nif_not_loaded).

-spec info(sock()) -> map().
info(_S) -> erlang:nif_error(nif_not_loaded).

-spec stats() -> #{atom() => integer()}.
stats() -> erlang:nif_error(nif_not_loaded).

%%% nifsock_tcp's data path

-spec tcp_accept(sock(), term(), mode(), pid()) -> {ok, sock()} | select | {error, term()}.
tcp_accept(_L, _Handle, _Mode, _Pump) -> erlang:nif_error(nif_not_loaded).

-spec tcp_deliver(sock()) -> ok.
tcp_deliver(_S) -> erlang:nif_error(nif_not_loaded).

-spec tcp_set_active(sock(), boolean() | once | integer(), pid()) -> ok | {error, term()}.
tcp_set_active(_S, _Active, _Pump) -> erlang:nif_error(nif_not_loaded).

-spec tcp_set_format(sock(), raw | line | 0..4, non_neg_integer(), boolean(),
                     non_neg_integer() | infinity, boolean(), 0..255) -> ok | {error, term()}.
tcp_set_format(_S, _Packet, _PacketSize, _List, _SendTimeout, _KeepOpen, _LineDelimiter) ->
    erlang:nif_error(nif_not_loaded).

-spec tcp_shutdown(sock(), read | write | read_write) -> ok | {error, term()}.
tcp_shutdown(_S, _How) -> erlang:nif_error(nif_not_loaded).

-spec tcp_ended(sock(), boolean()) -> {error, closed | econnreset}.
tcp_ended(_S, _Reset) -> erlang:nif_error(nif_not_loaded).

-spec tcp_setopts(sock(), [{atom(), term()}]) -> ok | {error, term()}.
tcp_setopts(_S, _Opts) -> erlang:nif_error(nif_not_loaded).

-spec tcp_send_timeout(sock(), [binary()]) -> ok | {error, term()}.
tcp_send_timeout(_S, _Rest) -> erlang:nif_error(nif_not_loaded).

-spec tcp_send_timeout_dirty(sock(), [binary()]) -> ok | {error, term()}.
tcp_send_timeout_dirty(_S, _Rest) -> erlang:nif_error(nif_not_loaded).

-spec tcp_flush(sock(), term(), mode()) -> ok | select | {error, term()}.
tcp_flush(_S, _Handle, _Mode) -> erlang:nif_error(nif_not_loaded).

-spec tcp_pause(sock()) ->
          {ok, boolean() | once | integer(), {atom(), atom(), atom(), atom()}} | {error, term()}.
tcp_pause(_S) -> erlang:nif_error(nif_not_loaded).

-spec tcp_tags(sock()) -> {atom(), atom(), atom(), atom()}.
tcp_tags(_S) -> erlang:nif_error(nif_not_loaded).

%% nifsock_dist's port carrier: the socket's connection goes to the dist port
%% (a dup of its fd, parked for the port's attach port_control) and the
%% socket is closed.
-spec dist_attach(sock(), port()) -> ok | {error, term()}.
dist_attach(_S, _Port) -> erlang:nif_error(nif_not_loaded).

-spec tcp_unread(sock(), binary()) -> ok.
tcp_unread(_S, _Bytes) -> erlang:nif_error(nif_not_loaded).

-spec tcp_move(sock(), pid()) ->
          ok | {ok, boolean() | once | integer(), {atom(), atom(), atom(), atom()}} |
          {error, term()}.
tcp_move(_S, _Pid) -> erlang:nif_error(nif_not_loaded).

-spec tcp_peername(sock()) ->
          {ok, {inet:ip_address(), inet:port_number()} | {local, binary()}} | {error, term()}.
tcp_peername(_S) -> erlang:nif_error(nif_not_loaded).

-spec tcp_sockname(sock()) ->
          {ok, {inet:ip_address(), inet:port_number()} | {local, binary()}} | {error, term()}.
tcp_sockname(_S) -> erlang:nif_error(nif_not_loaded).

-spec tcp_send(sock(), iodata(), term()) ->
          ok | yield | {select, non_neg_integer(), non_neg_integer() | infinity} |
          {raw | line | 1 | 2 | 4, non_neg_integer() | infinity, boolean()} | {error, term()}.
tcp_send(_S, _IOV, _Handle) -> erlang:nif_error(nif_not_loaded).

-spec tcp_send_flat(sock(), iodata(), term()) ->
          ok | yield | {select, non_neg_integer(), non_neg_integer() | infinity} |
          {raw | line | 1 | 2 | 4, non_neg_integer() | infinity, boolean()} | {error, term()}.
tcp_send_flat(_S, _Data, _Handle) -> erlang:nif_error(nif_not_loaded).

-spec tcp_send_info(sock()) -> {raw | line | 1 | 2 | 4, non_neg_integer() | infinity, boolean()}.
tcp_send_info(_S) -> erlang:nif_error(nif_not_loaded).

-spec tcp_getopts(sock()) -> map() | {error, term()}.
tcp_getopts(_S) -> erlang:nif_error(nif_not_loaded).

-spec tcp_recv(sock(), non_neg_integer(), term(), recv_mode()) ->
          {ok, binary() | string()} | select | more | yield | {error, term()}.
tcp_recv(_S, _Len, _Handle, _Mode) -> erlang:nif_error(nif_not_loaded).

-spec readiness_pump(boolean()) -> ok | {error, invalid}.
readiness_pump(_On) -> erlang:nif_error(nif_not_loaded).

-spec recv_yield(boolean()) -> ok.
recv_yield(_On) -> erlang:nif_error(nif_not_loaded).

-spec reply_yield(boolean()) -> ok.
reply_yield(_On) -> erlang:nif_error(nif_not_loaded).

-spec tcp_read_after_yield(sock(), boolean()) -> ok.
tcp_read_after_yield(_S, _OnHeap) -> erlang:nif_error(nif_not_loaded).

-spec readiness_port_hold(alone | any) -> ok | {error, {invalid, port_hold}}.
readiness_port_hold(_Rule) -> erlang:nif_error(nif_not_loaded).

-spec readiness_pump_drain() -> ok | {error, invalid}.
readiness_pump_drain() -> erlang:nif_error(nif_not_loaded).
