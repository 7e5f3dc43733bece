%% Adapter body for TLS backends: `ssl' over a gen_tcp-shaped module. The
%% including module defines ?TCP (the TCP module) and ?CB_OPTS (the ssl
%% options that select it: [] for gen_tcp, the cb_info for nifsock_tcp).
%% The server side listens and accepts with ?TCP and upgrades each accepted
%% socket with ssl:handshake/3 (as nifsock_ranch_ssl does; the same for both
%% backends, so only the transport under ssl differs); the client side is
%% ssl:connect/4. Certificates (ECDSA P-256) are made once per node with
%% public_key:pkix_test_data/1. TLS 1.3, no session reuse, no peer check.

-export([available/0, listen/2, accept/2, controlling_process/2, recv/3,
         send/2, close/1, connect/3, read_size/2]).

available() ->
    case {code:ensure_loaded(?TCP), application:ensure_all_started(ssl)} of
        {{module, ?TCP}, {ok, _}} -> _ = certs(), ok;
        Err -> {error, Err}
    end.

certs() ->
    case persistent_term:get({bench_ssl, certs}, undefined) of
        undefined ->
            Key = [{key, {namedCurve, secp256r1}}, {digest, sha256}],
            Chain = #{root => Key, intermediates => [], peer => Key},
            #{server_config := S, client_config := C} =
                public_key:pkix_test_data(#{server_chain => Chain, client_chain => Chain}),
            Certs = {[{versions, ['tlsv1.3']} | S],
                     [{verify, verify_none}, {versions, ['tlsv1.3']},
                      {server_name_indication, disable} | strip(C)]},
            persistent_term:put({bench_ssl, certs}, Certs),
            Certs;
        Certs ->
            Certs
    end.

%% The client sends no certificate.
strip(Opts) -> [O || {K, _} = O <- Opts, K =/= cert, K =/= key].

listen(Port, Opts) ->
    case ?TCP:listen(Port, [binary, {active, false}, {packet, raw},
                            {reuseaddr, true}, {ip, {127, 0, 0, 1}},
                            {backlog, maps:get(backlog, Opts, 1024)}]) of
        {ok, L} ->
            {ok, {_, P}} = case ?TCP of
                               gen_tcp -> inet:sockname(L);
                               _ -> ?TCP:sockname(L)
                           end,
            {ok, L, P};
        E -> E
    end.

accept(L, Timeout) ->
    case ?TCP:accept(L, Timeout) of
        {ok, S} ->
            {ServerOpts, _} = certs(),
            case ssl:handshake(S, ?CB_OPTS ++ ServerOpts, 10000) of
                {ok, SS} -> {ok, SS};
                {error, _} = E -> _ = ?TCP:close(S), E
            end;
        E -> E
    end.

controlling_process(S, Pid) -> ssl:controlling_process(S, Pid).

recv(S, Len, Timeout) -> ssl:recv(S, Len, Timeout).

send(S, Data) -> ssl:send(S, Data).

%% The listen socket is a ?TCP socket, connections are sslsockets.
close(S) when element(1, S) =:= sslsocket -> ssl:close(S);
close(L) -> ?TCP:close(L).

%% ssl passes `buffer' on to the transport under it (?TCP)
read_size(S, Bytes) -> ssl:setopts(S, [{buffer, Bytes}]).

connect(Port, Opts, Timeout) ->
    {_, ClientOpts} = certs(),
    ssl:connect({127, 0, 0, 1}, Port,
                ?CB_OPTS ++ [binary, {active, false}, {packet, raw},
                             {nodelay, maps:get(nodelay, Opts, false)} | ClientOpts], Timeout).
