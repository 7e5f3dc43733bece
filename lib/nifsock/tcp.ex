defmodule Nifsock.TCP do
  @moduledoc """
  A `:gen_tcp`-shaped API over nifsock: `{ip, port}` addresses, inet-style
  options, active modes and packet framing, with `:gen_tcp`'s return shapes.

  Every function delegates to the Erlang module `:nifsock_tcp` with the same
  name, arity and arguments; see its documentation for the options it accepts
  (`t:option/0`).

  ## Quick start

      {:ok, l} = Nifsock.TCP.listen(0, [:binary, active: false, reuseaddr: true])
      {:ok, port} = Nifsock.TCP.port(l)

      {:ok, c} = Nifsock.TCP.connect({127, 0, 0, 1}, port, [:binary, active: false])
      {:ok, s} = Nifsock.TCP.accept(l)

      :ok = Nifsock.TCP.send(c, "ping")
      {:ok, "ping"} = Nifsock.TCP.recv(s, 4)
      :ok = Nifsock.TCP.close(c)

  ## Active mode

  With `active: true | :once | n` the owner receives `{:nifsock, socket, data}`,
  `{:nifsock_closed, socket}`, `{:nifsock_error, socket, reason}` and (after
  `n` packets) `{:nifsock_passive, socket}` — the `:gen_tcp` messages with
  `:nifsock` tags. With `tags: :gen_tcp` they carry `:gen_tcp`'s own tags
  (`{:tcp, socket, data}`, `{:tcp_closed, socket}`, `{:tcp_error, socket, reason}`,
  `{:tcp_passive, socket}`), for code that matches those literally (Thousand Island
  handlers); `tags: {data, closed, error, passive}` names any four atoms. With
  `packet: 1 | 2 | 4 | :line` each message is one packet.
  """

  @typedoc "A nifsock socket, shared with `Nifsock`."
  @type socket :: :nifsock_tcp.socket()
  @typedoc "An inet-style option, as `:nifsock_tcp` accepts them."
  @type option :: :nifsock_tcp.option()

  @doc "Listens on `port` (0: any free port), as `:gen_tcp.listen/2`. Default backlog 5."
  @spec listen(:inet.port_number(), [option()]) :: {:ok, socket()} | {:error, term()}
  defdelegate listen(port, options), to: :nifsock_tcp

  @doc "Accepts a connection, waiting as long as it takes, as `:gen_tcp.accept/1`."
  @spec accept(socket()) :: {:ok, socket()} | {:error, term()}
  defdelegate accept(listen_socket), to: :nifsock_tcp

  @doc "Accepts a connection within `timeout`; it inherits the listener's options."
  @spec accept(socket(), timeout()) :: {:ok, socket()} | {:error, term()}
  defdelegate accept(listen_socket, timeout), to: :nifsock_tcp

  @doc "Connects to a `:socket.sockaddr_in()` / `sockaddr_in6()` map, as `:gen_tcp.connect/2`."
  @spec connect(map(), [option()]) :: {:ok, socket()} | {:error, term()}
  defdelegate connect(sockaddr, options), to: :nifsock_tcp

  @doc """
  Connects to `address`:`port`, as `:gen_tcp.connect/3`; or to a sockaddr map
  within a timeout (`connect(sockaddr, options, timeout)`).
  """
  @spec connect(
          :inet.socket_address() | :inet.hostname() | map(),
          :inet.port_number() | [option()],
          [option()] | timeout()
        ) :: {:ok, socket()} | {:error, term()}
  defdelegate connect(address, port, options), to: :nifsock_tcp

  @doc "Connects to `address`:`port` within `timeout`, as `:gen_tcp.connect/4`."
  @spec connect(
          :inet.socket_address() | :inet.hostname(),
          :inet.port_number(),
          [option()],
          timeout()
        ) :: {:ok, socket()} | {:error, term()}
  defdelegate connect(address, port, options, timeout), to: :nifsock_tcp

  @doc "Sends iodata (framed when `packet` is set), as `:gen_tcp.send/2`."
  @spec send(socket(), iodata()) :: :ok | {:error, term()}
  defdelegate send(socket, packet), to: :nifsock_tcp

  @doc "Receives `length` bytes (0: what is there, or one packet) in passive mode, as `:gen_tcp.recv/2`."
  @spec recv(socket(), non_neg_integer()) :: {:ok, binary() | charlist()} | {:error, term()}
  defdelegate recv(socket, length), to: :nifsock_tcp

  @doc "Receives `length` bytes within `timeout`, as `:gen_tcp.recv/3`."
  @spec recv(socket(), non_neg_integer(), timeout()) ::
          {:ok, binary() | charlist()} | {:error, term()}
  defdelegate recv(socket, length, timeout), to: :nifsock_tcp

  @doc "Closes the socket, as `:gen_tcp.close/1`."
  @spec close(socket()) :: :ok
  defdelegate close(socket), to: :nifsock_tcp

  @doc "Shuts down reading, writing or both, as `:gen_tcp.shutdown/2`."
  @spec shutdown(socket(), :read | :write | :read_write) :: :ok | {:error, term()}
  defdelegate shutdown(socket, how), to: :nifsock_tcp

  @doc "Sets options (`active`, `packet`, `mode`, socket options...), as `:inet.setopts/2`."
  @spec setopts(socket(), [option()]) :: :ok | {:error, term()}
  defdelegate setopts(socket, options), to: :nifsock_tcp

  @doc "Reads options by name, as `:inet.getopts/2`."
  @spec getopts(socket(), [atom()]) :: {:ok, [{atom(), term()}]} | {:error, term()}
  defdelegate getopts(socket, names), to: :nifsock_tcp

  @doc "Makes `pid` the owner (and receiver of active messages), as `:gen_tcp.controlling_process/2`."
  @spec controlling_process(socket(), pid()) :: :ok | {:error, term()}
  defdelegate controlling_process(socket, pid), to: :nifsock_tcp

  @doc "The peer's `{ip, port}` (`{:local, path}` for `:local` sockets), as `:inet.peername/1`."
  @spec peername(socket()) ::
          {:ok, {:inet.ip_address(), :inet.port_number()} | {:local, binary()}} | {:error, term()}
  defdelegate peername(socket), to: :nifsock_tcp

  @doc "The local `{ip, port}` (`{:local, path}` for `:local` sockets), as `:inet.sockname/1`."
  @spec sockname(socket()) ::
          {:ok, {:inet.ip_address(), :inet.port_number()} | {:local, binary()}} | {:error, term()}
  defdelegate sockname(socket), to: :nifsock_tcp

  @doc "The local port, as `:inet.port/1`."
  @spec port(socket()) :: {:ok, :inet.port_number()} | {:error, term()}
  defdelegate port(socket), to: :nifsock_tcp

  @doc """
  The socket's statistics under inet's names, shaped as `:inet.getstat/1`
  (`recv_oct`, `recv_cnt`, `send_oct`, `send_pend`, ...). Byte counts are
  gen_tcp's; `recv_cnt`/`send_cnt` count system calls (see `:nifsock_tcp.getstat/1`).
  """
  @spec getstat(socket()) :: {:ok, [{atom(), non_neg_integer()}]} | {:error, :einval}
  defdelegate getstat(socket), to: :nifsock_tcp

  @doc "The named statistics, as `:inet.getstat/2`."
  @spec getstat(socket(), [atom()]) :: {:ok, [{atom(), non_neg_integer()}]} | {:error, :einval}
  defdelegate getstat(socket, names), to: :nifsock_tcp

  # For transports that write around send/2 (sendfile): what timed-out sends
  # left queued goes out first (see :nifsock_tcp.flush_queued/2).
  @doc false
  @spec flush_queued(socket(), timeout()) :: :ok | {:error, term()}
  defdelegate flush_queued(socket, timeout), to: :nifsock_tcp
end
