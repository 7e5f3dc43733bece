%%% Helpers shared by the test suites (nifsock_tcp_SUITE keeps its own):
%%% loopback listeners and connected pairs over a module with socket's API
%%% (`socket' or `nifsock'), a listener's port over any of the modules under
%%% test, mailbox flushing, polling for a condition, fd counts, peer nodes
%%% that run this tree's code, unique /tmp paths and PROXY protocol v2 header
%%% builders.
-module(nifsock_test_lib).

-export([loopback/1, listener/2, listener/3, connect_accept/3, pair/1, port/2]).
-export([flush/0, flush/1, kill_and_wait/1, wait_until/2, fd_count/0, socket_fds/0]).
-export([start_peer/1, stop_peers/0]).
-export([tmp_path/1, proxy_v2/2, proxy_tlv/2]).

-define(T, 5000).          % bound for anything that should happen "now"
-define(PEERS, {?MODULE, peers}).

%%--------------------------------------------------------------------
%% Sockets
%%--------------------------------------------------------------------

%% The loopback address of a family.
loopback(inet) -> {127, 0, 0, 1};
loopback(inet6) -> {0, 0, 0, 0, 0, 0, 0, 1}.

%% A TCP listener of Mod (socket's API) on Fam's loopback, any port, backlog
%% 128: {ListenSocket, ConnectAddress}.
listener(Mod, Fam) ->
    listener(Mod, Fam, 128).

%% The same with Backlog.
listener(Mod, Fam, Backlog) ->
    {ok, L} = Mod:open(Fam, stream, tcp),
    ok = Mod:bind(L, #{family => Fam, addr => loopback(Fam), port => 0}),
    ok = Mod:listen(L, Backlog),
    {ok, #{port := P}} = Mod:sockname(L),
    {L, #{family => Fam, addr => loopback(Fam), port => P}}.

%% Connects a new socket to the listener L at Addr and accepts it (each
%% within 5 s): {Client, Accepted}.
connect_accept(Mod, L, #{family := Fam} = Addr) ->
    {ok, C} = case Fam of
                  local -> Mod:open(local, stream);
                  _ -> Mod:open(Fam, stream, tcp)
              end,
    ok = Mod:connect(C, Addr, ?T),
    {ok, A} = Mod:accept(L, ?T),
    {C, A}.

%% A connected IPv4 loopback pair and its listener: {Listener, Client, Accepted}.
pair(Mod) ->
    {L, Addr} = listener(Mod, inet),
    {C, A} = connect_accept(Mod, L, Addr),
    {L, C, A}.

%% The port a listener of Mod is bound to (Mod: socket, nifsock, gen_tcp,
%% nifsock_tcp or nifsock_ranch).
port(gen_tcp, L) ->
    {ok, P} = inet:port(L),
    P;
port(nifsock_tcp, L) ->
    {ok, P} = nifsock_tcp:port(L),
    P;
port(nifsock_ranch, L) ->
    {ok, {_, P}} = nifsock_ranch:sockname(L),
    P;
port(Mod, L) ->
    {ok, #{port := P}} = Mod:sockname(L),
    P.

%%--------------------------------------------------------------------
%% Processes and the OS process
%%--------------------------------------------------------------------

%% Drops every message in the caller's mailbox.
flush() ->
    receive _ -> flush() after 0 -> ok end.

%% Drops the messages about socket S (those whose second element is S).
flush(S) ->
    receive Msg when element(2, Msg) =:= S -> flush(S)
    after 0 -> ok
    end.

%% Kills Pid and waits for it to be gone (fails after 5 s).
kill_and_wait(Pid) ->
    MRef = erlang:monitor(process, Pid),
    exit(Pid, kill),
    receive {'DOWN', MRef, process, Pid, _} -> ok after ?T -> ct:fail({still_alive, Pid}) end.

%% Polls Get() (every millisecond) until Done(Value) holds or ?T ms have
%% passed; returns the last value, for the caller to match.
wait_until(Get, Done) ->
    wait_until(Get, Done, erlang:monotonic_time(millisecond) + ?T).

wait_until(Get, Done, Deadline) ->
    V = Get(),
    case Done(V) orelse erlang:monotonic_time(millisecond) > Deadline of
        true -> V;
        false -> receive after 1 -> wait_until(Get, Done, Deadline) end
    end.

%% The open file descriptors of this OS process.
fd_count() ->
    {ok, Fs} = file:list_dir("/proc/self/fd"),
    length(Fs).

%% The open socket fds of this OS process as {Fd, Link} (the link names the inode).
socket_fds() ->
    {ok, Fs} = file:list_dir("/proc/self/fd"),
    lists:sort([{F, Link} || F <- Fs,
                             {ok, Link} <- [file:read_link("/proc/self/fd/" ++ F)],
                             lists:prefix("socket:", Link)]).

%%--------------------------------------------------------------------
%% Peer nodes
%%--------------------------------------------------------------------

%% Starts a peer node with peer:start/1 (peer:start_link/1 when Opts has
%% `link => true'): Opts as peer takes them, with the code paths of nifsock
%% and of the test modules before Opts' `args'. The peer is kept for
%% stop_peers/0. Returns {Peer, Node} (Node is `undefined' for a peer without
%% a name); fails the case when the peer does not start.
start_peer(Opts0) ->
    {Link, Opts} = case maps:take(link, Opts0) of
                       {L, O} -> {L, O};
                       error -> {false, Opts0}
                   end,
    Paths = lists:usort([filename:dirname(code:which(M)) || M <- [?MODULE, nifsock]]),
    Args = lists:append([["-pa", P] || P <- Paths]) ++ maps:get(args, Opts, []),
    Started = case Link of
                  true -> peer:start_link(Opts#{args => Args});
                  false -> peer:start(Opts#{args => Args})
              end,
    case Started of
        {ok, Peer} ->
            keep_peer(Peer),
            {Peer, undefined};
        {ok, Peer, Node} ->
            keep_peer(Peer),
            {Peer, Node};
        Error ->
            ct:fail({peer_start, Error})
    end.

%% Stops every peer the calling process started with start_peer/1.
stop_peers() ->
    [catch peer:stop(P) || P <- case erase(?PEERS) of undefined -> []; Ps -> Ps end],
    ok.

keep_peer(Peer) ->
    put(?PEERS, [Peer | case get(?PEERS) of undefined -> []; Ps -> Ps end]).

%%--------------------------------------------------------------------
%% Files and protocol bytes
%%--------------------------------------------------------------------

%% A path under /tmp no other test run uses: /tmp/Prefix_OsPid_Unique.
tmp_path(Prefix) ->
    filename:join("/tmp", lists:concat([Prefix, "_", os:getpid(), "_",
                                        erlang:unique_integer([positive])])).

%% A PROXY protocol v2 PROXY header: family/protocol byte, then the body
%% (addresses and TLVs, iodata).
proxy_v2(FamProto, Body0) ->
    Body = iolist_to_binary(Body0),
    <<"\r\n\r\n\0\r\nQUIT\n", 16#21, FamProto, (byte_size(Body)):16, Body/binary>>.

%% A PROXY protocol v2 TLV.
proxy_tlv(Type, Value) ->
    <<Type, (byte_size(Value)):16, Value/binary>>.
