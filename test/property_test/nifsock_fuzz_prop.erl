%%% Fuzzing every exported function of `nifsock' and `nifsock_nif' with random
%%% terms: atoms, huge/negative integers, floats, deep and improper lists,
%%% maps, binaries, sub-binaries, bitstrings, refs, other NIF resources,
%%% ports, funs, pids (own, dead, another live one), closed sockets and live
%%% sockets (listening, connected with data pending both ways, unconnected,
%%% unix) as arguments.
%%%
%%% The calls run in a peer node (`connection => standard_io': no
%%% distribution socket the fuzzer could adopt and close), each in its own
%%% process, which creates the live sockets it needs (so it owns them) and is
%%% killed if the call takes longer than a bound. The property, per case:
%%%   - the node survives;
%%%   - the call returns {error, _}, ok, {ok, _} or {select, _} (plus the
%%%     documented extra shapes of a few functions: is_socket/1 a boolean,
%%%     info/0,1 a map, and nifsock_nif's internal protocol atoms), or raises
%%%     error:badarg or error:{invalid, _};
%%%   - a call still running at the bound must be a nifsock function waiting in
%%%     a receive inside nifsock (a legitimately blocking call on a live socket
%%%     with a long timeout); a NIF never blocks, and never busy-loops.
%%%
%%% Safety (the machine allows loopback traffic only): connect/bind addresses
%%% are rewritten to loopback (any IP that isn't 127.x or ::1 becomes one,
%%% broadcast becomes loopback, connect ports go to a closed local port or
%%% the fixture listener, bind ports to 0, unix paths stay in a temp dir), and
%%% adopting an fd the node already uses without dup (which would hand the
%%% VM's own fds to nifsock to close) is skipped.
-module(nifsock_fuzz_prop).

-include("nifsock_proper.hrl").

-export([prop_fuzz/3, functions/1, start_peer/0, stop_peer/0, arg/0]).
%% run inside the peer
-export([exec/4, setup_peer/1]).

-define(BOUND_MS, 150).          % a nifsock call may legitimately wait this long
-define(NIF_BOUND_MS, 3000).     % a NIF call must return well within this

%%--------------------------------------------------------------------
%% Property
%%--------------------------------------------------------------------

%% Name/arity of every exported function of Mod except module_info.
functions(Mod) ->
    [{F, A} || {F, A} <- Mod:module_info(exports), F =/= module_info].

%% One case: F of Mod with Arity random arguments.
prop_fuzz(Mod, F, Arity) ->
    %% (the tuple keeps ct_property_test's counterexample reporting happy: it
    %% takes lists:last/1 of a list-shaped counterexample)
    ?FORALL({fuzz_args, Args}, {fuzz_args, args(Mod, F, Arity)},
            begin
                R = run(Mod, F, Args),
                ?WHENFAIL(io:format("~n~p:~p(~P)~n  => ~P~n", [Mod, F, Args, 30, R, 40]),
                          collect(outcome_tag(R), verdict(Mod, F, R)))
            end).

run(Mod, F, Args) ->
    Peer = peer(),
    call_peer(Peer, ?MODULE, exec, [Mod, F, Args, bound(Mod)]).

bound(nifsock_nif) -> ?NIF_BOUND_MS;
bound(_) -> ?BOUND_MS.

outcome_tag({returned, T, _}) -> {returned, T};
outcome_tag({raised, C, T}) -> {raised, C, T};
outcome_tag({blocked, _}) -> blocked;
outcome_tag(skipped) -> skipped;
outcome_tag(Other) -> Other.

%% The peer classifies results into small tags and checks them against the
%% function's -spec; nifsock's results must also have the shapes socket's
%% have. Only allowed outcomes pass.
verdict(_Mod, _F, skipped) -> true;
verdict(nifsock, F, {returned, Tag, SpecOk}) ->
    SpecOk andalso lists:member(Tag, allowed_returns(nifsock, F));
verdict(nifsock_nif, _F, {returned, _Tag, SpecOk}) -> SpecOk;
verdict(_Mod, _F, {raised, error, badarg}) -> true;
verdict(_Mod, _F, {raised, error, invalid}) -> true;
verdict(nifsock, _F, {blocked, {waiting, nifsock}}) -> true;   % a legitimate wait
verdict(_Mod, _F, _) -> false.

allowed_returns(nifsock, is_socket) -> [boolean];
allowed_returns(nifsock, info) -> [map];
allowed_returns(nifsock, _) -> [ok, ok_tuple, error_tuple, select_tuple].

%%--------------------------------------------------------------------
%% Generators
%%--------------------------------------------------------------------

%% Each position: half the time a value of the type the function's -spec
%% gives that argument (so combinations often get past the checks and reach
%% the NIF's real work: modes, lengths, flag lists...), otherwise any term.
%% Without a spec, the first position is biased towards sockets.
args(_Mod, _F, 0) -> exactly([]);
args(Mod, F, Arity) ->
    case arg_types(Mod, F, Arity) of
        none ->
            ?LET({First, Rest}, {frequency([{3, socket_arg()}, {2, arg()}]),
                                 vector(Arity - 1, arg())},
                 [First | Rest]);
        Clauses ->
            ?LET(Types, elements(Clauses),
                 [frequency([{1, typed(T, Mod, 3)}, {1, arg()}]) || T <- Types])
    end.

%% The argument types of each clause of Mod:F/Arity's -spec, or none.
arg_types(Mod, F, Arity) ->
    case beam_lib:chunks(code:which(Mod), [abstract_code]) of
        {ok, {_, [{abstract_code, {_, Forms}}]}} ->
            case [Clauses || {attribute, _, spec, {{F1, A1}, Clauses}} <- Forms,
                             F1 =:= F, A1 =:= Arity] of
                [Clauses] -> [clause_args(C) || C <- Clauses];
                _ -> none
            end;
        _ ->
            none
    end.

clause_args({type, _, bounded_fun, [Fun, _]}) -> clause_args(Fun);
clause_args({type, _, 'fun', [{type, _, product, Args}, _]}) -> Args.

%% A generator for an abstract type (depth-limited).
typed(_, _Mod, 0) -> arg();
typed({ann_type, _, [_, T]}, M, D) -> typed(T, M, D);
typed({paren_type, _, [T]}, M, D) -> typed(T, M, D);
typed({atom, _, A}, _, _) -> exactly(A);
typed({integer, _, I}, _, _) -> exactly(I);
typed({type, _, union, Ts}, M, D) -> oneof([typed(T, M, D) || T <- Ts]);
typed({type, _, range, _}, _, _) -> oneof([interesting_int(), choose(0, 4)]);
typed({type, _, T, _}, _, _)
  when T =:= integer; T =:= non_neg_integer; T =:= pos_integer; T =:= neg_integer;
       T =:= number -> interesting_int();
typed({type, _, T, _}, _, _) when T =:= boolean -> elements([true, false]);
typed({type, _, T, _}, _, _) when T =:= binary; T =:= bitstring ->
    oneof([resize(32, binary()), {'$fz', sub_binary}, ?LET(N, choose(0, 70000), {'$fz', big_binary, N})]);
typed({type, _, T, _}, _, _) when T =:= iodata; T =:= iolist ->
    oneof([[<<"io">>, "data", [<<>>]], resize(32, binary()), {'$fz', sub_binary}]);
typed({type, _, list, [E]}, M, D) -> oneof([small_list(typed(E, M, D - 1)), plausible()]);
typed({type, _, list, _}, _, _) -> oneof([exactly([]), plausible(), small_list(arg(2))]);
typed({type, _, nil, _}, _, _) -> exactly([]);
typed({type, _, tuple, Es}, M, D) when is_list(Es) ->
    ?LET(L, [typed(E, M, D - 1) || E <- Es], list_to_tuple(L));
typed({type, _, map, _}, _, _) -> oneof([plausible(), structured(3)]);
typed({type, _, pid, _}, _, _) -> {'$fz', elements([self_pid, dead_pid, other_pid])};
typed({type, _, reference, _}, _, _) -> {'$fz', ref};
typed({type, _, timeout, _}, _, _) -> oneof([exactly(infinity), interesting_int()]);
typed({type, _, atom, _}, _, _) -> interesting_atom();
typed({user_type, _, sock, _}, _, _) -> socket_arg();
typed({user_type, _, socket, _}, _, _) -> socket_arg();
typed({remote_type, _, [{atom, _, nifsock}, {atom, _, socket}, _]}, _, _) -> socket_arg();
typed({user_type, _, Name, _}, M, D) ->
    case local_type(M, Name) of
        none -> arg();
        T -> typed(T, M, D - 1)
    end;
typed(_, _, _) -> arg().

local_type(Mod, Name) ->
    case beam_lib:chunks(code:which(Mod), [abstract_code]) of
        {ok, {_, [{abstract_code, {_, Forms}}]}} ->
            case [T || {attribute, _, Kind, {N, T, _}} <- Forms, N =:= Name,
                       Kind =:= type orelse Kind =:= opaque] of
                [T | _] -> T;
                [] -> none
            end;
        _ -> none
    end.

socket_arg() ->
    frequency([{4, {'$fz', elements([live_conn, live_peer, live_listener, live_unconnected,
                                     live_local, closed_socket, other_owner_socket])}},
               {1, {'$nifsock', oneof([{'$fz', ref}, {'$fz', other_resource}, leaf()])}}]).

%% Terms stay small (a few KB at most: they cross the peer's stdio link);
%% big binaries are made in the peer from a {'$fz', big_binary, N} stand-in.
arg() ->
    ?SIZED(S, resize(min(S, 8), arg(min(S, 8)))).


arg(0) ->
    leaf();
arg(S) ->
    frequency([{6, leaf()},
               {4, plausible()},
               {2, placeholder()},
               {2, ?LAZY(small_list(arg(S div 3)))},
               {1, ?LAZY(improper(S))},
               {1, ?LAZY(deep(S))},
               {1, ?LAZY(tuple_of(S))},
               {1, ?LAZY(map_of(S))},
               {2, ?LAZY(structured(S))}]).

%% Values the API actually takes, so that random combinations are often
%% valid enough to get past the argument checks (nifsock_nif's modes, flag
%% lists, handles, lengths, timeouts, addresses, iodata).
plausible() ->
    oneof([elements([wait, nowait, zero, infinity, undefined, [], [peek], [nosignal],
                     read, write, read_write, recv, send, accept, connect, true, false,
                     0, 1, 5, 100, 65536, 1 bsl 40, 1 bsl 62, <<"data">>]),
           {'$fz', ref},
           {select_info, recv, {'$fz', ref}},
           ?LET(P, elements([0, 1, 65535]), #{family => inet, addr => {127, 0, 0, 1}, port => P}),
           [<<"io">>, "vec", [<<"tor">>]]]).

leaf() ->
    frequency([{3, interesting_atom()},
               {1, atom()},
               {3, interesting_int()},
               {1, integer()},
               {1, float()},
               {1, oneof([1.0e308, -0.0, 0.5])},
               {2, resize(64, binary())},
               {1, ?LET(N, choose(0, 70000), {'$fz', big_binary, N})},
               {1, {'$fz', sub_binary}},
               {1, resize(64, bitstring())},
               {1, exactly([])},
               {1, exactly(<<>>)},
               {1, resize(16, proper_types:string())}]).

small_list(G) ->
    resize(6, list(G)).

interesting_atom() ->
    elements([inet, inet6, local, stream, dgram, seqpacket, tcp, udp, sctp, default, ip, any,
              loopback, broadcast, infinity, nowait, wait, zero, true, false, undefined,
              read, write, read_write, recv, send, accept, connect, select_info, socket,
              ipv6, otp, reuseaddr, reuseport, keepalive, linger, rcvbuf, sndbuf, fd,
              domain, type, protocol, error, acceptconn, controlling_process, nodelay,
              tos, ttl, priority, bindtodevice, congestion, lowdelay, peek, oob, nosignal,
              waitall, trunc, errqueue, more, eor, abort, closed, timeout, dup, family, addr,
              port, path, flowinfo, scope_id, onoff, '$nifsock', '$socket', 'ŝ', '']).

interesting_int() ->
    oneof([elements([0, 1, -1, 2, 5, 8, 64, 100, 1000, 4096, 65535, 65536, 100000]),
           elements([1 bsl 40, 1 bsl 50, 1 bsl 62, (1 bsl 63) - 1, 1 bsl 63, (1 bsl 64) - 1,
                     1 bsl 64, 1 bsl 100, 1 bsl 1000, -(1 bsl 63), -(1 bsl 200)]),
           all_ints()]).

all_ints() ->
    elements([0, 1, -1, 2, 3, 5, 7, 8, 16, 42, 255, 256, 1023, 1024, 4096, 65535, 65536,
              65537, 16#7fffffff, 16#80000000, -16#80000000, -16#80000001, 16#ffffffff,
              16#100000000, 1 bsl 40, 1 bsl 50, 1 bsl 62, (1 bsl 63) - 1, 1 bsl 63,
              (1 bsl 64) - 1, 1 bsl 64, -(1 bsl 63), -(1 bsl 64), 1 bsl 100, -(1 bsl 200),
              1 bsl 1000, 3, 4, 6, 9, 10, 11, 12, 13, 14, 15, 20, 41, 64, 100, 1000, 100000]).

%% Stand-ins the executor replaces with real things in the peer.
placeholder() ->
    {'$fz', elements([live_listener, live_conn, live_peer, live_unconnected, live_local,
                      closed_socket, other_owner_socket, self_pid, dead_pid, other_pid,
                      ref, other_resource, port, fun0, select_handle_recv])}.

improper(S) ->
    ?LET({L, T}, {small_list(arg(S div 3)), oneof([leaf(), placeholder()])},
         lists:foldr(fun(X, Acc) -> [X | Acc] end, T, L)).

deep(_S) ->
    ?LET({D, X}, {choose(1, 300), oneof([leaf(), placeholder()])},
         lists:foldl(fun(_, Acc) -> [Acc] end, X, lists:seq(1, D))).

tuple_of(S) ->
    ?LET(L, small_list(arg(S div 3)), list_to_tuple(L)).

map_of(S) ->
    ?LET(L, small_list({arg(S div 4), arg(S div 4)}), maps:from_list(L)).

%% Terms shaped like what the API takes, with random parts. (PropEr 1.2
%% doesn't look inside maps: maps are built with ?LET from generated parts.)
structured(S) ->
    Sub = arg(S div 3),
    oneof([{'$nifsock', Sub},
           {'$nifsock', {'$fz', ref}},
           {'$nifsock', {'$fz', other_resource}},
           {select_info, oneof([recv, accept, connect, {send, []}, Sub]), oneof([{'$fz', ref}, Sub])},
           {oneof([socket, ip, ipv6, tcp, otp, interesting_int(), Sub]),
            oneof([interesting_atom(), interesting_int(), Sub])},
           sockaddr(Sub),
           ?LET(D, oneof([true, false, Sub]), #{dup => D}),
           ?LET({O, L}, {oneof([true, false, Sub]), oneof([interesting_int(), Sub])},
                #{onoff => O, linger => L}),
           [oneof([peek, oob, nosignal, waitall, more, interesting_int(), Sub])],
           [resize(32, binary()), "iolist", [<<"deep">>, [Sub]]]]).

sockaddr(Sub) ->
    oneof([?LET({A, P}, {oneof([{127, 0, 0, 1}, loopback, any, broadcast,
                                 {choose(0, 300), 0, 0, 1}, Sub]),
                          oneof([interesting_int(), Sub])},
                #{family => inet, addr => A, port => P}),
           ?LET({A, P, F, Sc}, {oneof([{0, 0, 0, 0, 0, 0, 0, 1}, loopback, any, Sub]),
                                oneof([interesting_int(), Sub]),
                                oneof([0, interesting_int()]), oneof([0, interesting_int()])},
                #{family => inet6, addr => A, port => P, flowinfo => F, scope_id => Sc}),
           ?LET(P, oneof([<<"fz.sock">>, "fz2.sock", <<0, "abstract">>, resize(32, binary()), Sub]),
                #{family => local, path => P}),
           ?LET({F, K, V}, {oneof([inet, inet6, local, Sub]), Sub, Sub},
                #{family => F, K => V})]).

%%--------------------------------------------------------------------
%% The peer
%%--------------------------------------------------------------------

peer() ->
    case get(nifsock_fuzz_peer) of
        undefined -> start_peer();
        P ->
            case catch peer:get_state(P) of
                running -> P;
                _ -> start_peer()
            end
    end.

start_peer() ->
    stop_peer(),
    {P, _} = nifsock_test_lib:start_peer(#{connection => standard_io, peer_down => continue}),
    Dir = nifsock_test_lib:tmp_path("nifsock_fuzz"),
    ok = peer:call(P, ?MODULE, setup_peer, [Dir], 10000),
    put(nifsock_fuzz_peer, P),
    put(nifsock_fuzz_dir, Dir),
    P.

stop_peer() ->
    case erase(nifsock_fuzz_peer) of
        undefined -> ok;
        P -> catch peer:stop(P)
    end,
    case erase(nifsock_fuzz_dir) of
        undefined -> ok;
        Dir -> os:cmd("rm -rf '" ++ Dir ++ "'")
    end,
    ok.

%% A dead peer never answers a pending call: poll its state meanwhile.
call_peer(Peer, M, F, A) ->
    Self = self(),
    Ref = make_ref(),
    Caller = spawn(fun() ->
                           R = try peer:call(Peer, M, F, A, 60000)
                               catch C:E -> {peer_call_failed, C, E}
                               end,
                           Self ! {Ref, R}
                   end),
    wait_peer(Peer, Ref, Caller, erlang:monotonic_time(millisecond) + 61000).

wait_peer(Peer, Ref, Caller, Deadline) ->
    receive
        {Ref, R} -> R
    after 100 ->
            case catch peer:get_state(Peer) of
                running ->
                    case erlang:monotonic_time(millisecond) > Deadline of
                        true -> exit(Caller, kill), {peer_call_failed, timeout};
                        false -> wait_peer(Peer, Ref, Caller, Deadline)
                    end;
                State ->
                    exit(Caller, kill),
                    {node_died, State}
            end
    end.

%%--------------------------------------------------------------------
%% Executor (in the peer)
%%--------------------------------------------------------------------

setup_peer(Dir) ->
    ok = filelib:ensure_dir(filename:join(Dir, "x")),
    ok = file:set_cwd(Dir),
    [code:ensure_loaded(M) || M <- [nifsock, nifsock_nif, socket, maps, lists]],
    %% a port nobody listens on: a bound socket holds it
    {ok, B} = socket:open(inet, stream, tcp),
    ok = socket:bind(B, #{family => inet, addr => {127, 0, 0, 1}, port => 0}),
    {ok, #{port := Closed}} = socket:sockname(B),
    Holder = spawn(fun() -> receive never -> B end end),
    ok = socket:setopt(B, {otp, controlling_process}, Holder),
    persistent_term:put(nifsock_fuzz_closed_port, Closed),
    persistent_term:put(nifsock_fuzz_dir, Dir),
    ok.

%% Runs Mod:F(Args) (placeholders replaced) in a fresh process; returns a
%% small classification.
exec(Mod, F, Args0, Bound) ->
    Parent = self(),
    Ref = make_ref(),
    {Pid, Mon} =
        spawn_monitor(
          fun() ->
                  Fix = fixtures(Args0),
                  Args = sanitize(Mod, F, subst(Args0, Fix), Fix),
                  case skip(Mod, F, Args) of
                      true ->
                          Parent ! {Ref, skipped};
                      false ->
                          Parent ! {Ref, started},
                          R = try apply(Mod, F, Args) of
                                  V -> {returned, classify(V), spec_ok(Mod, F, length(Args), V)}
                              catch
                                  error:badarg -> {raised, error, badarg};
                                  error:{invalid, _} -> {raised, error, invalid};
                                  C:E:St -> {raised, C, {E, hd(St ++ [none])}}
                              end,
                          Parent ! {Ref, R}
                  end,
                  cleanup(Fix)
          end),
    R = receive
            {Ref, skipped} -> skipped;
            {Ref, started} ->
                receive
                    {Ref, R0} -> R0
                after Bound ->
                        blocked_state(Pid, Ref, 100)
                end;
            {'DOWN', Mon, process, Pid, Reason} ->
                {died_before_call, Reason}
        after 10000 ->
                {fixtures_stuck, process_info(Pid, current_stacktrace)}
        end,
    exit(Pid, kill),
    receive {'DOWN', Mon, process, Pid, _} -> ok after 5000 -> ok end,
    R.

%% A call not back after its bound: waiting in a nifsock function is a
%% legitimate wait; running or runnable (a short timeout that just fired, a
%% process not yet scheduled on a loaded machine) is looked at again, 20 ms
%% apart, up to `Tries' times, taking its result if it comes meanwhile.
blocked_state(Pid, Ref, Tries) ->
    case process_info(Pid, [status, current_function]) of
        [{status, waiting}, {current_function, {M, _, _}}] = Info ->
            case lists:prefix("nifsock", atom_to_list(M)) of
                true -> {blocked, {waiting, nifsock}};
                false -> {blocked, {Info, process_info(Pid, current_stacktrace)}}
            end;
        [{status, S}, _] when Tries > 0, S =:= running orelse S =:= runnable ->
            receive
                {Ref, R} -> R
            after 20 -> blocked_state(Pid, Ref, Tries - 1)
            end;
        Info ->
            {blocked, {Info, process_info(Pid, current_stacktrace)}}
    end.

classify(ok) -> ok;
classify(true) -> boolean;
classify(false) -> boolean;
classify({ok, _}) -> ok_tuple;
classify({error, _}) -> error_tuple;
classify({select, _}) -> select_tuple;
classify({more, N}) when is_integer(N) -> more_tuple;
classify(A) when A =:= select; A =:= more; A =:= linger; A =:= select_sent;
                 A =:= not_found -> A;
classify(B) when is_binary(B) -> binary;
classify(M) when is_map(M) -> map;
classify(Other) -> {unexpected, Other}.

%% adopting an fd this node already uses, without dup: the VM's own fds
skip(nifsock, open, [Fd, Opts]) when is_integer(Fd), is_map(Opts) ->
    maps:get(dup, Opts, true) =:= false andalso fd_open(Fd);
skip(nifsock_nif, adopt, [Fd, false]) when is_integer(Fd) ->
    fd_open(Fd);
skip(_, _, _) ->
    false.

fd_open(Fd) when Fd >= 0, Fd < 1 bsl 31 ->
    filelib:is_file("/proc/self/fd/" ++ integer_to_list(Fd)) orelse
        element(1, file:read_link("/proc/self/fd/" ++ integer_to_list(Fd))) =:= ok;
fd_open(_) ->
    false.

%% Which placeholders occur in the arguments.
needed(T) -> lists:usort(needed(T, [])).
needed({'$fz', K}, Acc) when is_atom(K) -> [K | Acc];
needed({'$fz', big_binary, _}, Acc) -> Acc;
needed(T, Acc) when is_tuple(T) -> needed(tuple_to_list(T), Acc);
needed([H | T], Acc) -> needed(T, needed(H, Acc));
needed(M, Acc) when is_map(M) -> needed(maps:to_list(M), Acc);
needed(_, Acc) -> Acc.

fixtures(Args) ->
    lists:foldl(fun(K, Acc) -> fixture(K, Acc) end, #{}, needed(Args)).

fixture(K, Acc) when K =:= live_conn; K =:= live_peer ->
    case maps:is_key(live_conn, Acc) of
        true -> Acc;
        false ->
            {L, Addr} = nifsock_test_lib:listener(nifsock, inet, 8),
            {ok, C} = nifsock:open(inet, stream),
            ok = nifsock:connect(C, Addr, 2000),
            {ok, A} = nifsock:accept(L, 2000),
            ok = nifsock:close(L),
            %% data pending in both directions
            ok = nifsock:send(A, <<"pending data for the fuzzed socket">>),
            ok = nifsock:send(C, <<"pending data for its peer">>),
            timer:sleep(1),
            Acc#{live_conn => C, live_peer => A, '$close' => [C, A | maps:get('$close', Acc, [])]}
    end;
fixture(live_listener, Acc) ->
    {L, Addr} = nifsock_test_lib:listener(nifsock, inet, 8),
    %% one connection pending in its backlog
    {ok, C} = nifsock:open(inet, stream),
    ok = nifsock:connect(C, Addr, 2000),
    Acc#{live_listener => L, listener_port => maps:get(port, Addr),
         '$close' => [L, C | maps:get('$close', Acc, [])]};
fixture(live_unconnected, Acc) ->
    {ok, S} = nifsock:open(inet, stream),
    Acc#{live_unconnected => S, '$close' => [S | maps:get('$close', Acc, [])]};
fixture(live_local, Acc) ->
    {ok, S} = nifsock:open(local, stream),
    Path = <<"fz_", (integer_to_binary(erlang:unique_integer([positive])))/binary, ".sock">>,
    ok = nifsock:bind(S, #{family => local, path => Path}),
    ok = nifsock:listen(S, 4),
    Acc#{live_local => S, '$files' => [Path | maps:get('$files', Acc, [])],
         '$close' => [S | maps:get('$close', Acc, [])]};
fixture(closed_socket, Acc) ->
    {ok, S} = nifsock:open(inet, stream),
    ok = nifsock:close(S),
    Acc#{closed_socket => S};
fixture(other_owner_socket, Acc) ->
    Self = self(),
    P = spawn(fun() ->
                      {ok, S} = nifsock:open(inet, stream),
                      Self ! {other_sock, S},
                      receive stop -> nifsock:close(S) end
              end),
    S = receive {other_sock, S0} -> S0 after 2000 -> exit(no_other_socket) end,
    Acc#{other_owner_socket => S, '$procs' => [P | maps:get('$procs', Acc, [])]};
fixture(self_pid, Acc) ->
    Acc#{self_pid => self()};
fixture(dead_pid, Acc) ->
    {P, M} = spawn_monitor(fun() -> ok end),
    receive {'DOWN', M, process, P, _} -> ok end,
    Acc#{dead_pid => P};
fixture(other_pid, Acc) ->
    P = spawn(fun() -> receive stop -> ok after 60000 -> ok end end),
    Acc#{other_pid => P, '$procs' => [P | maps:get('$procs', Acc, [])]};
fixture(ref, Acc) ->
    Acc#{ref => make_ref()};
fixture(select_handle_recv, Acc) ->
    Acc#{select_handle_recv => {select_info, recv, make_ref()}};
fixture(other_resource, Acc) ->
    Acc#{other_resource => atomics:new(1, [])};
fixture(port, Acc) ->
    Acc#{port => hd(erlang:ports())};
fixture(fun0, Acc) ->
    Acc#{fun0 => fun() -> ok end};
fixture(sub_binary, Acc) ->
    Acc;
fixture(_, Acc) ->
    Acc.

cleanup(Fix) ->
    [catch nifsock:close(S) || S <- maps:get('$close', Fix, [])],
    [P ! stop || P <- maps:get('$procs', Fix, [])],
    [file:delete(F) || F <- maps:get('$files', Fix, [])],
    ok.

subst({'$fz', big_binary, N}, _Fix) when is_integer(N) ->
    binary:copy(<<"z">>, N);
subst({'$fz', sub_binary}, _Fix) ->
    Big = binary:copy(<<"sub">>, 1000),
    binary:part(Big, 7, 100);
subst({'$fz', K} = T, Fix) when is_atom(K) ->
    maps:get(K, Fix, T);
subst(T, Fix) when is_tuple(T) ->
    list_to_tuple(subst(tuple_to_list(T), Fix));
subst([H | T], Fix) ->
    [subst(H, Fix) | subst(T, Fix)];
subst(M, Fix) when is_map(M) ->
    maps:from_list(subst(maps:to_list(M), Fix));
subst(X, _Fix) ->
    X.

%% Loopback-only addresses, ports of our own, paths in our temp dir.
sanitize(nifsock, connect, [S, A | Rest], Fix) -> [S, addr(connect, A, Fix) | Rest];
sanitize(nifsock, bind, [S, A], Fix) -> [S, addr(bind, A, Fix)];
sanitize(nifsock_nif, connect, [S, A | Rest], Fix) -> [S, addr(connect, A, Fix) | Rest];
sanitize(nifsock_nif, bind, [S, A], Fix) -> [S, addr(bind, A, Fix)];
sanitize(_, _, Args, _) -> Args.

addr(connect, broadcast, _Fix) -> loopback;
addr(Op, M, Fix) when is_map(M) ->
    maps:map(fun(addr, V) -> ip(V);
                (port, P) when is_integer(P), P > 0, P < 65536 -> port(Op, Fix);
                (path, P) -> path(P);
                (_, V) -> V
             end, M);
addr(_Op, A, _Fix) ->
    A.

ip(broadcast) -> loopback;
ip({127, _, _, _} = A) -> A;
ip({A, B, C, D}) when is_integer(A), is_integer(B), is_integer(C), is_integer(D) -> {127, 0, 0, 1};
ip({0, 0, 0, 0, 0, 0, 0, 1} = A) -> A;
ip({0, 0, 0, 0, 0, 0, 0, 0} = A) -> A;
ip(T) when is_tuple(T), tuple_size(T) =:= 8 -> {0, 0, 0, 0, 0, 0, 0, 1};
ip(V) -> V.

port(bind, _Fix) -> 0;
port(connect, Fix) ->
    case maps:get(listener_port, Fix, undefined) of
        undefined -> persistent_term:get(nifsock_fuzz_closed_port);
        P -> P
    end.

path(<<0, _/binary>> = Abstract) -> Abstract;
path(P) when is_binary(P); is_list(P) ->
    case catch filename:basename(P) of
        B when is_binary(B); is_list(B) ->
            case catch iolist_to_binary(B) of
                Bin when is_binary(Bin), byte_size(Bin) > 0, byte_size(Bin) < 60 ->
                    iolist_to_binary([persistent_term:get(nifsock_fuzz_dir), "/", Bin]);
                _ -> <<"fz_default.sock">>
            end;
        _ -> P
    end;
path(P) -> P.

%%--------------------------------------------------------------------
%% Return values against -spec (in the peer; specs read from the loaded
%% module's debug info)
%%--------------------------------------------------------------------

spec_ok(Mod, F, A, V) ->
    case specs(Mod) of
        #{{F, A} := Rets} ->
            Types = types(Mod),
            lists:any(fun(T) -> match(T, V, Types, 8) end, Rets);
        #{} ->
            true   % no spec (or no debug info): only the shape checks apply
    end.

specs(Mod) ->
    case persistent_term:get({?MODULE, specs, Mod}, undefined) of
        undefined ->
            {Specs, Types} = read_specs(Mod),
            persistent_term:put({?MODULE, specs, Mod}, Specs),
            persistent_term:put({?MODULE, types, Mod}, Types),
            Specs;
        S ->
            S
    end.

types(Mod) -> persistent_term:get({?MODULE, types, Mod}, #{}).

read_specs(Mod) ->
    case beam_lib:chunks(code:which(Mod), [abstract_code]) of
        {ok, {_, [{abstract_code, {_, Forms}}]}} ->
            Specs = maps:from_list(
                      [{FA, [ret(C) || C <- Clauses]}
                       || {attribute, _, spec, {FA, Clauses}} <- Forms]),
            Types = maps:from_list(
                      [{Name, T} || {attribute, _, Kind, {Name, T, _}} <- Forms,
                                    Kind =:= type orelse Kind =:= opaque]),
            {Specs, Types};
        _ ->
            {#{}, #{}}
    end.

ret({type, _, bounded_fun, [Fun, _]}) -> ret(Fun);
ret({type, _, 'fun', [_, Ret]}) -> Ret.

match(_, _, _, 0) -> true;
match({ann_type, _, [_, T]}, V, Ts, D) -> match(T, V, Ts, D);
match({paren_type, _, [T]}, V, Ts, D) -> match(T, V, Ts, D);
match({var, _, _}, _V, _Ts, _D) -> true;
match({atom, _, A}, V, _, _) -> V =:= A;
match({integer, _, I}, V, _, _) -> V =:= I;
match({op, _, _, _} = Op, V, _, _) -> V =:= erl_eval:partial_eval(Op) orelse is_integer(V);
match({op, _, _, _, _}, V, _, _) -> is_integer(V);
match({type, _, union, Ts}, V, Tys, D) -> lists:any(fun(T) -> match(T, V, Tys, D) end, Ts);
match({type, _, range, [L, H]}, V, _, _) ->
    is_integer(V) andalso V >= int(L) andalso V =< int(H);
match({type, _, tuple, any}, V, _, _) -> is_tuple(V);
match({type, _, tuple, Es}, V, Tys, D) ->
    is_tuple(V) andalso tuple_size(V) =:= length(Es) andalso
        lists:all(fun({T, X}) -> match(T, X, Tys, D - 1) end, lists:zip(Es, tuple_to_list(V)));
match({type, _, nil, []}, V, _, _) -> V =:= [];
match({type, _, L, Args}, V, Tys, D) when L =:= list; L =:= nonempty_list ->
    is_list(V) andalso (L =:= list orelse V =/= []) andalso
        case Args of
            [T] -> proper_list(V) andalso lists:all(fun(X) -> match(T, X, Tys, D - 1) end, V);
            _ -> true
        end;
match({type, _, map, _}, V, _, _) -> is_map(V);
match({type, _, T, _}, V, _, _) when T =:= binary; T =:= bitstring -> is_bitstring(V);
match({type, _, T, _}, V, _, _) when T =:= iodata; T =:= iolist ->
    is_binary(V) orelse is_list(V);
match({type, _, integer, _}, V, _, _) -> is_integer(V);
match({type, _, non_neg_integer, _}, V, _, _) -> is_integer(V) andalso V >= 0;
match({type, _, pos_integer, _}, V, _, _) -> is_integer(V) andalso V > 0;
match({type, _, neg_integer, _}, V, _, _) -> is_integer(V) andalso V < 0;
match({type, _, number, _}, V, _, _) -> is_number(V);
match({type, _, float, _}, V, _, _) -> is_float(V);
match({type, _, atom, _}, V, _, _) -> is_atom(V);
match({type, _, boolean, _}, V, _, _) -> is_boolean(V);
match({type, _, pid, _}, V, _, _) -> is_pid(V);
match({type, _, reference, _}, V, _, _) -> is_reference(V);
match({type, _, port, _}, V, _, _) -> is_port(V);
match({type, _, timeout, _}, V, _, _) -> V =:= infinity orelse (is_integer(V) andalso V >= 0);
match({type, _, T, _}, _V, _, _) when T =:= term; T =:= any -> true;
match({type, _, T, _}, _V, _, _) when T =:= none; T =:= no_return -> false;
match({user_type, _, Name, _}, V, Tys, D) ->
    case Tys of
        #{Name := T} -> match(T, V, Tys, D - 1);
        #{} -> true
    end;
match({remote_type, _, _}, _V, _, _) -> true;   % other modules' types: not resolved
match(_, _V, _, _) -> true.

int({integer, _, I}) -> I;
int(Op) -> erl_eval:partial_eval(Op).

proper_list([_ | T]) -> proper_list(T);
proper_list([]) -> true;
proper_list(_) -> false.
