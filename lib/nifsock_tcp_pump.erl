%% @private
%% @doc The pumps of `nifsock_tcp''s active mode: one process per scheduler,
%% shared by every active socket (no process per connection). A pump gets the
%% select message of a readable socket and calls the NIF that reads and sends
%% the owner `{nifsock, S, Data}' directly; it never holds data itself.
-module(nifsock_tcp_pump).

-export([for_caller/0]).
-export([init/1]).

-include("nifsock_internal.hrl").

%% @doc The pump for the caller's scheduler, started on first use.
-spec for_caller() -> pid().
for_caller() ->
    Name = name(erlang:system_info(scheduler_id)),
    case whereis(Name) of
        undefined -> start(Name);
        Pid -> Pid
    end.

%% The first 16 schedulers' names are literals (no persistent_term lookup:
%% this runs at every accept and every active setopts).
-define(NAMES, {nifsock_tcp_pump_1, nifsock_tcp_pump_2, nifsock_tcp_pump_3, nifsock_tcp_pump_4,
                nifsock_tcp_pump_5, nifsock_tcp_pump_6, nifsock_tcp_pump_7, nifsock_tcp_pump_8,
                nifsock_tcp_pump_9, nifsock_tcp_pump_10, nifsock_tcp_pump_11, nifsock_tcp_pump_12,
                nifsock_tcp_pump_13, nifsock_tcp_pump_14, nifsock_tcp_pump_15, nifsock_tcp_pump_16}).

name(N) when N =< tuple_size(?NAMES) ->
    element(N, ?NAMES);
name(N) ->
    Key = {?MODULE, N},
    try persistent_term:get(Key)
    catch error:badarg ->
            Name = list_to_atom("nifsock_tcp_pump_" ++ integer_to_list(N)),
            persistent_term:put(Key, Name),
            Name
    end.

start(Name) ->
    case proc_lib:start(?MODULE, init, [Name]) of
        {ok, Pid} -> Pid;
        {error, taken} -> whereis_or_retry(Name)
    end.

whereis_or_retry(Name) ->
    case whereis(Name) of
        undefined -> start(Name);
        Pid -> Pid
    end.

%% @private
-spec init(atom()) -> no_return().
init(Name) ->
    try register(Name, self()) of
        true ->
            process_flag(message_queue_data, off_heap),
            proc_lib:init_ack({ok, self()}),
            loop()
    catch
        error:badarg ->
            proc_lib:init_ack({error, taken}),
            exit(normal)
    end.

loop() ->
    receive
        ?MSG(S, select, active) ->
            try nifsock_nif:tcp_deliver(S)
            catch Class:Reason ->
                    logger:warning("nifsock_tcp pump: ~p:~p", [Class, Reason])
            end;
        _Other ->
            %% aborts for closed sockets and anything stray
            ok
    after 1000 ->
            %% idle: drop the socket terms of past messages from the heap, so
            %% closed sockets' objects can be freed
            garbage_collect()
    end,
    loop().
