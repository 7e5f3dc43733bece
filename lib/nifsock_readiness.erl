%% @doc Choosing nifsock's readiness source.
%%
%% The application environment key `readiness' picks how a waiting socket
%% learns it is readable:
%%
%% <ul>
%% <li>`driver' (the default on Linux): the socket's fd is added once to
%%   nifsock's own epoll set,
%%   and a port of a small driver in the same library (`libnifsock', loaded
%%   with `erl_ddll') keeps that set selected in ERTS, so the schedulers poll
%%   it; its `ready_input' tells passive waiters and delivers `nifsock_tcp'
%%   active data to the owner directly, and tells blocked writers and
%%   connects (the fd gets `EPOLLOUT' from its first write wait on).</li>
%% <li>`pump': the same set, but its fd is `enif_select'ed once per batch by
%%   a pump process that drains it in a NIF call.</li>
%% <li>`select' (the fallback, and the default off Linux): one
%%   `enif_select' per wait.</li>
%% </ul>
%%
%% The source starts when the NIF loads, or on `start/0'; if the driver
%% cannot be started, a warning is logged and waits use `enif_select'.
%%
%% On the driver path a hot socket's own fd moves to the readiness port
%% (into the scheduler pollset) after 16 reads in a row served by drains.
%% The application environment key `port_hold' says which sockets may move:
%% `alone' (the default: only one served alone in its drain's batch, at most
%% 16 held) or `any' (every active socket the drain keeps delivering to, as
%% inet_drv's active sockets; passive ones keep `alone'). Keep-alive over 64
%% connections, `{active, 100}': `any' makes one `epoll_wait' less per batch
%% (0.04-0.05 system calls less per request) and costs 1-7 % more CPU per
%% request on OTP 27 and 29.
%% Measurements and limits: doc/readiness-research.md.
-module(nifsock_readiness).

-export([mode/0, port_hold/0, start/0, stop/0, on_load/0, load_driver/0]).
-export([init/1]).

-define(DRIVER, "libnifsock").

%% @doc The configured readiness source.
-spec mode() -> select | driver | pump.
mode() ->
    %% Loading the application reads `-nifsock readiness driver' from the
    %% command line and the release's sys.config.
    _ = application:load(nifsock),
    case application:get_env(nifsock, readiness) of
        {ok, driver} -> driver;
        {ok, pump} -> pump;
        {ok, select} -> select;
        _ -> default()
    end.

%% @doc Which hot sockets' input the readiness port holds: the application
%% environment key `port_hold' (`alone' | `any'), `alone' when unset.
-spec port_hold() -> alone | any.
port_hold() ->
    _ = application:load(nifsock),
    case application:get_env(nifsock, port_hold) of
        {ok, any} -> any;
        _ -> alone
    end.

%% The epoll set is Linux's.
default() ->
    case os:type() of
        {unix, linux} -> driver;
        _ -> select
    end.

%% @private
%% @doc Called by `nifsock_nif''s on_load once the NIF is loaded: starts the
%% configured source, before any socket exists.
-spec on_load() -> ok.
on_load() ->
    case mode() of
        select ->
            ok;
        driver ->
            %% Synchronous: the port exists before the first socket.
            warn_unless_ok(driver, start_owner(driver));
        pump ->
            %% The pump calls nifsock_nif, which is callable only once this
            %% on_load returns: start it without waiting.
            _ = proc_lib:spawn(fun() -> warn_unless_ok(pump, start_owner(pump)) end),
            ok
    end.

warn_unless_ok(_Mode, ok) -> ok;
warn_unless_ok(Mode, {error, E}) ->
    logger:warning("nifsock: readiness ~p not started: ~p", [Mode, E]).

%% @doc Starts the configured source (`driver' when the key is unset), idempotent:
%% a registered process that lives as long as the node owns the driver's port
%% or is the pump.
-spec start() -> ok | {error, term()}.
start() ->
    %% The driver forwards to hooks the NIF's load installs.
    case code:ensure_loaded(nifsock_nif) of
        {module, nifsock_nif} ->
            start_owner(case mode() of select -> driver; M -> M end);
        {error, E} ->
            {error, {nif, E}}
    end.

start_owner(Mode) ->
    case whereis(?MODULE) of
        undefined ->
            case proc_lib:start(?MODULE, init, [Mode], 5000) of
                ok -> ok;
                {error, taken} -> ok;
                {error, _} = E -> E
            end;
        _ ->
            ok
    end.

%% @doc Stops the driver path: new waits go back to `enif_select'.
-spec stop() -> ok.
stop() ->
    case whereis(?MODULE) of
        undefined -> ok;
        Pid ->
            Ref = monitor(process, Pid),
            Pid ! stop,
            receive {'DOWN', Ref, process, Pid, _} -> ok end
    end.

%% @private
-spec init(driver | pump) -> ok.
init(Mode) ->
    try register(?MODULE, self()) of
        true when Mode =:= driver ->
            case open() of
                {ok, Port} ->
                    proc_lib:init_ack(ok),
                    loop(Port);
                {error, _} = E ->
                    proc_lib:init_ack(E)
            end;
        true when Mode =:= pump ->
            case nifsock_nif:readiness_pump(true) of
                ok ->
                    ok = nifsock_nif:readiness_pump_drain(),
                    proc_lib:init_ack(ok),
                    pump_loop();
                {error, _} = E ->
                    proc_lib:init_ack(E)
            end
    catch
        error:badarg -> proc_lib:init_ack({error, taken})
    end.

pump_loop() ->
    receive
        {'$nifsock', readiness, select, batch} ->
            _ = nifsock_nif:readiness_pump_drain(),
            pump_loop();
        stop ->
            ok = nifsock_nif:readiness_pump(false);
        _ ->
            pump_loop()
    end.

%% @private
%% @doc Loads the driver for the calling process (erl_ddll counts its users:
%% it stays loaded while one lives or one of its ports is open). Also used by
%% nifsock_dist's port carrier, whatever the readiness source.
-spec load_driver() -> ok | {error, term()}.
load_driver() ->
    case erl_ddll:load_driver(priv_dir(), ?DRIVER) of
        ok -> ok;
        {error, E} -> {error, {load_driver, erl_ddll:format_error(E)}}
    end.

open() ->
    case load_driver() of
        ok ->
            try open_port({spawn_driver, ?DRIVER}, [binary]) of
                Port -> {ok, Port}
            catch
                error:Reason -> {error, Reason}
            end;
        {error, _} = E ->
            E
    end.

loop(Port) ->
    receive
        stop ->
            port_close(Port),
            ok;
        _ ->
            loop(Port)
    end.

priv_dir() ->
    case code:priv_dir(nifsock) of
        {error, bad_name} ->
            filename:join(filename:dirname(filename:dirname(code:which(?MODULE))), "priv");
        D ->
            D
    end.
