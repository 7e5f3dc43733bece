%% Backends defining READINESS run nifsock with that readiness source
%% (application env `readiness', see nifsock_readiness); the others with
%% the default (the driver path on Linux). Backends defining RECV_YIELD set
%% the application env `recv_yield' (whether a blocking recv(S, 0) may yield
%% before it reads; default true), and REPLY_YIELD the application env
%% `reply_yield' (whether an active socket's owner yields after its reply and
%% reads the next request itself; default false). Included by the adapter
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
recv_yield() -> nifsock_env(recv_yield, ?RECV_YIELD, fun nifsock_nif:recv_yield/1).
-else.
recv_yield() -> ok.
-endif.

-ifdef(REPLY_YIELD).
reply_yield() -> nifsock_env(reply_yield, ?REPLY_YIELD, fun nifsock_nif:reply_yield/1).
-else.
reply_yield() -> ok.
-endif.

%% Sets nifsock's application env Key to Value, read when the NIF loads; on
%% a node where it is loaded already, Set(Value) takes it now.
-compile({nowarn_unused_function, [{nifsock_env, 3}]}).
nifsock_env(Key, Value, Set) ->
    _ = application:load(nifsock),
    ok = application:set_env(nifsock, Key, Value),
    case erlang:module_loaded(nifsock_nif) of
        true -> Set(Value);
        false -> ok
    end.
