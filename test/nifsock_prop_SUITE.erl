%%% Property-based tests of nifsock, run through ct_property_test (PropEr).
%%% The properties live in test/property_test/:
%%%   nifsock_fuzz_prop   - every exported function of nifsock and nifsock_nif
%%%                         with random terms, in a peer node;
%%%   nifsock_statem_prop - proper_statem model of stream sockets, run over
%%%                         nifsock, over OTP socket, and both side by side;
%%%   nifsock_framing_prop - packets cut anywhere by the sender arrive whole
%%%                         through nifsock_tcp's framing (and gen_tcp's);
%%%   nifsock_stream_prop  - random recv sequences (exact lengths, timeouts,
%%%                         peeks) over a stream cut anywhere give back exactly
%%%                         the stream, over nifsock (and socket).
%%%
%%% Short versions run in `rebar3 ct' (300 fuzz cases per function, 300
%%% statem sequences, 300 framing streams); NIFSOCK_STRESS=1 runs the long
%%% ones (20,000 fuzz cases per function, 5,000 sequences, 5,000 streams):
%%%
%%%   NIFSOCK_STRESS=1 rebar3 ct --suite test/nifsock_prop_SUITE
-module(nifsock_prop_SUITE).

-include_lib("common_test/include/ct.hrl").

-export([all/0, suite/0, init_per_suite/1, end_per_suite/1,
         init_per_testcase/2, end_per_testcase/2]).
-export([prop_fuzz_nifsock/1, prop_fuzz_nifsock_nif/1,
         prop_statem_nifsock_model/1, prop_statem_socket_model/1,
         prop_statem_parity_with_socket/1,
         prop_framing_nifsock_tcp/1, prop_framing_gen_tcp/1,
         prop_stream_nifsock/1, prop_stream_socket/1]).

suite() -> [{timetrap, {minutes, 10}}].

all() ->
    [prop_fuzz_nifsock,
     prop_fuzz_nifsock_nif,
     prop_statem_nifsock_model,
     prop_statem_socket_model,
     prop_statem_parity_with_socket,
     prop_framing_nifsock_tcp,
     prop_framing_gen_tcp,
     prop_stream_nifsock,
     prop_stream_socket].

init_per_suite(Config) ->
    {module, nifsock_nif} = code:ensure_loaded(nifsock_nif),
    ct_property_test:init_per_suite([{prop_tools, [proper]} | Config]).

end_per_suite(_Config) -> ok.

init_per_testcase(_Case, Config) ->
    ct:timetrap({minutes, case long() of true -> 240; false -> 5 end}),
    Config.

end_per_testcase(_Case, _Config) ->
    nifsock_fuzz_prop:stop_peer(),
    ok.

%% @doc Every exported function of nifsock, called with random terms (300
%% cases each; long: 20,000): the node survives and each call returns
%% {error, _}/ok/{ok, _}/{select, _} (is_socket/1 a boolean, info/0,1 a map)
%% or raises badarg / {invalid, _}; calls still running after 150 ms are
%% legitimately waiting in a receive inside nifsock.
prop_fuzz_nifsock(Config) ->
    fuzz(nifsock, Config).

%% @doc Every NIF stub of nifsock_nif, called directly with random terms (300
%% cases each; long: 20,000): the node survives, each call returns one of the
%% shapes of its spec or raises badarg, and none blocks or spins (3 s bound).
prop_fuzz_nifsock_nif(Config) ->
    fuzz(nifsock_nif, Config).

%% @doc Random sequences of open/bind/listen/accept/connect/send/recv/shutdown/
%% close/controlling_process/owner death on 4 sockets: every nifsock result
%% matches the model of Linux TCP (300 sequences; long: 5,000).
prop_statem_nifsock_model(Config) ->
    check(nifsock_statem_prop:prop_model(nifsock), n(300, 5000), Config).

%% @doc The same model checked against OTP's socket, so the model itself is
%% known to describe the kernel (300 sequences; long: 5,000).
prop_statem_socket_model(Config) ->
    check(nifsock_statem_prop:prop_model(socket), n(300, 5000), Config).

%% @doc The same random sequences run over OTP socket and over nifsock give
%% the same results step by step (not_owner normalised as README/api suite
%% document) (300 sequences; long: 5,000).
prop_statem_parity_with_socket(Config) ->
    check(nifsock_statem_prop:prop_parity(), n(300, 5000), Config).

%% @doc Streams of packets for {packet, 1 | 2 | 4 | line}, cut by the sender
%% at random points with random pauses, arrive through nifsock_tcp as exactly
%% those packets and then end of stream, in passive, {active, true}, {active,
%% once} and {active, N} modes (300 streams; long: 5,000).
prop_framing_nifsock_tcp(Config) ->
    check(nifsock_framing_prop:prop_framing(nifsock_tcp), n(300, 5000), Config).

%% @doc The same property over gen_tcp: the model is inet's own behaviour.
prop_framing_gen_tcp(Config) ->
    check(nifsock_framing_prop:prop_framing(gen_tcp), n(300, 5000), Config).

%% @doc A random byte stream, cut anywhere by the sender, read through random
%% recv calls (length 0 or 1 byte to 100 KB, timeouts 0, 1-3 ms or 5 s, some
%% peeks): the ok results and the partial data of timed-out or closed exact
%% reads are exactly the stream, then end of stream (300 streams; long: 3,000).
prop_stream_nifsock(Config) ->
    check(nifsock_stream_prop:prop_stream(nifsock), n(300, 3000), Config).

%% @doc The same property over OTP socket: the model is socket's behaviour
%% as of OTP 25, which nifsock keeps. Later releases changed it (a short
%% `recv(S, N, 0)' is `{error, {timeout, Data}}' from OTP 26; OTP 27's timed-out
%% short recvs keep their bytes: README, "Differences from socket"), so there
%% the model is not socket's and the case is skipped.
prop_stream_socket(Config) ->
    case erlang:system_info(otp_release) of
        "25" -> check(nifsock_stream_prop:prop_stream(socket), n(300, 3000), Config);
        Release -> {skip, "the model is OTP 25's socket; this is OTP " ++ Release}
    end.

%%--------------------------------------------------------------------

long() -> os:getenv("NIFSOCK_STRESS") =:= "1".

n(Short, Long) ->
    case long() of
        true -> Long;
        false -> Short
    end.

fuzz_cases() ->
    case string:to_integer(os:getenv("NIFSOCK_FUZZ_CASES", "")) of
        {N, ""} when N > 0 -> N;
        _ -> 300
    end.

check(Prop, N, Config) ->
    T0 = erlang:monotonic_time(millisecond),
    R = ct_property_test:quickcheck(proper:numtests(N, Prop), Config),
    ct:pal("~p sequences in ~p ms: ~p", [N, erlang:monotonic_time(millisecond) - T0, R]),
    true = R.

%% Cases per function: 300, or NIFSOCK_FUZZ_CASES (the Makefile's passes
%% over the other readiness paths and OTP releases run fewer: the fuzzed
%% calls are bad input, checked before any wait is made).
fuzz(Mod, Config) ->
    N = n(fuzz_cases(), 20000),
    Funs = nifsock_fuzz_prop:functions(Mod),
    T0 = erlang:monotonic_time(millisecond),
    Results = [begin
                   T1 = erlang:monotonic_time(millisecond),
                   R = ct_property_test:quickcheck(
                         proper:numtests(N, nifsock_fuzz_prop:prop_fuzz(Mod, F, A)), Config),
                   CE = case R of
                            true -> none;
                            _ -> proper:counterexample()
                        end,
                   ct:log("~p:~p/~p: ~p cases, ~p ms: ~p~ncounterexample: ~p",
                          [Mod, F, A, N, erlang:monotonic_time(millisecond) - T1, R, CE]),
                   {{F, A}, case R of true -> true; _ -> CE end}
               end || {F, A} <- Funs],
    nifsock_fuzz_prop:stop_peer(),
    Failed = [FR || {_, R} = FR <- Results, R =/= true],
    ct:pal("fuzzed ~p functions of ~p, ~p cases each, in ~p ms; failed: ~p",
           [length(Funs), Mod, N, erlang:monotonic_time(millisecond) - T0, Failed]),
    [] =:= Failed orelse ct:fail({fuzz_failed, Failed}).
