%% Backends defining READINESS run nifsock with that readiness source
%% (application env `readiness', see nifsock_readiness); the others with
%% the default (the driver path on Linux). Included by the adapter bodies.
-ifdef(READINESS).
readiness() ->
    _ = application:load(nifsock),
    ok = application:set_env(nifsock, readiness, ?READINESS),
    case ?READINESS of
        %% set before the NIF loads, so its load starts no source; stop/0
        %% covers a node where it is loaded already
        select -> nifsock_readiness:stop();
        _ -> nifsock_readiness:start()
    end.
-else.
readiness() -> ok.
-endif.
