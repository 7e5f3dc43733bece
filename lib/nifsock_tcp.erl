%% @doc A gen_tcp-shaped API over nifsock: `{IP, Port}' addresses, inet-style
%% options, active modes (`{active, true | false | once | N}') and packet
%% framing (`{packet, raw | 0 | 1 | 2 | 4 | line}', `{line_delimiter, C}').
%%
%% Active messages are `{nifsock, S, Data}', `{nifsock_closed, S}',
%% `{nifsock_error, S, Reason}' and `{nifsock_passive, S}', or with
%% `{tags, gen_tcp}' gen_tcp's `{tcp, S, Data}', `{tcp_closed, S}',
%% `{tcp_error, S, Reason}' and `{tcp_passive, S}' (`{tags, {Data, Closed,
%% Error, Passive}}' names any four atoms). The tags are kept in the socket as
%% atoms: choosing them costs nothing per message. An active socket's
%% readiness goes to a pump process shared by all sockets of a scheduler; the
%% pump's NIF call reads and sends the owner one message per packet, so no
%% process sits between a connection and its owner. A socket made active when
%% data is already there gets it delivered at once, without a select.
%%
%% Accepted sockets get the listener's options without system calls: Linux
%% copies socket-level options (reuseaddr, reuseport, keepalive, nodelay,
%% nopush, buffer sizes, linger, tos, ttl, keepidle, tclass) to accepted
%% sockets, and nifsock copies its own (active, packet, packet_size, mode,
%% send_timeout, exit_on_close, line_delimiter, buffer, header, delay_send,
%% the watermarks, send_timeout_close, show_econnreset, deliver, tags) inside the
%% accept call. SO_PRIORITY is the exception Linux doesn't copy: when a
%% priority was set on the listener, accept sets it (one setsockopt).
%%
%% Every option `setopts/2' takes, `getopts/2' reads, with gen_tcp's defaults.
%% Where one works differently from gen_tcp's (`delay_send', the watermarks,
%% `deliver'), the README ("Differences from gen_tcp") says how and why.
-module(nifsock_tcp).

-export([listen/2, accept/1, accept/2, connect/2, connect/3, connect/4, send/2, recv/2, recv/3,
         close/1, shutdown/2, setopts/2, getopts/2, controlling_process/2,
         peername/1, sockname/1, port/1, getstat/1, getstat/2]).
-export([flush_queued/2]).

-export_type([socket/0, option/0, tags/0, sockaddr/0]).

-include("nifsock_internal.hrl").

%% The options nifsock_tcp keeps in the socket (tcp_set_format/7 sets them all).
-define(FORMAT, [packet, packet_size, mode, send_timeout, exit_on_close, line_delimiter]).
%% A timed-out send's rest at least this large is copied on a dirty scheduler.
-define(DIRTY_COPY, (1024 * 1024)).
%% The largest iodata send/2 copies together before sending (tcp_send_flat/3):
%% as large as the NIF's gather buffer, so no more is copied than a walk
%% would copy.
-define(FLAT_SEND_MAX, 1024).
%% The largest `{raw, _, _, Size}' getopts reads (inet_drv's limit).
-define(RAW_GETOPT_MAX, 65522).
-define(IS_INT32(I), (is_integer(I) andalso I >= -16#80000000 andalso I =< 16#7fffffff)).

-type socket() :: nifsock:socket().
%% gen_tcp's `socket:sockaddr_in() | socket:sockaddr_in6()' (for connect/2,3
%% and `{ifaddr, SockAddr}').
-type sockaddr() :: #{family := inet | inet6, addr := inet:ip_address() | any | loopback,
                      port => inet:port_number(), flowinfo => non_neg_integer(),
                      scope_id => non_neg_integer()}.
%% The active-message tags: `nifsock' (the default: `{nifsock, nifsock_closed,
%% nifsock_error, nifsock_passive}'), `gen_tcp' (`{tcp, tcp_closed, tcp_error,
%% tcp_passive}'), or `{Data, Closed, Error, Passive}'. getopts reads the tuple.
-type tags() :: nifsock | gen_tcp | {atom(), atom(), atom(), atom()}.
-type option() :: binary | list | inet | inet6 | local
                | {active, boolean() | once | -32768..32767}
                | {packet, raw | 0 | 1 | 2 | 4 | line} | {packet_size, non_neg_integer()}
                | {line_delimiter, char()}
                | {mode, binary | list} | {reuseaddr, boolean()} | {reuseport, boolean()}
                | {nodelay, boolean()} | {keepalive, boolean()} | {backlog, integer()}
                | {ip, inet:ip_address() | any | loopback}
                | {ifaddr, inet:ip_address() | any | loopback | {local, binary() | string()} | sockaddr()}
                | {port, inet:port_number()} | {buffer, pos_integer()}
                | {recbuf, pos_integer()} | {sndbuf, pos_integer()}
                | {linger, {boolean(), non_neg_integer()}} | {send_timeout, timeout()}
                | {exit_on_close, boolean()} | {priority, integer()} | {tos, integer()}
                | {header, non_neg_integer()} | {delay_send, boolean()}
                | {high_watermark, integer()} | {low_watermark, integer()}
                | {high_msgq_watermark, pos_integer()} | {low_msgq_watermark, pos_integer()}
                | {send_timeout_close, boolean()} | {show_econnreset, boolean()}
                | {deliver, port | term}
                | {tags, tags()}
                | {ipv6_v6only, boolean()} | {nopush, boolean()} | {tclass, integer()}
                | {raw, integer(), integer(), binary() | integer()} | {atom(), term()}.

%%% ------------------------------------------------------------------
%%% Connections

%% @doc Listens on `Port' (0: any), as `gen_tcp:listen/2'. Default backlog 5.
%% As gen_tcp, a bad port or option exits with `badarg', the kernel
%% application's `inet_default_listen_options' come before `Opts' (less
%% `active'), and `{ifaddr, A}' binds to an address, a `{local, Path}' (`<<>>':
%% an abstract autobound name, Linux) or a `socket:sockaddr_in() | sockaddr_in6()' map.
-spec listen(inet:port_number(), [option()]) -> {ok, socket()} | {error, term()}.
listen(Port, Opts) when is_list(Opts) ->
    is_port_number(Port) orelse exit(badarg),
    #{domain := Domain} = P =
        parse_or_exit(defaults(inet_default_listen_options) ++ Opts, #{port => Port}),
    with_socket(Domain, P, fun(S) ->
        ok = ok(bind_addr(S, P)),
        ok = ok(nifsock:listen(S, maps:get(backlog, P, 5))),
        ok = ok(set_active(S, maps:get(active, P, true))),
        {ok, S}
    end);
listen(Port, Opts) ->
    erlang:error(badarg, [Port, Opts]).

%% @equiv accept(L, infinity)
-spec accept(socket()) -> {ok, socket()} | {error, term()}.
accept(L) ->
    accept(L, infinity).

%% @doc Accepts a connection; it inherits the listener's options.
-spec accept(socket(), timeout()) -> {ok, socket()} | {error, term()}.
accept(L, Timeout) ->
    accept_loop(L, ?WAIT_HANDLE(), deadline(Timeout)).

accept_loop(L, H, Deadline) ->
    case nifsock_nif:tcp_accept(L, H, mode(Deadline), nifsock_tcp_pump:for_caller()) of
        select ->
            case nifsock_wait:await(L, accept, H, Deadline) of
                select -> accept_loop(L, H, Deadline);
                timeout -> {error, timeout};
                Reason -> {error, Reason}
            end;
        Result ->
            Result
    end.

%% @equiv connect(SockAddr, Opts, infinity)
-spec connect(sockaddr(), [option()]) -> {ok, socket()} | {error, term()}.
connect(SockAddr, Opts) ->
    connect(SockAddr, Opts, infinity).

%% @doc `connect(Address, Port, Opts)' is `connect(Address, Port, Opts,
%% infinity)'; `connect(SockAddr, Opts, Timeout)' connects to a
%% `socket:sockaddr_in() | sockaddr_in6()' map, as gen_tcp's (OTP 24 on).
-spec connect(inet:socket_address() | inet:hostname() | sockaddr(),
              inet:port_number() | [option()], [option()] | timeout()) ->
          {ok, socket()} | {error, term()}.
connect(SockAddr, Opts, Timeout) when is_map(SockAddr) ->
    is_list(Opts) andalso (Timeout =:= infinity orelse is_integer(Timeout) andalso Timeout >= 0)
        orelse erlang:error(badarg, [SockAddr, Opts, Timeout]),
    case inet_sockaddr(SockAddr) of
        {Family, IP, Port} ->
            P = parse_or_exit(defaults(inet_default_connect_options) ++ Opts, #{}),
            connect_to(family_of(P, Family), IP, SockAddr#{port => Port}, Timeout);
        false ->
            erlang:error(badarg, [SockAddr, Opts, Timeout])
    end;
connect(Address, Port, Opts) ->
    connect(Address, Port, Opts, infinity).

%% @doc Connects, as `gen_tcp:connect/4'. As gen_tcp, a bad port, address
%% tuple or option exits with `badarg', the kernel application's
%% `inet_default_connect_options' come before `Opts' (less `active'), and a
%% `{local, Path}' address is a unix connect (no `local' option needed).
-spec connect(inet:socket_address() | inet:hostname(), inet:port_number(), [option()],
              timeout()) -> {ok, socket()} | {error, term()}.
connect(Address, Port, Opts, Timeout)
  when is_list(Opts), Timeout =:= infinity orelse is_integer(Timeout) andalso Timeout >= 0 ->
    is_port_number(Port) orelse exit(badarg),
    P0 = address_family(Address,
                        parse_or_exit(defaults(inet_default_connect_options) ++ Opts, #{}), Opts),
    case resolve(Address, maps:get(domain, P0), [Address, Port, Opts, Timeout]) of
        {ok, IP} ->
            #{domain := Domain} = P0,
            connect_to(P0, IP, sockaddr(Domain, IP, Port), Timeout);
        {error, _} = Error ->
            Error
    end;
connect(Address, Port, Opts, Timeout) ->
    erlang:error(badarg, [Address, Port, Opts, Timeout]).

connect_to(P0, IP, Remote, Timeout) ->
    #{domain := Domain} = P = P0#{remote => IP},
    with_socket(Domain, P, fun(S) ->
        case maps:is_key(ip, P) orelse maps:is_key(port, P) orelse maps:is_key(ifaddr_map, P)
                 orelse maps:is_key(path, P) of
            true -> ok = ok(bind_addr(S, P));
            false -> ok
        end,
        case nifsock:connect(S, Remote, Timeout) of
            ok ->
                ok = ok(set_active(S, maps:get(active, P, true))),
                {ok, S};
            {error, _} = Error ->
                throw(Error)
        end
    end).

%% As gen_tcp, the address gives the family: `{local, Path}' is a unix
%% address whether or not the options say `local' (inet or inet6 with it exits
%% with badarg), an address tuple is inet or inet6 (another family option:
%% `eafnosupport').
address_family({local, _}, P, Opts) ->
    lists:any(fun(O) -> O =:= inet orelse O =:= inet6 end, Opts) andalso exit(badarg),
    P#{domain => local};
address_family(IP, P, _Opts) when is_tuple(IP) ->
    case inet:is_ip_address(IP) of
        true -> family_of(P, ip_family(IP));
        false -> P
    end;
address_family(_Address, P, _Opts) ->
    P.

ip_family(IP) when tuple_size(IP) =:= 4 -> inet;
ip_family(IP) when tuple_size(IP) =:= 8 -> inet6.

%% A `socket:sockaddr_in() | sockaddr_in6()' map's family, address and port
%% (false if it is none).
inet_sockaddr(#{family := F, addr := IP} = SA) when F =:= inet; F =:= inet6 ->
    Port = maps:get(port, SA, 0),
    Valid = (IP =:= any orelse IP =:= loopback
             orelse inet:is_ip_address(IP) andalso tuple_size(IP) =:= family_size(F))
        andalso is_port_number(Port),
    Valid andalso {F, IP, Port};
inet_sockaddr(_) ->
    false.

family_size(inet) -> 4;
family_size(inet6) -> 8.

%% The options with a sockaddr map's family: another family option is gen_tcp's
%% `eafnosupport'.
family_of(#{family_set := true, domain := D} = P, F) when D =/= F ->
    P#{open_error => eafnosupport};
family_of(P, F) ->
    P#{domain => F}.

with_socket(_Domain, #{open_error := Reason}, _Fun) ->
    {error, Reason};
with_socket(Domain, P, Fun) ->
    case nifsock:open(Domain, stream, case Domain of local -> default; _ -> tcp end) of
        {ok, S} ->
            try
                ok = ok(apply_sockopts(S, maps:get(sockopts, P, []))),
                ok = ok(set_format(S, P)),
                ok = ok(set_layer_opts(S, lists:reverse(maps:get(layer, P, [])))),
                Fun(S)
            catch
                throw:{error, _} = Error ->
                    _ = nifsock:close(S),
                    %% as setopts/2 (gen_tcp says einval for bad values)
                    invalid_einval(Error);
                Class:Reason:Stack ->
                    _ = nifsock:close(S),
                    erlang:raise(Class, Reason, Stack)
            end;
        Error ->
            Error
    end.

invalid_einval({error, {invalid, _}}) -> {error, einval};
invalid_einval(Error) -> Error.

ok(ok) -> ok;
ok({error, _} = E) -> throw(E).

%%% ------------------------------------------------------------------
%%% Data

%% @doc Sends iodata (with a length header in `{packet, N}' mode), as `gen_tcp:send/2'.
%%
%% With `{send_timeout, T}', a send that times out returns `{error, timeout}'
%% and, as gen_tcp, keeps what it could not write queued in the socket: the
%% next send (from any process) writes it first, so a timeout never cuts a
%% packet and no later data overtakes it (`getstat' shows the queued bytes as
%% `send_pend'). With `{send_timeout_close, true}' the timeout closes the
%% socket instead. A connection reset is `{error, closed}', or `{error,
%% econnreset}' with `{show_econnreset, true}'.
%%
%% With the application env `reply_yield' set to `true' (off by default), on
%% an active socket the owner's first send after data was delivered to it
%% (once the connection has gone request, reply, request) may yield before it
%% returns and then read the peer's next bytes, which arrive as the usual
%% `{nifsock, S, Data}' message (see the README's "How it is built").
-spec send(socket(), iodata()) -> ok | {error, term()}.
send(S, Data) when is_binary(Data) ->
    %% One NIF call in the common case; tcp_send/3 sends nothing and answers
    %% tcp_send_info/1's tuple when a header is to be added, bytes of a
    %% timed-out send are queued or send_timeout is 0.
    H = ?WAIT_HANDLE(),
    IOV = [Data],
    case nifsock_nif:tcp_send(S, IOV, H) of
        ok -> ok;
        yield -> read_after_yield(S);
        {select, N, Timeout} -> send_waited(S, Data, N, H, deadline(Timeout));
        {error, {Reason, N}} when is_integer(N) -> send_error(S, Reason);
        {error, _} = Error -> sent(S, IOV, Error);
        {Packet, Timeout, Queued} -> send(S, Data, Packet, Timeout, Queued)
    end;
send(S, Data) when is_list(Data) ->
    %% Nested lists of binaries (Cowboy's responses) go out in the same one
    %% call, without erlang:iolist_to_iovec/1; tcp_send/3 answers the tuple,
    %% having sent nothing, for other iodata too (byte integers, many binaries).
    %% Short iodata (iolist_size/1 walks it in C, and raises badarg for what
    %% is not iodata) is copied together in one erl_nif call (tcp_send_flat/3)
    %% rather than walked in the NIF one call per binary.
    H = ?WAIT_HANDLE(),
    Sent = case iolist_size(Data) =< ?FLAT_SEND_MAX of
               true -> nifsock_nif:tcp_send_flat(S, Data, H);
               false -> nifsock_nif:tcp_send(S, Data, H)
           end,
    case Sent of
        ok -> ok;
        yield -> read_after_yield(S);
        {select, N, Timeout} -> send_waited(S, Data, N, H, deadline(Timeout));
        {error, {Reason, N}} when is_integer(N) -> send_error(S, Reason);
        {error, _} = Error -> sent(S, Data, Error);
        {Packet, Timeout, Queued} -> send(S, Data, Packet, Timeout, Queued)
    end;
send(S, Data) ->
    {Packet, Timeout, Queued} = nifsock_nif:tcp_send_info(S),
    send(S, Data, Packet, Timeout, Queued).

%% The send was the owner's reply to data delivered to it (an active
%% socket): after the other runnable processes ran, the peer's next request is
%% usually there, and one read in this call delivers it (`{nifsock, S, Data}'
%% in the owner's mailbox as the readiness drain would have sent it, with no
%% drain and no message from the readiness port). Application env
%% `reply_yield' (default false) turns this on. Only for an owner whose
%% messages are on its heap: with `off_heap', ERTS may buffer this process's
%% messages to itself and the readiness port's apart and hand them over in
%% the buffers' order, not the order sent (the socket then yields no more).
read_after_yield(S) ->
    case erlang:process_info(self(), message_queue_data) of
        {message_queue_data, on_heap} ->
            erlang:yield(),
            nifsock_nif:tcp_read_after_yield(S, true);
        _ ->
            nifsock_nif:tcp_read_after_yield(S, false)
    end.

send(S, Data, Packet, Timeout, Queued) ->
    IOV = case Packet of
              N when is_integer(N) -> [<<(iolist_size(Data)):N/unit:8>>, Data];
              _ -> Data
          end,
    case Queued of
        false -> sent(S, IOV, nifsock:send(S, IOV, [], Timeout));
        true -> send_after_rest(S, IOV, deadline(Timeout))
    end.

%% tcp_send/3 wrote N bytes of Data and armed a select (handle H) for the
%% rest: wait for it as nifsock:send/4 does, then send the rest.
send_waited(S, Data, N, H, Deadline) ->
    Rest = unsent(Data, N),
    case nifsock_wait:await(S, send, H, Deadline) of
        select -> sent(S, Rest, nifsock:send(S, Rest, [], nifsock_wait:remaining(Deadline)));
        timeout -> timed_out(S, Rest);
        Reason -> send_error(S, Reason)
    end.

%% What is left of Data after its first N bytes, as a list of binaries.
unsent(Data, N) when is_binary(Data) ->
    [binary_part(Data, N, byte_size(Data) - N)];
unsent(Data, N) ->
    drop(erlang:iolist_to_iovec(Data), N).

drop([B | T], N) when byte_size(B) =< N -> drop(T, N - byte_size(B));
drop([B | T], N) when N > 0 -> [binary_part(B, N, byte_size(B) - N) | T];
drop(IOV, _) -> IOV.

sent(_S, _IOV, ok) -> ok;
sent(S, _IOV, {error, {timeout, Rest}}) -> timed_out(S, Rest);
sent(S, IOV, {error, timeout}) -> timed_out(S, IOV);
sent(S, _IOV, {error, {Reason, _Rest}}) -> send_error(S, Reason);
sent(S, _IOV, {error, Reason}) -> send_error(S, Reason).

%% The bytes a timed-out send didn't write stay queued (or, with
%% send_timeout_close, the socket is closed). They are copied: a large rest
%% is copied on a dirty scheduler.
timed_out(S, Rest) ->
    IOV = erlang:iolist_to_iovec(Rest),
    _ = case iolist_size(IOV) >= ?DIRTY_COPY of
            true -> nifsock_nif:tcp_send_timeout_dirty(S, IOV);
            false -> nifsock_nif:tcp_send_timeout(S, IOV)
        end,
    {error, timeout}.

%% What earlier timed-out sends queued goes out first, within this send's time.
send_after_rest(S, IOV, Deadline) ->
    case flush(S, ?WAIT_HANDLE(), Deadline) of
        ok -> sent(S, IOV, nifsock:send(S, IOV, [], nifsock_wait:remaining(Deadline)));
        {error, timeout} -> timed_out(S, IOV);
        {error, Reason} -> send_error(S, Reason)
    end.

flush(S, H, Deadline) ->
    case nifsock_nif:tcp_flush(S, H, mode(Deadline)) of
        select ->
            case nifsock_wait:await(S, send, H, Deadline) of
                select -> flush(S, H, Deadline);
                timeout -> {error, timeout};
                Reason -> {error, Reason}
            end;
        {error, closed} = Error ->
            %% closed after our select message came: its abort may follow it
            receive ?MSG(S, abort, {H, _}) -> ok after 0 -> ok end,
            Error;
        Result ->
            Result
    end.

%% @private
%% @doc Writes what timed-out sends left queued (see {@link send/2}), within
%% `Timeout', for a caller about to write on the socket other than through
%% `send/2' (`nifsock_ranch''s sendfile), so that its bytes don't overtake them.
-spec flush_queued(socket(), timeout()) -> ok | {error, term()}.
flush_queued(S, Timeout) ->
    case nifsock_nif:tcp_send_info(S) of
        {_, _, false} ->
            ok;
        {_, _, true} ->
            case flush(S, ?WAIT_HANDLE(), deadline(Timeout)) of
                ok -> ok;
                {error, timeout} -> timed_out(S, []);
                {error, Reason} -> send_error(S, Reason)
            end
    end.

%% gen_tcp reports EPIPE as closed, and a reset as closed unless show_econnreset is on.
send_error(_S, epipe) ->
    {error, closed};
send_error(S, econnreset) ->
    case nifsock_nif:tcp_getopts(S) of
        #{show_econnreset := true} -> {error, econnreset};
        _ -> {error, closed}
    end;
send_error(_S, Reason) ->
    {error, Reason}.

%% @equiv recv(S, Length, infinity)
-spec recv(socket(), non_neg_integer()) -> {ok, binary() | string()} | {error, term()}.
recv(S, Length) ->
    recv(S, Length, infinity).

%% @doc Receives a packet (or `Length' bytes in raw mode; 0: what is there).
%% `{error, einval}' on an active socket, as gen_tcp.
-spec recv(socket(), non_neg_integer(), timeout()) -> {ok, binary() | string()} | {error, term()}.
recv(S, Length, Timeout) when is_integer(Length), Length >= 0 ->
    recv_loop(S, Length, ?WAIT_HANDLE(), deadline(Timeout)).

recv_loop(S, Length, H, Deadline) ->
    recv_result(S, Length, H, Deadline, nifsock_nif:tcp_recv(S, Length, H, mode(Deadline))).

%% A raw binary recv(S, 0) waits as nifsock:recv/4 does, so its wait may end
%% with its result, read by the readiness drain (`{recv, Result}'): the same
%% shapes as the NIF's raw results, handled alike.
recv_result(S, Length, H, Deadline, Result0) ->
    case Result0 of
        select ->
            case nifsock_wait:await(S, recv, H, Deadline) of
                select -> recv_loop(S, Length, H, Deadline);
                {recv, Result} -> recv_result(S, Length, H, Deadline, Result);
                timeout -> timeout_result(S);
                Reason -> {error, Reason}
            end;
        more ->
            recv_loop(S, Length, H, Deadline);
        yield ->
            %% as nifsock:recv/4: read after the other runnable processes ran
            erlang:yield(),
            recv_result(S, Length, H, Deadline, nifsock_nif:tcp_recv(S, Length, H, yielded));
        {error, Reason} when Reason =:= closed; Reason =:= econnreset ->
            ended(S, Reason);
        {error, {Reason, Partial}} when Reason =:= closed; Reason =:= econnreset ->
            ok = nifsock_nif:tcp_unread(S, Partial),
            ended(S, Reason);
        {error, emsgsize} ->
            %% a packet too large (its bytes are dropped): with exit_on_close
            %% the socket is closed, as gen_tcp
            _ = nifsock_nif:tcp_ended(S, false),
            {error, emsgsize};
        {error, {Reason, _Partial}} ->
            {error, Reason};
        Result ->
            Result
    end.

%% The peer closed (or reset: gen_tcp reports both as closed unless
%% show_econnreset is on): with exit_on_close (the default) the socket is
%% closed too.
ended(S, Reason) ->
    nifsock_nif:tcp_ended(S, Reason =:= econnreset).

%% gen_tcp drops nothing on timeout: the bytes of a partial read go back in
%% front of the stream for the next recv.
timeout_result(S) ->
    case nifsock_nif:take_partial(S) of
        <<>> -> ok;
        Partial -> ok = nifsock_nif:tcp_unread(S, Partial)
    end,
    {error, timeout}.

%%% ------------------------------------------------------------------
%%% Options

%% @doc Sets options, as `inet:setopts/2': applied last to first, as inet
%% does (of two values for one option, the first wins). Options that only
%% `listen' and `connect' take (`inet', `inet6', `local', `ip', `ifaddr',
%% `port', `backlog', `tcp_module') are `{error, einval}', as gen_tcp's.
-spec setopts(socket(), [option()]) -> ok | {error, term()}.
setopts(S, [{active, A}]) when is_boolean(A); A =:= once;
                               is_integer(A), A >= -32768, A =< 32767 ->
    %% the common call (Cowboy's, Ranch's), without the option parsing
    einval(set_active(S, A));
setopts(S, Opts) when is_list(Opts) ->
    try
        P = parse(lists:reverse(Opts), #{}),
        %% options that only listen/connect take are einval here, as inet
        lists:any(fun creation_only/1, Opts) andalso throw({error, einval}),
        ok = ok(apply_sockopts(S, maps:get(sockopts, P, []))),
        case lists:any(fun(K) -> maps:is_key(K, P) end, ?FORMAT) of
            true -> ok = ok(set_format(S, maps:merge(current_format(S), P)));
            false -> ok
        end,
        ok = ok(set_layer_opts(S, lists:reverse(maps:get(layer, P, [])))),
        case P of
            #{active := A} -> ok = ok(set_active(S, A));
            _ -> ok
        end
    catch
        throw:{error, _} = Error -> einval(Error);
        error:{invalid_option, _} -> {error, einval}
    end;
setopts(S, Opts) ->
    erlang:error(badarg, [S, Opts]).

%% gen_tcp's answer to bad values and closed sockets.
einval({error, closed}) -> {error, einval};
einval(Error) -> invalid_einval(Error).

current_format(S) ->
    maps:with(?FORMAT, value(nifsock_nif:tcp_getopts(S))).

%% @doc Reads options, as `inet:getopts/2': every option `setopts/2' takes.
%% `{raw, Level, Name, Size | Bin}' gives `{raw, Level, Name, Bytes}': the
%% bytes getsockopt wrote into a buffer of `Size' zero bytes (or holding
%% `Bin'), at most 65522 (inet_drv's limit: larger is `{error, einval}'). As
%% inet, a raw option (or `tclass') whose getsockopt fails is left out of the list.
-spec getopts(socket(), [atom() | {raw, integer(), integer(), non_neg_integer() | binary()}]) ->
          {ok, [{atom(), term()} | {raw, integer(), integer(), binary()}]} | {error, term()}.
getopts(S, Names) when is_list(Names) ->
    try
        Tcp = value(nifsock_nif:tcp_getopts(S)),
        {ok, lists:append([getopt_pair(S, N, Tcp) || N <- Names])}
    catch
        throw:{error, _} = Error -> einval(Error)
    end.

getopt_pair(S, {raw, Level, Name, Spec}, _Tcp) when ?IS_INT32(Level), ?IS_INT32(Name) ->
    dropped(nifsock_nif:tcp_getopt_raw(S, Level, Name, raw_buffer(Spec)),
            fun(Bytes) -> {raw, Level, Name, Bytes} end);
getopt_pair(S, tclass, _Tcp) ->
    dropped(nifsock:getopt(S, {ipv6, tclass}), fun(Class) -> {tclass, Class} end);
getopt_pair(S, N, Tcp) when is_atom(N) ->
    [{N, getopt(S, N, Tcp)}];
getopt_pair(_S, _N, _Tcp) ->
    throw({error, einval}).

raw_buffer(Size) when is_integer(Size), Size >= 0, Size =< ?RAW_GETOPT_MAX -> <<0:Size/unit:8>>;
raw_buffer(Bin) when is_binary(Bin), byte_size(Bin) =< ?RAW_GETOPT_MAX -> Bin;
raw_buffer(_) -> throw({error, einval}).

%% inet leaves out an option whose getsockopt fails (a closed socket is einval).
dropped({ok, V}, Pair) -> [Pair(V)];
dropped({error, closed} = E, _Pair) -> throw(E);
dropped({error, _}, _Pair) -> [].

%% {packet, raw} reads back as {packet, 0}, as inet's getopts (ssl keeps what
%% getopts says as the sslsocket's packet option).
getopt(_S, packet, Tcp) ->
    case maps:get(packet, Tcp) of
        raw -> 0;
        Packet -> Packet
    end;
getopt(_S, N, Tcp) when N =:= active; N =:= packet_size; N =:= mode;
                        N =:= send_timeout; N =:= exit_on_close; N =:= line_delimiter;
                        N =:= header; N =:= delay_send; N =:= high_watermark;
                        N =:= low_watermark; N =:= high_msgq_watermark;
                        N =:= low_msgq_watermark; N =:= send_timeout_close;
                        N =:= show_econnreset; N =:= deliver; N =:= tags ->
    maps:get(N, Tcp);
getopt(S, linger, _) ->
    #{onoff := On, linger := T} = value(nifsock:getopt(S, {socket, linger})),
    {On, T};
getopt(S, buffer, _) ->
    value(nifsock:getopt(S, {otp, rcvbuf}));
getopt(S, tos, _) ->
    tos_int(value(nifsock:getopt(S, {ip, tos})));
getopt(S, bind_to_device, _) ->
    %% a string at the socket level, a binary in inet's
    iolist_to_binary(value(nifsock:getopt(S, {socket, bindtodevice})));
getopt(S, N, _) ->
    case sockopt_name(N) of
        undefined -> throw({error, einval});
        Opt -> value(nifsock:getopt(S, Opt))
    end.

%% inet reads tos as an integer; nifsock (as socket) names four values.
tos_int(lowdelay) -> 16#10;
tos_int(throughput) -> 16#08;
tos_int(reliability) -> 16#04;
tos_int(mincost) -> 16#02;
tos_int(Tos) -> Tos.

value({ok, V}) -> V;
value({error, _} = E) -> throw(E);
value(#{} = Map) -> Map.

%%% ------------------------------------------------------------------
%%% The rest

%% @doc Closes the socket. Always `ok', as gen_tcp. As `gen_tcp:close/1' (OTP
%% 25's `inet:tcp_close/1'), it takes one closed message (`{nifsock_closed,
%% S}', or the socket's `tags') out of the caller's mailbox if there is one;
%% data messages stay.
-spec close(socket()) -> ok.
close(S) ->
    _ = nifsock:close(S),
    Closed = element(2, nifsock_nif:tcp_tags(S)),
    receive {Closed, S} -> ok after 0 -> ok end.

%% @doc Shuts down reading, writing or both. A listening socket is
%% `{error, enotconn}', as gen_tcp (and keeps listening).
-spec shutdown(socket(), read | write | read_write) -> ok | {error, term()}.
shutdown(S, How) when How =:= read; How =:= write; How =:= read_write ->
    nifsock_nif:tcp_shutdown(S, How);
shutdown(S, How) ->
    nifsock:shutdown(S, How).

%% @doc Makes `Pid' the owner: active messages go to it from now on. As
%% `gen_tcp:controlling_process/2' (OTP 25's `inet:tcp_controlling_process/2'),
%% the socket is made passive, its data and closed messages already in the
%% caller's mailbox are passed on to `Pid' in order (its error and passive
%% messages stay), and the active mode is restored once `Pid' owns it.
-spec controlling_process(socket(), pid()) -> ok | {error, term()}.
controlling_process(S, Pid) when is_pid(Pid), Pid =:= self() ->
    nifsock:controlling_process(S, Pid);
controlling_process(S, Pid) when is_pid(Pid) ->
    case process_info(self(), message_queue_len) of
        %% nothing to hand over: a passive socket moves in one call
        {message_queue_len, 0} -> move(S, Pid, nifsock_nif:tcp_move(S, Pid));
        _ -> move(S, Pid, nifsock_nif:tcp_pause(S))
    end;
controlling_process(S, Pid) ->
    erlang:error(badarg, [S, Pid]).

%% After tcp_move/2 (ok: moved; a dead Pid: gen_tcp's badarg, the socket stays
%% the caller's) or tcp_pause/1 ({ok, ...}: paused, still the caller's).
move(_S, _Pid, ok) ->
    ok;
move(_S, _Pid, {error, esrch}) ->
    {error, badarg};
move(S, Pid, Paused) ->
    case Paused of
        {ok, Active, {Data, Closed, _, _}} ->
            ok = hand_over(S, Pid, Data, Closed),
            case nifsock:controlling_process(S, Pid) of
                ok when Active =/= false ->
                    _ = set_active(S, Active),
                    ok;
                Result ->
                    %% A dead Pid ({error, badarg}): as gen_tcp, the socket
                    %% stays the caller's, passive.
                    Result
            end;
        {error, _} = Error ->
            Error
    end.

%% The socket's data and closed messages (its tags), in order.
hand_over(S, Pid, Data, Closed) ->
    receive
        {Data, S, _} = Msg -> Pid ! Msg, hand_over(S, Pid, Data, Closed);
        {Closed, S} = Msg -> Pid ! Msg, hand_over(S, Pid, Data, Closed)
    after 0 -> ok
    end.

%% @doc `{ok, {IP, Port}}' of the peer (`{ok, {local, Path}}' on a unix socket, as inet).
-spec peername(socket()) ->
          {ok, {inet:ip_address(), inet:port_number()} | {local, binary()}} | {error, term()}.
peername(S) ->
    %% (a term that is no socket: badarg, raised by the NIF)
    nifsock_nif:tcp_peername(S).

%% @doc `{ok, {IP, Port}}' of the local end (`{ok, {local, Path}}' on a unix socket, as inet).
-spec sockname(socket()) ->
          {ok, {inet:ip_address(), inet:port_number()} | {local, binary()}} | {error, term()}.
sockname(S) ->
    %% (a term that is no socket: badarg, raised by the NIF)
    nifsock_nif:tcp_sockname(S).

%% @doc The local port.
-spec port(socket()) -> {ok, inet:port_number()} | {error, term()}.
port(S) ->
    case sockname(S) of
        {ok, {_, Port}} -> {ok, Port};
        Other -> Other
    end.

%% @doc The socket's statistics under inet's names, as `inet:getstat/1':
%% `recv_oct', `recv_cnt', `recv_max', `recv_avg', `send_oct', `send_cnt',
%% `send_max', `send_avg' and `send_pend' (the bytes timed-out sends left
%% queued, see {@link send/2}: otherwise 0, a send returns once the kernel
%% has the bytes). They come from the socket's counters (`nifsock:info/1'). The byte counts
%% (`recv_oct', `send_oct') are gen_tcp's; the call counts differ: `recv_cnt'
%% and `send_cnt' count the recv and sendmsg/sendfile system calls that moved
%% bytes (and `*_max'/`*_avg' their sizes), where gen_tcp counts packets
%% delivered and `send/2' calls. With `{packet, N | line}', one read that holds
%% several packets counts once; a large send that takes several sendmsg
%% calls counts each.
-spec getstat(socket()) -> {ok, [{atom(), non_neg_integer()}]} | {error, einval}.
getstat(S) ->
    getstat(S, [recv_oct, recv_cnt, recv_max, recv_avg,
                send_oct, send_cnt, send_max, send_avg, send_pend]).

%% @doc The named statistics (see {@link getstat/1}). Every name of
%% `inet:stats()' is answered (`ssl:getstat/1' asks for them all); inet's
%% `recv_dvi' (the packet size's average deviation), which nifsock does not
%% keep, reads 0. As gen_tcp, an unknown name or a socket that is closed or
%% closing is `{error, einval}'.
-spec getstat(socket(), [atom()]) -> {ok, [{atom(), non_neg_integer()}]} | {error, einval}.
getstat(S, Names) when is_list(Names) ->
    _ = try length(Names) catch error:badarg -> erlang:error(badarg, [S, Names]) end,
    try nifsock:info(S) of
        #{rstates := States, counters := Counters0} ->
            Counters = case lists:member(send_pend, Names) of
                           true -> Counters0#{send_pend => send_pend(S)};
                           false -> Counters0
                       end,
            Stats = [{Name, stat(Name, Counters)} || Name <- Names],
            case not lists:member(open, States) orelse lists:keymember(error, 2, Stats) of
                true -> {error, einval};
                false -> {ok, Stats}
            end
    catch
        error:badarg -> {error, einval}
    end;
getstat(S, Names) ->
    erlang:error(badarg, [S, Names]).

stat(recv_oct, #{read_byte := V}) -> V;
stat(recv_cnt, #{read_pkg := V}) -> V;
stat(recv_max, #{read_pkg_max := V}) -> V;
stat(recv_avg, #{read_byte := B, read_pkg := N}) -> avg(B, N);
stat(send_oct, #{write_byte := V}) -> V;
stat(send_cnt, #{write_pkg := V}) -> V;
stat(send_max, #{write_pkg_max := V}) -> V;
stat(send_avg, #{write_byte := B, write_pkg := N}) -> avg(B, N);
stat(send_pend, #{send_pend := V}) -> V;
stat(recv_dvi, _) -> 0;
stat(_, _) -> error.

send_pend(S) ->
    case nifsock_nif:tcp_getopts(S) of
        #{send_pend := N} -> N;
        {error, _} -> 0
    end.

avg(_Bytes, 0) -> 0;
avg(Bytes, Count) -> Bytes div Count.

%%% ------------------------------------------------------------------
%%% Option parsing

%% As gen_tcp (inet:listen_options/2, connect_options/2): the kernel
%% application's `inet_default_listen_options' / `inet_default_connect_options'
%% (a list or one option) come before the caller's options, less `active'.
defaults(Key) ->
    case application:get_env(kernel, Key) of
        {ok, List} when is_list(List) -> lists:keydelete(active, 1, List);
        {ok, {active, _}} -> [];
        {ok, Opt} -> [Opt];
        undefined -> []
    end.

%% gen_tcp's listen and connect exit with badarg for an option they don't
%% know or a value of the wrong type (setopts returns {error, einval}).
parse_or_exit(Opts, P) ->
    try parse(Opts, P)
    catch error:{invalid_option, _} -> exit(badarg)
    end.

parse([], #{ifaddr := SA} = P) ->
    %% the sockaddr map's family is the socket's, unless an option said another
    P1 = family_of(maps:remove(ifaddr, P), maps:get(family, SA)),
    parse([], P1#{ifaddr_map => SA});
parse([], P0) ->
    %% as gen_tcp, {ip, Tuple} gives the family (another family option: badarg)
    P = case P0 of
            #{ip := IP} when is_tuple(IP) ->
                case inet:is_ip_address(IP) andalso ip_family(IP) of
                    false -> P0;
                    F when map_get(family_set, P0), map_get(domain, P0) =/= F ->
                        erlang:error({invalid_option, {ip, IP}});
                    F -> P0#{domain => F}
                end;
            _ ->
                P0
        end,
    P#{domain => maps:get(domain, P, inet), sockopts => lists:reverse(maps:get(sockopts, P, []))};
parse([Opt | Rest], P) ->
    parse(Rest, parse_one(check(Opt), P)).

%% inet's type check of an option's value (prim_inet:is_sockopt_val/2 and
%% inet's listen and connect option lists), so that a value inet refuses is
%% refused here whatever nifsock_tcp would make of it.
check({raw, Level, Name, Value} = Opt) ->
    case is_integer(Level) andalso is_integer(Name) andalso is_binary(Value) of
        true -> Opt;
        false -> erlang:error({invalid_option, Opt})
    end;
check({Name, Value} = Opt) ->
    case valid(inet_type(Name), Value) of
        true -> Opt;
        false -> erlang:error({invalid_option, Opt})
    end;
check(Opt) ->
    Opt.

inet_type(N) when N =:= reuseaddr; N =:= reuseport; N =:= keepalive; N =:= dontroute;
                  N =:= nodelay; N =:= nopush; N =:= ipv6_v6only; N =:= exit_on_close;
                  N =:= send_timeout_close; N =:= delay_send; N =:= show_econnreset ->
    bool;
inet_type(N) when N =:= sndbuf; N =:= recbuf; N =:= priority; N =:= tos; N =:= ttl;
                  N =:= buffer; N =:= low_watermark; N =:= high_watermark;
                  N =:= low_msgq_watermark; N =:= high_msgq_watermark;
                  N =:= line_delimiter; N =:= tclass ->
    int;
inet_type(N) when N =:= header; N =:= packet_size -> uint;
inet_type(send_timeout) -> time;
inet_type(linger) -> linger;
inet_type(active) -> active;
inet_type(mode) -> {enum, [list, binary]};
inet_type(deliver) -> {enum, [port, term]};
inet_type(tags) -> tags;
inet_type(bind_to_device) -> binary;
inet_type(port) -> port;
inet_type(N) when N =:= ip; N =:= ifaddr -> address;
inet_type(_) -> any.

valid(bool, V) -> is_boolean(V);
valid(int, V) -> is_integer(V);
valid(uint, V) -> is_integer(V) andalso V >= 0;
valid(time, V) -> V =:= infinity orelse is_integer(V) andalso V >= 0;
valid(linger, {On, T}) -> is_boolean(On) andalso is_integer(T);
valid(linger, _) -> false;
valid(active, V) -> is_boolean(V) orelse V =:= once
                        orelse is_integer(V) andalso V >= -32768 andalso V =< 32767;
valid({enum, Values}, V) -> lists:member(V, Values);
valid(tags, V) -> V =:= nifsock orelse V =:= gen_tcp
                      orelse is_tuple(V) andalso tuple_size(V) =:= 4
                             andalso lists:all(fun is_atom/1, tuple_to_list(V));
valid(binary, V) -> is_binary(V);
valid(port, V) -> is_port_number(V);
valid(address, V) -> V =:= any orelse V =:= loopback orelse inet:is_ip_address(V)
                         orelse is_tuple(V) andalso tuple_size(V) =:= 2
                                andalso element(1, V) =:= local
                         orelse is_map(V);
valid(any, _) -> true.

is_port_number(Port) -> is_integer(Port) andalso Port >= 0 andalso Port =< 65535.

%% Options only listen/connect take: setopts gives einval, as inet.
creation_only(O) when O =:= inet; O =:= inet6; O =:= local -> true;
creation_only({K, _}) when K =:= ip; K =:= ifaddr; K =:= port; K =:= backlog;
                           K =:= tcp_module; K =:= fd ->
    true;
creation_only(_) ->
    false.

parse_one(binary, P) -> P#{mode => binary};
parse_one(list, P) -> P#{mode => list};
parse_one(inet, P) -> P#{domain => inet, family_set => true};
parse_one(inet6, P) -> P#{domain => inet6, family_set => true};
parse_one(local, P) -> P#{domain => local, family_set => true};
parse_one({mode, M}, P) when M =:= binary; M =:= list -> P#{mode => M};
parse_one({active, A}, P) when is_boolean(A); A =:= once; is_integer(A) -> P#{active => A};
parse_one({packet, 0}, P) -> P#{packet => raw};
parse_one({packet, K}, P) when K =:= raw; K =:= 1; K =:= 2; K =:= 4; K =:= line -> P#{packet => K};
%% any size, as inet: the driver keeps its low 32 bits
parse_one({packet_size, N}, P) when is_integer(N), N >= 0 -> P#{packet_size => N band 16#FFFFFFFF};
parse_one({send_timeout, T}, P) when T =:= infinity; is_integer(T), T >= 0 -> P#{send_timeout => T};
parse_one({exit_on_close, B}, P) when is_boolean(B) -> P#{exit_on_close => B};
%% any integer, as inet: the driver keeps its low byte
parse_one({line_delimiter, C}, P) when is_integer(C) -> P#{line_delimiter => C band 255};
parse_one({backlog, N}, P) when is_integer(N) -> P#{backlog => N};
parse_one({ip, IP}, P) -> maps:remove(ifaddr, P#{ip => IP});
parse_one({ifaddr, {local, Path}}, P) -> P#{domain => local, path => Path};
parse_one({ifaddr, SA} = Opt, P) when is_map(SA) ->
    %% gen_tcp: a map of another family is einval, a bad address badarg
    case SA of
        #{family := F} when F =:= inet; F =:= inet6 ->
            inet_sockaddr(SA) =:= false andalso erlang:error({invalid_option, Opt}),
            maps:remove(ip, P#{ifaddr => SA});
        _ ->
            P#{open_error => einval}
    end;
parse_one({ifaddr, IP}, P) -> maps:remove(ifaddr, P#{ip => IP});
parse_one({port, Port}, P) when is_integer(Port) -> P#{port => Port};
%% inet takes any integer, and uses 1 for less
parse_one({buffer, N}, P) when is_integer(N) -> sockopt({otp, rcvbuf}, max(N, 1), P);
parse_one({linger, {On, T}}, P) when is_boolean(On), is_integer(T) ->
    sockopt({socket, linger}, #{onoff => On, linger => T}, P);
parse_one({raw, Level, Name, Value}, P) -> sockopt({Level, Name}, Value, P);
parse_one({tcp_module, _}, P) -> P;
%% gen_tcp-layer options kept in the socket (prim_inet sends integers as
%% their low 32 bits: so do we; the NIF applies inet_drv's rules)
parse_one({header, N}, P) when is_integer(N), N >= 0 ->
    layer_opt(header, N band 16#ffffffff, P);
parse_one({Name, N}, P) when (Name =:= high_watermark orelse Name =:= low_watermark orelse
                              Name =:= high_msgq_watermark orelse Name =:= low_msgq_watermark),
                             is_integer(N) ->
    layer_opt(Name, N band 16#ffffffff, P);
parse_one({Name, B}, P) when (Name =:= delay_send orelse Name =:= send_timeout_close orelse
                              Name =:= show_econnreset), is_boolean(B) ->
    layer_opt(Name, B, P);
parse_one({deliver, D}, P) when D =:= port; D =:= term ->
    layer_opt(deliver, D, P);
parse_one({tags, nifsock}, P) ->
    layer_opt(tags, {nifsock, nifsock_closed, nifsock_error, nifsock_passive}, P);
parse_one({tags, gen_tcp}, P) ->
    layer_opt(tags, {tcp, tcp_closed, tcp_error, tcp_passive}, P);
parse_one({tags, {_, _, _, _} = Tags}, P) ->
    layer_opt(tags, Tags, P);
parse_one({Name, Value} = Opt, P) ->
    case sockopt_name(Name) of
        undefined -> erlang:error({invalid_option, Opt});
        SockOpt -> sockopt(SockOpt, Value, P)
    end;
parse_one(Opt, _P) ->
    erlang:error({invalid_option, Opt}).

sockopt(Opt, Value, P) ->
    P#{sockopts => [{Opt, Value} | maps:get(sockopts, P, [])]}.

%% Kept last first, as sockopts (applied in the order parsed: the NIF applies
%% the watermark pairs' rules in that order).
layer_opt(Name, Value, P) ->
    P#{layer => [{Name, Value} | maps:get(layer, P, [])]}.

set_layer_opts(_S, []) -> ok;
set_layer_opts(S, Opts) -> einval(nifsock_nif:tcp_setopts(S, Opts)).

sockopt_name(reuseaddr) -> {socket, reuseaddr};
sockopt_name(reuseport) -> {socket, reuseport};
sockopt_name(keepalive) -> {socket, keepalive};
sockopt_name(recbuf) -> {socket, rcvbuf};
sockopt_name(sndbuf) -> {socket, sndbuf};
sockopt_name(priority) -> {socket, priority};
sockopt_name(dontroute) -> {socket, dontroute};
sockopt_name(bind_to_device) -> {socket, bindtodevice};
sockopt_name(nodelay) -> {tcp, nodelay};
sockopt_name(nopush) -> {tcp, cork};
sockopt_name(tos) -> {ip, tos};
sockopt_name(ttl) -> {ip, ttl};
sockopt_name(ipv6_v6only) -> {ipv6, v6only};
sockopt_name(tclass) -> {ipv6, tclass};
sockopt_name(_) -> undefined.

apply_sockopts(_S, []) -> ok;
apply_sockopts(S, [{Opt, Value} | Rest]) ->
    case nifsock:setopt(S, Opt, Value) of
        ok -> apply_sockopts(S, Rest);
        %% as inet: IPV6_TCLASS on a socket that is not inet6 (or out of range)
        {error, _} when Opt =:= {ipv6, tclass} -> {error, einval};
        {error, _} = E -> E
    end.

set_format(S, P) ->
    nifsock_nif:tcp_set_format(S, maps:get(packet, P, raw), maps:get(packet_size, P, 0),
                               maps:get(mode, P, list) =:= list, maps:get(send_timeout, P, infinity),
                               not maps:get(exit_on_close, P, true),
                               maps:get(line_delimiter, P, $\n)).

set_active(S, A) ->
    nifsock_nif:tcp_set_active(S, A, nifsock_tcp_pump:for_caller()).

bind_addr(S, #{domain := local, path := Path}) ->
    nifsock:bind(S, #{family => local, path => Path});
bind_addr(S, #{ifaddr_map := SA} = P) ->
    %% the map's port, or listen's Port / {port, P} when the map has none (or 0)
    Port = case maps:get(port, SA, 0) of
               0 -> maps:get(port, P, 0);
               N -> N
           end,
    nifsock:bind(S, SA#{port => Port});
bind_addr(S, #{domain := Domain} = P) ->
    IP = case maps:get(ip, P, any) of
             any -> any;
             loopback -> loopback;
             Addr -> Addr
         end,
    nifsock:bind(S, sockaddr(Domain, IP, maps:get(port, P, 0))).

sockaddr(local, Path, _Port) -> #{family => local, path => Path};
sockaddr(Domain, IP, Port) -> #{family => Domain, addr => IP, port => Port}.

%% As gen_tcp: a tuple that is no address exits with badarg, a term that is
%% neither an address nor a host name raises badarg.
resolve({local, Path}, _Domain, _Args) -> {ok, Path};
resolve(IP, _Domain, _Args) when is_tuple(IP) ->
    inet:is_ip_address(IP) orelse exit(badarg),
    {ok, IP};
resolve(Host, Domain, _Args) when is_list(Host); is_atom(Host) -> inet:getaddr(Host, Domain);
resolve(_, _Domain, Args) -> erlang:error(badarg, Args).

%%% ------------------------------------------------------------------
%%% Timeouts

%% gen_tcp's timeouts only (infinity or ms): `nowait' and handles are
%% nifsock's, not gen_tcp's, and anything else is a function_clause, as before.
deadline(T) when T =:= infinity; is_integer(T), T >= 0 -> nifsock_wait:deadline(T).

mode(zero) -> zero;
mode(_) -> wait.
