%% @doc The PROXY protocol (versions 1 and 2, haproxy's PROXY protocol
%% spec, "PP" sections below) header parser behind
%% `nifsock_ranch:recv_proxy_header/2'. Pure: it reads bytes, no socket.
%% It returns Ranch's `ranch_proxy_header:proxy_info()' maps and error
%% reasons, so code written for Ranch sees the same values.
-module(nifsock_proxy_header).

-export([header_length/1, parse/1, crc32c/1]).

-export_type([proxy_info/0]).

-type proxy_info() :: #{version := 1 | 2,
                        command := local | proxy,
                        transport_family => undefined | ipv4 | ipv6 | unix,
                        transport_protocol => undefined | stream | dgram,
                        src_address => inet:ip_address() | binary(),
                        src_port => inet:port_number(),
                        dest_address => inet:ip_address() | binary(),
                        dest_port => inet:port_number(),
                        alpn => binary(),
                        authority => binary(),
                        ssl => #{client := [ssl | cert_conn | cert_sess],
                                 verified := boolean(),
                                 version => binary(),
                                 cipher => binary(),
                                 sig_alg => binary(),
                                 key_alg => binary(),
                                 cn => binary()},
                        netns => binary(),
                        raw_tlvs => [{0..255, binary()}]}.

%% Longest v1 header (PP 2.1): 107 bytes including the CRLF.
-define(V1_MAX, 107).
-define(V2_SIG, "\r\n\r\n\0\r\nQUIT\n").

%% @doc How long the header at the start of `Data' is: `{ok, Len}' (`Len'
%% may exceed what is there for v2), `more' while too little is there to
%% tell, or `{error, Reason}' when `Data' cannot start a PROXY header.
-spec header_length(binary()) -> {ok, pos_integer()} | more | {error, atom()}.
header_length(<<?V2_SIG, _VerCmd, _FamProto, Len:16, _/binary>>) ->
    {ok, 16 + Len};
header_length(<<?V2_SIG, _/binary>>) ->
    more;
header_length(<<"PROXY ", _/binary>> = Data) ->
    case binary:match(Data, <<"\r\n">>, [{scope, {0, min(byte_size(Data), ?V1_MAX)}}]) of
        {Pos, 2} ->
            {ok, Pos + 2};
        nomatch when byte_size(Data) >= ?V1_MAX ->
            {error, 'Malformed or incomplete PROXY protocol header line. (PP 2.1)'};
        nomatch ->
            more
    end;
header_length(Data) ->
    Size = byte_size(Data),
    case is_prefix(Data, <<?V2_SIG>>) orelse is_prefix(Data, <<"PROXY ">>) of
        true when Size > 0 -> more;
        _ -> {error, 'The PROXY protocol header signature was not recognized. (PP 2.1, PP 2.2)'}
    end.

is_prefix(Data, Full) ->
    byte_size(Data) < byte_size(Full) andalso binary:part(Full, 0, byte_size(Data)) =:= Data.

%% @doc Parses one complete header: exactly its bytes, as measured by
%% {@link header_length/1}.
-spec parse(binary()) -> {ok, proxy_info()} | {error, atom()}.
parse(<<"PROXY ", Line/binary>>) ->
    Size = byte_size(Line) - 2,
    <<Fields:Size/binary, "\r\n">> = Line,
    parse_v1(binary:split(Fields, <<" ">>, [global]));
parse(<<?V2_SIG, _/binary>> = Header) ->
    parse_v2(Header).

%% Version 1: "PROXY TCP4|TCP6 Src Dst SrcPort DstPort" or "PROXY UNKNOWN ...".
parse_v1([<<"UNKNOWN">> | _]) ->
    {ok, #{version => 1, command => proxy,
           transport_family => undefined, transport_protocol => undefined}};
parse_v1([Proto, Src, Dst, SrcPort, DstPort]) when Proto =:= <<"TCP4">>; Proto =:= <<"TCP6">> ->
    Family = case Proto of <<"TCP4">> -> ipv4; <<"TCP6">> -> ipv6 end,
    case {v1_address(Family, Src), v1_address(Family, Dst)} of
        {{ok, SrcAddr}, {ok, DstAddr}} ->
            case {v1_port(SrcPort), v1_port(DstPort)} of
                {{ok, SP}, {ok, DP}} ->
                    {ok, #{version => 1, command => proxy,
                           transport_family => Family, transport_protocol => stream,
                           src_address => SrcAddr, src_port => SP,
                           dest_address => DstAddr, dest_port => DP}};
                _ ->
                    {error, 'Failed to parse a port number in the PROXY protocol header line. (PP 2.1)'}
            end;
        _ when Family =:= ipv4 ->
            {error, 'Failed to parse an IPv4 address in the PROXY protocol header line. (PP 2.1)'};
        _ ->
            {error, 'Failed to parse an IPv6 address in the PROXY protocol header line. (PP 2.1)'}
    end;
parse_v1([Proto | _]) when Proto =:= <<"TCP4">>; Proto =:= <<"TCP6">> ->
    {error, 'Malformed or incomplete PROXY protocol header line. (PP 2.1)'};
parse_v1(_) ->
    {error, 'The INET protocol and family string was not recognized. (PP 2.1)'}.

v1_address(ipv4, Bin) -> inet:parse_ipv4strict_address(binary_to_list(Bin));
v1_address(ipv6, Bin) -> inet:parse_ipv6strict_address(binary_to_list(Bin)).

v1_port(Bin) when byte_size(Bin) >= 1, byte_size(Bin) =< 5 ->
    try binary_to_integer(Bin) of
        P when P > 0, P =< 65535 -> {ok, P};
        _ -> error
    catch error:badarg -> error
    end;
v1_port(_) ->
    error.

%% Version 2: signature, version/command, family/protocol, length, addresses, TLVs.
parse_v2(<<?V2_SIG, 2:4, 0:4, _FamProto, _Len:16, _/binary>>) ->
    {ok, #{version => 2, command => local}};
parse_v2(<<?V2_SIG, 2:4, 1:4, Fam:4, Proto:4, Len:16, Body:Len/binary>> = Header)
  when Fam =< 3, Proto =< 2 ->
    Family = element(Fam + 1, {undefined, ipv4, ipv6, unix}),
    Protocol = element(Proto + 1, {undefined, stream, dgram}),
    Base = #{version => 2, command => proxy},
    case {Family, Protocol, Body} of
        {_, _, _} when Family =:= undefined; Protocol =:= undefined ->
            {ok, Base#{transport_family => undefined, transport_protocol => undefined}};
        {ipv4, _, <<S1, S2, S3, S4, D1, D2, D3, D4, SP:16, DP:16, TLVs/binary>>} ->
            tlvs(TLVs, Header, Base#{transport_family => ipv4, transport_protocol => Protocol,
                                     src_address => {S1, S2, S3, S4}, src_port => SP,
                                     dest_address => {D1, D2, D3, D4}, dest_port => DP});
        {ipv6, _, <<S:16/binary, D:16/binary, SP:16, DP:16, TLVs/binary>>} ->
            tlvs(TLVs, Header, Base#{transport_family => ipv6, transport_protocol => Protocol,
                                     src_address => ipv6_tuple(S), src_port => SP,
                                     dest_address => ipv6_tuple(D), dest_port => DP});
        {unix, _, <<S:108/binary, D:108/binary, TLVs/binary>>} ->
            case {unix_path(S), unix_path(D)} of
                {{ok, SrcPath}, {ok, DstPath}} ->
                    tlvs(TLVs, Header, Base#{transport_family => unix,
                                             transport_protocol => Protocol,
                                             src_address => SrcPath, dest_address => DstPath});
                _ ->
                    {error, 'Invalid UNIX address in PROXY protocol binary header. (PP 2.2)'}
            end;
        _ ->
            {error, 'Invalid length in the PROXY protocol binary header. (PP 2.2)'}
    end;
parse_v2(<<?V2_SIG, Version:4, _/bits>>) when Version =/= 2 ->
    {error, 'Invalid version in the PROXY protocol binary header. (PP 2.2)'};
parse_v2(<<?V2_SIG, _:4, Command:4, _/bits>>) when Command > 1 ->
    {error, 'Invalid command in the PROXY protocol binary header. (PP 2.2)'};
parse_v2(<<?V2_SIG, _:8, Fam:4, _/bits>>) when Fam > 3 ->
    {error, 'Invalid address family in the PROXY protocol binary header. (PP 2.2)'};
parse_v2(<<?V2_SIG, _:12, Proto:4, _/bits>>) when Proto > 2 ->
    {error, 'Invalid transport protocol in the PROXY protocol binary header. (PP 2.2)'};
parse_v2(_) ->
    {error, 'Missing data in the PROXY protocol binary header. (PP 2.2)'}.

ipv6_tuple(<<A:16, B:16, C:16, D:16, E:16, F:16, G:16, H:16>>) -> {A, B, C, D, E, F, G, H}.

unix_path(Padded) ->
    case binary:split(Padded, <<0>>) of
        [Path | _] when byte_size(Path) > 0 -> {ok, Path};
        _ -> error
    end.

%% TLVs (PP 2.2.7 ff.): ALPN, authority, CRC32C (verified), noop, SSL, netns;
%% others are kept in raw_tlvs.
tlvs(<<>>, _Header, Info) ->
    {ok, Info};
tlvs(<<Type, Len:16, Value:Len/binary, Rest/binary>>, Header, Info) ->
    case tlv(Type, Value, Header, Info) of
        {ok, Info1} -> tlvs(Rest, Header, Info1);
        {error, _} = Error -> Error
    end;
tlvs(_, _Header, _Info) ->
    {error, 'Invalid TLV length in the PROXY protocol binary header. (PP 2.2)'}.

tlv(16#01, ALPN, _, Info) -> {ok, Info#{alpn => ALPN}};
tlv(16#02, Authority, _, Info) -> {ok, Info#{authority => Authority}};
tlv(16#03, <<CRC:32>>, Header, Info) ->
    %% The checksum covers the whole header with the checksum field zeroed.
    case crc32c(zero_crc_field(Header)) of
        CRC -> {ok, Info};
        _ -> {error, 'Failed CRC32C verification in PROXY protocol binary header. (PP 2.2)'}
    end;
tlv(16#03, _, _, _) ->
    {error, 'Invalid TLV length in the PROXY protocol binary header. (PP 2.2)'};
tlv(16#04, _Noop, _, Info) -> {ok, Info};
tlv(16#20, <<Client, Verify:32, Subs/binary>>, _, Info) ->
    case ssl_subs(Subs, #{client => ssl_client(Client), verified => Verify =:= 0}) of
        {ok, SSL} -> {ok, Info#{ssl => SSL}};
        {error, _} = Error -> Error
    end;
tlv(16#20, _, _, _) ->
    {error, 'Invalid TLV length in the PROXY protocol binary header. (PP 2.2)'};
tlv(16#30, NetNS, _, Info) -> {ok, Info#{netns => NetNS}};
tlv(Type, Value, _, Info) ->
    {ok, Info#{raw_tlvs => [{Type, Value} | maps:get(raw_tlvs, Info, [])]}}.

ssl_client(Client) ->
    [Flag || {Bit, Flag} <- [{1, ssl}, {2, cert_conn}, {4, cert_sess}], Client band Bit =/= 0].

ssl_subs(<<>>, SSL) ->
    {ok, SSL};
ssl_subs(<<Type, Len:16, Value:Len/binary, Rest/binary>>, SSL) ->
    case Type of
        16#21 -> ssl_subs(Rest, SSL#{version => Value});
        16#22 -> ssl_subs(Rest, SSL#{cn => Value});
        16#23 -> ssl_subs(Rest, SSL#{cipher => Value});
        16#24 -> ssl_subs(Rest, SSL#{sig_alg => Value});
        16#25 -> ssl_subs(Rest, SSL#{key_alg => Value});
        _ -> {error, 'Invalid TLV subtype for PP2_TYPE_SSL in PROXY protocol binary header. (PP 2.2)'}
    end;
ssl_subs(_, _) ->
    {error, 'Invalid TLV length in the PROXY protocol binary header. (PP 2.2)'}.

%% The header with the value of its CRC32C TLV replaced by zeros.
zero_crc_field(<<Fixed:16/binary, TLVsAndAddr/binary>>) ->
    <<_:12/binary, _VerCmd, Fam:4, _:4, _:16>> = Fixed,
    AddrLen = case Fam of 1 -> 12; 2 -> 36; 3 -> 216; _ -> 0 end,
    <<Addr:AddrLen/binary, TLVs/binary>> = TLVsAndAddr,
    <<Fixed/binary, Addr/binary, (zero_crc_tlv(TLVs))/binary>>.

zero_crc_tlv(<<16#03, 4:16, _:32, Rest/binary>>) ->
    <<16#03, 4:16, 0:32, Rest/binary>>;
zero_crc_tlv(<<Type, Len:16, Value:Len/binary, Rest/binary>>) ->
    <<Type, Len:16, Value/binary, (zero_crc_tlv(Rest))/binary>>;
zero_crc_tlv(Rest) ->
    Rest.

%% @doc CRC-32C (Castagnoli, reflected polynomial 16#82F63B78), the checksum
%% of the v2 `PP2_TYPE_CRC32C' TLV (PP 2.2.5).
-spec crc32c(binary()) -> non_neg_integer().
crc32c(Bin) ->
    crc32c(Bin, 16#FFFFFFFF) bxor 16#FFFFFFFF.

crc32c(<<Byte, Rest/binary>>, CRC) ->
    crc32c(Rest, crc32c_byte(CRC bxor Byte, 8));
crc32c(<<>>, CRC) ->
    CRC.

crc32c_byte(CRC, 0) -> CRC;
crc32c_byte(CRC, N) when CRC band 1 =:= 1 -> crc32c_byte((CRC bsr 1) bxor 16#82F63B78, N - 1);
crc32c_byte(CRC, N) -> crc32c_byte(CRC bsr 1, N - 1).
