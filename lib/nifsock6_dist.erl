%% @doc The Erlang distribution over nifsock on IPv6: `erl -proto_dist nifsock6'.
%% `nifsock_dist' with address family inet6 (as `inet6_tcp_dist' is to
%% `inet_tcp_dist').
-module(nifsock6_dist).

-export([listen/1, listen/2, accept/1, accept_connection/5, setup/5, close/1,
         select/1, address/0, is_node_name/1, setopts/2, getopts/2]).

-include_lib("kernel/include/net_address.hrl").

%% @doc See `nifsock_dist:select/1'.
-spec select(node()) -> boolean().
select(Node) -> nifsock_dist:gen_select(inet6, Node).

%% @doc See `nifsock_dist:address/0'.
-spec address() -> #net_address{}.
address() -> nifsock_dist:gen_address(inet6).

%% @doc See `nifsock_dist:listen/1'.
-spec listen(atom()) ->
          {ok, {nifsock_tcp:socket(), #net_address{}, pos_integer()}} | {error, term()}.
listen(Name) ->
    {ok, Host} = inet:gethostname(),
    listen(Name, Host).

%% @doc See `nifsock_dist:listen/2'.
-spec listen(atom(), string()) ->
          {ok, {nifsock_tcp:socket(), #net_address{}, pos_integer()}} | {error, term()}.
listen(Name, Host) -> nifsock_dist:gen_listen(inet6, Name, Host).

%% @doc See `nifsock_dist:accept/1'.
-spec accept(nifsock_tcp:socket()) -> pid().
accept(L) -> nifsock_dist:gen_accept(inet6, L).

%% @doc See `nifsock_dist:accept_connection/5'.
-spec accept_connection(pid(), nifsock_tcp:socket(), node(), [node()], non_neg_integer()) -> pid().
accept_connection(AcceptPid, S, MyNode, Allowed, SetupTime) ->
    nifsock_dist:gen_accept_connection(inet6, AcceptPid, S, MyNode, Allowed, SetupTime).

%% @doc See `nifsock_dist:setup/5'.
-spec setup(node(), normal | hidden, node(), shortnames | longnames, non_neg_integer()) -> pid().
setup(Node, Type, MyNode, LongOrShortNames, SetupTime) ->
    nifsock_dist:gen_setup(inet6, Node, Type, MyNode, LongOrShortNames, SetupTime).

%% @doc See `nifsock_dist:close/1'.
-spec close(nifsock_tcp:socket()) -> ok.
close(L) -> nifsock_dist:close(L).

%% @doc See `nifsock_dist:is_node_name/1'.
-spec is_node_name(term()) -> boolean().
is_node_name(Node) -> nifsock_dist:is_node_name(Node).

%% @doc See `nifsock_dist:setopts/2'.
-spec setopts(nifsock_tcp:socket(), [nifsock_tcp:option()]) -> ok | {error, term()}.
setopts(S, Opts) -> nifsock_dist:setopts(S, Opts).

%% @doc See `nifsock_dist:getopts/2'.
-spec getopts(nifsock_tcp:socket(), [atom()]) -> {ok, [{atom(), term()}]} | {error, term()}.
getopts(S, Opts) -> nifsock_dist:getopts(S, Opts).
