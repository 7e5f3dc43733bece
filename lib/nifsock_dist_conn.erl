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
%% The input handler reads with passive nifsock recvs and frames packets
%% itself, handing each to `erlang:dist_ctrl_put_data/2' as a sub-binary of
%% what was read (no copy):
%% <ul>
%% <li>stream mode: recv(S, 0) reads whatever is there (up to 64 KB); the
%%     packets in it are matched off; a packet cut at the end of the read is
%%     finished with an exact-length recv;</li>
%% <li>large mode, after a packet of ?LARGE bytes or more: the header is read
%%     alone (recv(S, 4)) and then the body with one exact-length recv, so a
%%     large packet arrives as one binary and ERTS doesn't have to join pieces.
%%     The first packet under ?LARGE returns to stream mode.</li>
%% </ul>
-module(nifsock_dist_conn).

-export([start_link/1, handshake_complete/2, tick/1]).
-export([controller/2, input/4]).

%% As gen_tcp_dist: off-heap queues, and cheap full sweeps of processes that
%% hold almost nothing live, so no stale binaries linger.
-define(SPAWN_OPTS, [{message_queue_data, off_heap}, {fullsweep_after, 0}]).
%% The most bytes one send takes from the VM's queue.
-define(BATCH_BYTES, (256 * 1024)).
%% Packets from this size on switch the input to large mode.
-define(LARGE, (64 * 1024)).
-define(MSG(S, Kind, Info), {'$nifsock', S, Kind, Info}).

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
    stream(S, DHandle, <<>>).

stream(S, DHandle, <<Len:32, Packet:Len/binary, Rest/binary>>) ->
    put_data(DHandle, Packet),
    stream(S, DHandle, Rest);
stream(S, DHandle, <<>>) ->
    stream(S, DHandle, read(S, 0));
stream(S, DHandle, <<Len:32, Part/binary>>) ->
    More = read(S, Len - byte_size(Part)),
    put_data(DHandle, case Part of <<>> -> More; _ -> [Part, More] end),
    next(S, DHandle, Len);
stream(S, DHandle, Head) ->
    %% Less than a header: finish it.
    stream(S, DHandle, <<Head/binary, (read(S, 4 - byte_size(Head)))/binary>>).

next(S, DHandle, Len) when Len >= ?LARGE ->
    large(S, DHandle);
next(S, DHandle, _Len) ->
    stream(S, DHandle, <<>>).

large(S, DHandle) ->
    <<Len:32>> = read(S, 4),
    put_data(DHandle, case Len of 0 -> <<>>; _ -> read(S, Len) end),
    next(S, DHandle, Len).

read(S, Length) ->
    case nifsock_tcp:recv(S, Length) of
        {ok, Bin} -> Bin;
        {error, closed} -> exit(connection_closed);
        {error, Reason} -> exit({recv_error, Reason})
    end.

put_data(DHandle, Data) ->
    try erlang:dist_ctrl_put_data(DHandle, Data)
    catch _:_ -> death_row(connection_closed)
    end.

%%% ------------------------------------------------------------------

%% The connection is going down (the VM refuses our handle, or the socket
%% failed): whoever began taking it down will kill us through a link; exiting
%% ourselves first would change the nodedown reason. After 5 s we go anyway.
death_row(Reason) ->
    receive after 5000 -> exit(Reason) end.
