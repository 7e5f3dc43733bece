%%% strace attached to another OS process (a peer node), for the suites that
%%% count or inspect the syscalls nifsock makes.
-module(nifsock_strace).

-export([attach/3, detach/1]).

%% @doc Starts `Strace' with `Args' (its own options, `-p OsPid' is added)
%% and returns its port once it has attached to every thread.
-spec attach(file:filename(), [string()], string()) -> port().
attach(Strace, Args, OsPid) ->
    Port = open_port({spawn_executable, Strace},
                     [{args, Args ++ ["-p", OsPid]}, exit_status, stderr_to_stdout, binary]),
    wait_attached(Port, 0),
    Port.

%% @doc Interrupts strace (it then writes its summary, if asked for one) and
%% waits for it to exit.
-spec detach(port()) -> ok.
detach(Port) ->
    {os_pid, Pid} = erlang:port_info(Port, os_pid),
    _ = os:cmd("kill -INT " ++ integer_to_list(Pid)),
    receive {Port, {exit_status, _}} -> ok after 20000 -> exit(strace_stuck) end,
    flush_port(Port).

%% strace prints one "attached" line per thread; wait until the lines stop coming.
wait_attached(Port, Seen) ->
    Quiet = case Seen of 0 -> 10000; _ -> 700 end,
    receive
        {Port, {data, D}} ->
            wait_attached(Port, Seen + length(binary:matches(D, <<"attached">>)))
    after Quiet ->
            Seen > 0 orelse exit(strace_not_attached),
            ok
    end.

flush_port(Port) ->
    receive {Port, _} -> flush_port(Port) after 0 -> ok end.
