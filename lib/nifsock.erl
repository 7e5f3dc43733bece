%% @doc TCP sockets for the BEAM with the fewest system calls and scheduler
%% hops: OTP's `socket' API for stream sockets, over a Rust NIF.
%%
%% Names, arities, argument order, return shapes and error atoms are those of
%% OTP 25's `socket', so code written for `socket' switches by renaming the
%% module. Differences are listed in the README ("Differences from socket").
%%
%% == Asynchronous calls ==
%% Every call that can wait takes a `Timeout': `infinity', milliseconds,
%% `nowait' or a handle (a reference). With `nowait' or a handle a call that
%% would block returns `{select, SelectInfo}' (`{select_info, Tag, Handle}');
%% the caller then waits for `{'$nifsock', Socket, select, Handle}' and calls
%% again, or gets `{'$nifsock', Socket, abort, {Handle, closed}}' if the socket
%% is closed meanwhile. `cancel/2' withdraws a wait. Blocking calls are loops
%% over the same mechanism; readiness comes from the VM's own poll set.
-module(nifsock).

-export([open/1, open/2, open/3, open/4, bind/2, listen/1, listen/2,
         accept/1, accept/2, connect/1, connect/2, connect/3,
         recv/1, recv/2, recv/3, recv/4, send/2, send/3, send/4,
         sendfile/2, sendfile/3, sendfile/4, sendfile/5,
         close/1, shutdown/2, setopt/3, getopt/2, sockname/1, peername/1,
         cancel/2, controlling_process/2, is_socket/1, info/0, info/1]).

-export_type([socket/0, select_info/0, select_handle/0, select_tag/0,
              timeout_spec/0, level_name/0]).

-include("nifsock_internal.hrl").

-define(DEFAULT_BACKLOG, 5).
%% The process dictionary key of the file of a socket's nowait sendfile
%% that answered `select': its continuation (`sendfile(S, SelectInfo, ...)')
%% goes on with it.
-define(SENDFILE_KEY(S), {'$nifsock_sendfile', S}).

-opaque socket() :: {'$nifsock', reference()}.
-type select_handle() :: reference().
-type select_tag() :: accept | connect | recv | {send, []}.
-type select_info() :: {select_info, select_tag(), select_handle()}.
-type timeout_spec() :: infinity | non_neg_integer() | nowait | select_handle().
-type level_name() :: {socket | ip | ipv6 | tcp | otp, atom()} | {integer(), integer()}.
-type reason() :: inet:posix() | closed | timeout | not_owner | {invalid, term()}.

%%% ------------------------------------------------------------------
%%% Creating sockets

%% @equiv open(FD, #{})
-spec open(integer()) -> {ok, socket()} | {error, reason()}.
open(FD) ->
    open(FD, #{}).

%% @doc Opens a stream socket: `open(Domain, stream)', or adopts an open fd:
%% `open(FD, #{dup => boolean()})' (dup defaults to true: nifsock then owns a
%% duplicate and never closes the caller's fd).
-spec open(inet | inet6 | local, stream) -> {ok, socket()} | {error, reason()};
          (integer(), map()) -> {ok, socket()} | {error, reason()}.
open(FD, Opts) when is_integer(FD), is_map(Opts) ->
    nifsock_nif:adopt(FD, maps:get(dup, Opts, true) =/= false);
open(Domain, Type) when is_atom(Domain), is_atom(Type) ->
    open(Domain, Type, default, #{});
open(A, B) ->
    erlang:error(badarg, [A, B]).

%% @doc `open(Domain, stream, Protocol)' or `open(Domain, stream, Opts)'.
-spec open(inet | inet6 | local, stream, tcp | default | integer() | map()) ->
          {ok, socket()} | {error, reason()}.
open(Domain, Type, Opts) when is_map(Opts) ->
    open(Domain, Type, default, Opts);
open(Domain, Type, Protocol) ->
    open(Domain, Type, Protocol, #{}).

%% @doc `open(Domain, stream, Protocol, Opts)'. Protocol `tcp' or `default'.
%% `Opts' as socket's: `netns' (a file name such as "/var/run/netns/NAME")
%% makes the socket in that network namespace (Linux; the calling scheduler
%% thread enters it for the socket(2) call and returns at once; it takes
%% CAP_SYS_ADMIN, `{error, eperm}' otherwise). `debug' and `use_registry'
%% are accepted and have no effect (nifsock has no socket registry or NIF
%% debug log).
-spec open(inet | inet6 | local, stream, tcp | default | integer(),
           #{netns => string(), debug => boolean(), use_registry => boolean()}) ->
          {ok, socket()} | {error, reason()}.
open(Domain, Type, Protocol, Opts)
  when is_atom(Domain), is_atom(Type), (is_atom(Protocol) orelse is_integer(Protocol)),
       is_map(Opts) ->
    case netns(Opts) of
        {ok, Netns} ->
            case nifsock_nif:open(Domain, Type, Protocol, Netns) of
                {error, {invalid, domain}} -> {error, {invalid, {domain, Domain}}};
                {error, {invalid, type}} -> {error, {invalid, {type, Type}}};
                {error, {invalid, protocol}} -> {error, {invalid, {protocol, Protocol}}};
                Result -> Result
            end;
        error ->
            {error, {invalid, {netns, maps:get(netns, Opts)}}}
    end;
open(Domain, Type, Protocol, Opts) ->
    erlang:error(badarg, [Domain, Type, Protocol, Opts]).

%% The `netns' file name as the NIF takes it: `undefined', or the name's
%% bytes in the file name encoding (as prim_socket encodes it).
netns(#{netns := Path}) when is_list(Path) ->
    case unicode:characters_to_binary(Path, unicode, file:native_name_encoding()) of
        Bin when is_binary(Bin) -> {ok, Bin};
        _ -> error
    end;
netns(#{netns := _}) ->
    error;
netns(_) ->
    {ok, undefined}.

%% @doc Binds to a sockaddr map, or `any' / `loopback' / `broadcast' (port
%% 0; a local socket gets `{error, eafnosupport}' for these, as from socket).
-spec bind(socket(), socket:sockaddr() | any | loopback | broadcast) -> ok | {error, reason()}.
bind(?SOCK(_) = S, broadcast) ->
    case nifsock_nif:bind(S, broadcast) of
        %% only an inet6 socket has no broadcast address; socket names the
        %% sockaddr it tried
        {error, {invalid, sockaddr}} ->
            {error, {invalid, {sockaddr, #{family => inet6, addr => broadcast}}}};
        Result ->
            Result
    end;
bind(?SOCK(_) = S, Addr) when is_map(Addr); is_atom(Addr) ->
    sockaddr_error(nifsock_nif:bind(S, Addr), Addr);
bind(S, Addr) ->
    erlang:error(badarg, [S, Addr]).

%% @doc Listens with the default backlog (5, as `socket').
-spec listen(socket()) -> ok | {error, reason()}.
listen(S) ->
    listen(S, ?DEFAULT_BACKLOG).

%% @doc Listens with `Backlog'.
-spec listen(socket(), integer()) -> ok | {error, reason()}.
listen(?SOCK(_) = S, Backlog) when is_integer(Backlog) ->
    nifsock_nif:listen(S, Backlog);
listen(S, Backlog) ->
    erlang:error(badarg, [S, Backlog]).

%% @equiv accept(L, infinity)
-spec accept(socket()) -> {ok, socket()} | {error, reason()}.
accept(L) ->
    accept(L, infinity).

%% @doc Accepts a connection (one accept4 call; several processes may wait on
%% one listener: one is armed, the rest queue in order).
-spec accept(socket(), timeout_spec()) ->
          {ok, socket()} | {select, select_info()} | {error, reason()}.
accept(?SOCK(_) = L, Timeout) ->
    case nifsock_wait:deadline(Timeout) of
        zero ->
            nifsock_nif:accept(L, undefined, zero);
        {handle, H} ->
            accept_nowait(L, H);
        Deadline ->
            accept_wait(L, ?WAIT_HANDLE(), Deadline)
    end;
accept(L, Timeout) ->
    erlang:error(badarg, [L, Timeout]).

accept_nowait(L, H) ->
    case nifsock_nif:accept(L, H, nowait) of
        select -> {select, ?SELECT_INFO(accept, H)};
        Result -> Result
    end.

accept_wait(L, H, Deadline) ->
    case nifsock_nif:accept(L, H, wait) of
        select ->
            case nifsock_wait:await(L, accept, H, Deadline) of
                select -> accept_wait(L, H, Deadline);
                Reason -> {error, Reason}
            end;
        Result ->
            Result
    end.

%% @doc Finishes a `connect/3' that returned `{select, _}', after its select message.
-spec connect(socket()) -> ok | {error, reason()}.
connect(?SOCK(_) = S) ->
    nifsock_nif:connect_finish(S);
connect(S) ->
    erlang:error(badarg, [S]).

%% @equiv connect(S, Addr, infinity)
-spec connect(socket(), socket:sockaddr() | any | loopback) -> ok | {error, reason()}.
connect(S, Addr) ->
    connect(S, Addr, infinity).

%% @doc Connects to `Addr'.
-spec connect(socket(), socket:sockaddr() | any | loopback, timeout_spec()) ->
          ok | {select, select_info()} | {error, reason()}.
connect(?SOCK(_) = S, Addr, Timeout) when is_map(Addr); is_atom(Addr) ->
    case nifsock_wait:deadline(Timeout) of
        zero ->
            sockaddr_error(nifsock_nif:connect(S, Addr, undefined, zero), Addr);
        {handle, H} ->
            case nifsock_nif:connect(S, Addr, H, nowait) of
                select -> {select, ?SELECT_INFO(connect, H)};
                Result -> sockaddr_error(Result, Addr)
            end;
        Deadline ->
            H = ?WAIT_HANDLE(),
            case nifsock_nif:connect(S, Addr, H, wait) of
                select ->
                    case nifsock_wait:await(S, connect, H, Deadline) of
                        select -> nifsock_nif:connect_finish(S);
                        Reason -> {error, Reason}
                    end;
                Result ->
                    sockaddr_error(Result, Addr)
            end
    end;
connect(S, Addr, Timeout) ->
    erlang:error(badarg, [S, Addr, Timeout]).

sockaddr_error({error, {invalid, sockaddr}}, Addr) -> {error, {invalid, {sockaddr, Addr}}};
sockaddr_error(Result, _Addr) -> Result.

%%% ------------------------------------------------------------------
%%% Receiving

%% @equiv recv(S, 0, [], infinity)
-spec recv(socket()) -> {ok, binary()} | {error, reason() | {reason(), binary()}}.
recv(S) ->
    recv(S, 0, [], infinity).

%% @doc `recv(S, Length)' or `recv(S, Flags)'.
-spec recv(socket(), non_neg_integer() | list()) ->
          {ok, binary()} | {error, reason() | {reason(), binary()}}.
recv(S, Flags) when is_list(Flags) ->
    recv(S, 0, Flags, infinity);
recv(S, Length) ->
    recv(S, Length, [], infinity).

%% @doc `recv(S, Flags, Timeout)', `recv(S, Length, Flags)' or `recv(S, Length, Timeout)'.
-spec recv(socket(), non_neg_integer() | list(), list() | timeout_spec()) ->
          {ok, binary()} | {select, select_info() | {select_info(), binary()}} |
          {error, reason() | {reason(), binary()}}.
recv(S, Flags, Timeout) when is_list(Flags) ->
    recv(S, 0, Flags, Timeout);
recv(S, Length, Flags) when is_list(Flags) ->
    recv(S, Length, Flags, infinity);
recv(S, Length, Timeout) ->
    recv(S, Length, [], Timeout).

%% @doc Receives `Length' bytes exactly, or what is there when `Length' is 0.
%% With a timeout, a partial result is `{error, {timeout, Data}}'; with
%% timeout 0, as OTP 25's socket, `{ok, Data}' with what is there (fewer bytes
%% than `Length' when no more has arrived; README: "Differences from socket");
%% with `nowait', `{select, {SelectInfo, Data}}'.
-spec recv(socket(), non_neg_integer(), list(), timeout_spec()) ->
          {ok, binary()} | {select, select_info() | {select_info(), binary()}} |
          {error, reason() | {reason(), binary()}}.
recv(?SOCK(_) = S, Length, Flags, Timeout)
  when is_integer(Length), Length >= 0, is_list(Flags) ->
    case nifsock_wait:deadline(Timeout) of
        zero ->
            recv_zero(S, Length, Flags);
        {handle, H} ->
            recv_nowait(S, Length, Flags, H);
        Deadline ->
            recv_wait(S, Length, Flags, ?WAIT_HANDLE(), Deadline)
    end;
recv(S, Length, Flags, Timeout) ->
    erlang:error(badarg, [S, Length, Flags, Timeout]).

recv_zero(S, Length, Flags) ->
    case nifsock_nif:recv(S, Length, Flags, undefined, zero) of
        more -> recv_zero(S, Length, Flags);
        Result -> Result
    end.

recv_nowait(S, Length, Flags, H) ->
    case nifsock_nif:recv(S, Length, Flags, H, nowait) of
        select -> {select, ?SELECT_INFO(recv, H)};
        {select, Data} -> {select, {?SELECT_INFO(recv, H), Data}};
        more -> recv_nowait(S, Length, Flags, H);
        Result -> Result
    end.

recv_wait(S, Length, Flags, H, Deadline) ->
    recv_wait(S, Length, Flags, H, Deadline, wait).

%% `yield': the last read emptied the queue, and reads after a yield keep
%% finding data on this socket (a busy scheduler): let the other runnable
%% processes run, then read (one NIF call, no wait).
recv_wait(S, Length, Flags, H, Deadline, Mode) ->
    case nifsock_nif:recv(S, Length, Flags, H, Mode) of
        select ->
            case nifsock_wait:await(S, recv, H, Deadline) of
                select -> recv_wait(S, Length, Flags, H, Deadline);
                {recv, Result} -> Result;
                Reason -> with_partial(S, Reason)
            end;
        more ->
            recv_wait(S, Length, Flags, H, Deadline);
        yield ->
            erlang:yield(),
            recv_wait(S, Length, Flags, H, Deadline, yielded);
        Result ->
            Result
    end.

with_partial(S, Reason) ->
    case nifsock_nif:take_partial(S) of
        <<>> -> {error, Reason};
        Data -> {error, {Reason, Data}}
    end.

%%% ------------------------------------------------------------------
%%% Sending

%% @equiv send(S, Data, [], infinity)
-spec send(socket(), iodata()) -> ok | {error, reason() | {reason(), iodata()}}.
send(S, Data) ->
    send(S, Data, [], infinity).

%% @doc `send(S, Data, Flags)', `send(S, Data, Cont)' or `send(S, Data, Timeout)'.
-spec send(socket(), iodata(), list() | select_info() | timeout_spec()) ->
          ok | {ok, iodata()} | {select, select_info() | {select_info(), iodata()}} |
          {error, reason() | {reason(), iodata()}}.
send(S, Data, Flags) when is_list(Flags) ->
    send(S, Data, Flags, infinity);
send(S, Data, ?SELECT_INFO(_, _) = Cont) ->
    send(S, Data, Cont, infinity);
send(S, Data, Timeout) ->
    send(S, Data, [], Timeout).

%% @doc Sends iodata with one sendmsg over its binaries (no flattening copy;
%% one binary, or bytes copied together: one send).
%% A partial send returns the rest: `{select, {SelectInfo, Rest}}' with
%% `nowait', `{error, {timeout, Rest}}' when the time runs out. `Rest' is a
%% binary (a sub-binary) when one binary is left, as when `Data' is one
%% binary; otherwise the list of the unsent binaries, never flattened.
-spec send(socket(), iodata(), list() | select_info(), timeout_spec()) ->
          ok | {ok, iodata()} | {select, select_info() | {select_info(), iodata()}} |
          {error, reason() | {reason(), iodata()}}.
send(S, Data, ?SELECT_INFO({send, Flags}, _), Timeout) when is_list(Flags) ->
    %% a continuation: the rest goes out with the first call's flags
    send(S, Data, Flags, Timeout);
send(?SOCK(_), Data, ?SELECT_INFO(_, _) = Cont, _Timeout)
  when is_binary(Data); is_list(Data) ->
    {error, {invalid, Cont}};
send(?SOCK(_) = S, Data, Flags, Timeout)
  when is_list(Flags), is_binary(Data) orelse is_list(Data) ->
    case nifsock_wait:deadline(Timeout) of
        zero ->
            case nif_send(S, Data, Flags, undefined, zero, Timeout) of
                {more, 0} -> {error, timeout};
                {more, N} -> {error, {timeout, unwrap(rest(Data, N))}};
                Result -> send_result(Result, Data)
            end;
        {handle, H} ->
            case nif_send(S, Data, Flags, H, nowait, Timeout) of
                {select, 0} -> {select, ?SELECT_INFO({send, Flags}, H)};
                {select, N} -> {select, {?SELECT_INFO({send, Flags}, H), unwrap(rest(Data, N))}};
                Result -> send_result(Result, Data)
            end;
        Deadline ->
            send_wait(S, Data, Flags, ?WAIT_HANDLE(), Deadline, false, Timeout)
    end;
send(S, Data, Flags, Timeout) ->
    erlang:error(badarg, [S, Data, Flags, Timeout]).

%% One send call. The NIF takes a binary or a list of binaries (nested, with
%% binary tails) as it is, so a short reply needs no iolist_to_iovec; what
%% it can't take (byte integers; more pieces than it gathers, unless a flat
%% list of binaries) it returns as `iovec', sending nothing: that is
%% flattened here (badarg, with the send's arguments, when it is not iodata)
%% and sent. Only a send's first call can get `iovec' (the rest of a partial
%% send is a flat list of binaries), so `Data' is then the caller's.
nif_send(S, Data, Flags, H, Mode, Timeout) ->
    case nifsock_nif:send(S, Data, Flags, H, Mode) of
        iovec ->
            IOV = try erlang:iolist_to_iovec(Data)
                  catch error:badarg -> erlang:error(badarg, [S, Data, Flags, Timeout])
                  end,
            nifsock_nif:send(S, IOV, Flags, H, Mode);
        Result ->
            Result
    end.

send_wait(S, Data, Flags, H, Deadline, Written, Timeout) ->
    case nif_send(S, Data, Flags, H, wait, Timeout) of
        {select, N} ->
            Rest = rest(Data, N),
            Written1 = Written orelse N > 0,
            case nifsock_wait:await(S, send, H, Deadline) of
                select -> send_wait(S, Rest, Flags, H, Deadline, Written1, Timeout);
                Reason -> send_error(Reason, Rest, Written1)
            end;
        {error, {Reason, N}} when is_integer(N) ->
            send_error(Reason, rest(Data, N), true);
        {error, Reason} ->
            send_error(Reason, Data, Written);
        Result ->
            send_result(Result, Data)
    end.

send_result({error, {Reason, N}}, Data) when is_integer(N) ->
    {error, {Reason, unwrap(rest(Data, N))}};
send_result(Result, _Data) ->
    Result.

send_error(Reason, _Rest, false) -> {error, Reason};
send_error(Reason, Rest, true) -> {error, {Reason, unwrap(Rest)}}.

%% The binaries of the data after its first N bytes (a partial send's rest,
%% sent as it is by the next call).
rest(Bin, N) when is_binary(Bin) ->
    drop([Bin], N);
rest(Data, N) ->
    drop(erlang:iolist_to_iovec(Data), N).

drop([B | T], N) when byte_size(B) =< N ->
    drop(T, N - byte_size(B));
drop([B | T], N) when N > 0 ->
    [binary:part(B, N, byte_size(B) - N) | T];
drop(IOV, _) ->
    IOV.

%% The rest of a partial send as the caller gets it: one binary as a binary.
unwrap([B]) -> B;
unwrap(IOV) -> IOV.

%%% ------------------------------------------------------------------
%%% sendfile

%% @equiv sendfile(S, File, 0, 0, infinity)
-spec sendfile(socket(), file:fd()) ->
          {ok, non_neg_integer()} | {error, reason() | {reason(), non_neg_integer()}}.
sendfile(S, File) ->
    sendfile(S, File, 0, 0, infinity).

%% @equiv sendfile(S, File, 0, 0, Timeout)
-spec sendfile(socket(), file:fd() | select_info(), timeout_spec()) ->
          {ok, non_neg_integer()} | {select, {select_info(), non_neg_integer()}} |
          {error, reason() | {reason(), non_neg_integer()}}.
sendfile(S, File, Timeout) ->
    sendfile(S, File, 0, 0, Timeout).

%% @equiv sendfile(S, File, Offset, Count, infinity)
-spec sendfile(socket(), file:fd(), non_neg_integer(), non_neg_integer()) ->
          {ok, non_neg_integer()} | {error, reason() | {reason(), non_neg_integer()}}.
sendfile(S, File, Offset, Count) ->
    sendfile(S, File, Offset, Count, infinity).

%% @doc Sends `Count' bytes (0: up to the end of the file) of a raw file
%% (`file:open(Name, [raw, read])') from `Offset' with sendfile(2). The socket
%% is non-blocking: a full socket buffer makes the caller wait for a select,
%% never a scheduler. Returns the bytes sent. With `nowait' (or a select
%% handle) a full socket answers `{select, {SelectInfo, BytesSent}}'; as with
%% socket, `sendfile(S, SelectInfo, Offset, Count, Timeout)' then goes on
%% with the same file (this process keeps it for the socket until the next
%% sendfile of it, or its close).
-spec sendfile(socket(), file:fd() | select_info(), non_neg_integer(), non_neg_integer(),
               timeout_spec()) ->
          {ok, non_neg_integer()} | {select, {select_info(), non_neg_integer()}} |
          {error, reason() | {reason(), non_neg_integer()}}.
sendfile(?SOCK(_) = S, ?SELECT_INFO(Tag, _) = Cont, Offset, Count, Timeout)
  when is_integer(Offset), Offset >= 0, is_integer(Count), Count >= 0 ->
    %% a continuation, as socket's: the file of this socket's last sendfile
    %% that answered `select' (kept by this process)
    case Tag =:= sendfile andalso get(?SENDFILE_KEY(S)) of
        {file, File} -> sendfile(S, File, Offset, Count, Timeout);
        _ -> {error, {invalid, Cont}}
    end;
sendfile(?SOCK(_) = S, File, Offset, Count, Timeout)
  when is_integer(Offset), Offset >= 0, is_integer(Count), Count >= 0 ->
    _ = erase(?SENDFILE_KEY(S)),
    case file_fd(File) of
        {ok, Fd} ->
            case nifsock_wait:deadline(Timeout) of
                {handle, H} ->
                    case sendfile_nowait(S, Fd, Offset, Count, H, 0) of
                        {select, _} = Select ->
                            put(?SENDFILE_KEY(S), {file, File}),
                            Select;
                        Result ->
                            Result
                    end;
                Deadline ->
                    sendfile_wait(S, Fd, Offset, Count, ?WAIT_HANDLE(), Deadline, 0)
            end;
        error ->
            {error, {invalid, {file, File}}}
    end;
sendfile(S, File, Offset, Count, Timeout) ->
    erlang:error(badarg, [S, File, Offset, Count, Timeout]).

%% The OS fd of a raw file (prim_file hands out its native handle).
file_fd(File) ->
    try prim_file:get_handle(File) of
        <<Fd:32/signed-native>> -> {ok, Fd};
        _ -> error
    catch _:_ -> error
    end.

sendfile_nowait(S, Fd, Offset, Count, H, Sent) ->
    case nifsock_nif:sendfile(S, Fd, Offset, Count, H, nowait) of
        {ok, N} -> {ok, Sent + N};
        {more, N} -> sendfile_nowait(S, Fd, Offset + N, sendfile_left(Count, N), H, Sent + N);
        {select, N} -> {select, {?SELECT_INFO(sendfile, H), Sent + N}};
        {error, {Reason, N}} -> {error, {Reason, Sent + N}};
        {error, Reason} when Sent > 0 -> {error, {Reason, Sent}};
        {error, _} = Error -> Error
    end.

sendfile_wait(S, Fd, Offset, Count, H, Deadline, Sent) ->
    Mode = case Deadline of zero -> zero; _ -> wait end,
    case nifsock_nif:sendfile(S, Fd, Offset, Count, H, Mode) of
        {ok, N} ->
            {ok, Sent + N};
        {more, N} when Mode =:= zero ->
            sendfile_error(timeout, Sent + N);
        {more, N} ->
            sendfile_wait(S, Fd, Offset + N, sendfile_left(Count, N), H, Deadline, Sent + N);
        {select, N} ->
            Sent1 = Sent + N,
            case nifsock_wait:await(S, sendfile, H, Deadline) of
                select ->
                    sendfile_wait(S, Fd, Offset + N, sendfile_left(Count, N), H, Deadline, Sent1);
                Reason ->
                    sendfile_error(Reason, Sent1)
            end;
        {error, {Reason, N}} ->
            sendfile_error(Reason, Sent + N);
        {error, Reason} ->
            sendfile_error(Reason, Sent)
    end.

sendfile_left(0, _N) -> 0;
sendfile_left(Count, N) -> Count - N.

sendfile_error(Reason, 0) -> {error, Reason};
sendfile_error(Reason, Sent) -> {error, {Reason, Sent}}.

%%% ------------------------------------------------------------------
%%% Ending

%% @doc Closes the socket. Waiters get `{'$nifsock', S, abort, {Handle, closed}}'.
%% The fd is closed on the calling scheduler, or on a dirty I/O scheduler when
%% SO_LINGER is on with a positive timeout (so the close may block).
-spec close(socket()) -> ok | {error, reason()}.
close(?SOCK(_) = S) ->
    _ = erase(?SENDFILE_KEY(S)),
    case nifsock_nif:close(S) of
        linger -> nifsock_nif:finish_close(S);
        Result -> Result
    end;
close(S) ->
    erlang:error(badarg, [S]).

%% @doc Shuts down reading, writing or both.
-spec shutdown(socket(), read | write | read_write) -> ok | {error, reason()}.
shutdown(?SOCK(_) = S, How) when How =:= read; How =:= write; How =:= read_write ->
    nifsock_nif:shutdown(S, How);
shutdown(?SOCK(_), How) when is_atom(How) ->
    {error, {invalid, {how, How}}};
shutdown(S, How) ->
    erlang:error(badarg, [S, How]).

%%% ------------------------------------------------------------------
%%% Options and names

%% @doc Sets an option: `{Level, Name}' from the option table (see README), or
%% raw `{Level :: integer(), Opt :: integer()}' with an integer or binary.
%% One setsockopt per option (IP_TOS: see README).
-spec setopt(socket(), level_name(), term()) -> ok | {error, reason()}.
setopt(?SOCK(_) = S, {otp, controlling_process} = Opt, Value) ->
    %% socket's shapes: a non-owner gets {invalid, not_owner} (whatever the
    %% value), the owner {invalid, {socket_option, Opt, Value}} for a non-pid.
    %% controlling_process/2 keeps gen_tcp's {error, not_owner}.
    Result = case is_pid(Value) of
                 true -> nifsock_nif:controlling_process(S, Value);
                 %% moving it to the caller itself is the ownership check
                 false -> nifsock_nif:controlling_process(S, self())
             end,
    case Result of
        {error, not_owner} -> {error, {invalid, not_owner}};
        ok when not is_pid(Value) -> {error, {invalid, {socket_option, Opt, Value}}};
        %% A dead new owner: `socket' takes it and the owner's death closes
        %% the socket at once.
        {error, esrch} -> _ = close(S), ok;
        _ -> Result
    end;
setopt(?SOCK(_) = S, {Level, Name} = Opt, Value) ->
    case nifsock_nif:setopt(S, Level, Name, Value) of
        {error, {invalid, option}} -> {error, {invalid, {socket_option, Opt}}};
        {error, {invalid, value}} -> {error, {invalid, {socket_option, Opt, Value}}};
        Result -> Result
    end;
setopt(S, Opt, Value) ->
    erlang:error(badarg, [S, Opt, Value]).

%% @doc Reads an option.
-spec getopt(socket(), level_name()) -> {ok, term()} | {error, reason()}.
getopt(?SOCK(_) = S, {otp, controlling_process}) ->
    {ok, maps:get(ctrl, nifsock_nif:info(S))};
getopt(?SOCK(_) = S, {Level, Name} = Opt) ->
    case nifsock_nif:getopt(S, Level, Name) of
        {error, {invalid, option}} -> {error, {invalid, {socket_option, Opt}}};
        Result -> Result
    end;
getopt(S, Opt) ->
    erlang:error(badarg, [S, Opt]).

%% @doc The local address.
-spec sockname(socket()) -> {ok, socket:sockaddr()} | {error, reason()}.
sockname(?SOCK(_) = S) -> nifsock_nif:sockname(S);
sockname(S) -> erlang:error(badarg, [S]).

%% @doc The peer's address.
-spec peername(socket()) -> {ok, socket:sockaddr()} | {error, reason()}.
peername(?SOCK(_) = S) -> nifsock_nif:peername(S);
peername(S) -> erlang:error(badarg, [S]).

%%% ------------------------------------------------------------------
%%% Waits, ownership, introspection

%% @doc Withdraws a wait started with `nowait' or a handle.
-spec cancel(socket(), select_info()) -> ok | {error, reason()}.
cancel(?SOCK(_) = S, ?SELECT_INFO(Tag, H) = Info) when is_reference(H) ->
    Op = case Tag of
             {Op0, _} -> Op0;
             Op0 -> Op0
         end,
    case nifsock_wait:cancel(S, Op, H) of
        not_found -> {error, {invalid, Info}};
        Result -> Result
    end;
cancel(S, Info) ->
    erlang:error(badarg, [S, Info]).

%% @doc Makes `Pid' the owner: its death closes the socket. Only the owner may call.
-spec controlling_process(socket(), pid()) -> ok | {error, reason()}.
controlling_process(?SOCK(_) = S, Pid) when is_pid(Pid) ->
    case nifsock_nif:controlling_process(S, Pid) of
        %% A dead new owner: gen_tcp's `badarg' (from port_connect/2); the
        %% socket stays the caller's.
        {error, esrch} -> {error, badarg};
        Result -> Result
    end;
controlling_process(S, Pid) ->
    erlang:error(badarg, [S, Pid]).

%% @doc True for a nifsock socket term.
-spec is_socket(term()) -> boolean().
is_socket(?SOCK(R)) when is_reference(R) -> true;
is_socket(_) -> false.

%% @doc Process-wide counters: sockets and fds alive, accepts, reads, writes
%% (and their EAGAINs), bytes in/out, closes inline/dirty/deferred, selects,
%% setsockopt/getsockopt calls.
-spec info() -> #{atom() => integer()}.
info() ->
    nifsock_nif:stats().

%% @doc Information about one socket, as `socket:info/1' gives it, with
%% nifsock's own `active', `pending' and `readiness' (where its reads and
%% writes wait: the README lists the keys).
-spec info(socket()) -> map().
info(?SOCK(_) = S) -> nifsock_nif:info(S);
info(S) -> erlang:error(badarg, [S]).
