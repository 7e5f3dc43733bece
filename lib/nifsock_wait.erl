%% @private
%% @doc The waits of nifsock's blocking calls, in one place: the timeout a
%% caller gives becomes a deadline (`deadline/1'), a wait-mode NIF call that
%% answered `select' waits for its message until then (`await/4', with
%% `remaining/1'), and a wait is withdrawn with no message left behind
%% (`cancel/3'). Used by `nifsock' (all its blocking calls and `cancel/2')
%% and by `nifsock_tcp''s accept and recv loops (`cancel/3').
%%
%% A deadline is `infinity', `zero' (timeout 0: one try, never a wait) or a
%% time in `erlang:monotonic_time(millisecond)'; `deadline/1' also returns
%% `{handle, Handle}' for `nowait' or a caller's reference, the calls that
%% return `{select, _}' instead of waiting.
-module(nifsock_wait).

-include("nifsock_internal.hrl").

-export([deadline/1, remaining/1, await/4, cancel/3]).

-export_type([deadline/0]).

%% receive's longest `after' (about 49 days); longer timeouts wait forever.
-define(MAX_WAIT, 16#FFFFFFFF).

-type deadline() :: infinity | zero | integer().

%% @doc The deadline of a call's `Timeout': `infinity'; `zero' for 0;
%% `infinity' beyond receive's longest wait (2^32-1 ms); otherwise now plus
%% `Timeout' ms. `nowait' and a reference give `{handle, Handle}' (`nowait' a
%% new reference). Any other term raises `{invalid, {timeout, Timeout}}', as
%% `socket' does.
-spec deadline(nifsock:timeout_spec()) -> deadline() | {handle, reference()}.
deadline(infinity) -> infinity;
deadline(nowait) -> {handle, make_ref()};
deadline(0) -> zero;
deadline(T) when is_integer(T), T > ?MAX_WAIT -> infinity;
deadline(T) when is_integer(T), T > 0 -> erlang:monotonic_time(millisecond) + T;
deadline(H) when is_reference(H) -> {handle, H};
deadline(T) -> erlang:error({invalid, {timeout, T}}).

%% @doc The milliseconds left until `Deadline' (0 once it has passed), or
%% `infinity': a receive's `after'.
-spec remaining(deadline()) -> timeout().
remaining(infinity) -> infinity;
remaining(zero) -> 0;
remaining(Deadline) -> max(0, Deadline - erlang:monotonic_time(millisecond)).

%% @doc Waits for the message that ends a wait-mode call's wait `H' for `Op'
%% (recv, accept, send, connect, sendfile) on `S': `select' when `S' is ready
%% again, the abort reason (`closed', ...) when the wait was ended under the
%% caller, or `timeout' once `Deadline' passes (the wait is cancelled first,
%% so no late message is left in the mailbox).
%% A blocking recv(S, 0)'s wait may instead end with its result, read for it
%% by a readiness drain: `{recv, Result}' (also when it came as the wait timed
%% out: the bytes were read, so they are the call's result).
-spec await(nifsock:socket(), atom(), term(), deadline()) ->
          select | timeout | {recv, {ok, binary()} | {error, term()}} | term().
await(S, Op, H, Deadline) ->
    receive
        ?SELECT_MSG(H) -> select;
        ?RECV_MSG(H, Result) -> {recv, Result};
        ?MSG(S, select, H) -> select;
        ?MSG(S, abort, {H, Reason}) -> Reason
    after remaining(Deadline) ->
            _ = cancel(S, Op, H),
            receive
                ?RECV_MSG(H, Result) -> {recv, Result}
            after 0 -> timeout
            end
    end.

%% @doc Withdraws the caller's wait `H' for `Op' on `S' in the NIF and
%% flushes the select or abort message that may already be in the caller's
%% mailbox. `not_found' when there is no such wait.
-spec cancel(nifsock:socket(), atom(), term()) -> ok | not_found | {error, term()}.
cancel(S, Op, H) ->
    case nifsock_nif:cancel(S, Op, H) of
        ok ->
            flush_abort(S, H),
            ok;
        select_sent ->
            flush_select(S, H),
            flush_abort(S, H),
            ok;
        Other ->
            %% Closed meanwhile: a blocking call's waiter that was already sent
            %% its select gets no abort (lifecycle::close), so the select may
            %% be here instead.
            flush_select(S, H),
            flush_abort(S, H),
            Other
    end.

flush_select(S, H) ->
    receive
        ?SELECT_MSG(H) -> ok;
        ?MSG(S, select, H) -> ok
    after 0 -> ok
    end.

flush_abort(S, H) ->
    receive ?MSG(S, abort, {H, _}) -> ok after 0 -> ok end.
