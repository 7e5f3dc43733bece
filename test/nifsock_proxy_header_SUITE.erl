%%% nifsock_proxy_header: the pure PROXY protocol parser, without sockets.
%%% The socket side (peek, consume, timeouts) is in nifsock_ranch_SUITE.
-module(nifsock_proxy_header_SUITE).

-include_lib("common_test/include/ct.hrl").

-export([all/0]).
-export([proxy_crc32c_check_value/1,
         proxy_length_v1/1,
         proxy_length_v2/1,
         proxy_length_prefixes_wait/1,
         proxy_length_rejects_other_bytes/1,
         proxy_parse_v1/1,
         proxy_parse_v1_errors/1,
         proxy_parse_v2_addresses/1,
         proxy_parse_v2_tlvs/1,
         proxy_parse_v2_crc/1,
         proxy_parse_v2_errors/1]).

-import(nifsock_test_lib, [proxy_tlv/2, proxy_v2/2]).

-define(SIG, "\r\n\r\n\0\r\nQUIT\n").

all() ->
    [proxy_crc32c_check_value, proxy_length_v1, proxy_length_v2, proxy_length_prefixes_wait,
     proxy_length_rejects_other_bytes, proxy_parse_v1, proxy_parse_v1_errors,
     proxy_parse_v2_addresses, proxy_parse_v2_tlvs, proxy_parse_v2_crc, proxy_parse_v2_errors].

%% crc32c/1 gives CRC-32C's published check value for "123456789".
proxy_crc32c_check_value(_Config) ->
    16#E3069283 = nifsock_proxy_header:crc32c(<<"123456789">>),
    0 = nifsock_proxy_header:crc32c(<<>>).

%% A v1 header's length runs to its CRLF, whatever follows it.
proxy_length_v1(_Config) ->
    Line = <<"PROXY TCP4 10.0.0.1 10.0.0.2 1000 2000\r\n">>,
    Len = byte_size(Line),
    {ok, Len} = nifsock_proxy_header:header_length(Line),
    {ok, Len} = nifsock_proxy_header:header_length(<<Line/binary, "GET / HTTP/1.1\r\n">>),
    more = nifsock_proxy_header:header_length(<<"PROXY TCP4 10.0.0.1">>),
    {error, _} = nifsock_proxy_header:header_length(
                   <<"PROXY ", (binary:copy(<<"1">>, 120))/binary>>).

%% A v2 header's length is 16 plus its length field, known before the body is there.
proxy_length_v2(_Config) ->
    {ok, 28} = nifsock_proxy_header:header_length(<<?SIG, 16#21, 16#11, 12:16>>),
    {ok, 16} = nifsock_proxy_header:header_length(<<?SIG, 16#20, 0, 0:16, "rest">>),
    more = nifsock_proxy_header:header_length(<<?SIG, 16#21>>).

%% Every proper prefix of either signature asks for more bytes.
proxy_length_prefixes_wait(_Config) ->
    [more = nifsock_proxy_header:header_length(binary:part(Sig, 0, N))
     || Sig <- [<<?SIG>>, <<"PROXY ">>], N <- lists:seq(1, byte_size(Sig) - 1)],
    ok.

%% Bytes that cannot start a PROXY header are rejected at once.
proxy_length_rejects_other_bytes(_Config) ->
    [{error, _} = nifsock_proxy_header:header_length(B)
     || B <- [<<>>, <<"GET / HTTP/1.1\r\n">>, <<"PROXX ">>, <<"\r\n\r\n\0\r\nQUIX\n">>]],
    ok.

%% v1: TCP4, TCP6 and UNKNOWN headers give Ranch's proxy_info maps.
proxy_parse_v1(_Config) ->
    {ok, #{version := 1, command := proxy, transport_family := ipv4,
           transport_protocol := stream, src_address := {10, 0, 0, 1}, src_port := 1000,
           dest_address := {10, 0, 0, 2}, dest_port := 2000}} =
        nifsock_proxy_header:parse(<<"PROXY TCP4 10.0.0.1 10.0.0.2 1000 2000\r\n">>),
    {ok, #{transport_family := ipv6, src_address := {16#2001, 16#db8, 0, 0, 0, 0, 0, 1},
           dest_address := {0, 0, 0, 0, 0, 0, 0, 1}, src_port := 65535, dest_port := 1}} =
        nifsock_proxy_header:parse(<<"PROXY TCP6 2001:db8::1 ::1 65535 1\r\n">>),
    {ok, #{version := 1, transport_family := undefined, transport_protocol := undefined}} =
        nifsock_proxy_header:parse(<<"PROXY UNKNOWN whatever follows\r\n">>).

%% v1: bad addresses, ports, protocols and field counts are errors, never crashes.
proxy_parse_v1_errors(_Config) ->
    Bad = [<<"PROXY TCP4 10.0.0.256 10.0.0.2 1000 2000\r\n">>,
           <<"PROXY TCP4 ::1 10.0.0.2 1000 2000\r\n">>,
           <<"PROXY TCP6 10.0.0.1 ::1 1000 2000\r\n">>,
           <<"PROXY TCP4 10.0.0.1 10.0.0.2 0 2000\r\n">>,
           <<"PROXY TCP4 10.0.0.1 10.0.0.2 1000 65536\r\n">>,
           <<"PROXY TCP4 10.0.0.1 10.0.0.2 1000 x\r\n">>,
           <<"PROXY TCP4 10.0.0.1 10.0.0.2 1000\r\n">>,
           <<"PROXY UDP4 10.0.0.1 10.0.0.2 1000 2000\r\n">>],
    [{error, _} = nifsock_proxy_header:parse(B) || B <- Bad],
    ok.

%% v2: LOCAL, IPv4, IPv6, UNIX and unspecified families.
proxy_parse_v2_addresses(_Config) ->
    {ok, #{version := 2, command := local} = Local} =
        nifsock_proxy_header:parse(<<?SIG, 16#20, 0, 0:16>>),
    false = maps:is_key(transport_family, Local),
    {ok, #{command := proxy, transport_family := ipv4, transport_protocol := stream,
           src_address := {1, 2, 3, 4}, dest_address := {5, 6, 7, 8},
           src_port := 80, dest_port := 443}} =
        nifsock_proxy_header:parse(proxy_v2(16#11, <<1, 2, 3, 4, 5, 6, 7, 8, 80:16, 443:16>>)),
    {ok, #{transport_family := ipv6, transport_protocol := dgram,
           src_address := {1, 2, 3, 4, 5, 6, 7, 8}, dest_port := 9}} =
        nifsock_proxy_header:parse(proxy_v2(16#22, <<1:16, 2:16, 3:16, 4:16, 5:16, 6:16, 7:16,
                                                      8:16, 0:128, 7:16, 9:16>>)),
    {ok, #{transport_family := unix, src_address := <<"/tmp/a">>,
           dest_address := <<"/tmp/b">>}} =
        nifsock_proxy_header:parse(proxy_v2(16#31, <<(pad(<<"/tmp/a">>))/binary,
                                                      (pad(<<"/tmp/b">>))/binary>>)),
    {ok, #{transport_family := undefined, transport_protocol := undefined}} =
        nifsock_proxy_header:parse(proxy_v2(16#00, <<"ignored">>)).

%% v2 TLVs: ALPN, authority, SSL with sub-TLVs, netns, noop, and unknown ones kept raw.
proxy_parse_v2_tlvs(_Config) ->
    SSL = <<(1 bor 2), 0:32, (proxy_tlv(16#21, <<"TLSv1.3">>))/binary,
            (proxy_tlv(16#22, <<"cn">>))/binary>>,
    TLVs = <<(proxy_tlv(16#01, <<"h2">>))/binary, (proxy_tlv(16#02, <<"example.com">>))/binary,
             (proxy_tlv(16#04, <<0, 0>>))/binary, (proxy_tlv(16#20, SSL))/binary,
             (proxy_tlv(16#30, <<"ns">>))/binary, (proxy_tlv(16#E0, <<"x">>))/binary>>,
    {ok, #{alpn := <<"h2">>, authority := <<"example.com">>, netns := <<"ns">>,
           raw_tlvs := [{16#E0, <<"x">>}],
           ssl := #{client := [ssl, cert_conn], verified := true, version := <<"TLSv1.3">>,
                    cn := <<"cn">>}}} =
        nifsock_proxy_header:parse(proxy_v2(16#11, <<1, 2, 3, 4, 5, 6, 7, 8, 1:16, 2:16,
                                                      TLVs/binary>>)),
    {error, _} = nifsock_proxy_header:parse(
                   proxy_v2(16#11, <<1, 2, 3, 4, 5, 6, 7, 8, 1:16, 2:16, 16#01, 9:16, "h2">>)).

%% v2 CRC32C TLV: the checksum over the header with the field zeroed is
%% accepted; any other value is rejected.
proxy_parse_v2_crc(_Config) ->
    Addr = <<1, 2, 3, 4, 5, 6, 7, 8, 1:16, 2:16>>,
    Zeroed = proxy_v2(16#11, <<Addr/binary, 16#03, 4:16, 0:32>>),
    CRC = nifsock_proxy_header:crc32c(Zeroed),
    Good = proxy_v2(16#11, <<Addr/binary, 16#03, 4:16, CRC:32>>),
    {ok, #{src_port := 1}} = nifsock_proxy_header:parse(Good),
    {error, _} = nifsock_proxy_header:parse(proxy_v2(16#11, <<Addr/binary, 16#03, 4:16,
                                                              (CRC bxor 1):32>>)),
    {error, _} = nifsock_proxy_header:parse(proxy_v2(16#11, <<Addr/binary, 16#03, 3:16, 0:24>>)).

%% v2: bad version, command, family, protocol and short bodies are errors.
proxy_parse_v2_errors(_Config) ->
    [{error, _} = nifsock_proxy_header:parse(H)
     || H <- [<<?SIG, 16#11, 16#11, 12:16, 0:96>>,      % version 1
              <<?SIG, 16#22, 16#11, 12:16, 0:96>>,      % command 2
              <<?SIG, 16#21, 16#41, 12:16, 0:96>>,      % family 4
              <<?SIG, 16#21, 16#13, 12:16, 0:96>>,      % protocol 3
              <<?SIG, 16#21, 16#11, 4:16, 0:32>>,       % IPv4 body too short
              <<?SIG, 16#21, 16#21, 12:16, 0:96>>,      % IPv6 body too short
              <<?SIG, 16#21, 16#31, 216:16, 0:1728>>]], % empty UNIX paths
    ok.

pad(Path) ->
    <<Path/binary, 0:((108 - byte_size(Path)) * 8)>>.
