%% @doc A Ranch 2.x transport over `nifsock_tcp': use `nifsock_ranch' where
%% `ranch_tcp' would go (`ranch:start_listener(Ref, nifsock_ranch, TransOpts,
%% Protocol, ProtoOpts)'). Sockets are `nifsock_tcp' sockets; active messages
%% are `{nifsock, S, Data}', `{nifsock_closed, S}', `{nifsock_error, S, Reason}'
%% and `{nifsock_passive, S}' (see {@link messages/0}). Those are fixed, as
%% Ranch's `messages/0' takes no socket: a `{tags, _}' listen option is
%% dropped (see {@link disallowed_listen_options/0}), and a protocol must not
%% set `tags' on its sockets.
%%
%% It mirrors `ranch_tcp': the same listen defaults (`binary', `{active,
%% false}', `{packet, raw}', `{reuseaddr, true}', `{backlog, 1024}', `{nodelay,
%% true}', `{send_timeout, 30000}'), the same disallowed listen options, and
%% the same return shapes. The differences:
%% <ul>
%% <li>`recv_proxy_header/2' peeks at the socket and then consumes exactly the
%%     PROXY header, so it needs no `unrecv'; version 1 and version 2
%%     headers are parsed by `nifsock_proxy_header' (Ranch's
%%     `ranch_proxy_header' is not needed), which returns the same
%%     `proxy_info()' maps. The socket must be passive, in `{packet,
%%     raw}' binary mode, with nothing read yet (as Ranch calls it: right
%%     after the handshake).</li>
%% <li>`sendfile' goes through sendfile(2) (`nifsock:sendfile'), waiting on
%%     the socket with the socket's `send_timeout'; `chunk_size' is ignored.
%%     A file that is not raw falls back to read-and-send.</li>
%% <li>`getstat' reports the socket's counters (`nifsock_tcp:getstat/1').</li>
%% <li>gen_tcp's options are `nifsock_tcp''s: all readable with
%%     `getopts/2' and inherited by accepted sockets (`send_timeout_close',
%%     ranch_tcp's default true, closes the socket after a send timeout);
%%     `delay_send', the watermarks and `deliver' are kept but work
%%     differently (README, "Differences from gen_tcp");
%%     `{inet_backend, _}' is dropped with a warning (and silently by
%%     `connect/3,4').</li>
%% </ul>
%%
%% `-behaviour(ranch_transport)' is left out because Ranch is not a dependency
%% of nifsock (the attribute would only produce an "undefined behaviour"
%% warning); every `ranch_transport' callback is exported, with Ranch 2.x's
%% arities and return shapes.
-module(nifsock_ranch).

-export([name/0, secure/0, messages/0, listen/1, disallowed_listen_options/0,
         accept/2, handshake/2, handshake/3, handshake_continue/2, handshake_continue/3,
         handshake_cancel/1, connect/3, connect/4, recv/3, recv_proxy_header/2,
         send/2, sendfile/2, sendfile/4, sendfile/5, setopts/2, getopts/2,
         getstat/1, getstat/2, controlling_process/2, peername/1, sockname/1,
         shutdown/2, close/1, cleanup/1]).

-export_type([opt/0, opts/0, proxy_info/0]).

-type socket() :: nifsock:socket().
-type opt() :: nifsock_tcp:option().
-type opts() :: [opt()].
-type transport_opts() :: #{socket_opts => opts(), logger => module() | false, atom() => term()}.
-type sendfile_opts() :: [{chunk_size, non_neg_integer()}].
-type proxy_info() :: nifsock_proxy_header:proxy_info().

%%% ------------------------------------------------------------------
%%% Identity

%% @doc The transport's name: `nifsock'.
-spec name() -> nifsock.
name() -> nifsock.

%% @doc Whether the transport encrypts: `false'.
-spec secure() -> false.
secure() -> false.

%% @doc The tags of active-mode messages: `{OK, Closed, Error, Passive}'
%% (nifsock_tcp's default `tags').
-spec messages() -> {nifsock, nifsock_closed, nifsock_error, nifsock_passive}.
messages() -> {nifsock, nifsock_closed, nifsock_error, nifsock_passive}.

%%% ------------------------------------------------------------------
%%% Listening and accepting

%% @doc Opens the listen socket described by `TransOpts' (its `socket_opts';
%% the port is given there, 0 or absent: any). Defaults as `ranch_tcp':
%% `{backlog, 1024}', `{nodelay, true}', `{send_timeout, 30000}'; forced:
%% `binary', `{active, false}', `{packet, raw}', `{reuseaddr, true}' (the
%% options of {@link disallowed_listen_options/0} are dropped with a warning).
%% `{ip, {local, Path}}' listens on a unix socket (removing a stale file
%% first; TCP-level options such as `nodelay' are left out there).
%% Unknown options give `{error, einval}'.
-spec listen(transport_opts()) -> {ok, socket()} | {error, atom()}.
listen(TransOpts) ->
    ok = cleanup(TransOpts),
    Logger = maps:get(logger, TransOpts, logger),
    SocketOpts = maps:get(socket_opts, TransOpts, []),
    try nifsock_tcp:listen(0, local_opts(prepare_socket_opts(SocketOpts, Logger))) of
        Result -> Result
    catch
        %% nifsock_tcp exits with badarg for a bad option, as gen_tcp
        exit:badarg -> {error, einval};
        error:badarg -> {error, einval}
    end.

prepare_socket_opts(SocketOpts0, Logger) ->
    SocketOpts1 = set_option_default(SocketOpts0, backlog, 1024),
    SocketOpts2 = set_option_default(SocketOpts1, nodelay, true),
    SocketOpts3 = set_option_default(SocketOpts2, send_timeout, 30000),
    SocketOpts4 = set_option_default(SocketOpts3, send_timeout_close, true),
    filter_options(SocketOpts4, disallowed_listen_options(),
                   [binary, {active, false}, {packet, raw}, {reuseaddr, true}], Logger).

set_option_default(Opts, Key, Value) ->
    case lists:keymember(Key, 1, Opts) of
        true -> Opts;
        false -> [{Key, Value} | Opts]
    end.

%% The user's options minus the disallowed ones, merged over the defaults
%% (a user option replaces a default with the same key), as ranch:filter_options/4.
filter_options(UserOpts, Disallowed, Defaults, Logger) ->
    Allowed = filter_user_options(UserOpts, Disallowed, Logger),
    lists:foldl(fun merge_option/2, Defaults, Allowed).

filter_user_options([{inet_backend, _} = Opt | Rest], Disallowed, Logger) ->
    warn_option(Opt, Logger),
    filter_user_options(Rest, Disallowed, Logger);
filter_user_options([{Key, _} = Opt | Rest], Disallowed, Logger) ->
    case lists:member(Key, Disallowed) of
        true ->
            warn_option(Opt, Logger),
            filter_user_options(Rest, Disallowed, Logger);
        false ->
            [Opt | filter_user_options(Rest, Disallowed, Logger)]
    end;
filter_user_options([Opt | Rest], Disallowed, Logger) when Opt =:= inet; Opt =:= inet6;
                                                           Opt =:= local ->
    [Opt | filter_user_options(Rest, Disallowed, Logger)];
filter_user_options([{raw, _, _, _} = Opt | Rest], Disallowed, Logger) ->
    [Opt | filter_user_options(Rest, Disallowed, Logger)];
filter_user_options([Opt | Rest], Disallowed, Logger) ->
    warn_option(Opt, Logger),
    filter_user_options(Rest, Disallowed, Logger);
filter_user_options([], _Disallowed, _Logger) ->
    [].

merge_option({Key, _} = Opt, Opts) -> lists:keystore(Key, 1, Opts, Opt);
merge_option(Opt, Opts) -> [Opt | Opts].

warn_option(Opt, Logger) ->
    log(Logger, warning,
        "Transport option ~p unknown or invalid for nifsock_ranch; ignored.~n", [Opt]).

log(false, _Level, _Format, _Args) -> ok;
log(Logger, Level, Format, Args) ->
    try Logger:Level(Format, Args)
    catch error:undef -> ok
    end.

%% `{ip, {local, Path}}' (inet's spelling) is `{ifaddr, {local, Path}}' for
%% nifsock_tcp; on a unix socket TCP-level options are dropped (gen_tcp ignores
%% them there, nifsock_tcp would fail with enotsup).
local_opts(Opts) ->
    IsLocal = lists:any(fun({K, {local, _}}) -> K =:= ip orelse K =:= ifaddr;
                           (local) -> true;
                           (_) -> false
                        end, Opts),
    [case O of
         {ip, {local, Path}} -> {ifaddr, {local, Path}};
         _ -> O
     end || O <- Opts, not (IsLocal andalso is_tcp_level(O))].

is_tcp_level({Name, _}) -> lists:member(Name, [nodelay, nopush, tos]);
is_tcp_level(_) -> false.

%% @doc The listen options the transport sets itself and drops from the
%% user's: `active', `header', `mode', `packet', `packet_size',
%% `line_delimiter', `reuseaddr' (`binary' and `list' are dropped too), as
%% `ranch_tcp', and nifsock_tcp's `tags' ({@link messages/0} are the default
%% tags).
-spec disallowed_listen_options() -> [atom()].
disallowed_listen_options() ->
    [active, header, mode, packet, packet_size, line_delimiter, reuseaddr, tags].

%% @doc Accepts a connection on `LSocket'. The new socket inherits the
%% listener's options (passive, raw, binary) and is owned by the caller.
%% `{error, closed}' once the listen socket is closed, `{error, timeout}'.
-spec accept(socket(), timeout()) -> {ok, socket()} | {error, closed | timeout | atom()}.
accept(LSocket, Timeout) ->
    nifsock_tcp:accept(LSocket, Timeout).

%% @equiv handshake(CSocket, [], Timeout)
-spec handshake(socket(), timeout()) -> {ok, socket()}.
handshake(CSocket, Timeout) ->
    handshake(CSocket, [], Timeout).

%% @doc Completes the transport handshake: nothing to do for plain TCP.
-spec handshake(socket(), opts(), timeout()) -> {ok, socket()}.
handshake(CSocket, _Opts, _Timeout) ->
    {ok, CSocket}.

%% @equiv handshake_continue(CSocket, [], Timeout)
-spec handshake_continue(socket(), timeout()) -> no_return().
handshake_continue(CSocket, Timeout) ->
    handshake_continue(CSocket, [], Timeout).

%% @doc Not supported by plain TCP (as `ranch_tcp'): raises `not_supported'.
-spec handshake_continue(socket(), opts(), timeout()) -> no_return().
handshake_continue(_CSocket, _Opts, _Timeout) ->
    error(not_supported).

%% @doc Not supported by plain TCP (as `ranch_tcp'): raises `not_supported'.
-spec handshake_cancel(socket()) -> no_return().
handshake_cancel(_CSocket) ->
    error(not_supported).

%%% ------------------------------------------------------------------
%%% Connecting

%% @equiv connect(Host, Port, Opts, infinity)
-spec connect(inet:ip_address() | inet:hostname() | {local, binary() | string()},
              inet:port_number(), opts()) -> {ok, socket()} | {error, atom()}.
connect(Host, Port, Opts) when is_integer(Port) ->
    connect(Host, Port, Opts, infinity).

%% @doc Connects to `Host' (an address, a host name or `{local, Path}'),
%% with `Opts' followed by `binary', `{active, false}', `{packet, raw}' (which
%% therefore win), as `ranch_tcp'. Unknown options give `{error, einval}'.
-spec connect(inet:ip_address() | inet:hostname() | {local, binary() | string()},
              inet:port_number(), opts(), timeout()) -> {ok, socket()} | {error, atom()}.
connect(Host, Port, Opts, Timeout) when is_integer(Port) ->
    Family = case Host of
                 {local, _} -> [local];
                 _ -> []
             end,
    %% {inet_backend, _} chooses gen_tcp's backend (ranch_tcp passes it on);
    %% nifsock is the backend here, so it is dropped, as listen/1 drops it.
    Opts1 = [O || O <- Opts, not (is_tuple(O) andalso element(1, O) =:= inet_backend)],
    try nifsock_tcp:connect(Host, Port, Family ++ Opts1 ++ [binary, {active, false}, {packet, raw}],
                            Timeout) of
        Result -> Result
    catch
        exit:badarg -> {error, einval};
        error:badarg -> {error, einval}
    end.

%%% ------------------------------------------------------------------
%%% Data

%% @doc Receives `Length' bytes (0: whatever is there) from a passive socket.
-spec recv(socket(), non_neg_integer(), timeout()) ->
          {ok, binary() | string()} | {error, closed | timeout | atom()}.
recv(Socket, Length, Timeout) ->
    nifsock_tcp:recv(Socket, Length, Timeout).

%% @doc Reads a PROXY protocol header (version 1 or 2) and nothing after it:
%% the bytes are peeked at first, then exactly the header is consumed, so
%% what follows stays in the socket for the protocol. Returns Ranch's
%% `proxy_info()' map, `{error, protocol_error, HumanReadable}' for a
%% malformed or unrecognised header, or the socket's `{error, Reason}'
%% (`closed', `timeout'...). The socket must be passive, raw and binary.
-spec recv_proxy_header(socket(), timeout()) ->
          {ok, proxy_info()} | {error, closed | atom()} | {error, protocol_error, atom()}.
recv_proxy_header(Socket, Timeout) ->
    case nifsock_tcp:getopts(Socket, [active, packet, mode]) of
        {ok, [{active, false}, {packet, 0}, {mode, binary}]} ->
            proxy_header(Socket, <<>>, deadline(Timeout));
        {ok, _} ->
            {error, einval};
        {error, _} = Error ->
            Error
    end.

proxy_header(Socket, Acc, Deadline) ->
    case nifsock:recv(Socket, 0, [peek], nifsock_wait:remaining(Deadline)) of
        {ok, Peeked} ->
            Data = <<Acc/binary, Peeked/binary>>,
            case nifsock_proxy_header:header_length(Data) of
                {ok, Len} when Len =< byte_size(Data) ->
                    proxy_header_complete(Socket, Data, Len, Len - byte_size(Acc));
                {ok, _Len} ->
                    proxy_header_more(Socket, Data, byte_size(Peeked), Deadline);
                more ->
                    proxy_header_more(Socket, Data, byte_size(Peeked), Deadline);
                {error, Reason} ->
                    {error, protocol_error, Reason}
            end;
        {error, {Reason, _}} ->
            {error, Reason};
        {error, _} = Error ->
            Error
    end.

%% The header is all there: consume its unconsumed part and parse it.
proxy_header_complete(Socket, Data, Len, Unconsumed) ->
    case consume(Socket, Unconsumed) of
        ok ->
            <<Header:Len/binary, _/binary>> = Data,
            case nifsock_proxy_header:parse(Header) of
                {ok, Info} -> {ok, Info};
                {error, Reason} -> {error, protocol_error, Reason}
            end;
        {error, _} = Error ->
            Error
    end.

%% All that was peeked belongs to the header: take it and wait for the rest.
proxy_header_more(Socket, Data, Peeked, Deadline) ->
    case consume(Socket, Peeked) of
        ok -> proxy_header(Socket, Data, Deadline);
        {error, _} = Error -> Error
    end.

%% Reads N bytes known to be in the socket already.
consume(_Socket, 0) ->
    ok;
consume(Socket, N) ->
    case nifsock:recv(Socket, N, [], 5000) of
        {ok, _} -> ok;
        {error, {Reason, _}} -> {error, Reason};
        {error, _} = Error -> Error
    end.


%% @doc Sends iodata (no flattening: one sendmsg over its binaries, one send
%% for a single piece).
-spec send(socket(), iodata()) -> ok | {error, atom()}.
send(Socket, Data) ->
    nifsock_tcp:send(Socket, Data).

%% @equiv sendfile(Socket, File, 0, 0, [])
-spec sendfile(socket(), file:name_all() | file:fd()) ->
          {ok, non_neg_integer()} | {error, atom()}.
sendfile(Socket, File) ->
    sendfile(Socket, File, 0, 0, []).

%% @equiv sendfile(Socket, File, Offset, Bytes, [])
-spec sendfile(socket(), file:name_all() | file:fd(), non_neg_integer(), non_neg_integer()) ->
          {ok, non_neg_integer()} | {error, atom()}.
sendfile(Socket, File, Offset, Bytes) ->
    sendfile(Socket, File, Offset, Bytes, []).

%% @doc Sends `Bytes' bytes (0: to the end of the file) of `File' from
%% `Offset': a file name (opened `[raw, read, binary]' and closed again) or
%% an open file. A raw file goes out with sendfile(2) (`nifsock:sendfile/5'),
%% bounded by the socket's `send_timeout'; its position is not moved. Any
%% other file is read and sent in chunks (`chunk_size', default 8191 bytes).
%% A partial send reports only the reason, as `ranch_tcp'.
-spec sendfile(socket(), file:name_all() | file:fd(), non_neg_integer(), non_neg_integer(),
               sendfile_opts()) -> {ok, non_neg_integer()} | {error, atom()}.
sendfile(Socket, Filename, Offset, Bytes, Opts)
  when is_list(Filename); is_atom(Filename); is_binary(Filename) ->
    case file:open(Filename, [read, raw, binary]) of
        {ok, RawFile} ->
            try
                sendfile(Socket, RawFile, Offset, Bytes, Opts)
            after
                ok = file:close(RawFile)
            end;
        {error, _} = Error ->
            Error
    end;
sendfile(Socket, File, Offset, Bytes, Opts) ->
    case nifsock_tcp:getopts(Socket, [send_timeout]) of
        {ok, [{send_timeout, Timeout}]} ->
            %% what a timed-out send left queued goes out before the file
            case nifsock_tcp:flush_queued(Socket, Timeout) of
                ok -> raw_sendfile(Socket, File, Offset, Bytes, Opts, Timeout);
                {error, _} = Error -> Error
            end;
        {error, _} = Error ->
            Error
    end.

raw_sendfile(Socket, File, Offset, Bytes, Opts, Timeout) ->
    case nifsock:sendfile(Socket, File, Offset, Bytes, Timeout) of
        {ok, _} = Ok -> Ok;
        {error, {invalid, {file, _}}} -> sendfile_fallback(Socket, File, Offset, Bytes, Opts);
        {error, {Reason, _Sent}} -> {error, Reason};
        {error, _} = Error -> Error
    end.

%% For files that are not raw (no OS fd to hand to sendfile(2)): pread + send.
sendfile_fallback(Socket, File, Offset, Bytes, Opts) ->
    Chunk = case lists:keyfind(chunk_size, 1, Opts) of
                {chunk_size, N} when is_integer(N), N > 0 -> N;
                _ -> 16#1FFF
            end,
    sendfile_loop(Socket, File, Offset, Bytes, Chunk, 0).

sendfile_loop(_Socket, _File, _Offset, Bytes, _Chunk, Sent) when Bytes > 0, Sent >= Bytes ->
    {ok, Sent};
sendfile_loop(Socket, File, Offset, Bytes, Chunk, Sent) ->
    Want = case Bytes of
               0 -> Chunk;
               _ -> min(Chunk, Bytes - Sent)
           end,
    case file:pread(File, Offset + Sent, Want) of
        {ok, Data} ->
            case send(Socket, Data) of
                ok -> sendfile_loop(Socket, File, Offset, Bytes, Chunk, Sent + iolist_size(Data));
                {error, _} = Error -> Error
            end;
        eof ->
            {ok, Sent};
        {error, _} = Error ->
            Error
    end.

%%% ------------------------------------------------------------------
%%% Options and statistics

%% @doc Sets options (`nifsock_tcp:setopts/2': inet-style names).
-spec setopts(socket(), opts()) -> ok | {error, atom()}.
setopts(Socket, Opts) ->
    nifsock_tcp:setopts(Socket, Opts).

%% @doc Reads options (`nifsock_tcp:getopts/2': inet-style names).
-spec getopts(socket(), [atom()]) -> {ok, opts()} | {error, atom()}.
getopts(Socket, Names) ->
    nifsock_tcp:getopts(Socket, Names).

%% @doc The socket's statistics under inet's names (`nifsock_tcp:getstat/1').
-spec getstat(socket()) -> {ok, [{atom(), non_neg_integer()}]} | {error, atom()}.
getstat(Socket) ->
    nifsock_tcp:getstat(Socket).

%% @doc The named statistics (`nifsock_tcp:getstat/2').
-spec getstat(socket(), [atom()]) -> {ok, [{atom(), non_neg_integer()}]} | {error, atom()}.
getstat(Socket, Names) ->
    nifsock_tcp:getstat(Socket, Names).

%%% ------------------------------------------------------------------
%%% Ownership, names, ending

%% @doc Makes `Pid' the owner (active messages go to it; its exit closes the
%% socket). Only the owner may call: others get `{error, not_owner}'.
-spec controlling_process(socket(), pid()) -> ok | {error, closed | not_owner | atom()}.
controlling_process(Socket, Pid) ->
    nifsock_tcp:controlling_process(Socket, Pid).

%% @doc The peer's address: `{IP, Port}', or `{local, Path}' for a unix socket.
-spec peername(socket()) ->
          {ok, {inet:ip_address(), inet:port_number()} | {local, binary()}} | {error, atom()}.
peername(Socket) ->
    inet_name(nifsock_tcp:peername(Socket)).

%% @doc The local address: `{IP, Port}', or `{local, Path}' for a unix socket.
-spec sockname(socket()) ->
          {ok, {inet:ip_address(), inet:port_number()} | {local, binary()}} | {error, atom()}.
sockname(Socket) ->
    inet_name(nifsock_tcp:sockname(Socket)).

%% nifsock_tcp's names are inet's: {IP, Port} or {local, Path}.
inet_name({ok, {_, _}} = Ok) -> Ok;
inet_name({error, _} = Error) -> Error.

%% @doc Shuts down reading, writing or both.
-spec shutdown(socket(), read | write | read_write) -> ok | {error, atom()}.
shutdown(Socket, How) ->
    nifsock_tcp:shutdown(Socket, How).

%% @doc Closes the socket. Always `ok'.
-spec close(socket()) -> ok.
close(Socket) ->
    nifsock_tcp:close(Socket).

%% @doc Removes what a listener leaves behind: the socket file of
%% `{ip, {local, Path}}' (or `{ifaddr, {local, Path}}'), as `ranch_tcp'.
-spec cleanup(transport_opts()) -> ok.
cleanup(#{socket_opts := SocketOpts}) ->
    Local = [Path || {Key, {local, Path}} <- lists:reverse(SocketOpts),
                     Key =:= ip orelse Key =:= ifaddr],
    case Local of
        [Path | _] ->
            _ = file:delete(Path),
            ok;
        [] ->
            ok
    end;
cleanup(_) ->
    ok.

%%% ------------------------------------------------------------------
%%% Timeouts

%% Ranch's timeouts only (infinity or ms), as before.
deadline(T) when T =:= infinity; is_integer(T), T >= 0 -> nifsock_wait:deadline(T).
