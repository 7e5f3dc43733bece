%% @private
%% @doc The processes of one `nifsock_dist' connection after its handshake:
%% the controller (output) and the input handler.
%%
%% The controller is the process given to `erlang:setnode/3'. It waits for
%% `dist_data' (`erlang:dist_ctrl_get_data_notification/1'), takes what the VM
%% has queued with `erlang:dist_ctrl_get_data/1' (up to ?BATCH_BYTES at a
%% time), puts a 4-byte length in front of each packet and writes the lot with
%% one nifsock send: one sendmsg over the VM's own binaries, no flattening.
%% It is the only writer of the socket: a tick (an empty packet) is a message
%% to it, so a tick never lands in the middle of a partly written packet. Its
%% sends don't block: while the socket is full it waits for the select
%% message and ignores ticks (bytes are pending, so the peer will see traffic).
%%
%% The input handler reads with passive nifsock recvs in raw binary mode,
%% `recv(S, 0)': whatever has arrived, up to 64 KB, read straight into a
%% binary. It frames the packets itself and hands each one to
%% `erlang:dist_ctrl_put_data/2' as a sub-binary of that read: no copy. A
%% packet cut by the end of a read (ERTS sends large messages as ~64 KB
%% fragments, so with a stream of them that is one per read) is completed from
%% the next read and handed over as an iolist of its pieces, which ERTS joins.
%% Framing in the NIF instead (`{packet, 4}') measured 2x the CPU per MB
%% and 0.4x the throughput on large messages.
-module(nifsock_dist_conn).

-export([start_link/1, handshake_complete/2, tick/1]).
-export([controller/2, input/4]).

-include("nifsock_internal.hrl").

%% As gen_tcp_dist: off-heap queues, and cheap full sweeps of processes that
%% hold almost nothing live, so no stale binaries linger.
-define(SPAWN_OPTS, [{message_queue_data, off_heap}, {fullsweep_after, 0}]).
%% The most bytes one send takes from the VM's queue.
-define(BATCH_BYTES, (256 * 1024)).

-record(in, {sock :: nifsock_tcp:socket(),
             dhandle :: term()}).

-record(out, {sock :: nifsock_tcp:socket(),
              dhandle :: term(),
              ref :: reference()}).

%% @doc Spawns the controller of socket `S', linked to the caller (the
%% connection supervisor). It idles until `handshake_complete/2'.
-spec start_link(nifsock_tcp:socket()) -> pid().
start_link(S) ->
    spawn_opt(?MODULE, controller, [S, self()], [link, {priority, max} | ?SPAWN_OPTS]).

%% @doc The handshake is done: start moving data. Called by the supervisor.
-spec handshake_complete(pid(), term()) -> ok.
handshake_complete(Ctrl, DHandle) ->
    Mon = erlang:monitor(process, Ctrl),
    Ctrl ! {handshake_complete, self(), Mon, DHandle},
    receive
        {Mon, ok} ->
            erlang:demonitor(Mon, [flush]),
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
            Input ! {self(), registered},
            Sup ! {Mon, ok},
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
input(S, DHandle, Sup, Ctrl) ->
    link(Sup),
    %% Put no data before the VM knows us as the input handler.
    receive {Ctrl, registered} -> ok end,
    stream(#in{sock = S, dhandle = DHandle}, <<>>).

stream(I, <<Len:32, Packet:Len/binary, Rest/binary>>) ->
    put_data(I, Packet),
    stream(I, Rest);
stream(I, <<>>) ->
    stream(I, read_chunk(I));
stream(I, <<Len:32, Part/binary>>) ->
    fill(I, Len - byte_size(Part), [Part || Part =/= <<>>]);
stream(#in{sock = S} = I, Head) ->
    %% Less than a header: finish it.
    stream(I, <<Head/binary, (read(S, 4 - byte_size(Head)))/binary>>).

%% The packet continues in the next reads: Acc holds its first parts, reversed.
fill(I, Need, Acc) ->
    case read_chunk(I) of
        <<Tail:Need/binary, Rest/binary>> ->
            put_data(I, case Acc of [] -> Tail; _ -> lists:reverse(Acc, [Tail]) end),
            stream(I, Rest);
        Chunk ->
            fill(I, Need - byte_size(Chunk), [Chunk | Acc])
    end.

%% recv(S, 0): what is there, up to nifsock's read size (64 KB).
read_chunk(#in{sock = S}) ->
    read(S, 0).

read(S, Length) ->
    case nifsock_tcp:recv(S, Length) of
        {ok, Bin} -> Bin;
        {error, closed} -> exit(connection_closed);
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
