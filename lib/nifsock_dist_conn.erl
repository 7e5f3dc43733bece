%% @private
%% @doc The processes of one `nifsock_dist' connection after its handshake:
%% the controller (output) and the input handler.
%%
%% The controller is the process given to `erlang:setnode/3'. It waits for
%% `dist_data' (`erlang:dist_ctrl_get_data_notification/1'), takes what the VM
%% has queued with `erlang:dist_ctrl_get_data/1' (up to ?BATCH_BYTES at a
%% time), puts a 4-byte length in front of each packet and writes the lot with
%% one nifsock send: one sendmsg over the VM's own binaries, no flattening (a
%% tick, a lone header, goes out with one send).
%% It is the only writer of the socket: a tick (an empty packet) is a message
%% to it, so a tick never lands in the middle of a partly written packet. Its
%% sends don't block: while the socket is full it waits for the select
%% message and ignores ticks (bytes are pending, so the peer will see traffic).
%%
%% The input handler owns the socket after the handshake (the supervisor
%% hands it over once the VM knows the handler, so no data is put before) and
%% keeps it in raw binary `{active, 64}' mode: the readiness drain (the
%% driver port's `ready_input' on a scheduler) reads whatever has arrived, up
%% to 64 KB (straight into a binary while the connection streams), and sends
%% it to the handler as a message: no select message, no recv call, no
%% EAGAIN read per wait, as the passive `recv(S, 0)' it replaces had. The
%% count bounds what waits in the handler's mailbox (64 chunks): a peer
%% faster than the handler is held back by TCP; `{active, true}' would let
%% the drain read without limit. It is re-armed on the passive message.
%% While the peer streams (a chunk of 16 KB or more) the handler turns the
%% socket passive and reads itself, `recv(S, 0)' straight into binaries,
%% until a read comes back short: a stream of large messages costs no drain
%% and no message per 64 KB (measured: active delivery alone took 17 % off
%% the MB/s of 1 MB messages and added 10 % CPU per MB).
%% The handler frames the packets itself and hands each one to
%% `erlang:dist_ctrl_put_data/2' as a sub-binary of that chunk: no copy. A
%% packet cut by the end of a chunk (ERTS sends large messages as ~64 KB
%% fragments, so with a stream of them that is one per read) is completed from
%% the next chunks and handed over as an iolist of its pieces, which ERTS joins.
%% Framing in the NIF instead (`{packet, 4}') measured 2x the CPU per MB
%% and 0.4x the throughput on large messages.
-module(nifsock_dist_conn).

-export([start_link/1, handshake_complete/3, tick/1]).
-export([controller/2, input/4]).

-include("nifsock_internal.hrl").

%% As gen_tcp_dist: off-heap queues, and cheap full sweeps of processes that
%% hold almost nothing live, so no stale binaries linger.
-define(SPAWN_OPTS, [{message_queue_data, off_heap}, {fullsweep_after, 0}]).
%% The most bytes one send takes from the VM's queue.
-define(BATCH_BYTES, (256 * 1024)).
%% The input handler's active count: chunks (up to 64 KB each) read ahead.
-define(ACTIVE_N, 64).
%% A chunk this large means the peer streams: the input handler reads
%% passively until a read is shorter (see chunk/1).
-define(STREAMING, (16 * 1024)).

-record(in, {sock :: nifsock_tcp:socket(),
             dhandle :: term(),
             %% streaming: passive reads (see chunk/1)
             passive = false :: boolean()}).

-record(out, {sock :: nifsock_tcp:socket(),
              dhandle :: term(),
              ref :: reference()}).

%% @doc Spawns the controller of socket `S', linked to the caller (the
%% connection supervisor). It idles until `handshake_complete/2'.
-spec start_link(nifsock_tcp:socket()) -> pid().
start_link(S) ->
    spawn_opt(?MODULE, controller, [S, self()], [link, {priority, max} | ?SPAWN_OPTS]).

%% @doc The handshake is done: start moving data. Called by the supervisor,
%% the owner of `S' until then: it hands the socket to the input handler.
-spec handshake_complete(pid(), nifsock_tcp:socket(), term()) -> ok.
handshake_complete(Ctrl, S, DHandle) ->
    Mon = erlang:monitor(process, Ctrl),
    Ctrl ! {handshake_complete, self(), Mon, DHandle},
    receive
        {Mon, ok, Input} ->
            erlang:demonitor(Mon, [flush]),
            case nifsock_tcp:controlling_process(S, Input) of
                ok -> ok;
                {error, Reason} -> exit({dist_controlling_process, Reason})
            end,
            Input ! {self(), owner},
            ok;
        {'DOWN', Mon, process, Ctrl, Reason} ->
            exit({dist_controller_exit, Reason})
    end.

%% @doc dist_util's `mf_tick': ask the controller for a tick.
-spec tick(pid()) -> ok.
tick(Ctrl) ->
    Ctrl ! tick,
    ok.

%%% ------------------------------------------------------------------
%%% Output

%% @private
-spec controller(nifsock_tcp:socket(), pid()) -> no_return().
controller(S, Sup) ->
    receive
        {handshake_complete, Sup, Mon, DHandle} ->
            _ = erlang:dist_ctrl_set_opt(DHandle, get_size, true),
            Input = spawn_opt(?MODULE, input, [S, DHandle, Sup, self()], [link | ?SPAWN_OPTS]),
            ok = erlang:dist_ctrl_input_handler(DHandle, Input),
            Sup ! {Mon, ok, Input},
            process_flag(priority, normal),
            ok = erlang:dist_ctrl_get_data_notification(DHandle),
            idle(#out{sock = S, dhandle = DHandle, ref = make_ref()})
    end.

idle(O) ->
    receive
        dist_data -> drain(O);
        tick -> transmit(O, <<0:32>>, idle);
        _ -> idle(O)
    end.

%% Sends what the VM has queued until it has nothing more; then asks to be
%% told when it has.
drain(#out{dhandle = DHandle} = O) ->
    case try collect(DHandle, [], 0) catch _:_ -> death_row(connection_closed) end of
        [] ->
            ok = erlang:dist_ctrl_get_data_notification(DHandle),
            idle(O);
        Batch ->
            transmit(O, Batch, drain)
    end.

collect(_DHandle, Acc, Bytes) when Bytes >= ?BATCH_BYTES ->
    lists:reverse(Acc);
collect(DHandle, Acc, Bytes) ->
    case erlang:dist_ctrl_get_data(DHandle) of
        none -> lists:reverse(Acc);
        {Size, Data} -> collect(DHandle, [[<<Size:32>> | Data] | Acc], Bytes + Size)
    end.

transmit(#out{sock = S, ref = Ref} = O, Data, Then) ->
    case nifsock:send(S, Data, [], Ref) of
        ok when Then =:= drain -> drain(O);
        ok -> idle(O);
        {select, {_Info, Rest}} -> blocked(O, Rest, Then);
        {select, _Info} -> blocked(O, Data, Then);
        {error, {Reason, _Rest}} -> death_row({send_error, Reason});
        {error, Reason} -> death_row({send_error, Reason})
    end.

blocked(#out{sock = S, ref = Ref} = O, Rest, Then) ->
    receive
        ?MSG(S, select, Ref) -> transmit(O, Rest, Then);
        ?MSG(S, abort, {Ref, Reason}) -> death_row({send_error, Reason})
    end.

%%% ------------------------------------------------------------------
%%% Input

%% @private
-spec input(nifsock_tcp:socket(), term(), pid(), pid()) -> no_return().
input(S, DHandle, Sup, _Ctrl) ->
    link(Sup),
    %% Put no data before the VM knows us as the input handler, and read
    %% nothing before we own the socket: the supervisor says when both hold.
    receive {Sup, owner} -> ok end,
    ok = arm(S),
    stream(#in{sock = S, dhandle = DHandle}, <<>>).

stream(I, <<Len:32, Packet:Len/binary, Rest/binary>>) ->
    put_data(I, Packet),
    stream(I, Rest);
stream(I, <<>>) ->
    {Chunk, I1} = chunk(I),
    stream(I1, Chunk);
stream(I, <<Len:32, Part/binary>>) ->
    fill(I, Len - byte_size(Part), [Part || Part =/= <<>>]);
stream(I, Head) ->
    %% Less than a header: finish it from the next chunk.
    {Chunk, I1} = chunk(I),
    header(I1, Head, Chunk).

%% Head (under 4 bytes) starts a header that Chunk continues.
header(I, Head, Chunk) when byte_size(Head) + byte_size(Chunk) < 4 ->
    {Chunk1, I1} = chunk(I),
    header(I1, <<Head/binary, Chunk/binary>>, Chunk1);
header(I, Head, Chunk) ->
    HeadRest = 4 - byte_size(Head),
    <<More:HeadRest/binary, Rest/binary>> = Chunk,
    <<Len:32>> = <<Head/binary, More/binary>>,
    case Rest of
        <<Packet:Len/binary, Rest1/binary>> ->
            put_data(I, Packet),
            stream(I, Rest1);
        _ ->
            fill(I, Len - byte_size(Rest), [Rest || Rest =/= <<>>])
    end.

%% The packet continues in the next chunks: Acc holds its first parts, reversed.
fill(I, Need, Acc) ->
    case chunk(I) of
        {<<Tail:Need/binary, Rest/binary>>, I1} ->
            put_data(I1, case Acc of [] -> Tail; _ -> lists:reverse(Acc, [Tail]) end),
            stream(I1, Rest);
        {Chunk, I1} ->
            fill(I1, Need - byte_size(Chunk), [Chunk | Acc])
    end.

%% The next chunk of the stream, and the handler's state. Active (the
%% default): what the readiness drain read for us, up to nifsock's read size
%% (64 KB). A chunk of ?STREAMING bytes or more says the peer streams: the
%% handler turns the socket passive and reads itself with `recv(S, 0)'
%% (straight into binaries, no drain and no message per chunk), first taking
%% the chunks delivered before the switch, until a read comes back short;
%% then it is active again.
chunk(#in{sock = S, passive = false} = I) ->
    receive
        {nifsock, S, Bin} when byte_size(Bin) >= ?STREAMING -> {Bin, to_passive(I)};
        {nifsock, S, Bin} -> {Bin, I};
        {nifsock_passive, S} -> ok = arm(S), chunk(I);
        {nifsock_closed, S} -> exit(connection_closed);
        {nifsock_error, S, Reason} -> exit({recv_error, Reason});
        _ -> chunk(I)
    end;
chunk(#in{sock = S} = I) ->
    receive
        {nifsock, S, Bin} -> {Bin, I};
        {nifsock_passive, S} -> chunk(I);
        {nifsock_closed, S} -> exit(connection_closed);
        {nifsock_error, S, Reason} -> exit({recv_error, Reason})
    after 0 ->
            case nifsock_tcp:recv(S, 0) of
                {ok, Bin} when byte_size(Bin) >= ?STREAMING ->
                    {Bin, I};
                {ok, Bin} ->
                    ok = arm(S),
                    {Bin, I#in{passive = false}};
                {error, closed} ->
                    exit(connection_closed);
                {error, Reason} ->
                    exit({recv_error, Reason})
            end
    end.

to_passive(#in{sock = S} = I) ->
    case nifsock_tcp:setopts(S, [{active, false}]) of
        ok -> I#in{passive = true};
        {error, _} -> exit(connection_closed)
    end.

%% {active, N}, not {active, true}: at most ?ACTIVE_N chunks wait in our
%% mailbox, so a peer faster than we are is held back by TCP, as inet_drv
%% holds it back, instead of filling our memory.
arm(S) ->
    case nifsock_tcp:setopts(S, [{active, ?ACTIVE_N}]) of
        ok -> ok;
        {error, closed} -> exit(connection_closed);
        {error, einval} -> exit(connection_closed);
        {error, Reason} -> exit({recv_error, Reason})
    end.

put_data(#in{dhandle = DHandle}, Data) ->
    try erlang:dist_ctrl_put_data(DHandle, Data)
    catch _:_ -> death_row(connection_closed)
    end.

%%% ------------------------------------------------------------------

%% The connection is going down (the VM refuses our handle, or the socket
%% failed): whoever began taking it down will kill us through a link; exiting
%% ourselves first would change the nodedown reason. After 5 s we go anyway.
-spec death_row(term()) -> no_return().
death_row(Reason) ->
    receive after 5000 -> exit(Reason) end.
