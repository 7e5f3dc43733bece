defmodule Nifsock.TCP do
  @moduledoc """
  A `:gen_tcp`-shaped API over nifsock: ports, options lists, active modes and
  packet framing, with the same return shapes and error atoms as `:gen_tcp`.

  Every function delegates to the Erlang module `:nifsock_tcp` with the same
  name, arity and arguments; see its documentation for the options it
  accepts. (`:nifsock_tcp` is built alongside `:nifsock`; if it is not part of
  the build, calls here raise `UndefinedFunctionError`.)

  ## Quick start

      {:ok, l} = Nifsock.TCP.listen(0, [:binary, active: false, reuseaddr: true])
      {:ok, {_ip, port}} = Nifsock.TCP.sockname(l)

      {:ok, c} = Nifsock.TCP.connect({127, 0, 0, 1}, port, [:binary, active: false])
      {:ok, s} = Nifsock.TCP.accept(l)

      :ok = Nifsock.TCP.send(c, "ping")
      {:ok, "ping"} = Nifsock.TCP.recv(s, 4)
      :ok = Nifsock.TCP.close(c)
  """

  # :nifsock_tcp may be built after (or without) this module.
  @compile {:no_warn_undefined, :nifsock_tcp}

  @typedoc "A `:nifsock_tcp` socket; its shape is private to `:nifsock_tcp`."
  @type socket :: term()
  @typedoc "An error reason, as `:gen_tcp` returns them."
  @type reason :: :closed | :timeout | :inet.posix() | term()

  @doc "Opens a listening socket on `port` (0 picks a free one), as `:gen_tcp.listen/2`."
  @spec listen(:inet.port_number(), [:gen_tcp.listen_option() | term()]) ::
          {:ok, socket()} | {:error, reason()}
  defdelegate listen(port, options), to: :nifsock_tcp

  @doc "Accepts a connection, waiting as long as it takes, as `:gen_tcp.accept/1`."
  @spec accept(socket()) :: {:ok, socket()} | {:error, reason()}
  defdelegate accept(listen_socket), to: :nifsock_tcp

  @doc "Accepts a connection within `timeout`, as `:gen_tcp.accept/2`."
  @spec accept(socket(), timeout()) :: {:ok, socket()} | {:error, reason()}
  defdelegate accept(listen_socket, timeout), to: :nifsock_tcp

  @doc "Connects to `address`:`port`, as `:gen_tcp.connect/3`."
  @spec connect(
          :inet.socket_address() | :inet.hostname(),
          :inet.port_number(),
          [:gen_tcp.connect_option() | term()]
        ) :: {:ok, socket()} | {:error, reason()}
  defdelegate connect(address, port, options), to: :nifsock_tcp

  @doc "Connects to `address`:`port` within `timeout`, as `:gen_tcp.connect/4`."
  @spec connect(
          :inet.socket_address() | :inet.hostname(),
          :inet.port_number(),
          [:gen_tcp.connect_option() | term()],
          timeout()
        ) :: {:ok, socket()} | {:error, reason()}
  defdelegate connect(address, port, options, timeout), to: :nifsock_tcp

  @doc "Sends iodata, as `:gen_tcp.send/2`."
  @spec send(socket(), iodata()) :: :ok | {:error, reason()}
  defdelegate send(socket, packet), to: :nifsock_tcp

  @doc "Receives `length` bytes (0: what is there) in passive mode, as `:gen_tcp.recv/2`."
  @spec recv(socket(), non_neg_integer()) ::
          {:ok, binary() | charlist() | term()} | {:error, reason()}
  defdelegate recv(socket, length), to: :nifsock_tcp

  @doc "Receives `length` bytes within `timeout`, as `:gen_tcp.recv/3`."
  @spec recv(socket(), non_neg_integer(), timeout()) ::
          {:ok, binary() | charlist() | term()} | {:error, reason()}
  defdelegate recv(socket, length, timeout), to: :nifsock_tcp

  @doc "Closes the socket, as `:gen_tcp.close/1`."
  @spec close(socket()) :: :ok
  defdelegate close(socket), to: :nifsock_tcp

  @doc "Shuts down reading, writing or both, as `:gen_tcp.shutdown/2`."
  @spec shutdown(socket(), :read | :write | :read_write) :: :ok | {:error, reason()}
  defdelegate shutdown(socket, how), to: :nifsock_tcp

  @doc "Sets options (`active`, `packet`, `mode`, socket options…), as `:inet.setopts/2`."
  @spec setopts(socket(), [:inet.socket_setopt() | term()]) :: :ok | {:error, reason()}
  defdelegate setopts(socket, options), to: :nifsock_tcp

  @doc "Reads options, as `:inet.getopts/2`."
  @spec getopts(socket(), [:inet.socket_getopt() | term()]) ::
          {:ok, [:inet.socket_optval() | term()]} | {:error, reason()}
  defdelegate getopts(socket, options), to: :nifsock_tcp

  @doc "Makes `pid` the owner (and receiver of active-mode messages), as `:gen_tcp.controlling_process/2`."
  @spec controlling_process(socket(), pid()) :: :ok | {:error, reason()}
  defdelegate controlling_process(socket, pid), to: :nifsock_tcp

  @doc "The peer's address and port, as `:inet.peername/1`."
  @spec peername(socket()) ::
          {:ok, {:inet.ip_address(), :inet.port_number()} | term()} | {:error, reason()}
  defdelegate peername(socket), to: :nifsock_tcp

  @doc "The local address and port, as `:inet.sockname/1`."
  @spec sockname(socket()) ::
          {:ok, {:inet.ip_address(), :inet.port_number()} | term()} | {:error, reason()}
  defdelegate sockname(socket), to: :nifsock_tcp
end
