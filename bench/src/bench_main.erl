%% @doc Orchestrator and load-generator node of the side-by-side benchmark.
%%
%% Started by bench/run pinned to the load core. It starts one server node
%% per backend (peer, pinned to the server core, `+S 1:1'), runs each
%% workload in rounds that interleave the backends, each round's order the
%% last one's rotated by one (A B C, B C A, C A B, ...),
%% drives wrk (HTTP workloads) or its own client loops (the others),
%% samples CPU time from /proc, writes the raw per-round numbers and
%% hands them to bench_report.
-module(bench_main).

-export([main/1]).

-define(HTTP_REQ, <<"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n">>).

%%% entry point: erl -run bench_main main key=value ...

-spec main([string()]) -> no_return().
main(Args) ->
    Opts = maps:from_list([case string:split(A, "=") of
                               [K, V] -> {list_to_atom(K), V};
                               [K] -> {list_to_atom(K), "true"}
                           end || A <- Args]),
    Code = try run(Opts) of
               ok -> 0
           catch C:E:St ->
                   io:format(standard_error, "bench: ~p:~p~n~p~n", [C, E, St]),
                   1
           end,
    halt(Code).

config(Opts) ->
    Full = maps:get(mode, Opts, "quick") =:= "full",
    Get = fun(K, Def) -> maps:get(K, Opts, Def) end,
    Int = fun(K, Q, F) -> list_to_integer(Get(K, integer_to_list(case Full of true -> F; false -> Q end))) end,
    Root = Get(root, element(2, file:get_cwd())),
    Workloads = Get(workloads, case Full of
                                   true -> "churn,keepalive,pingpong1,pingpong16,bulk,idle,syscalls,"
                                           "tls_keepalive,tls_bulk";
                                   false -> "churn,keepalive,pingpong1,pingpong16,bulk,idle,syscalls"
                               end),
    #{mode => case Full of true -> full; false -> quick end,
      root => Root,
      results => Get(results, filename:join([Root, "bench", "results"])),
      pidfile => Get(pidfile, filename:join([Root, "bench", "_build", "pids"])),
      paths => string:lexemes(Get(paths, ""), ":"),
      backends => [list_to_atom(B) || B <- string:lexemes(Get(backends, default_backends(Full, Workloads)), ",")],
      workloads => [list_to_atom(W) || W <- string:lexemes(Workloads, ",")],
      subject => list_to_atom(Get(subject, "nifsock")),
      client => list_to_atom(Get(client, "gen_tcp")),
      %% pingpong's load: `native' (bench/pingpong-client, one epoll thread:
      %% a BEAM client on one core saturates before a fast server does) or
      %% `beam' (bench_client:pingpong/5 over `client')
      pp_client => pp_client(Get(pp_client, "native"), Get(pp_client_bin, "")),
      server_core => Get(server_core, "0"),
      nice => Get(nice, ""),
      load_core => Get(load_core, "1"),
      rounds => Int(rounds, 3, 7),
      syscall_rounds => Int(syscall_rounds, 1, 3),
      http_secs => Int(http_secs, 3, 5),
      pp_ms => Int(pp_ms, 1000, 3000),
      %% pingpong x1 runs 3 s in both modes: one connection's round trips/s
      %% spread 5-10 % between 1 s runs (the wake-ups of two vCPUs), more than
      %% the backends differ by, so 1 s runs put the x1 ratio either side of
      %% 1.0 from round to round
      pp1_ms => Int(pp1_ms, 3000, 3000),
      bulk_mib => Int(bulk_mib, 1024, 2048),
      tls_bulk_mib => Int(tls_bulk_mib, 64, 256),
      idle_conns => Int(idle_conns, 10000, 10000),
      syscall_conns => Int(syscall_conns, 2000, 2000),
      wrk_conns => Int(wrk_conns, 64, 64),
      acceptors => Int(acceptors, 16, 16),
      deadline_s => Int(deadline_s, 380, 1500),
      clk_tck => list_to_integer(string:trim(os:cmd("getconf CLK_TCK"))),
      ncpu => erlang:system_info(logical_processors),
      erl => os:find_executable("erl"),
      taskset => os:find_executable("taskset"),
      wrk => os:find_executable("wrk"),
      strace => os:find_executable("strace"),
      start => erlang:monotonic_time(millisecond)}.

pp_client("native", "") -> beam;
pp_client("native", Bin) -> {native, Bin};
pp_client("beam", _) -> beam.

%% The TLS backends (ssl over nifsock_tcp and over gen_tcp) are added when a
%% TLS workload runs (full mode, or --workloads naming one); only they run
%% when every workload is a TLS one.
default_backends(Full, Workloads) ->
    Plain = "nifsock,socket,gen_tcp,gen_tcp_active,nifsock_tcp_active_n,gen_tcp_active_n,"
        "nifsock_sel,nifsock_tcp_sel_active_n",
    Tls = "nifsock_tcp_ssl,gen_tcp_ssl",
    IsTls = [lists:prefix("tls_", W) || W <- string:lexemes(Workloads, ",")],
    case {lists:all(fun(X) -> X end, IsTls), Full orelse lists:member(true, IsTls)} of
        {true, _} -> Tls;
        {false, true} -> Plain ++ "," ++ Tls;
        {false, false} -> Plain
    end.

run(#{report := Csv} = Opts) ->
    %% regenerate latest.md/png from a raw CSV and its .meta file
    Cfg = config(Opts),
    {ok, [Meta]} = file:consult(Csv ++ ".meta"),
    bench_report:write(read_csv(Csv), maps:merge(Cfg, Meta#{raw_file => Csv}));
run(Opts) ->
    Cfg0 = config(Opts),
    log("bench: mode ~p, server pinned to core ~s (+S 1:1), load (client node, wrk) "
        "pinned to core ~s", [maps:get(mode, Cfg0), maps:get(server_core, Cfg0),
                               maps:get(load_core, Cfg0)]),
    ok = filelib:ensure_dir(filename:join(maps:get(results, Cfg0), "raw/x")),
    Stamp = stamp(),
    RawFile = filename:join([maps:get(results, Cfg0), "raw",
                             Stamp ++ "-" ++ atom_to_list(maps:get(mode, Cfg0)) ++ ".csv"]),
    {ok, Raw} = file:open(RawFile, [write]),
    io:format(Raw, "round,workload,backend,metric,value~n", []),
    maps:get(pp_client, Cfg0) =:= beam andalso maps:get(pp_client, Opts, "native") =:= "native"
        andalso log("bench: the native ping-pong client is not built (cargo build --release -p "
                    "nifsock_pingpong_client); pingpong runs with the BEAM client", []),
    Client = bench_backend:mod(maps:get(client, Cfg0)),
    ok = bench_backend:available(maps:get(client, Cfg0)),
    %% one long-lived server node per backend
    %% a server node that dies (say, a NIF crash) must not take the
    %% orchestrator with it: its runs fail and the node is restarted
    process_flag(trap_exit, true),
    {Nodes, Skipped} = start_nodes(Cfg0),
    [put({node, B}, N) || {B, N} <- Nodes],
    Backends = [B || {B, _} <- Nodes],
    Cfg = Cfg0#{backends => Backends,
                client_mod => Client, raw => Raw, skipped => Skipped},
    log("bench: backends ~p~s", [Backends,
                                 [io_lib:format(", skipped ~p (~0p)", [B, R]) || {B, R} <- Skipped]]),
    Backends =:= [] andalso error(no_backend),
    warmup(Cfg),
    Results = lists:append([workload(W, Cfg) || W <- maps:get(workloads, Cfg)]),
    [stop_node(get({node, B})) || B <- Backends],
    ok = file:close(Raw),
    Machine = machine(Cfg),
    Wall = (erlang:monotonic_time(millisecond) - maps:get(start, Cfg)) div 1000,
    Cfg1 = Cfg#{machine => Machine, raw_file => RawFile, bench_wall_s => Wall,
                skipped => [{B, lists:flatten(io_lib:format("~0p", [R]))} || {B, R} <- Skipped]},
    Meta = maps:with([mode, workloads, deadline_s, backends, subject, client, pp_client, rounds,
                      syscall_rounds, http_secs, pp_ms, pp1_ms,
                      bulk_mib, idle_conns, syscall_conns, wrk_conns, acceptors, server_core,
                      load_core, ncpu, machine, skipped, bench_wall_s], Cfg1),
    ok = file:write_file(RawFile ++ ".meta", io_lib:format("~p.~n", [Meta])),
    bench_report:write(Results, Cfg1).

read_csv(File) ->
    {ok, B} = file:read_file(File),
    [_Hdr | Lines] = [L || L <- binary:split(B, <<"\n">>, [global]), L =/= <<>>],
    Rows = [begin
                [R, W, Bk, K, V] = binary:split(L, <<",">>, [global]),
                {{binary_to_atom(W), binary_to_integer(R), binary_to_atom(Bk)},
                 binary_to_atom(K), num(V)}
            end || L <- Lines],
    Keys = lists:foldr(fun({Key, _, _}, Acc) -> [Key | lists:delete(Key, Acc)] end, [], Rows),
    [{W, R, Bk, maps:from_list([{K, V} || {Key1, K, V} <- Rows, Key1 =:= Key])}
     || {W, R, Bk} = Key <- Keys].

num(V) ->
    try binary_to_integer(V) catch _:_ -> binary_to_float(V) end.

%%% server nodes

start_nodes(Cfg) ->
    lists:foldr(
      fun(B, {Ok, Skip}) ->
              case start_node(Cfg, B) of
                  {ok, N} -> {[{B, N} | Ok], Skip};
                  {error, R} -> {Ok, [{B, R} | Skip]}
              end
      end, {[], []}, maps:get(backends, Cfg)).

start_node(Cfg, Backend) ->
    Paths = lists:append([["-pa", P] || P <- maps:get(paths, Cfg)]),
    {ok, Peer, _} = peer:start_link(
                      #{connection => standard_io,
                        exec => {maps:get(taskset, Cfg),
                                 ["-c", maps:get(server_core, Cfg), maps:get(erl, Cfg)]},
                        args => ["+S", "1:1"] ++ Paths}),
    OsPid = peer:call(Peer, bench_server, os_pid, []),
    note_pid(Cfg, OsPid),
    case peer:call(Peer, bench_server, load, [Backend], 15000) of
        ok -> {ok, #{peer => Peer, os_pid => OsPid}};
        Err -> stop_node(#{peer => Peer}), {error, Err}
    end.

stop_node(#{peer := Peer}) ->
    catch peer:stop(Peer),
    ok.

note_pid(Cfg, OsPid) ->
    file:write_file(maps:get(pidfile, Cfg), [OsPid, $\n], [append]).

call(Node, F, A) -> call(Node, F, A, 60000).
call(#{peer := Peer}, F, A, T) -> peer:call(Peer, bench_server, F, A, T).

%%% workloads

warmup(Cfg) ->
    log("bench: warm-up (1 s of wrk churn per backend)", []),
    [begin
         {ok, Ref, Port} = call(node_of(Cfg, B), start, [B, http, maps:get(acceptors, Cfg)]),
         _ = wrk(Cfg, scheme(B), Port, 1, true),
         call(node_of(Cfg, B), stop, [Ref])
     end || B <- maps:get(backends, Cfg)],
    ok.

node_of(Cfg, B) ->
    #{peer := Peer} = N = get({node, B}),
    case is_process_alive(Peer) of
        true -> N;
        false ->
            log("bench: server node of ~p is gone; starting a new one", [B]),
            {ok, N1} = start_node(Cfg, B),
            put({node, B}, N1),
            N1
    end.

all_nodes() -> [N || {{node, _}, N} <- get()].

workload(W, Cfg) ->
    Rounds = case W of
                 syscalls -> maps:get(syscall_rounds, Cfg);
                 _ -> maps:get(rounds, Cfg)
             end,
    case W =:= syscalls andalso maps:get(strace, Cfg) =:= false of
        true -> log("bench: strace not found, skipping syscalls", []), [];
        false ->
            Backends = [B || B <- maps:get(backends, Cfg), runs(W, B)],
            log("bench: ~p: ~p round(s) x ~p", [W, Rounds, Backends]),
            lists:append(
              [[one(W, R, B, Cfg) || B <- rotate(Backends, R - 1)]
               || R <- lists:seq(1, Rounds), not past_deadline(Cfg, W, R)])
    end.

%% Round R runs the backends in their order rotated left by R - 1: the
%% machine's speed drifts by 10-30 % over tens of seconds on these VMs, and
%% a fixed order would put the same backends in the same part of every
%% round (the ones compared at opposite ends of it).
rotate([], _) -> [];
rotate(L, N) ->
    {A, B} = lists:split(N rem length(L), L),
    B ++ A.

%% The {active, N} backends compare active delivery (nifsock_tcp's pumps vs
%% inet_drv): they run the request/response workloads only.
%% The TLS backends run the TLS workloads, and only they do.
runs(W, B) ->
    case {is_tls(B), lists:prefix("tls_", atom_to_list(W))} of
        {true, IsTlsWorkload} -> IsTlsWorkload;
        {false, true} -> false;
        {false, false} ->
            case lists:suffix("_active_n", atom_to_list(B)) of
                true -> lists:member(W, [keepalive, pingpong1, pingpong16]);
                false -> true
            end
    end.

is_tls(B) -> lists:suffix("_ssl", atom_to_list(B)).

scheme(B) ->
    case is_tls(B) of
        true -> "https";
        false -> "http"
    end.

past_deadline(Cfg, W, R) ->
    Elapsed = (erlang:monotonic_time(millisecond) - maps:get(start, Cfg)) div 1000,
    case Elapsed > maps:get(deadline_s, Cfg) of
        true -> log("bench: time budget used up, skipping ~p round ~p", [W, R]), true;
        false -> false
    end.

one(W, R, B, Cfg) ->
    flush_exits(),
    Res = try run_one(W, B, Cfg)
          catch C:E:St ->
                  log("bench: ~p round ~p ~p FAILED: ~p:~P ~P", [W, R, B, C, E, 20, St, 20]),
                  #{failed => 1}
          end,
    Raw = maps:get(raw, Cfg),
    [io:format(Raw, "~b,~p,~p,~p,~s~n", [R, W, B, K, fmt_raw(V)]) || {K, V} <- lists:sort(maps:to_list(Res))],
    log("  ~-10s r~b ~-15s ~s", [W, R, B, summary(W, Res)]),
    {W, R, B, Res}.

flush_exits() ->
    receive {'EXIT', _, _} -> flush_exits() after 0 -> ok end.

fmt_raw(V) when is_integer(V) -> integer_to_list(V);
fmt_raw(V) when is_float(V) -> float_to_list(V, [{decimals, 4}, compact]).

summary(_, #{failed := _}) -> "FAILED";
summary(W, Res) ->
    Keys = case W of
               churn -> [rps, cpu_us_per_req, errors];
               keepalive -> [rps, cpu_us_per_req, errors];
               tls_keepalive -> [rps, cpu_us_per_req, errors];
               tls_bulk -> [mb_per_s, cpu_us_per_mb];
               pingpong1 -> [rt_per_s, cpu_us_per_rt];
               pingpong16 -> [rt_per_s, cpu_us_per_rt];
               bulk -> [mb_per_s, cpu_us_per_mb];
               idle -> [mem_total, rss, binary, system];
               syscalls -> [sc_socket, sc_total, sc_accept, sc_epoll_ctl]
           end,
    Other = case maps:find(other_pct, Res) of
                {ok, O} when O > 10 -> io_lib:format("  other load ~.1f% (NOISY)", [O]);
                {ok, O} -> io_lib:format("  other ~.1f%", [O]);
                error -> ""
            end,
    [lists:join("  ", [io_lib:format("~p=~s", [K, short(maps:get(K, Res, -1))]) || K <- Keys]), Other].

short(V) when is_integer(V) -> integer_to_list(V);
short(V) -> float_to_list(V, [{decimals, 2}, compact]).

run_one(W, B, Cfg) when W =:= churn; W =:= keepalive ->
    N = node_of(Cfg, B),
    {ok, Ref, Port} = call(N, start, [B, http, maps:get(acceptors, Cfg)]),
    {Wrk, S} = sampled(Cfg, [N], fun() -> wrk(Cfg, "http", Port, maps:get(http_secs, Cfg), W =:= churn) end),
    Stats = call(N, stop, [Ref]),
    #{requests := Reqs, rps := Rps, errors := Errs, cpu_us := WrkCpu} = Wrk,
    noise(S, WrkCpu, Cfg,
          #{rps => Rps, requests => Reqs, errors => Errs,
            server_errors => maps:get(handler_errors, Stats) + maps:get(accept_errors, Stats),
            cpu_us_per_req => maps:get(server_us, S) / max(1, Reqs)});
run_one(W, B, Cfg) when W =:= pingpong1; W =:= pingpong16 ->
    N = node_of(Cfg, B),
    Conns = case W of pingpong1 -> 1; pingpong16 -> 16 end,
    {ok, Ref, Port} = call(N, start, [B, echo, maps:get(acceptors, Cfg)]),
    {{RT, Us, Errs, ClientUs}, S} = sampled(Cfg, [N], fun() -> pingpong(Cfg, Port, Conns) end),
    _ = call(N, stop, [Ref]),
    noise(S, ClientUs, Cfg, #{rt_per_s => RT * 1.0e6 / Us, round_trips => RT, errors => Errs,
                              cpu_us_per_rt => maps:get(server_us, S) / max(1, RT)});
%% TLS keep-alive: wrk over https (its OpenSSL client, the same for both
%% backends), 64 connections, handshakes done before the timed part starts
%% counting only in wrk's own first requests.
run_one(tls_keepalive, B, Cfg) ->
    N = node_of(Cfg, B),
    {ok, Ref, Port} = call(N, start, [B, http, maps:get(acceptors, Cfg)]),
    {Wrk, S} = sampled(Cfg, [N], fun() -> wrk(Cfg, "https", Port, maps:get(http_secs, Cfg), false) end),
    Stats = call(N, stop, [Ref]),
    #{requests := Reqs, rps := Rps, errors := Errs, cpu_us := WrkCpu} = Wrk,
    noise(S, WrkCpu, Cfg,
          #{rps => Rps, requests => Reqs, errors => Errs,
            server_errors => maps:get(handler_errors, Stats) + maps:get(accept_errors, Stats),
            cpu_us_per_req => maps:get(server_us, S) / max(1, Reqs)});
%% TLS bulk: the bulk workload over TLS; the client is ssl over gen_tcp for
%% every server backend (bench_backend_gen_tcp_ssl).
run_one(tls_bulk, B, Cfg) ->
    N = node_of(Cfg, B),
    Bytes = maps:get(tls_bulk_mib, Cfg) * 1024 * 1024,
    ok = bench_backend:available(gen_tcp_ssl),
    {ok, Ref, Port} = call(N, start, [B, sink, 1]),
    {{ok, Us}, S} = sampled(Cfg, [N], fun() ->
        bench_client:bulk(bench_backend:mod(gen_tcp_ssl), Port, Bytes, 65536)
    end),
    _ = call(N, stop, [Ref]),
    MB = Bytes / 1.0e6,
    noise(S, 0, Cfg, #{mb_per_s => MB / (Us / 1.0e6), bytes => Bytes,
                       cpu_us_per_mb => maps:get(server_us, S) / MB});
run_one(bulk, B, Cfg) ->
    N = node_of(Cfg, B),
    Bytes = maps:get(bulk_mib, Cfg) * 1024 * 1024,
    {ok, Ref, Port} = call(N, start, [B, sink, 1]),
    {{ok, Us}, S} = sampled(Cfg, [N], fun() ->
        bench_client:bulk(maps:get(client_mod, Cfg), Port, Bytes, 65536)
    end),
    _ = call(N, stop, [Ref]),
    MB = Bytes / 1.0e6,
    noise(S, 0, Cfg, #{mb_per_s => MB / (Us / 1.0e6), bytes => Bytes,
                       cpu_us_per_mb => maps:get(server_us, S) / MB});
run_one(idle, B, Cfg) ->
    %% a fresh server node per run, so that RSS is not hidden by memory
    %% cached from earlier runs
    {ok, N} = start_node(Cfg, B),
    try
        Conns = maps:get(idle_conns, Cfg),
        {ok, Ref, Port} = call(N, start, [B, idle, maps:get(acceptors, Cfg)]),
        timer:sleep(200),
        ok = call(N, gc_all, []),
        M0 = call(N, memory, []),
        {Holders, Opened, OpenErrs} = bench_client:idle_open(maps:get(client_mod, Cfg), Port, Conns, 16),
        try
            Wait = call(N, wait_handlers, [Ref, Opened, 30000]),
            timer:sleep(300),
            ok = call(N, gc_all, []),
            M1 = call(N, memory, []),
            Per = fun(K) -> (maps:get(K, M1) - maps:get(K, M0)) / max(1, Opened) end,
            #{mem_total => Per(total), rss => Per(rss), binary => Per(binary),
              system => Per(system), processes => Per(processes),
              conns => Opened, errors => OpenErrs + case Wait of ok -> 0; _ -> 1 end}
        after
            bench_client:idle_close(Holders),
            _ = call(N, stop, [Ref])
        end
    after
        stop_node(N)
    end;
run_one(syscalls, B, Cfg) ->
    N = node_of(Cfg, B),
    CMod = maps:get(client_mod, Cfg),
    Conns = maps:get(syscall_conns, Cfg),
    {ok, Ref, Port} = call(N, start, [B, http, maps:get(acceptors, Cfg)]),
    %% warm the listener without strace
    {_, _, _} = bench_client:churn(CMod, Port, 200, 16, ?HTTP_REQ),
    #{accepted := A0} = call(N, stats, [Ref]),
    File = filename:join(filename:dirname(maps:get(pidfile, Cfg)),
                         "strace-" ++ atom_to_list(B) ++ ".txt"),
    _ = file:delete(File),
    Strace = strace_attach(Cfg, maps:get(os_pid, N), File),
    {Ok, Errs, _Us} = try bench_client:churn(CMod, Port, Conns, 16, ?HTTP_REQ)
                      after strace_detach(Strace)
                      end,
    #{accepted := A1} = Stats = call(N, stop, [Ref]),
    Counts = parse_strace(File),
    Per = maps:map(fun(_, V) -> V / max(1, Conns) end, categorize(Counts)),
    Per#{conns => Ok, errors => Errs + maps:get(handler_errors, Stats),
         accepted => A1 - A0}.

%%% syscall accounting

strace_attach(Cfg, OsPid, File) ->
    Port = open_port({spawn_executable, maps:get(strace, Cfg)},
                     [{args, ["-f", "-c", "-o", File, "-p", OsPid]},
                      exit_status, stderr_to_stdout, binary]),
    {os_pid, SPid} = erlang:port_info(Port, os_pid),
    note_pid(Cfg, integer_to_list(SPid)),
    wait_attached(Port, <<>>, 50),
    timer:sleep(300),
    {Port, SPid}.

wait_attached(_Port, _Acc, 0) -> error(strace_attach_timeout);
wait_attached(Port, Acc, N) ->
    receive
        {Port, {data, D}} ->
            Acc1 = <<Acc/binary, D/binary>>,
            case binary:match(Acc1, <<"attached">>) of
                nomatch -> wait_attached(Port, Acc1, N);
                _ -> ok
            end;
        {Port, {exit_status, S}} -> error({strace_exited, S, Acc})
    after 100 -> wait_attached(Port, Acc, N - 1)
    end.

strace_detach({Port, SPid}) ->
    _ = os:cmd("kill -INT " ++ integer_to_list(SPid)),
    receive {Port, {exit_status, _}} -> ok
    after 20000 -> _ = os:cmd("kill -KILL " ++ integer_to_list(SPid)), ok
    end,
    flush_port(Port).

flush_port(Port) ->
    receive {Port, _} -> flush_port(Port) after 0 -> ok end.

parse_strace(File) ->
    {ok, B} = file:read_file(File),
    Lines = binary:split(B, <<"\n">>, [global]),
    maps:from_list(
      [{Name, binary_to_integer(Calls)}
       || L <- Lines,
          Toks <- [binary:split(L, [<<" ">>], [global, trim_all])],
          length(Toks) >= 5,
          [Pct | _] <- [Toks],
          Pct =/= <<"%">>,
          binary:first(Pct) =/= $-,
          Name <- [lists:last(Toks)],
          Name =/= <<"total">>,
          Calls <- [lists:nth(4, Toks)]]).

%% syscall names -> categories; see bench/README.md
categories() ->
    [{sc_accept, [<<"accept">>, <<"accept4">>]},
     {sc_fcntl, [<<"fcntl">>]},
     {sc_getsockopt, [<<"getsockopt">>]},
     {sc_setsockopt, [<<"setsockopt">>]},
     {sc_close, [<<"close">>, <<"shutdown">>]},
     {sc_recv, [<<"recvfrom">>, <<"recvmsg">>, <<"recvmmsg">>, <<"read">>, <<"readv">>]},
     {sc_send, [<<"sendto">>, <<"sendmsg">>, <<"sendmmsg">>, <<"write">>, <<"writev">>]},
     {sc_sockmisc, [<<"getsockname">>, <<"getpeername">>, <<"ioctl">>]},
     {sc_epoll_ctl, [<<"epoll_ctl">>]},
     {sc_futex, [<<"futex">>]},
     {sc_epoll_wait, [<<"epoll_wait">>, <<"epoll_pwait">>, <<"epoll_pwait2">>, <<"poll">>, <<"ppoll">>]}].

socket_categories() ->
    [sc_accept, sc_fcntl, sc_getsockopt, sc_setsockopt, sc_close, sc_recv, sc_send, sc_sockmisc].

categorize(Counts) ->
    Cats = maps:from_list([{C, lists:sum([maps:get(N, Counts, 0) || N <- Names])}
                           || {C, Names} <- categories()]),
    Known = lists:append([Ns || {_, Ns} <- categories()]),
    Total = lists:sum(maps:values(Counts)),
    Cats#{sc_other => Total - lists:sum([maps:get(N, Counts, 0) || N <- Known]),
          sc_socket => lists:sum([maps:get(C, Cats) || C <- socket_categories()]),
          sc_total => Total}.

%%% wrk

wrk(Cfg, Scheme, Port, Secs, Close) ->
    Hdr = case Close of true -> " -H 'Connection: close'"; false -> "" end,
    Cmd = io_lib:format("timeout -s INT ~b ~s -c ~s ~s -t 1 -c ~b -d ~bs~s ~s://127.0.0.1:~b/",
                        [Secs + 20, maps:get(taskset, Cfg), maps:get(load_core, Cfg),
                         maps:get(wrk, Cfg), maps:get(wrk_conns, Cfg), Secs, Hdr, Scheme, Port]),
    Out = load_cmd(Cfg, Cmd, (Secs + 30) * 1000),
    Num = fun(Re) ->
                  case re:run(Out, Re, [{capture, all_but_first, list}]) of
                      {match, [X]} -> to_num(X);
                      _ -> 0
                  end
          end,
    Errs = case re:run(Out, "Socket errors: connect (\\d+), read (\\d+), write (\\d+), timeout (\\d+)",
                       [{capture, all_but_first, list}]) of
               {match, L} -> lists:sum([list_to_integer(X) || X <- L]);
               nomatch -> 0
           end + Num("Non-2xx or 3xx responses: (\\d+)"),
    Reqs = Num("(\\d+) requests in"),
    Reqs > 0 orelse error({wrk_failed, Out}),
    #{requests => Reqs, rps => float(Num("Requests/sec:\\s+([0-9.]+)")), errors => Errs,
      cpu_us => load_cpu_us(Cfg, Out)}.

%% Runs a load program (Cmd, a shell command) through sh/3 and returns its
%% output, followed by the CPU time of the shell's children (cutime + cstime
%% of /proc/$$/stat), which load_cpu_us/2 reads: the load's, not the server's.
load_cmd(Cfg, Cmd, TimeoutMs) ->
    sh(Cfg, lists:flatten([Cmd, "; echo; echo CHILDCPU $(cut -d' ' -f16,17 /proc/$$/stat)"]),
       TimeoutMs).

load_cpu_us(Cfg, Out) ->
    {match, [U, S]} = re:run(Out, "CHILDCPU (\\d+) (\\d+)", [{capture, all_but_first, list}]),
    (list_to_integer(U) + list_to_integer(S)) * (1000000 div maps:get(clk_tck, Cfg)).

%% Conns connections doing 100-byte round trips for pp1_ms or pp_ms: {RoundTrips,
%% ElapsedUs, Errors, ClientCpuUs}. The native client is an OS process (its
%% CPU time, as wrk's, is added to the load's); the BEAM client runs in this
%% node, whose CPU time sampled/3 counts.
pingpong(#{pp_client := {native, Bin}} = Cfg, Port, Conns) ->
    Ms = pp_ms(Cfg, Conns),
    Cmd = io_lib:format("~s -c ~s ~s ~b ~b 100 ~b",
                        [maps:get(taskset, Cfg), maps:get(load_core, Cfg), Bin, Port, Conns, Ms]),
    Out = load_cmd(Cfg, Cmd, Ms + 30000),
    case re:run(Out, "round_trips=(\\d+) elapsed_us=(\\d+) errors=(\\d+)",
                [{capture, all_but_first, list}]) of
        {match, [RT, Us, Errs]} ->
            {list_to_integer(RT), max(1, list_to_integer(Us)), list_to_integer(Errs),
             load_cpu_us(Cfg, Out)};
        nomatch ->
            error({pingpong_client_failed, Out})
    end;
pingpong(#{pp_client := beam} = Cfg, Port, Conns) ->
    {RT, Us, Errs} = bench_client:pingpong(maps:get(client_mod, Cfg), Port, Conns, 100,
                                           pp_ms(Cfg, Conns)),
    {RT, Us, Errs, 0}.

%% the length of a pingpong run: pp1_ms for one connection, pp_ms for more
pp_ms(Cfg, 1) -> maps:get(pp1_ms, Cfg);
pp_ms(Cfg, _Conns) -> maps:get(pp_ms, Cfg).

to_num(X) ->
    try list_to_integer(X) catch _:_ -> list_to_float(X) end.

%% run a shell command in its own process group (erl_child_setup does
%% setsid), bounded in time; returns its output
sh(Cfg, Cmd, TimeoutMs) ->
    Port = open_port({spawn_executable, "/bin/sh"},
                     [{args, ["-c", Cmd]}, exit_status, stderr_to_stdout, binary]),
    {os_pid, Pid} = erlang:port_info(Port, os_pid),
    note_pid(Cfg, integer_to_list(Pid)),
    sh_collect(Port, Pid, [], erlang:monotonic_time(millisecond) + TimeoutMs).

sh_collect(Port, Pid, Acc, Deadline) ->
    Left = max(0, Deadline - erlang:monotonic_time(millisecond)),
    receive
        {Port, {data, D}} -> sh_collect(Port, Pid, [D | Acc], Deadline);
        {Port, {exit_status, _}} -> binary_to_list(iolist_to_binary(lists:reverse(Acc)))
    after Left ->
        _ = os:cmd("kill -KILL -- -" ++ integer_to_list(Pid)),
        error({timeout, iolist_to_binary(lists:reverse(Acc))})
    end.

%%% CPU sampling and noise

%% Run Fun, sampling CPU time of the server node (and of all our
%% processes) and the machine's busy time around it.
sampled(Cfg, [Node], Fun) ->
    Ours = [os:getpid() | [maps:get(os_pid, N) || N <- all_nodes()]],
    S0 = {erlang:monotonic_time(microsecond), proc_cpu(Cfg, maps:get(os_pid, Node)),
          lists:sum([proc_cpu(Cfg, P) || P <- Ours]), sys_busy(Cfg)},
    R = Fun(),
    S1 = {erlang:monotonic_time(microsecond), proc_cpu(Cfg, maps:get(os_pid, Node)),
          lists:sum([proc_cpu(Cfg, P) || P <- Ours]), sys_busy(Cfg)},
    {W0, Srv0, O0, B0} = S0,
    {W1, Srv1, O1, B1} = S1,
    {R, #{wall_us => W1 - W0, server_us => Srv1 - Srv0, ours_us => O1 - O0, busy_us => B1 - B0}}.

%% other load = machine busy time (user+nice+system) not accounted to our
%% processes (server nodes, this node, wrk), as % of the machine's capacity
noise(S, ExtraUs, Cfg, M) ->
    #{wall_us := W, server_us := Srv, ours_us := O, busy_us := B} = S,
    %% /proc/stat's user, nice and system fields are each read truncated
    %% to whole 10 ms ticks per CPU: give that much benefit of the doubt
    NCpu = maps:get(ncpu, Cfg),
    Margin = 3 * NCpu * (1000000 div maps:get(clk_tck, Cfg)),
    Other = max(0, B - O - ExtraUs - Margin),
    M#{server_cpu_us => Srv, wall_us => W, client_cpu_us => O - Srv + ExtraUs,
       other_pct => 100 * Other / max(1, W * NCpu)}.

%% CPU time (user+system, µs) of an OS process: the sum of its threads'
%% on-CPU time from /proc/PID/task/*/schedstat (ns precision; the same
%% total as utime+stime of /proc/PID/stat, which only has 10 ms ticks),
%% falling back to /proc/PID/stat.
proc_cpu(Cfg, OsPid) ->
    Dir = "/proc/" ++ OsPid ++ "/task",
    case file:list_dir(Dir) of
        {ok, Tids} ->
            Ns = [case file:read_file(Dir ++ "/" ++ T ++ "/schedstat") of
                      {ok, B} -> binary_to_integer(hd(binary:split(B, <<" ">>)));
                      _ -> error
                  end || T <- Tids],
            case lists:member(error, Ns) of
                false -> lists:sum(Ns) div 1000;
                true -> proc_stat_cpu(Cfg, OsPid)
            end;
        _ -> proc_stat_cpu(Cfg, OsPid)
    end.

proc_stat_cpu(Cfg, OsPid) ->
    case file:read_file("/proc/" ++ OsPid ++ "/stat") of
        {ok, B} ->
            [_, Rest] = string:split(B, <<")">>, trailing),
            F = binary:split(Rest, <<" ">>, [global, trim_all]),
            Ticks = binary_to_integer(lists:nth(12, F)) + binary_to_integer(lists:nth(13, F)),
            Ticks * (1000000 div maps:get(clk_tck, Cfg));
        _ -> 0
    end.

sys_busy(Cfg) ->
    {ok, B} = file:read_file("/proc/stat"),
    [Line | _] = binary:split(B, <<"\n">>),
    [<<"cpu">>, U, N, S | _] = binary:split(Line, <<" ">>, [global, trim_all]),
    (binary_to_integer(U) + binary_to_integer(N) + binary_to_integer(S))
        * (1000000 div maps:get(clk_tck, Cfg)).

%%% machine description

machine(Cfg) ->
    Cmd = fun(C) -> string:trim(os:cmd(C)) end,
    Model = case re:run(Cmd("lscpu"), "Model name:\\s*(.*)", [{capture, all_but_first, list}]) of
                {match, [M]} -> string:trim(M);
                _ -> Cmd("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2")
            end,
    #{nproc => integer_to_list(erlang:system_info(logical_processors)),
      cpu => Model,
      kernel => Cmd("uname -sr"),
      otp => erlang:system_info(otp_release) ++ " (erts " ++ erlang:system_info(version) ++ ")",
      wrk => hd(string:split(Cmd("wrk -v 2>&1 | head -1"), " Copyright")),
      pinning => lists:flatten(
                   io_lib:format("server node `taskset -c ~s erl +S 1:1`; load (client node `+S 1:1`, "
                                 "wrk -t 1) `taskset -c ~s`~s",
                                 [maps:get(server_core, Cfg), maps:get(load_core, Cfg),
                                  case maps:get(nice, Cfg) of
                                      "" -> "";
                                      N -> "; all at niceness " ++ N
                                  end])),
      tw_reuse => Cmd("cat /proc/sys/net/ipv4/tcp_tw_reuse"),
      date => Cmd("date -u '+%Y-%m-%d %H:%M UTC'")}.

stamp() ->
    {{Y, Mo, D}, {H, Mi, S}} = calendar:universal_time(),
    lists:flatten(io_lib:format("~4..0b~2..0b~2..0bT~2..0b~2..0b~2..0bZ", [Y, Mo, D, H, Mi, S])).

log(F, A) ->
    io:format(standard_error, F ++ "~n", A).
