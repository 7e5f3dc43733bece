%%% The sending side of nifsock's stream properties: a plain gen_tcp peer
%%% that writes a byte stream in chunks with pauses chosen by PropEr, so the
%%% reader sees headers and payloads cut anywhere and several writes merged
%%% into one read, then closes.
-module(nifsock_cut_sender).

-include("nifsock_proper.hrl").

-export([cuts/0, fill/2, start/3, stop/1]).

%% @doc Where the sender cuts the stream: chunk sizes (the rest goes last)
%% and whether it pauses 1 ms after the chunk, so the reader catches up
%% mid-packet.
cuts() ->
    list({frequency([{4, choose(1, 8)}, {2, choose(9, 600)}, {1, choose(601, 100000)}]),
          frequency([{3, false}, {1, true}])}).

%% @doc `Len' bytes of `Pattern' repeated: long binaries stay cheap to
%% generate.
fill(Len, <<>>) ->
    binary:copy(<<7>>, Len);
fill(Len, Pattern) ->
    Whole = binary:copy(Pattern, Len div byte_size(Pattern) + 1),
    binary:part(Whole, 0, Len).

%% @doc Connects a gen_tcp peer to 127.0.0.1:`Port' and returns it with a
%% function that, once the receiving socket is accepted, starts a linked
%% process writing `Stream' cut by `Cuts' and then closing the peer.
start(Port, Stream, Cuts) ->
    {ok, Peer} = gen_tcp:connect({127, 0, 0, 1}, Port,
                                 [binary, {packet, raw}, {active, false}, {nodelay, true}],
                                 5000),
    Go = fun() ->
                 Sender = spawn_link(fun() ->
                                             receive go -> ok end,
                                             send_chunks(Peer, Stream, Cuts),
                                             ok = gen_tcp:close(Peer)
                                     end),
                 ok = gen_tcp:controlling_process(Peer, Sender),
                 Sender ! go,
                 Sender
         end,
    {Peer, Go}.

%% @doc Stops a sender whatever it is doing (its peer socket goes with it).
stop(Sender) ->
    unlink(Sender),
    exit(Sender, kill),
    ok.

send_chunks(Peer, Stream, []) ->
    ok = gen_tcp:send(Peer, Stream);
send_chunks(Peer, Stream, [{Size, Pause} | Cuts]) when Size < byte_size(Stream) ->
    <<Chunk:Size/binary, Rest/binary>> = Stream,
    ok = gen_tcp:send(Peer, Chunk),
    Pause andalso timer:sleep(1),
    send_chunks(Peer, Rest, Cuts);
send_chunks(Peer, Stream, [_ | _]) ->
    send_chunks(Peer, Stream, []).
