%% @doc The small behaviour every benchmarked socket API implements.
%%
%% One adapter module per backend, named `bench_backend_<name>'. The
%% server harness (bench_server) and the load generator (bench_client)
%% only ever talk to sockets through these callbacks, so adding a
%% backend is adding one file.
%%
%% All sockets are IPv4 TCP stream sockets on 127.0.0.1.
-module(bench_backend).

-export([mod/1, available/1]).

%% Is the backend usable in this node (module loadable, NIF loaded...)?
-callback available() -> ok | {error, term()}.

%% Listen on 127.0.0.1:Port (0 = any free port). Opts: #{backlog => N}.
%% Returns the listen handle and the real port.
-callback listen(Port :: inet:port_number(), Opts :: map()) ->
    {ok, Listen :: term(), inet:port_number()} | {error, term()}.

%% Block (bounded by Timeout ms or infinity) until a connection arrives.
-callback accept(Listen :: term(), Timeout :: timeout()) ->
    {ok, Sock :: term()} | {error, term()}.

%% Make Pid the owner of Sock (called by the current owner).
-callback controlling_process(Sock :: term(), Pid :: pid()) -> ok | {error, term()}.

%% Len = 0: whatever is available (at least one byte);
%% Len > 0: exactly Len bytes. {error, closed} on orderly EOF.
-callback recv(Sock :: term(), Len :: non_neg_integer(), Timeout :: timeout()) ->
    {ok, binary()} | {error, term()}.

-callback send(Sock :: term(), Data :: iodata()) -> ok | {error, term()}.

-callback close(Sock :: term()) -> ok | {error, term()}.

%% Read up to Bytes per receive system call from now on (recv(S, 0) and
%% active deliveries): `{otp, rcvbuf}' for socket-shaped modules, `buffer'
%% for gen_tcp-shaped ones and ssl. The bulk sink sets every backend to the
%% client's write size, so that no backend is measured with a smaller read
%% than another (by default gen_tcp's `buffer' is 1460 bytes on OTP 25 and
%% 27 and 9216 on 29, socket's `rcvbuf' 8 KiB, nifsock's 64 KiB).
-callback read_size(Sock :: term(), Bytes :: pos_integer()) -> ok | {error, term()}.

%% Client side: connect to 127.0.0.1:Port.
%% Opts: #{linger0 => boolean(), nodelay => boolean()}.
-callback connect(Port :: inet:port_number(), Opts :: map(), Timeout :: timeout()) ->
    {ok, Sock :: term()} | {error, term()}.

-spec mod(atom() | string()) -> module().
mod(Name) when is_atom(Name) -> list_to_atom("bench_backend_" ++ atom_to_list(Name));
mod(Name) -> mod(list_to_atom(Name)).

-spec available(atom()) -> ok | {error, term()}.
available(Name) ->
    M = mod(Name),
    case code:ensure_loaded(M) of
        {module, M} ->
            try M:available() catch C:R -> {error, {C, R}} end;
        {error, E} ->
            {error, {no_adapter, M, E}}
    end.
