%% Internal to nifsock's own modules, not a public include: the term shapes
%% the NIF and the Erlang modules share, defined once.

%% A socket term: the tag and the NIF resource.
-define(SOCK(Ref), {'$nifsock', Ref}).

%% The messages the NIF sends a waiter: `select' (with the wait's handle,
%% `active' for an active socket's pump) when the socket is ready again,
%% `abort' (with `{Handle, Reason}') when the wait was ended under it.
-define(MSG(S, Kind, Info), {'$nifsock', S, Kind, Info}).

%% The select message of a blocking call's own wait (its handle is a
%% ?WAIT_HANDLE(), unique in the node, so it names the wait without the
%% socket): sent by the readiness drains, which then build or decode no
%% socket term. Waits take this shape and ?MSG(S, select, H) alike.
-define(SELECT_MSG(Handle), {'$nifsock', select, Handle}).

%% The result of a blocking recv(S, 0) that a readiness drain read for its
%% wait (`Handle' its integer): {ok, Data} or {error, Reason}.
-define(RECV_MSG(Handle, Result), {'$nifsock', recv, Handle, Result}).

%% What a nowait call returns in `{select, SelectInfo}', as `socket'.
-define(SELECT_INFO(Tag, Handle), {select_info, Tag, Handle}).

%% The handle of a wait inside a blocking call: a node-unique small integer.
%% It is an immediate term, so the NIF keeps it without copying it into an
%% env (user handles for nowait calls are references, as in socket).
-define(WAIT_HANDLE(), erlang:unique_integer()).
