defmodule Nifsock do
  @moduledoc """
  TCP sockets for the BEAM with the fewest system calls and scheduler hops:
  OTP's `:socket` API for stream sockets, over a Rust NIF.

  `Nifsock` is a thin Elixir façade over the Erlang module `:nifsock`: every
  function delegates to the function of the same name and arity, with the same
  arguments, return shapes and error atoms as OTP 25's `:socket`. Code written
  for `:socket` switches by renaming the module.

  ## Quick start

      {:ok, l} = Nifsock.open(:inet, :stream, :tcp)
      :ok = Nifsock.setopt(l, {:socket, :reuseaddr}, true)
      :ok = Nifsock.bind(l, %{family: :inet, addr: :loopback, port: 0})
      :ok = Nifsock.listen(l, 1024)
      {:ok, %{port: port}} = Nifsock.sockname(l)

      # elsewhere, a client
      {:ok, c} = Nifsock.open(:inet, :stream)
      :ok = Nifsock.connect(c, %{family: :inet, addr: {127, 0, 0, 1}, port: port})
      :ok = Nifsock.send(c, ["hello ", "world"])

      {:ok, s} = Nifsock.accept(l)
      {:ok, "hello world"} = Nifsock.recv(s, 11)
      :ok = Nifsock.close(s)

  ## Asynchronous calls

  Every call that can wait (`accept`, `connect`, `recv`, `send`) takes a
  timeout: `:infinity`, milliseconds, `:nowait` or a handle (a reference).
  With `:nowait` a call that would block returns
  `{:select, {:select_info, tag, handle}}`; the caller then waits for
  `{:"$nifsock", socket, :select, handle}` and calls again:

      {:select, {:select_info, :recv, handle}} = Nifsock.recv(s, 0, :nowait)

      receive do
        {:"$nifsock", ^s, :select, ^handle} -> Nifsock.recv(s, 0, :nowait)
        {:"$nifsock", ^s, :abort, {^handle, reason}} -> {:error, reason}
      end

  If the socket is closed meanwhile the waiter gets
  `{:"$nifsock", socket, :abort, {handle, :closed}}`. `cancel/2` withdraws a
  wait.

  ## Ownership

  The process that opens (or accepts) a socket owns it; when the owner exits
  the socket is closed. `controlling_process/2` hands it to another process.

  See also `Nifsock.TCP` for a `:gen_tcp`-shaped API.
  """

  @typedoc "A nifsock socket (opaque)."
  @type socket :: :nifsock.socket()
  @typedoc "`{:select_info, tag, handle}`, returned by calls made with `:nowait` or a handle."
  @type select_info :: :nifsock.select_info()
  @typedoc "The reference that identifies a wait in select and abort messages."
  @type select_handle :: :nifsock.select_handle()
  @typedoc "`:infinity`, milliseconds, `:nowait` or a select handle."
  @type timeout_spec :: :nifsock.timeout_spec()
  @typedoc "An option: `{level, name}` or raw `{level_int, opt_int}`."
  @type level_name :: :nifsock.level_name()
  @typedoc "A socket address, as `:socket.sockaddr()`."
  @type sockaddr :: :socket.sockaddr()
  @typedoc "A stream socket domain."
  @type domain :: :inet | :inet6 | :local
  @typedoc "An error reason: a POSIX errno atom, `:closed`, `:timeout`, `:not_owner` or `{:invalid, what}`."
  @type reason :: :inet.posix() | :closed | :timeout | :not_owner | {:invalid, term()}

  # ------------------------------------------------------------------
  # Creating sockets

  @doc """
  Adopts an open file descriptor, as `open(fd, %{})`.
  """
  @spec open(integer()) :: {:ok, socket()} | {:error, reason()}
  defdelegate open(fd), to: :nifsock

  @doc """
  Opens a stream socket: `open(domain, :stream)`; or adopts an open fd:
  `open(fd, %{dup: boolean()})` (`dup` defaults to `true`: nifsock then owns a
  duplicate and never closes the caller's fd).
  """
  @spec open(domain(), :stream) :: {:ok, socket()} | {:error, reason()}
  @spec open(integer(), map()) :: {:ok, socket()} | {:error, reason()}
  defdelegate open(domain_or_fd, type_or_opts), to: :nifsock

  @doc """
  `open(domain, :stream, protocol)` (`:tcp`, `:default` or an integer) or
  `open(domain, :stream, opts)`.
  """
  @spec open(domain(), :stream, :tcp | :default | integer() | map()) ::
          {:ok, socket()} | {:error, reason()}
  defdelegate open(domain, type, protocol_or_opts), to: :nifsock

  @doc """
  `open(domain, :stream, protocol, opts)`.
  """
  @spec open(domain(), :stream, :tcp | :default | integer(), map()) ::
          {:ok, socket()} | {:error, reason()}
  defdelegate open(domain, type, protocol, opts), to: :nifsock

  @doc """
  Binds to a sockaddr map (e.g. `%{family: :inet, addr: :loopback, port: 0}`),
  or to `:any` / `:loopback` with port 0.
  """
  @spec bind(socket(), sockaddr() | :any | :loopback | :broadcast) :: :ok | {:error, reason()}
  defdelegate bind(socket, addr), to: :nifsock

  @doc "Listens with the default backlog (5, as `:socket`)."
  @spec listen(socket()) :: :ok | {:error, reason()}
  defdelegate listen(socket), to: :nifsock

  @doc "Listens with `backlog`."
  @spec listen(socket(), integer()) :: :ok | {:error, reason()}
  defdelegate listen(socket, backlog), to: :nifsock

  @doc "Accepts a connection, waiting as long as it takes."
  @spec accept(socket()) :: {:ok, socket()} | {:error, reason()}
  defdelegate accept(listen_socket), to: :nifsock

  @doc """
  Accepts a connection (one `accept4` call). Several processes may wait on
  one listener: one is armed, the rest queue in order. See "Asynchronous
  calls" in the module doc for `:nowait` and handles.
  """
  @spec accept(socket(), timeout_spec()) ::
          {:ok, socket()} | {:select, select_info()} | {:error, reason()}
  defdelegate accept(listen_socket, timeout), to: :nifsock

  @doc "Finishes a `connect/3` that returned `{:select, _}`, after its select message."
  @spec connect(socket()) :: :ok | {:error, reason()}
  defdelegate connect(socket), to: :nifsock

  @doc "Connects to `addr`, waiting as long as it takes."
  @spec connect(socket(), sockaddr() | :any | :loopback) :: :ok | {:error, reason()}
  defdelegate connect(socket, addr), to: :nifsock

  @doc "Connects to `addr` with a timeout (see \"Asynchronous calls\")."
  @spec connect(socket(), sockaddr() | :any | :loopback, timeout_spec()) ::
          :ok | {:select, select_info()} | {:error, reason()}
  defdelegate connect(socket, addr, timeout), to: :nifsock

  # ------------------------------------------------------------------
  # Receiving

  @doc "Receives what is there, waiting for at least one byte."
  @spec recv(socket()) :: {:ok, binary()} | {:error, reason() | {reason(), binary()}}
  defdelegate recv(socket), to: :nifsock

  @doc "`recv(socket, length)` or `recv(socket, flags)`."
  @spec recv(socket(), non_neg_integer() | list()) ::
          {:ok, binary()} | {:error, reason() | {reason(), binary()}}
  defdelegate recv(socket, length_or_flags), to: :nifsock

  @doc """
  `recv(socket, flags, timeout)`, `recv(socket, length, flags)` or
  `recv(socket, length, timeout)`.
  """
  @spec recv(socket(), non_neg_integer() | list(), list() | timeout_spec()) ::
          {:ok, binary()}
          | {:select, select_info() | {select_info(), binary()}}
          | {:error, reason() | {reason(), binary()}}
  defdelegate recv(socket, length_or_flags, flags_or_timeout), to: :nifsock

  @doc """
  Receives exactly `length` bytes, or what is there when `length` is 0.

  With a timeout, a partial result is `{:error, {:timeout, data}}`; with
  `:nowait`, `{:select, {select_info, data}}`.
  """
  @spec recv(socket(), non_neg_integer(), list(), timeout_spec()) ::
          {:ok, binary()}
          | {:select, select_info() | {select_info(), binary()}}
          | {:error, reason() | {reason(), binary()}}
  defdelegate recv(socket, length, flags, timeout), to: :nifsock

  # ------------------------------------------------------------------
  # Sending

  @doc "Sends iodata with one `sendmsg` over its binaries (no flattening copy; one `send` for a single piece)."
  @spec send(socket(), iodata()) :: :ok | {:error, reason() | {reason(), iodata()}}
  defdelegate send(socket, data), to: :nifsock

  @doc """
  `send(socket, data, flags)`, `send(socket, data, continuation)` or
  `send(socket, data, timeout)`.
  """
  @spec send(socket(), iodata(), list() | select_info() | timeout_spec()) ::
          :ok
          | {:ok, iodata()}
          | {:select, select_info() | {select_info(), iodata()}}
          | {:error, reason() | {reason(), iodata()}}
  defdelegate send(socket, data, flags_or_timeout), to: :nifsock

  @doc """
  Sends iodata. A partial send returns the rest as iodata:
  `{:select, {select_info, rest}}` with `:nowait`, `{:error, {:timeout, rest}}`
  when the time runs out.
  """
  @spec send(socket(), iodata(), list() | select_info(), timeout_spec()) ::
          :ok
          | {:ok, iodata()}
          | {:select, select_info() | {select_info(), iodata()}}
          | {:error, reason() | {reason(), iodata()}}
  defdelegate send(socket, data, flags_or_continuation, timeout), to: :nifsock

  @doc "Sends a whole raw file, as `sendfile(socket, file, 0, 0, :infinity)`."
  @spec sendfile(socket(), :file.fd()) ::
          {:ok, non_neg_integer()} | {:error, reason() | {reason(), non_neg_integer()}}
  defdelegate sendfile(socket, file), to: :nifsock

  @doc "Sends a whole raw file with a timeout, as `sendfile(socket, file, 0, 0, timeout)`."
  @spec sendfile(socket(), :file.fd(), timeout_spec()) ::
          {:ok, non_neg_integer()}
          | {:select, {select_info(), non_neg_integer()}}
          | {:error, reason() | {reason(), non_neg_integer()}}
  defdelegate sendfile(socket, file, timeout), to: :nifsock

  @doc "Sends `count` bytes from `offset`, as `sendfile(socket, file, offset, count, :infinity)`."
  @spec sendfile(socket(), :file.fd(), non_neg_integer(), non_neg_integer()) ::
          {:ok, non_neg_integer()} | {:error, reason() | {reason(), non_neg_integer()}}
  defdelegate sendfile(socket, file, offset, count), to: :nifsock

  @doc """
  Sends `count` bytes (0: up to the end of the file) of a raw file
  (`File.open(path, [:raw, :read])`) from `offset` with `sendfile(2)`.
  Returns the bytes sent; a partial send is `{:error, {reason, sent}}`, or
  `{:select, {select_info, sent}}` with `:nowait`.
  """
  @spec sendfile(socket(), :file.fd(), non_neg_integer(), non_neg_integer(), timeout_spec()) ::
          {:ok, non_neg_integer()}
          | {:select, {select_info(), non_neg_integer()}}
          | {:error, reason() | {reason(), non_neg_integer()}}
  defdelegate sendfile(socket, file, offset, count, timeout), to: :nifsock

  # ------------------------------------------------------------------
  # Ending

  @doc """
  Closes the socket. Waiters get `{:"$nifsock", socket, :abort, {handle, :closed}}`.
  """
  @spec close(socket()) :: :ok | {:error, reason()}
  defdelegate close(socket), to: :nifsock

  @doc "Shuts down reading, writing or both."
  @spec shutdown(socket(), :read | :write | :read_write) :: :ok | {:error, reason()}
  defdelegate shutdown(socket, how), to: :nifsock

  # ------------------------------------------------------------------
  # Options and names

  @doc """
  Sets an option: `{level, name}` from the option table (see the README), or
  raw `{level_int, opt_int}` with an integer or binary value.
  """
  @spec setopt(socket(), level_name(), term()) :: :ok | {:error, reason()}
  defdelegate setopt(socket, option, value), to: :nifsock

  @doc "Reads an option."
  @spec getopt(socket(), level_name()) :: {:ok, term()} | {:error, reason()}
  defdelegate getopt(socket, option), to: :nifsock

  @doc "The local address."
  @spec sockname(socket()) :: {:ok, sockaddr()} | {:error, reason()}
  defdelegate sockname(socket), to: :nifsock

  @doc "The peer's address."
  @spec peername(socket()) :: {:ok, sockaddr()} | {:error, reason()}
  defdelegate peername(socket), to: :nifsock

  # ------------------------------------------------------------------
  # Waits, ownership, introspection

  @doc "Withdraws a wait started with `:nowait` or a handle."
  @spec cancel(socket(), select_info()) :: :ok | {:error, reason()}
  defdelegate cancel(socket, select_info), to: :nifsock

  @doc "Makes `pid` the owner: its death closes the socket. Only the owner may call."
  @spec controlling_process(socket(), pid()) :: :ok | {:error, reason()}
  defdelegate controlling_process(socket, pid), to: :nifsock

  @doc "True for a nifsock socket term."
  @spec is_socket?(term()) :: boolean()
  defdelegate is_socket?(term), to: :nifsock, as: :is_socket

  @doc """
  Process-wide counters: `sockets` and `fds` alive, `accepts`, `reads`,
  `writes` (and their `_eagain` twins), `bytes_in`/`bytes_out`,
  `closes_inline`/`closes_dirty`/`closes_deferred`, `selects`,
  `setsockopts`, `getsockopts`.
  """
  @spec info() :: %{atom() => integer()}
  defdelegate info(), to: :nifsock

  @doc "Information about one socket, as `:socket.info/1` gives it."
  @spec info(socket()) :: map()
  defdelegate info(socket), to: :nifsock
end
