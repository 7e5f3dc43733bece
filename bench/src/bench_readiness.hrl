%% Backends defining READINESS run nifsock with that readiness source
%% (application env `readiness', see nifsock_readiness); the others with
%% the default (the driver path on Linux). Backends defining RECV_YIELD set
%% the application env `recv_yield' (whether a blocking recv(S, 0) may yield
%% before it reads; default true), and REPLY_YIELD the application env
%% `reply_yield' (whether an active socket's owner yields after its reply and
%% reads the next request itself; default true). Included by the adapter
%% bodies.
readiness() ->
    ok = recv_yield(),
    ok = reply_yield(),
    readiness_source().

-ifdef(READINESS).
readiness_source() ->
    _ = application:load(nifsock),
    ok = application:set_env(nifsock, readiness, ?READINESS),
    case ?READINESS of
        %% set before the NIF loads, so its load starts no source; stop/0
        %% covers a node where it is loaded already
        select -> nifsock_readiness:stop();
        _ -> nifsock_readiness:start()
    end.
-else.
readiness_source() -> ok.
-endif.

-ifdef(RECV_YIELD).
recv_yield() ->
    _ = application:load(nifsock),
    ok = application:set_env(nifsock, recv_yield, ?RECV_YIELD),
    %% read when the NIF loads; a node where it is loaded already takes it now
    case erlang:module_loaded(nifsock_nif) of
        true -> nifsock_nif:recv_yield(?RECV_YIELD);
        false -> ok
    end.
-else.
recv_yield() -> ok.
-endif.

-ifdef(REPLY_YIELD).
reply_yield() ->
    _ = application:load(nifsock),
    ok = application:set_env(nifsock, reply_yield, ?REPLY_YIELD),
    case erlang:module_loaded(nifsock_nif) of
        true -> nifsock_nif:reply_yield(?REPLY_YIELD);
        false -> ok
    end.
-else.
reply_yield() -> ok.
-endif.
