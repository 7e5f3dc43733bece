%% @private
%% @doc Withdrawing a wait: cancels it in the NIF and flushes the select or
%% abort message that may already be in the caller's mailbox. Shared by the
%% blocking loops of `nifsock' and `nifsock_tcp' and by `nifsock:cancel/2'.
-module(nifsock_wait).

-export([cancel/3]).

-define(MSG(S, Kind, Info), {'$nifsock', S, Kind, Info}).

%% @doc Cancels the caller's wait `H' for `Op' (recv, accept, send, connect,
%% sendfile) on `S'.
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
    receive ?MSG(S, select, H) -> ok after 0 -> ok end.

flush_abort(S, H) ->
    receive ?MSG(S, abort, {H, _}) -> ok after 0 -> ok end.
