%% @doc A Ranch 2.x TLS transport over `nifsock_tcp': use `nifsock_ranch_ssl'
%% where `ranch_ssl' would go (`ranch:start_listener(Ref, nifsock_ranch_ssl,
%% TransOpts, cowboy_tls, ProtoOpts)'). Connections are accepted by
%% `nifsock_tcp' and upgraded with `ssl:handshake/3' through ssl's `cb_info'
%% option, so after the handshake a connection is a genuine `ssl:sslsocket()'
%% whose record layer runs over a nifsock socket: `ssl:*' functions
%% (`ssl:negotiated_protocol/1', `ssl:peercert/1', ...) work on it, and its
%% active messages are ssl's: `{ssl, S, Data}', `{ssl_closed, S}',
%% `{ssl_error, S, Reason}', `{ssl_passive, S}'.
%%
%% It mirrors `ranch_ssl': `name/0' is `ssl' (Cowboy asks `ssl:peercert/1'
%% when the name is `ssl'), the same listen defaults and disallowed options,
%% `{error, no_cert}' from `listen/1' without a certificate option, and the
%% same return shapes. The differences:
%% <ul>
%% <li>The listen socket, and an accepted socket before its handshake, are
%%     `{nifsock_ranch_ssl, NifsockTcpSocket, TlsOpts}': the `nifsock_tcp'
%%     socket with the TLS options that `handshake/2,3' uses (OTP 25's
%%     `ssl:listen/2' with a foreign `cb_info' calls `inet:monitor/1' on the
%%     listen socket and fails, so the listener is not an ssl listen socket).
%%     Every callback takes them (`sockname/1', `close/1',
%%     `controlling_process/2', ...).</li>
%% <li>`socket_opts' are split by name: the options `nifsock_tcp' knows go to
%%     `nifsock_tcp:listen/2', all others are TLS options, checked by ssl at
%%     the first handshake (not by `listen/1').</li>
%% <li>`recv_proxy_header/2' is `nifsock_ranch:recv_proxy_header/2' on the
%%     TCP socket, before the handshake (as Ranch calls it).</li>
%% <li>`sendfile' reads and sends chunks (as `ranch_ssl'; TLS has no
%%     sendfile(2)).</li>
%% </ul>
%%
%% `-behaviour(ranch_transport)' is left out because Ranch is not a dependency
%% of nifsock; every `ranch_transport' callback is exported, with Ranch 2.x's
%% arities and return shapes.
-module(nifsock_ranch_ssl).

-export([name/0, secure/0, messages/0, listen/1, disallowed_listen_options/0,
         accept/2, handshake/2, handshake/3, handshake_continue/2, handshake_continue/3,
         handshake_cancel/1, connect/3, connect/4, recv/3, recv_proxy_header/2,
         send/2, sendfile/2, sendfile/4, sendfile/5, setopts/2, getopts/2,
         getstat/1, getstat/2, controlling_process/2, peername/1, sockname/1,
         shutdown/2, close/1, cleanup/1]).
-export([cb_info/0]).

-export_type([socket/0, tcp_socket/0, opts/0]).

%% The cb_info that runs ssl over nifsock_tcp.
-define(CB_INFO, {cb_info, {nifsock_tcp, nifsock, nifsock_closed, nifsock_error,
                            nifsock_passive}}).

-type tcp_socket() :: {nifsock_ranch_ssl, nifsock_tcp:socket(), [tls_opt()]}.
-type socket() :: ssl:sslsocket() | tcp_socket().
-type tls_opt() :: ssl:tls_server_option() | ssl:tls_client_option().
-type opt() :: nifsock_tcp:option() | tls_opt().
-type opts() :: [opt()].
-type transport_opts() :: #{socket_opts => opts(), logger => module() | false, atom() => term()}.
-type sendfile_opts() :: [{chunk_size, non_neg_integer()}].

%%% ------------------------------------------------------------------
%%% Identity

%% @doc The transport's name: `ssl', as `ranch_ssl' (the connections are
%% sslsockets; Cowboy reads the peer certificate when the name is `ssl').
-spec name() -> ssl.
name() -> ssl.

%% @doc Whether the transport encrypts: `true'.
-spec secure() -> true.
secure() -> true.

%% @doc The tags of active-mode messages (ssl's): `{OK, Closed, Error, Passive}'.
-spec messages() -> {ssl, ssl_closed, ssl_error, ssl_passive}.
messages() -> {ssl, ssl_closed, ssl_error, ssl_passive}.

%% @doc The `cb_info' option that runs `ssl' over `nifsock_tcp':
%% `{cb_info, {nifsock_tcp, nifsock, nifsock_closed, nifsock_error, nifsock_passive}}'.
-spec cb_info() -> {cb_info, {nifsock_tcp, nifsock, nifsock_closed, nifsock_error,
                              nifsock_passive}}.
cb_info() -> ?CB_INFO.

%%% ------------------------------------------------------------------
%%% Listening and accepting

%% @doc Opens the listen socket described by `TransOpts'. Its `socket_opts'
%% need a certificate option (`cert', `certfile', `certs_keys', `sni_fun',
%% `sni_hosts' or `user_lookup_fun'; else `{error, no_cert}', as `ranch_ssl').
%% The TCP options go to `nifsock_ranch:listen/1' (ranch_tcp's defaults and
%% forced options, `send_timeout_close' true); the TLS options minus
%% {@link disallowed_listen_options/0} and those the configured TLS versions
%% do not support (dropped with a warning, as `ranch_ssl') are kept in the
%% returned socket for the handshakes. TLS 1.3 session tickets
%% (`session_tickets' other than `disabled', `anti_replay') are dropped with a
%% warning too: they need the ticket store of an `ssl:listen/2' listener.
-spec listen(transport_opts()) -> {ok, tcp_socket()} | {error, atom()}.
listen(TransOpts) ->
    SocketOpts = maps:get(socket_opts, TransOpts, []),
    case lists:any(fun(K) -> lists:keymember(K, 1, SocketOpts) end,
                   [cert, certfile, certs_keys, sni_fun, sni_hosts, user_lookup_fun]) of
        true ->
            Logger = maps:get(logger, TransOpts, logger),
            {TcpOpts, TlsOpts0} = lists:partition(fun is_tcp_option/1, SocketOpts),
            Disallowed = unsupported_tls_options(TlsOpts0) ++ disallowed_listen_options(),
            TlsOpts = filter_tls_options(no_tickets(TlsOpts0, Logger), Disallowed, Logger),
            case nifsock_ranch:listen(TransOpts#{socket_opts => TcpOpts}) of
                {ok, L} -> {ok, {nifsock_ranch_ssl, L, TlsOpts}};
                {error, _} = Error -> Error
            end;
        false ->
            {error, no_cert}
    end.

%% The options nifsock_tcp (and nifsock_ranch's filter) take; the rest is TLS.
is_tcp_option(O) when O =:= binary; O =:= list; O =:= inet; O =:= inet6; O =:= local ->
    true;
is_tcp_option({raw, _, _, _}) ->
    true;
is_tcp_option({Key, _}) ->
    lists:member(Key, [active, packet, packet_size, mode, send_timeout, exit_on_close,
                       line_delimiter, backlog, ip, ifaddr, port, buffer, linger, tcp_module,
                       header, high_watermark, low_watermark, high_msgq_watermark,
                       low_msgq_watermark, delay_send, send_timeout_close, show_econnreset,
                       deliver, tags, reuseaddr, reuseport, keepalive, recbuf, sndbuf, priority,
                       dontroute, bind_to_device, nodelay, nopush, tos, ttl, ipv6_v6only,
                       inet_backend, fd]);
is_tcp_option(_) ->
    false.

%% TLS 1.3 session tickets (and anti-replay) need the ticket store of an
%% ssl:listen/2 listener: ssl:handshake/3 on a TCP socket has none and its
%% connection process exits at the end of the handshake. They are dropped,
%% with a warning; `{session_tickets, disabled}' is kept.
no_tickets(Opts, Logger) ->
    lists:filter(fun({session_tickets, disabled}) ->
                         true;
                    ({Key, _} = Opt) when Key =:= session_tickets; Key =:= anti_replay ->
                         log(Logger, warning, "Transport option ~p unsupported by "
                             "nifsock_ranch_ssl (no ssl:listen ticket store); ignored.~n",
                             [Opt]),
                         false;
                    (_) ->
                         true
                 end, Opts).

filter_tls_options(Opts, Disallowed, Logger) ->
    lists:filter(fun({Key, _} = Opt) ->
                         case lists:member(Key, Disallowed) of
                             true ->
                                 log(Logger, warning, "Transport option ~p unknown or invalid "
                                     "for nifsock_ranch_ssl; ignored.~n", [Opt]),
                                 false;
                             false ->
                                 true
                         end;
                    (Opt) ->
                         log(Logger, warning, "Transport option ~p unknown or invalid "
                             "for nifsock_ranch_ssl; ignored.~n", [Opt]),
                         false
                 end, Opts).

log(false, _Level, _Format, _Args) -> ok;
log(Logger, Level, Format, Args) ->
    try Logger:Level(Format, Args)
    catch error:undef -> ok
    end.

%% As ranch_ssl: options the lowest configured TLS version does not support.
unsupported_tls_options(TlsOpts) ->
    unsupported_tls_version_options(lists:usort(tls_versions(TlsOpts))).

unsupported_tls_version_options([tlsv1 | _]) ->
    [];
unsupported_tls_version_options(['tlsv1.1' | _]) ->
    [beast_mitigation, padding_check];
unsupported_tls_version_options(['tlsv1.2' | _]) ->
    [beast_mitigation, padding_check];
unsupported_tls_version_options(['tlsv1.3' | _]) ->
    [beast_mitigation, client_renegotiation, next_protocols_advertised,
     padding_check, psk_identity, reuse_session, reuse_sessions,
     secure_renegotiate, user_lookup_fun];
unsupported_tls_version_options(_) ->
    [].

tls_versions(TlsOpts) ->
    case lists:keyfind(versions, 1, lists:reverse(TlsOpts)) of
        {versions, Versions} ->
            Versions;
        false ->
            case application:get_env(ssl, protocol_version) of
                {ok, Versions} ->
                    Versions;
                undefined ->
                    {supported, Versions} = lists:keyfind(supported, 1, ssl:versions()),
                    Versions
            end
    end.

%% @doc The listen options dropped from the user's: ranch_ssl's client-only
%% TLS options (`alpn_advertised_protocols', `client_preferred_next_protocols',
%% `fallback', `server_name_indication', `srp_identity') and
%% `nifsock_ranch:disallowed_listen_options/0'.
-spec disallowed_listen_options() -> [atom()].
disallowed_listen_options() ->
    [alpn_advertised_protocols, client_preferred_next_protocols,
     fallback, server_name_indication, srp_identity
     | nifsock_ranch:disallowed_listen_options()].

%% @doc Accepts a TCP connection; the TLS handshake is `handshake/2,3''s.
%% `{error, closed}' once the listen socket is closed, `{error, timeout}'.
-spec accept(tcp_socket(), timeout()) ->
          {ok, tcp_socket()} | {error, closed | timeout | atom()}.
accept({nifsock_ranch_ssl, L, TlsOpts}, Timeout) ->
    case nifsock_ranch:accept(L, Timeout) of
        {ok, S} -> {ok, {nifsock_ranch_ssl, S, TlsOpts}};
        {error, _} = Error -> Error
    end.

%% @equiv handshake(CSocket, [], Timeout)
-spec handshake(socket(), timeout()) ->
          {ok, ssl:sslsocket()} | {ok, ssl:sslsocket(), ssl:protocol_extensions()}
          | {error, any()}.
handshake(CSocket, Timeout) ->
    handshake(CSocket, [], Timeout).

%% @doc The TLS server handshake on an accepted socket, with the listener's
%% TLS options (`Opts' replace those with the same names). The calling process
%% owns the returned sslsocket. `{handshake, hello}' gives `{ok, S, Ext}', to
%% be followed by `handshake_continue/2,3' or `handshake_cancel/1'.
-spec handshake(socket(), [tls_opt()], timeout()) ->
          {ok, ssl:sslsocket()} | {ok, ssl:sslsocket(), ssl:protocol_extensions()}
          | {error, any()}.
handshake({nifsock_ranch_ssl, S, TlsOpts}, Opts, Timeout) ->
    Merged = Opts ++ [O || O <- TlsOpts, not has_key(O, Opts)],
    handshake_result(ssl:handshake(S, [socket_cb_info(S) | Merged], Timeout));
handshake(SslSocket, Opts, Timeout) ->
    handshake_result(ssl:handshake(SslSocket, Opts, Timeout)).

handshake_result({ok, _} = OK) -> OK;
handshake_result({ok, _, _} = OK) -> OK;
handshake_result({error, _} = Error) -> Error.

has_key({Key, _}, Opts) -> lists:keymember(Key, 1, Opts);
has_key(_, _) -> false.

%% @equiv handshake_continue(CSocket, [], Timeout)
-spec handshake_continue(ssl:sslsocket(), timeout()) -> {ok, ssl:sslsocket()} | {error, any()}.
handshake_continue(CSocket, Timeout) ->
    handshake_continue(CSocket, [], Timeout).

%% @doc Completes a handshake paused by `{handshake, hello}'.
-spec handshake_continue(ssl:sslsocket(), [ssl:tls_server_option()], timeout()) ->
          {ok, ssl:sslsocket()} | {error, any()}.
handshake_continue(CSocket, Opts, Timeout) ->
    case ssl:handshake_continue(CSocket, Opts, Timeout) of
        {ok, _} = OK -> OK;
        {error, _} = Error -> Error
    end.

%% @doc Cancels a handshake paused by `{handshake, hello}'.
-spec handshake_cancel(ssl:sslsocket()) -> ok.
handshake_cancel(CSocket) ->
    ok = ssl:handshake_cancel(CSocket).

%%% ------------------------------------------------------------------
%%% Connecting

%% @doc A TLS client connection over `nifsock_tcp' (`ssl:connect/3' with
%% {@link cb_info/0}), passive, raw, binary, as `ranch_ssl'.
-spec connect(inet:ip_address() | inet:hostname(), inet:port_number(), opts()) ->
          {ok, ssl:sslsocket()} | {error, atom() | tuple()}.
connect(Host, Port, Opts) when is_integer(Port) ->
    ssl:connect(Host, Port, [opts_cb_info(Opts) | Opts ++ [binary, {active, false}, {packet, raw}]]).

%% @doc As {@link connect/3}, with a timeout.
-spec connect(inet:ip_address() | inet:hostname(), inet:port_number(), opts(), timeout()) ->
          {ok, ssl:sslsocket()} | {error, atom() | tuple()}.
connect(Host, Port, Opts, Timeout) when is_integer(Port) ->
    ssl:connect(Host, Port, [opts_cb_info(Opts) | Opts ++ [binary, {active, false}, {packet, raw}]],
                Timeout).

%% ssl must be told the tags the socket sends (nifsock_tcp's `tags'): those
%% of an accepted socket (the default, unless changed with setopts)...
socket_cb_info(S) ->
    case nifsock_tcp:getopts(S, [tags]) of
        {ok, [{tags, Tags}]} -> tags_cb_info(Tags);
        {error, _} -> ?CB_INFO
    end.

%% ... or of the `{tags, T}' given to connect (the last one wins, as in nifsock_tcp:connect).
opts_cb_info(Opts) ->
    case lists:keyfind(tags, 1, lists:reverse(Opts)) of
        {tags, nifsock} -> ?CB_INFO;
        {tags, gen_tcp} -> tags_cb_info({tcp, tcp_closed, tcp_error, tcp_passive});
        {tags, {_, _, _, _} = Tags} -> tags_cb_info(Tags);
        _ -> ?CB_INFO
    end.

tags_cb_info({Data, Closed, Error, Passive}) ->
    {cb_info, {nifsock_tcp, Data, Closed, Error, Passive}}.

%%% ------------------------------------------------------------------
%%% Data

%% @doc `ssl:recv/3'.
-spec recv(ssl:sslsocket(), non_neg_integer(), timeout()) ->
          {ok, any()} | {error, closed | atom()}.
recv(Socket, Length, Timeout) ->
    ssl:recv(Socket, Length, Timeout).

%% @doc Reads a PROXY protocol header (v1 or v2) from the TCP connection
%% before the TLS handshake, as Ranch calls it
%% (`nifsock_ranch:recv_proxy_header/2').
-spec recv_proxy_header(socket(), timeout()) ->
          {ok, nifsock_ranch:proxy_info()} | {error, closed | atom()}
          | {error, protocol_error, atom()}.
recv_proxy_header({nifsock_ranch_ssl, S, _}, Timeout) ->
    nifsock_ranch:recv_proxy_header(S, Timeout);
recv_proxy_header({sslsocket, {nifsock_tcp, S, _, _}, _}, Timeout) ->
    nifsock_ranch:recv_proxy_header(S, Timeout).

%% @doc `ssl:send/2'.
-spec send(ssl:sslsocket(), iodata()) -> ok | {error, atom()}.
send(Socket, Packet) ->
    ssl:send(Socket, Packet).

%% @equiv sendfile(Socket, File, 0, 0, [])
-spec sendfile(ssl:sslsocket(), file:name_all() | file:fd()) ->
          {ok, non_neg_integer()} | {error, atom()}.
sendfile(Socket, File) ->
    sendfile(Socket, File, 0, 0, []).

%% @equiv sendfile(Socket, File, Offset, Bytes, [])
-spec sendfile(ssl:sslsocket(), file:name_all() | file:fd(), non_neg_integer(),
               non_neg_integer()) -> {ok, non_neg_integer()} | {error, atom()}.
sendfile(Socket, File, Offset, Bytes) ->
    sendfile(Socket, File, Offset, Bytes, []).

%% @doc Sends `Bytes' (0: to the end) of a file from `Offset', read and sent
%% in `chunk_size' chunks (default 8191), as `ranch_transport:sendfile/6'
%% (which `ranch_ssl' uses): a file name is opened and closed here; an open
%% raw file is read from `Offset' and its position restored afterwards.
-spec sendfile(ssl:sslsocket(), file:name_all() | file:fd(), non_neg_integer(),
               non_neg_integer(), sendfile_opts()) ->
          {ok, non_neg_integer()} | {error, atom()}.
sendfile(Socket, Filename, Offset, Bytes, Opts)
  when is_list(Filename) orelse is_atom(Filename) orelse is_binary(Filename) ->
    ChunkSize = chunk_size(Opts),
    case file:open(Filename, [read, raw, binary]) of
        {ok, RawFile} ->
            _ = case Offset of
                    0 -> ok;
                    _ -> {ok, _} = file:position(RawFile, {bof, Offset})
                end,
            try
                sendfile_loop(Socket, RawFile, Bytes, 0, ChunkSize)
            after
                ok = file:close(RawFile)
            end;
        {error, _} = Error ->
            Error
    end;
sendfile(Socket, RawFile, Offset, Bytes, Opts) ->
    ChunkSize = chunk_size(Opts),
    Initial = case file:position(RawFile, {cur, 0}) of
                  {ok, Offset} ->
                      Offset;
                  {ok, Initial0} ->
                      {ok, _} = file:position(RawFile, {bof, Offset}),
                      Initial0
              end,
    case sendfile_loop(Socket, RawFile, Bytes, 0, ChunkSize) of
        {ok, _Sent} = Result ->
            {ok, _} = file:position(RawFile, {bof, Initial}),
            Result;
        {error, _} = Error ->
            Error
    end.

chunk_size(Opts) ->
    case lists:keyfind(chunk_size, 1, Opts) of
        {chunk_size, ChunkSize} when is_integer(ChunkSize), ChunkSize > 0 -> ChunkSize;
        _ -> 16#1FFF
    end.

sendfile_loop(_Socket, _RawFile, Sent, Sent, _ChunkSize) when Sent =/= 0 ->
    {ok, Sent};
sendfile_loop(Socket, RawFile, Bytes, Sent, ChunkSize) ->
    ReadSize = case Bytes of
                   0 -> ChunkSize;
                   _ -> min(Bytes - Sent, ChunkSize)
               end,
    case file:read(RawFile, ReadSize) of
        {ok, IoData} ->
            case ssl:send(Socket, IoData) of
                ok -> sendfile_loop(Socket, RawFile, Bytes, Sent + iolist_size(IoData),
                                    ChunkSize);
                {error, _} = Error -> Error
            end;
        eof ->
            {ok, Sent};
        {error, _} = Error ->
            Error
    end.

%%% ------------------------------------------------------------------
%%% Options and statistics

%% @doc `ssl:setopts/2' (on a listen or not yet upgraded socket:
%% `nifsock_ranch:setopts/2').
-spec setopts(socket(), list()) -> ok | {error, atom()}.
setopts({nifsock_ranch_ssl, S, _}, Opts) ->
    nifsock_ranch:setopts(S, Opts);
setopts(Socket, Opts) ->
    ssl:setopts(Socket, Opts).

%% @doc `ssl:getopts/2' (on a listen or not yet upgraded socket:
%% `nifsock_ranch:getopts/2').
-spec getopts(socket(), [atom()]) -> {ok, list()} | {error, atom()}.
getopts({nifsock_ranch_ssl, S, _}, Names) ->
    nifsock_ranch:getopts(S, Names);
getopts(Socket, Names) ->
    ssl:getopts(Socket, Names).

%% @doc `ssl:getstat/1': the TCP socket's counters.
-spec getstat(socket()) -> {ok, list()} | {error, atom()}.
getstat({nifsock_ranch_ssl, S, _}) ->
    nifsock_ranch:getstat(S);
getstat(Socket) ->
    ssl:getstat(Socket).

%% @doc `ssl:getstat/2'.
-spec getstat(socket(), [atom()]) -> {ok, list()} | {error, atom()}.
getstat({nifsock_ranch_ssl, S, _}, Names) ->
    nifsock_ranch:getstat(S, Names);
getstat(Socket, Names) ->
    ssl:getstat(Socket, Names).

%%% ------------------------------------------------------------------
%%% Ownership, names, ending

%% @doc Makes `Pid' the owner: `ssl:controlling_process/2', or
%% `nifsock_ranch:controlling_process/2' before the handshake.
-spec controlling_process(socket(), pid()) -> ok | {error, closed | not_owner | atom()}.
controlling_process({nifsock_ranch_ssl, S, _}, Pid) ->
    nifsock_ranch:controlling_process(S, Pid);
controlling_process(Socket, Pid) ->
    ssl:controlling_process(Socket, Pid).

%% @doc The peer's address: `{IP, Port}', or `{local, Path}' for a unix socket
%% (an sslsocket over nifsock_tcp is asked through its TCP socket, as
%% `ssl:peername/1' does, with `nifsock_ranch''s `{local, Path}' shape).
-spec peername(socket()) ->
          {ok, {inet:ip_address(), inet:port_number()} | {local, binary()}} | {error, atom()}.
peername({nifsock_ranch_ssl, S, _}) ->
    nifsock_ranch:peername(S);
peername({sslsocket, {nifsock_tcp, S, _, _}, _}) ->
    nifsock_ranch:peername(S);
peername(Socket) ->
    ssl:peername(Socket).

%% @doc The local address: `{IP, Port}', or `{local, Path}' for a unix socket.
-spec sockname(socket()) ->
          {ok, {inet:ip_address(), inet:port_number()} | {local, binary()}} | {error, atom()}.
sockname({nifsock_ranch_ssl, S, _}) ->
    nifsock_ranch:sockname(S);
sockname({sslsocket, {nifsock_tcp, S, _, _}, _}) ->
    nifsock_ranch:sockname(S);
sockname(Socket) ->
    ssl:sockname(Socket).

%% @doc `ssl:shutdown/2' (`nifsock_ranch:shutdown/2' before the handshake).
-spec shutdown(socket(), read | write | read_write) -> ok | {error, atom()}.
shutdown({nifsock_ranch_ssl, S, _}, How) ->
    nifsock_ranch:shutdown(S, How);
shutdown(Socket, How) ->
    ssl:shutdown(Socket, How).

%% @doc Closes the socket (`ssl:close/1' after the handshake). Always `ok'.
-spec close(socket()) -> ok.
close({nifsock_ranch_ssl, S, _}) ->
    nifsock_ranch:close(S);
close(Socket) ->
    _ = ssl:close(Socket),
    ok.

%% @doc Removes what a listener leaves behind (`nifsock_ranch:cleanup/1').
-spec cleanup(transport_opts()) -> ok.
cleanup(TransOpts) ->
    nifsock_ranch:cleanup(TransOpts).
