%%% Framing property: a stream of packets encoded for `{packet, 1 | 2 | 4 |
%%% line}', written by a plain gen_tcp peer in random chunks with random
%%% pauses (so reads cut headers and payloads anywhere, and several packets
%%% share one read), arrives as exactly those packets, in order, and then as
%%% end of stream, whatever the receive mode: passive `recv(S, 0)', `{active,
%%% true}', `{active, once}' re-armed after each message, or `{active, N}'
%%% re-armed on each passive message.
%%%
%%% The same property runs over gen_tcp, so the model (one message per packet,
%%% payload without header) is known to be inet's.
-module(nifsock_framing_prop).

-include("nifsock_proper.hrl").

-export([prop_framing/1]).

-define(T, 5000).

%% @doc Packets sent through `Mod' (gen_tcp or nifsock_tcp) arrive whole.
prop_framing(Mod) ->
    ?FORALL({Packet, Mode, Payloads, Cuts}, scenario(),
            begin
                %% (an exception is returned, not raised: Debian's PropEr
                %% reports exceptions through erlang:get_stacktrace/0, gone
                %% in OTP 23)
                Result = try run(Mod, Packet, Mode, Payloads, Cuts)
                         catch C:R:St -> {crashed, C, R, St}
                         end,
                ?WHENFAIL(io:format("~p ~p ~p: sent ~p packets (sizes ~w), cuts ~w~n"
                                    "got ~P~n",
                                    [Mod, Packet, Mode, length(Payloads),
                                     [byte_size(P) || P <- Payloads], Cuts, Result, 30]),
                          aggregate([{Packet, mode_name(Mode)}],
                                    Result =:= {ok, Payloads}))
            end).

mode_name({n, _}) -> n;
mode_name(M) -> M.

%%% ------------------------------------------------------------------
%%% Generators

scenario() ->
    ?LET(Packet, elements([1, 2, 4, line]),
         {Packet, mode(), list(payload(Packet)), nifsock_cut_sender:cuts()}).

mode() ->
    oneof([passive, true, once, {n, choose(1, 4)}]).

payload(line) ->
    ?LET(Bytes, list(line_byte()), <<(list_to_binary(Bytes))/binary, $\n>>);
payload(1) ->
    sized_binary(255);
payload(2) ->
    frequency([{8, sized_binary(300)}, {1, sized_binary(65535)}]);
payload(4) ->
    frequency([{8, sized_binary(300)}, {1, sized_binary(70000)}, {1, sized_binary(200000)}]).

%% Any byte but the newline.
line_byte() ->
    ?LET(B, choose(0, 254), case B of $\n -> 255; _ -> B end).

%% A binary of up to Max bytes; long ones are made of a repeated random
%% pattern, so generating them stays cheap.
sized_binary(Max) ->
    ?LET({Len, Pattern}, {choose(0, Max), binary(16)},
         nifsock_cut_sender:fill(Len, Pattern)).

%%% ------------------------------------------------------------------
%%% One run

run(Mod, Packet, Mode, Payloads, Cuts) ->
    {ok, L} = Mod:listen(0, [binary, {packet, Packet}, {active, false},
                             {ip, {127, 0, 0, 1}}]),
    Port = nifsock_test_lib:port(Mod, L),
    Stream = iolist_to_binary([encode(Packet, P) || P <- Payloads]),
    {_Peer, Go} = nifsock_cut_sender:start(Port, Stream, Cuts),
    {ok, S} = Mod:accept(L, ?T),
    ok = Mod:close(L),
    Sender = Go(),
    Result = try
                 ok = start(Mod, S, Mode),
                 collect(Mod, S, Mode, length(Payloads), [])
             after
                 _ = Mod:close(S),
                 ok = nifsock_cut_sender:stop(Sender),
                 nifsock_test_lib:flush(S)
             end,
    Result.

setopts(gen_tcp, S, Opts) -> inet:setopts(S, Opts);
setopts(Mod, S, Opts) -> Mod:setopts(S, Opts).

encode(line, Payload) -> Payload;
encode(N, Payload) -> <<(byte_size(Payload)):(N * 8), Payload/binary>>.

start(_Mod, _S, passive) -> ok;
start(Mod, S, {n, N}) -> setopts(Mod, S, [{active, N}]);
start(Mod, S, Active) -> setopts(Mod, S, [{active, Active}]).

%% Takes the packets, then checks that end of stream follows them.
collect(Mod, S, Mode, 0, Acc) ->
    case next(Mod, S, Mode) of
        closed -> {ok, lists:reverse(Acc)};
        Other -> {extra, Other, lists:reverse(Acc)}
    end;
collect(Mod, S, Mode, Left, Acc) ->
    case next(Mod, S, Mode) of
        {data, D} -> collect(Mod, S, Mode, Left - 1, [D | Acc]);
        Other -> {Other, lists:reverse(Acc)}
    end.

%% The next packet, `closed', or what went wrong.
next(Mod, S, passive) ->
    case Mod:recv(S, 0, ?T) of
        {ok, D} -> {data, D};
        {error, closed} -> closed;
        Error -> Error
    end;
next(Mod, S, Mode) ->
    {Data, Closed, Passive} = tags(Mod),
    receive
        {Data, S, D} ->
            Mode =:= once andalso setopts(Mod, S, [{active, once}]),
            {data, D};
        {Passive, S} ->
            {n, N} = Mode,
            ok = setopts(Mod, S, [{active, N}]),
            next(Mod, S, Mode);
        {Closed, S} ->
            closed;
        Other when element(2, Other) =:= S ->
            {unexpected, Other}
    after ?T ->
            timeout
    end.

tags(gen_tcp) -> {tcp, tcp_closed, tcp_passive};
tags(nifsock_tcp) -> {nifsock, nifsock_closed, nifsock_passive}.
