%% recv(S, Len) for adapters whose messages carry whatever arrived: gather
%% Len bytes from recv(S, 0, Timeout) calls. Included after recv/3.
recv_exact(_S, 0, _Timeout, Acc) ->
    {ok, iolist_to_binary(lists:reverse(Acc))};
recv_exact(S, Len, Timeout, Acc) ->
    case recv(S, 0, Timeout) of
        {ok, D} when byte_size(D) =< Len -> recv_exact(S, Len - byte_size(D), Timeout, [D | Acc]);
        {ok, D} -> {error, {overread, byte_size(D) - Len}};
        E -> E
    end.
