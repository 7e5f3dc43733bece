# Compiled only when Thousand Island is there: nifsock does not depend on it,
# and `@behaviour ThousandIsland.Transport` needs the behaviour at compile time.
# mix.exs declares it as an optional dependency of nifsock when nifsock is a
# dependency, so a consuming project compiles Thousand Island first.
if Code.ensure_loaded?(ThousandIsland.Transport) do
  defmodule Nifsock.ThousandIsland do
    @moduledoc """
    A `ThousandIsland.Transport` (Thousand Island 1.x) over `:nifsock_tcp`:
    clear TCP, as `ThousandIsland.Transports.TCP`, with nifsock sockets.

        ThousandIsland.start_link(
          port: 4000,
          handler_module: MyHandler,
          transport_module: Nifsock.ThousandIsland
        )

    and with Bandit, `Bandit.start_link(plug: MyPlug, thousand_island_options:
    [transport_module: Nifsock.ThousandIsland])`.

    Sockets carry gen_tcp's message tags (`tags: :gen_tcp`, hard-wired like
    `mode: :binary` and `active: false`), so `ThousandIsland.Handler`, which
    matches `{:tcp, socket, data}`, `{:tcp_closed, socket}` and
    `{:tcp_error, socket, reason}`, works unchanged; so does handler code that
    calls `ThousandIsland.Socket.setopts(socket, active: :once)` and waits
    for `:tcp` messages.

    `transport_options` are `:nifsock_tcp`'s listen options (`t:Nifsock.TCP.option/0`),
    with `ThousandIsland.Transports.TCP`'s defaults: `backlog: 1024`,
    `nodelay: true`, `send_timeout: 30_000`, `send_timeout_close: true`,
    `reuseaddr: true`. `{:inet_backend, _}` is dropped. The differences from
    `ThousandIsland.Transports.TCP`:

      * `sendfile/4` goes through sendfile(2) with the socket's
        `send_timeout` (`:nifsock_ranch.sendfile/4`), not through
        `:file.sendfile/5`;
      * `getstat/1` reports nifsock's counters (`:nifsock_tcp.getstat/1`);
      * `upgrade/2` returns `{:error, :unsupported_upgrade}`, as the TCP
        transport does: there is no TLS variant yet.
    """

    @behaviour ThousandIsland.Transport

    @typedoc "A nifsock listen socket."
    @type listener_socket() :: :nifsock_tcp.socket()
    @typedoc "A nifsock connection socket."
    @type socket() :: :nifsock_tcp.socket()

    # What Thousand Island needs: binary data, passive until the handler asks,
    # and the tags its handlers match.
    @hardcoded_options [mode: :binary, active: false, tags: :gen_tcp]
    @default_options [
      backlog: 1024,
      nodelay: true,
      send_timeout: 30_000,
      send_timeout_close: true,
      reuseaddr: true
    ]

    @impl ThousandIsland.Transport
    @spec listen(:inet.port_number(), [:nifsock_tcp.option() | {:inet_backend, term()}]) ::
            ThousandIsland.Transport.on_listen()
    def listen(port, user_options) do
      # Options need not be keywords (`:binary`, `:inet6`), so no Keyword
      # functions; the first occurrence of a name wins, as in the TCP transport.
      options =
        (@hardcoded_options ++ user_options ++ @default_options)
        |> Enum.reject(&match?({:inet_backend, _}, &1))
        |> Enum.uniq_by(fn
          {key, _} when is_atom(key) -> key
          key -> key
        end)

      :nifsock_tcp.listen(port, options)
    end

    @impl ThousandIsland.Transport
    @spec accept(listener_socket()) :: ThousandIsland.Transport.on_accept()
    defdelegate accept(listener_socket), to: :nifsock_tcp

    @impl ThousandIsland.Transport
    @spec handshake(socket()) :: ThousandIsland.Transport.on_handshake()
    def handshake(socket), do: {:ok, socket}

    @impl ThousandIsland.Transport
    @spec upgrade(socket(), term()) :: ThousandIsland.Transport.on_upgrade()
    def upgrade(_socket, _options), do: {:error, :unsupported_upgrade}

    @impl ThousandIsland.Transport
    @spec controlling_process(socket(), pid()) ::
            ThousandIsland.Transport.on_controlling_process()
    defdelegate controlling_process(socket, pid), to: :nifsock_tcp

    @impl ThousandIsland.Transport
    @spec recv(socket(), non_neg_integer(), timeout()) :: ThousandIsland.Transport.on_recv()
    defdelegate recv(socket, length, timeout), to: :nifsock_tcp

    @impl ThousandIsland.Transport
    @spec send(socket(), iodata()) :: ThousandIsland.Transport.on_send()
    defdelegate send(socket, data), to: :nifsock_tcp

    @impl ThousandIsland.Transport
    @spec sendfile(socket(), String.t(), non_neg_integer(), non_neg_integer()) ::
            ThousandIsland.Transport.on_sendfile()
    defdelegate sendfile(socket, filename, offset, length), to: :nifsock_ranch

    @impl ThousandIsland.Transport
    @spec getopts(socket(), ThousandIsland.Transport.socket_get_options()) ::
            ThousandIsland.Transport.on_getopts()
    defdelegate getopts(socket, options), to: :nifsock_tcp

    @impl ThousandIsland.Transport
    @spec setopts(socket(), ThousandIsland.Transport.socket_set_options()) ::
            ThousandIsland.Transport.on_setopts()
    defdelegate setopts(socket, options), to: :nifsock_tcp

    @impl ThousandIsland.Transport
    @spec shutdown(socket(), ThousandIsland.Transport.way()) ::
            ThousandIsland.Transport.on_shutdown()
    defdelegate shutdown(socket, way), to: :nifsock_tcp

    @impl ThousandIsland.Transport
    @spec close(socket() | listener_socket()) :: :ok
    defdelegate close(socket), to: :nifsock_tcp

    @impl ThousandIsland.Transport
    @spec sockname(socket() | listener_socket()) :: ThousandIsland.Transport.on_sockname()
    defdelegate sockname(socket), to: :nifsock_tcp

    @impl ThousandIsland.Transport
    @spec peername(socket()) :: ThousandIsland.Transport.on_peername()
    defdelegate peername(socket), to: :nifsock_tcp

    @impl ThousandIsland.Transport
    @spec peercert(socket()) :: ThousandIsland.Transport.on_peercert()
    def peercert(_socket), do: {:error, :not_secure}

    @impl ThousandIsland.Transport
    @spec secure?() :: false
    def secure?, do: false

    @impl ThousandIsland.Transport
    @spec getstat(socket()) :: ThousandIsland.Transport.socket_stats()
    defdelegate getstat(socket), to: :nifsock_tcp

    @impl ThousandIsland.Transport
    @spec negotiated_protocol(socket()) :: ThousandIsland.Transport.on_negotiated_protocol()
    def negotiated_protocol(_socket), do: {:error, :protocol_not_negotiated}

    @impl ThousandIsland.Transport
    @spec connection_information(socket()) ::
            ThousandIsland.Transport.on_connection_information()
    def connection_information(_socket), do: {:error, :not_secure}
  end
end
