%%% Stream property of `recv': a random byte stream, written by a plain
%%% gen_tcp peer in random chunks with random pauses and then closed, read
%%% through a random sequence of recv calls - recv(S, 0), exact lengths from 1
%%% byte to 100 KB (past the 64 KB scratch buffer and the streaming
%%% threshold), timeouts of 0, a few ms or none (so exact reads time out
%%% half-filled), and `peek' - gives back exactly the stream: the bytes of the
%%% `ok' results and of the partial data carried by `{error, {timeout |
%%% closed, Data}}', concatenated, are the stream; every exact `ok' has its
%%% length; every peek is a prefix of what is still unread; end of stream
%%% follows.
%%%
%%% The same property runs over OTP `socket', so the model is the kernel's
%%% and socket's.
-module(nifsock_stream_prop).

-include("nifsock_proper.hrl").

-export([prop_stream/1]).

-define(T, 5000).

%% @doc Reading through `Mod' (socket or nifsock) loses, invents and
%% reorders no byte.
prop_stream(Mod) ->
    ?FORALL({Stream, Cuts, Reads}, {stream(), nifsock_cut_sender:cuts(), reads()},
            begin
                Result = bounded(fun() -> run(Mod, Stream, Cuts, Reads) end),
                ?WHENFAIL(io:format("~p: stream of ~p bytes, cuts ~w, reads ~w~ngot ~P~n",
                                    [Mod, byte_size(Stream), Cuts, Reads, Result, 40]),
                          Result =:= ok)
            end).

%% Runs `Fun' in a process of its own: its result, its exception, or, if it
%% takes over 30 s (a recv that never returns), where it is stuck.
bounded(Fun) ->
    Parent = self(),
    {Pid, Mon} = spawn_monitor(fun() ->
                                       Parent ! {self(), try Fun()
                                                         catch C:R:St -> {crashed, C, R, St}
                                                         end}
                               end),
    receive
        {Pid, Result} ->
            erlang:demonitor(Mon, [flush]),
            Result;
        {'DOWN', Mon, process, Pid, Reason} ->
            {died, Reason}
    after 30000 ->
            Where = erlang:process_info(Pid, [current_stacktrace, messages, dictionary]),
            exit(Pid, kill),
            {stuck, Where}
    end.

%%% ------------------------------------------------------------------
%%% Generators

%% Up to 8 runs: about 50 KB on average, at most 800 KB.
stream() ->
    ?LET(N, choose(0, 8), ?LET(Parts, vector(N, part()), iolist_to_binary(Parts))).

%% Runs of random-looking bytes (a repeated random pattern with a counter,
%% so a misplaced block shows).
part() ->
    ?LET({Len, Pattern, Tag}, {frequency([{6, choose(1, 300)}, {2, choose(301, 5000)},
                                          {1, choose(5001, 100000)}]),
                               binary(7), choose(0, 255)},
         nifsock_cut_sender:fill(Len, <<Tag, Pattern/binary>>)).

%% A cycle of peeks alone would never consume: one plain recv closes it.
reads() ->
    ?LET(N, choose(1, 8),
         ?LET(Rs, vector(N, read()),
              case lists:all(fun({_, _, F}) -> F =:= [peek] end, Rs) of
                  true -> Rs ++ [{0, ?T, []}];
                  false -> Rs
              end)).

read() ->
    ?LET({Len, Timeout, Flags}, {length(), timeout(), flags()},
         case Flags of
             [peek] -> {0, Timeout, Flags};
             [] -> {Len, Timeout, Flags}
         end).

length() ->
    frequency([{3, 0}, {3, choose(1, 16)}, {2, choose(17, 4000)}, {1, choose(4001, 100000)}]).

timeout() ->
    frequency([{4, ?T}, {2, 0}, {2, choose(1, 3)}]).

flags() ->
    frequency([{6, []}, {1, [peek]}]).

%%% ------------------------------------------------------------------
%%% One run

run(Mod, Stream, Cuts, Reads) ->
    {ok, L} = Mod:open(inet, stream, tcp),
    ok = Mod:bind(L, #{family => inet, addr => loopback, port => 0}),
    ok = Mod:listen(L),
    {ok, #{port := Port}} = Mod:sockname(L),
    {_Peer, Go} = nifsock_cut_sender:start(Port, Stream, Cuts),
    {ok, S} = Mod:accept(L, ?T),
    ok = Mod:close(L),
    Sender = Go(),
    try
        consume(Mod, S, Stream, Reads, Reads)
    after
        _ = Mod:close(S),
        ok = nifsock_cut_sender:stop(Sender)
    end.

%% Reads until `Left' (the unread rest of the stream) is empty, then expects
%% end of stream.
consume(Mod, S, <<>>, _, _) ->
    case Mod:recv(S, 0, ?T) of
        {error, closed} -> ok;
        Other -> {after_end, Other}
    end;
consume(Mod, S, Left, [], All) ->
    consume(Mod, S, Left, All, All);
consume(Mod, S, Left, [{Len, Timeout, Flags} = Read | Reads], All) ->
    put(nifsock_stream_prop_read, {Read, {unread, byte_size(Left)}}),
    case check(Left, Read, Mod:recv(S, Len, Flags, Timeout)) of
        {ok, Rest} -> consume(Mod, S, Rest, Reads, All);
        Bad -> {Bad, Read, {unread, byte_size(Left)}}
    end.

%% What a result says about the stream: the rest still unread, or why it is
%% wrong.
check(Left, {_Len, _T, [peek]}, {ok, Data}) ->
    prefix(Left, Data, fun(_) -> Left end);
check(Left, {_Len, _T, [peek]}, {error, timeout}) ->
    {ok, Left};
check(Left, {Len, _T, []}, {ok, Data}) when Len =:= 0, Data =/= <<>>;
                                            Len > 0, byte_size(Data) =:= Len ->
    prefix(Left, Data, fun(Rest) -> Rest end);
check(Left, {_Len, _T, []}, {error, timeout}) ->
    {ok, Left};
check(Left, {Len, 0, []}, {ok, Data}) when byte_size(Data) > 0, byte_size(Data) < Len ->
    %% timeout 0: what is there, even short of Len (as socket does)
    prefix(Left, Data, fun(Rest) -> Rest end);
check(Left, {Len, T, []}, {error, {timeout, Data}})
  when T > 0, Len > 0, byte_size(Data) > 0, byte_size(Data) < Len ->
    prefix(Left, Data, fun(Rest) -> Rest end);
check(Left, {Len, _T, []}, {error, {closed, Data}})
  when Len > 0, byte_size(Data) =:= byte_size(Left), Data =/= <<>> ->
    prefix(Left, Data, fun(Rest) -> Rest end);
check(_Left, _Read, Result) ->
    {unexpected, Result}.

prefix(Left, Data, Next) ->
    Size = byte_size(Data),
    case Left of
        <<Data:Size/binary, Rest/binary>> -> {ok, Next(Rest)};
        _ -> {not_the_stream, {got, Size, binary:part(Data, 0, min(Size, 16))},
              {expected, binary:part(Left, 0, min(byte_size(Left), 16))}}
    end.
