%%% Cowboy HTTPS on nifsock_ranch_ssl, with the real Cowboy, Ranch and Cowlib.
%%%
%%% They are not dependencies of nifsock (CI has no hex), so this suite runs
%%% only when NIFSOCK_COWBOY_DEPS names a directory whose subdirectories hold
%%% built applications (DIR/*/ebin: cowboy 2.12, ranch 2.1, cowlib 2.13), and
%%% is skipped, saying so, otherwise. The listener is started as
%%% cowboy:start_tls/3 starts one, with nifsock_ranch_ssl in place of
%%% ranch_ssl; clients are httpc and raw HTTP/1.1 over ssl (plain gen_tcp ssl
%%% and ssl over nifsock_tcp). All traffic is on loopback.
-module(nifsock_cowboy_SUITE).

-include_lib("common_test/include/ct.hrl").

-export([all/0, suite/0, init_per_suite/1, end_per_suite/1]).
-export([cowboy_https_get_httpc/1,
         cowboy_https_keepalive/1,
         cowboy_https_1mib_download/1,
         cowboy_https_1mib_upload/1,
         cowboy_https_client_cert/1,
         cowboy_https_alpn_h2_selected/1]).
%% Cowboy handler
-export([init/2]).

-define(T, 10000).
-define(MIB, (1024 * 1024)).
-define(REF, nifsock_cowboy_https).
-define(CB, {cb_info, {nifsock_tcp, nifsock, nifsock_closed, nifsock_error, nifsock_passive}}).

suite() -> [{timetrap, {seconds, 120}}].

all() ->
    [cowboy_https_get_httpc, cowboy_https_keepalive, cowboy_https_1mib_download,
     cowboy_https_1mib_upload, cowboy_https_client_cert, cowboy_https_alpn_h2_selected].

init_per_suite(Config) ->
    case os:getenv("NIFSOCK_COWBOY_DEPS") of
        Dir when is_list(Dir), Dir =/= "" ->
            %% all but DIR/nifsock (the rebar3 profile `cowboy`'s own build
            %% of nifsock, when DIR is its lib dir): this build is tested
            Ebins = filelib:wildcard(filename:join([Dir, "*", "ebin"]))
                -- [filename:join([Dir, "nifsock", "ebin"])],
            ok = code:add_pathsa(Ebins),
            case code:which(cowboy) of
                non_existing ->
                    {skip, "NIFSOCK_COWBOY_DEPS=" ++ Dir ++ " has no cowboy (DIR/*/ebin)"};
                _ ->
                    start(Config)
            end;
        _ ->
            {skip, "NIFSOCK_COWBOY_DEPS is not set (a directory of built cowboy, ranch and "
             "cowlib applications, DIR/*/ebin): Cowboy HTTPS on nifsock_ranch_ssl not tested"}
    end.

start(Config) ->
    {ok, _} = application:ensure_all_started(cowboy),
    {ok, _} = application:ensure_all_started(inets),
    Key = [{key, {namedCurve, secp256r1}}],
    Chain = #{root => Key, intermediates => [], peer => Key},
    #{server_config := ServerOpts, client_config := ClientOpts0} =
        public_key:pkix_test_data(#{server_chain => Chain, client_chain => Chain}),
    ClientOpts = [{verify, verify_peer}, {server_name_indication, disable} | ClientOpts0],
    Dispatch = cowboy_router:compile([{'_', [{"/[...]", ?MODULE, []}]}]),
    {ok, _} = start_tls(?REF, #{socket_opts => [{ip, {127, 0, 0, 1}}, {port, 0},
                                                {verify, verify_peer},
                                                {fail_if_no_peer_cert, false}
                                                | ServerOpts]},
                        #{env => #{dispatch => Dispatch}}),
    Port = ranch:get_port(?REF),
    ct:pal("cowboy ~s, ranch ~s on nifsock_ranch_ssl, port ~p",
           [vsn(cowboy), vsn(ranch), Port]),
    [{port, Port}, {client_opts, ClientOpts},
     {client_cert_opts, ClientOpts}, {client_nocert_opts, strip_cert(ClientOpts)} | Config].

vsn(App) ->
    {ok, V} = application:get_key(App, vsn),
    V.

strip_cert(Opts) ->
    [O || O <- Opts, not lists:member(element(1, O), [cert, key])].

%% cowboy:start_tls/3 (Cowboy 2.12) with nifsock_ranch_ssl for ranch_ssl.
start_tls(Ref, TransOpts0, ProtoOpts0) ->
    TransOpts1 = ranch:normalize_opts(TransOpts0),
    SocketOpts = maps:get(socket_opts, TransOpts1, []),
    TransOpts = TransOpts1#{connection_type => supervisor,
                            socket_opts => [{alpn_preferred_protocols, [<<"h2">>, <<"http/1.1">>]}
                                            | SocketOpts]},
    ProtoOpts = ProtoOpts0#{connection_type => supervisor},
    ranch:start_listener(Ref, nifsock_ranch_ssl, TransOpts, cowboy_tls, ProtoOpts).

end_per_suite(Config) ->
    case ?config(port, Config) of
        undefined -> ok;
        _ -> ok = cowboy:stop_listener(?REF)
    end.

%%--------------------------------------------------------------------
%% The handler
%%--------------------------------------------------------------------

init(Req0, State) ->
    Req = case cowboy_req:path(Req0) of
              <<"/hello">> ->
                  cowboy_req:reply(200, #{<<"content-type">> => <<"text/plain">>},
                                   <<"hello over nifsock">>, Req0);
              <<"/big">> ->
                  cowboy_req:reply(200, #{}, big(), Req0);
              <<"/upload">> ->
                  {Body, Req1} = read_body(Req0, []),
                  Reply = [integer_to_binary(byte_size(Body)), <<" ">>,
                           integer_to_binary(erlang:crc32(Body))],
                  cowboy_req:reply(200, #{}, Reply, Req1);
              <<"/cert">> ->
                  Has = case cowboy_req:cert(Req0) of
                            undefined -> <<"no cert">>;
                            Der when is_binary(Der) -> <<"cert">>
                        end,
                  cowboy_req:reply(200, #{}, Has, Req0);
              <<"/peer">> ->
                  {IP, Port} = cowboy_req:peer(Req0),
                  cowboy_req:reply(200, #{}, io_lib:format("~p ~p", [IP, Port]), Req0)
          end,
    {ok, Req, State}.

read_body(Req0, Acc) ->
    case cowboy_req:read_body(Req0) of
        {ok, Data, Req} -> {iolist_to_binary(lists:reverse([Data | Acc])), Req};
        {more, Data, Req} -> read_body(Req, [Data | Acc])
    end.

%% 1 MiB, the same every time.
big() ->
    binary:copy(<<"0123456789abcdef">>, ?MIB div 16).

%%--------------------------------------------------------------------
%% Cases
%%--------------------------------------------------------------------

%% httpc GET over HTTPS: status 200 and the handler's body.
cowboy_https_get_httpc(Config) ->
    {ok, {{_, 200, _}, _Headers, <<"hello over nifsock">>}} =
        httpc:request(get, {url(Config, "/hello"), []},
                      [{ssl, ?config(client_nocert_opts, Config)}, {timeout, ?T}],
                      [{body_format, binary}]),
    ok.

%% 20 HTTP/1.1 requests on one TLS connection (keep-alive), from a plain-ssl and a nifsock client; the peer Cowboy sees is the client's address.
cowboy_https_keepalive(Config) ->
    [begin
         {ok, C} = connect(Kind, Config, [<<"http/1.1">>]),
         {ok, {_, CPort}} = ssl:sockname(C),
         Peer = iolist_to_binary(io_lib:format("~p ~p", [{127, 0, 0, 1}, CPort])),
         [{200, <<"hello over nifsock">>} = get(C, "/hello") || _ <- lists:seq(1, 20)],
         {200, Peer} = get(C, "/peer"),
         ok = ssl:close(C)
     end || Kind <- [gen_tcp, nifsock]],
    ok.

%% A 1 MiB response body, byte for byte, to httpc and to a nifsock ssl client.
cowboy_https_1mib_download(Config) ->
    Big = big(),
    {ok, {{_, 200, _}, _, Big}} =
        httpc:request(get, {url(Config, "/big"), []},
                      [{ssl, ?config(client_nocert_opts, Config)}, {timeout, ?T}],
                      [{body_format, binary}]),
    {ok, C} = connect(nifsock, Config, [<<"http/1.1">>]),
    {200, Big} = get(C, "/big"),
    {200, Big} = get(C, "/big"),
    ok = ssl:close(C).

%% A 1 MiB request body, read by cowboy_req:read_body/1: the handler reports its size and CRC.
cowboy_https_1mib_upload(Config) ->
    Body = rand:bytes(?MIB),
    Expect = iolist_to_binary([integer_to_binary(?MIB), " ",
                               integer_to_binary(erlang:crc32(Body))]),
    {ok, {{_, 200, _}, _, Expect}} =
        httpc:request(post, {url(Config, "/upload"), [], "application/octet-stream", Body},
                      [{ssl, ?config(client_nocert_opts, Config)}, {timeout, ?T}],
                      [{body_format, binary}]),
    {ok, C} = connect(nifsock, Config, [<<"http/1.1">>]),
    ok = ssl:send(C, ["POST /upload HTTP/1.1\r\nhost: localhost\r\ncontent-length: ",
                      integer_to_binary(?MIB), "\r\n\r\n", Body]),
    {200, Expect} = response(C),
    ok = ssl:close(C).

%% cowboy_req:cert/1 has the client's certificate (Cowboy asks ssl:peercert/1 because name/0 is ssl).
cowboy_https_client_cert(Config) ->
    {ok, C} = connect(nifsock, Config, [<<"http/1.1">>]),
    {200, <<"cert">>} = get(C, "/cert"),
    ok = ssl:close(C),
    {ok, C2} = ssl:connect({127, 0, 0, 1}, ?config(port, Config),
                           [binary, {active, false}, {alpn_advertised_protocols, [<<"http/1.1">>]}
                            | ?config(client_nocert_opts, Config)], ?T),
    {200, <<"no cert">>} = get(C2, "/cert"),
    ok = ssl:close(C2).

%% A client offering h2 gets h2 (cowboy_tls's ssl:negotiated_protocol/1 on our sslsocket) and Cowboy's HTTP/2 server preface (a SETTINGS frame).
cowboy_https_alpn_h2_selected(Config) ->
    {ok, C} = connect(nifsock, Config, [<<"h2">>, <<"http/1.1">>]),
    {ok, <<"h2">>} = ssl:negotiated_protocol(C),
    ok = ssl:send(C, <<"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 0:24, 4, 0, 0:32>>),
    %% frame header: length (3), type 4 = SETTINGS, flags, stream 0
    {ok, <<_Len:24, 4, _Flags, 0:32>>} = ssl:recv(C, 9, ?T),
    ok = ssl:close(C).

%%--------------------------------------------------------------------
%% Helpers
%%--------------------------------------------------------------------

url(Config, Path) ->
    "https://127.0.0.1:" ++ integer_to_list(?config(port, Config)) ++ Path.

connect(gen_tcp, Config, Alpn) ->
    ssl:connect({127, 0, 0, 1}, ?config(port, Config),
                [binary, {active, false}, {alpn_advertised_protocols, Alpn}
                 | ?config(client_cert_opts, Config)], ?T);
connect(nifsock, Config, Alpn) ->
    ssl:connect({127, 0, 0, 1}, ?config(port, Config),
                [?CB, binary, {active, false}, {alpn_advertised_protocols, Alpn}
                 | ?config(client_cert_opts, Config)], ?T).

get(C, Path) ->
    ok = ssl:send(C, ["GET ", Path, " HTTP/1.1\r\nhost: localhost\r\n\r\n"]),
    response(C).

%% One HTTP/1.1 response with a content-length body.
response(C) ->
    ok = ssl:setopts(C, [{packet, http_bin}]),
    {ok, {http_response, _, Status, _}} = ssl:recv(C, 0, ?T),
    Len = headers(C, undefined),
    ok = ssl:setopts(C, [{packet, raw}]),
    Body = case Len of
               0 -> <<>>;
               _ -> {ok, B} = ssl:recv(C, Len, ?T), B
           end,
    {Status, Body}.

headers(C, Len) ->
    case ssl:recv(C, 0, ?T) of
        {ok, {http_header, _, 'Content-Length', _, V}} -> headers(C, binary_to_integer(V));
        {ok, {http_header, _, _, _, _}} -> headers(C, Len);
        {ok, http_eoh} -> Len
    end.
