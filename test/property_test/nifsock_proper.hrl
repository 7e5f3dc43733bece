%%% The PropEr macros nifsock's properties use, spelled out: Debian ships
%%% PropEr's proper.hrl only in erlang-proper-dev, which `scripts/setup' does
%%% not install; these expand exactly as PropEr's own definitions do.
-define(DELAY(X), fun() -> X end).
-define(FORALL(X, RawType, Prop), proper:forall(RawType, fun(X) -> Prop end)).
-define(LET(X, RawType, Gen), proper_types:bind(RawType, fun(X) -> Gen end, false)).
-define(SIZED(S, Gen), proper_types:sized(fun(S) -> Gen end)).
-define(LAZY(X), proper_types:lazy(?DELAY(X))).
-define(WHENFAIL(Action, Prop), proper:whenfail(?DELAY(Action), ?DELAY(Prop))).
-define(SUCHTHAT(X, RawType, Condition),
        proper_types:add_constraint(RawType, fun(X) -> Condition end, true)).

-import(proper, [aggregate/2, collect/2]).
-import(proper_types, [elements/1, frequency/1, oneof/1, choose/2, binary/0, binary/1,
                       list/1, integer/0, integer/2, atom/0, tuple/1, vector/2,
                       bitstring/0, float/0, non_neg_integer/0, resize/2, exactly/1]).
-import(proper_statem, [commands/1, run_commands/2, command_names/1]).
