//! Atoms, grouped by purpose.

rustler::atoms! {
    // results
    ok, error, select, select_sent, not_found, more, linger, iovec,
    // errors
    closed, timeout, invalid, not_owner, badarg, undefined,
    // message tags
    nifsock_tag = "$nifsock", abort, select_info,
    // families, types, protocols
    inet, inet6, local, stream, tcp, default, ip, ipv6, unspec,
    // sockaddr keys and special addresses
    family, addr, port, flowinfo, scope_id, path, any, loopback, broadcast,
    // recv modes and ops
    wait, nowait, zero, yielded, yield_ = "yield", recv, send, accept, connect, msg_flag, owner, sendfile,
    // nifsock_tcp messages and options
    nifsock, nifsock_closed, nifsock_error, nifsock_passive, active, once,
    raw, line, infinity, packet, packet_size, mode, send_timeout, list, binary, exit_on_close,
    line_delimiter, header, high_watermark, low_watermark, high_msgq_watermark, low_msgq_watermark, delay_send,
    send_timeout_close, show_econnreset, deliver, term, send_pend, tags,
    // shutdown
    read, write, read_write,
    // option values and keys
    onoff, socket, otp, rcvbuf, fd, domain, controlling_process, meta, dup, r#true = "true", r#false = "false",
    // info keys
    ctype, normal, ctrl, r#type = "type", protocol, counters, num_readers, num_writers, num_acceptors,
    rstates, wstates, open, closing, listening, selected, close_may_block, pending,
    // readiness (pump source)
    readiness, batch, nifsock_readiness, alone, port_hold,
}
