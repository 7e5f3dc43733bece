# Nifsock.ThousandIsland, two ways:
#
#   * "callbacks": each ThousandIsland.Transport callback driven directly, in
#     the order and with the arguments Thousand Island's listener, acceptor,
#     connection and handler use (listen, sockname, accept, controlling_process,
#     peername, handshake, recv, setopts(active: :once), ..., close). Runs on
#     every `mix test`: without Thousand Island the module is compiled here
#     against a stand-in behaviour (the callback names and arities only).
#   * "server": a real Thousand Island 1.x server (echo and HTTP-ish handlers)
#     with `transport_module: Nifsock.ThousandIsland`, driven by gen_tcp
#     clients. Runs when NIFSOCK_THOUSAND_ISLAND_DEPS names the ebin
#     directories of a built thousand_island and telemetry (README, "Thousand
#     Island / Bandit"); skipped, saying so, otherwise.
#
# With Thousand Island there, every case also runs over its own
# ThousandIsland.Transports.TCP (gen_tcp), which proves the case.

defmodule Nifsock.ThousandIslandTest.Lib do
  @moduledoc false
  # Helpers shared by the cases.

  # The callbacks of ThousandIsland.Transport 1.x, by name and arity.
  def callbacks do
    [
      listen: 2,
      accept: 1,
      handshake: 1,
      upgrade: 2,
      controlling_process: 2,
      recv: 3,
      send: 2,
      sendfile: 4,
      getopts: 2,
      setopts: 2,
      shutdown: 2,
      close: 1,
      sockname: 1,
      peername: 1,
      peercert: 1,
      secure?: 0,
      getstat: 1,
      negotiated_protocol: 1,
      connection_information: 1
    ]
  end

  def thousand_island?, do: Code.ensure_loaded?(ThousandIsland)

  # The transports a case runs over: Thousand Island's own TCP transport
  # (gen_tcp) proves the case, when it is there.
  def transports do
    if thousand_island?(),
      do: [Nifsock.ThousandIsland, ThousandIsland.Transports.TCP],
      else: [Nifsock.ThousandIsland]
  end

  def client(port) do
    {:ok, c} = :gen_tcp.connect({127, 0, 0, 1}, port, [:binary, active: false])
    c
  end

  def tmp_file(name, size) do
    path =
      Path.join(System.tmp_dir!(), "nifsock_ti_#{name}_#{System.unique_integer([:positive])}")

    data = :crypto.strong_rand_bytes(size)
    File.write!(path, data)
    {path, data}
  end

  # One HTTP/1.1 response: the status line and headers, then a body of
  # content-length bytes.
  def http_response(c) do
    :ok = :inet.setopts(c, packet: :http_bin)
    {:ok, {:http_response, {1, 1}, status, _}} = :gen_tcp.recv(c, 0, 5_000)
    headers = http_headers(c, %{})
    :ok = :inet.setopts(c, packet: :raw)
    len = String.to_integer(Map.fetch!(headers, "content-length"))
    {:ok, body} = if len == 0, do: {:ok, ""}, else: :gen_tcp.recv(c, len, 5_000)
    {status, headers, body}
  end

  defp http_headers(c, acc) do
    case :gen_tcp.recv(c, 0, 5_000) do
      {:ok, {:http_header, _, name, _, value}} ->
        http_headers(c, Map.put(acc, String.downcase(to_string(name)), value))

      {:ok, :http_eoh} ->
        acc
    end
  end
end

unless Nifsock.ThousandIslandTest.Lib.thousand_island?() do
  defmodule ThousandIsland.Transport do
    @moduledoc false
    # A stand-in, so that lib/nifsock/thousand_island.ex compiles in this
    # test run: only the callbacks' names and arities, no Thousand Island code.
    for {name, arity} <- Nifsock.ThousandIslandTest.Lib.callbacks() do
      args = List.duplicate(quote(do: term()), arity)
      @callback unquote(name)(unquote_splicing(args)) :: term()
    end
  end

  [_] = Code.compile_file(Path.expand("../lib/nifsock/thousand_island.ex", __DIR__))
end

defmodule Nifsock.ThousandIslandTest.Callbacks do
  use ExUnit.Case, async: false
  import Nifsock.ThousandIslandTest.Lib

  # Every callback of the behaviour the module was compiled against (the real
  # one, when Thousand Island is there) is exported, with its arity.
  test "callbacks_all_exported" do
    expected =
      ThousandIsland.Transport.behaviour_info(:callbacks)
      |> Enum.sort()

    assert expected == Enum.sort(callbacks())

    assert Enum.reject(expected, fn {f, a} -> function_exported?(Nifsock.ThousandIsland, f, a) end) ==
             []
  end

  for t <- transports() do
    @tag transport: t
    # The listener, acceptor, connection and handler sequence: listen with
    # Thousand Island's defaults, accept, hand over, handshake, passive recv,
    # active once with gen_tcp's tags, send, sendfile, peer close.
    test "callbacks_connection_lifecycle #{inspect(t)}", %{transport: t} do
      {:ok, l} = t.listen(0, ip: :loopback)
      assert {:ok, {{127, 0, 0, 1}, port}} = t.sockname(l)
      c = client(port)
      test = self()

      {:ok, s} = t.accept(l)

      handler =
        spawn_link(fn ->
          receive do
            {:ready, s} ->
              send(test, {:peername, t.peername(s)})
              {:ok, s} = t.handshake(s)
              send(test, {:recv, t.recv(s, 5, 5_000)})
              :ok = t.setopts(s, active: :once)

              receive do
                {:tcp, ^s, data} -> send(test, {:active, data, t.getopts(s, [:active, :mode])})
              end

              send(test, {:send, t.send(s, ["wor", "ld"])})

              receive do
                {:sendfile, path} -> send(test, {:sendfile, t.sendfile(s, path, 3, 1000)})
              end

              :ok = t.setopts(s, active: :once)

              receive do
                {:tcp_closed, ^s} -> send(test, {:closed, t.close(s)})
              end
          end
        end)

      assert :ok = t.controlling_process(s, handler)
      send(handler, {:ready, s})
      assert_receive {:peername, {:ok, {{127, 0, 0, 1}, cport}}}, 5_000
      assert {:ok, cport} == :inet.port(c)

      :ok = :gen_tcp.send(c, "hello")
      assert_receive {:recv, {:ok, "hello"}}, 5_000
      :ok = :gen_tcp.send(c, "ping")
      assert_receive {:active, "ping", {:ok, [active: false, mode: :binary]}}, 5_000
      assert_receive {:send, :ok}, 5_000
      assert {:ok, "world"} = :gen_tcp.recv(c, 5, 5_000)

      {path, data} = tmp_file("lifecycle", 4096)
      send(handler, {:sendfile, path})
      assert_receive {:sendfile, {:ok, 1000}}, 5_000
      assert {:ok, binary_part(data, 3, 1000)} == :gen_tcp.recv(c, 1000, 5_000)
      File.rm!(path)

      :ok = :gen_tcp.close(c)
      assert_receive {:closed, :ok}, 5_000
      assert :ok = t.close(l)
      assert {:error, :closed} = t.accept(l)
    end

    @tag transport: t
    # Accepted sockets carry Thousand Island's defaults unless overridden;
    # mode and active can't be, and inet_backend is accepted.
    test "callbacks_listen_defaults #{inspect(t)}", %{transport: t} do
      {:ok, l} =
        t.listen(0, [{:inet_backend, :socket}, ip: :loopback, nodelay: false, active: true])

      {:ok, {_, port}} = t.sockname(l)
      c = client(port)
      {:ok, s} = t.accept(l)

      assert {:ok, opts} =
               t.getopts(s, [
                 :mode,
                 :active,
                 :nodelay,
                 :send_timeout,
                 :send_timeout_close,
                 :reuseaddr
               ])

      assert Enum.sort(opts) ==
               Enum.sort(
                 mode: :binary,
                 active: false,
                 nodelay: false,
                 send_timeout: 30_000,
                 send_timeout_close: true,
                 reuseaddr: true
               )

      Enum.each([s, l], &t.close/1)
      :gen_tcp.close(c)
    end

    @tag transport: t
    # What a clear transport answers about security, upgrades and statistics,
    # a recv timeout, and shutdown(:write) reaching the peer as end of stream.
    test "callbacks_insecure_answers #{inspect(t)}", %{transport: t} do
      {:ok, l} = t.listen(0, ip: :loopback)
      {:ok, {_, port}} = t.sockname(l)
      c = client(port)
      {:ok, s} = t.accept(l)

      refute t.secure?()
      assert {:error, :not_secure} = t.peercert(s)
      assert {:error, :not_secure} = t.connection_information(s)
      assert {:error, :protocol_not_negotiated} = t.negotiated_protocol(s)
      assert {:error, :unsupported_upgrade} = t.upgrade(s, [])

      :ok = :gen_tcp.send(c, "abc")
      assert {:ok, "abc"} = t.recv(s, 3, 5_000)
      # (the last read on s: after a timed-out recv gen_tcp's next read may
      # be cut to that recv's length)
      assert {:error, :timeout} = t.recv(s, 0, 0)
      assert :ok = t.send(s, "defg")
      assert {:ok, "defg"} = :gen_tcp.recv(c, 4, 5_000)
      assert {:ok, stats} = t.getstat(s)
      assert stats[:recv_oct] == 3 and stats[:send_oct] == 4

      assert :ok = t.shutdown(s, :write)
      assert {:error, :closed} = :gen_tcp.recv(c, 0, 5_000)
      Enum.each([s, l], &t.close/1)
      :gen_tcp.close(c)
    end
  end
end

if Nifsock.ThousandIslandTest.Lib.thousand_island?() do
  defmodule Nifsock.ThousandIslandTest.Echo do
    @moduledoc false
    # Reads a 6-byte greeting with a passive recv, then echoes what arrives
    # (handle_data, active once) until "bye".
    use ThousandIsland.Handler

    @impl ThousandIsland.Handler
    def handle_connection(socket, state) do
      {:ok, hello} = ThousandIsland.Socket.recv(socket, 6)
      :ok = ThousandIsland.Socket.send(socket, "hi " <> hello)
      send(state.test, {:connected, self(), socket.transport_module})
      {:continue, state}
    end

    @impl ThousandIsland.Handler
    def handle_data("bye", socket, state) do
      :ok = ThousandIsland.Socket.send(socket, "ciao")
      {:close, state}
    end

    def handle_data(data, socket, state) do
      :ok = ThousandIsland.Socket.send(socket, data)
      {:continue, state}
    end

    @impl ThousandIsland.Handler
    def handle_close(_socket, state), do: send(state.test, {:handle_close, self()})

    @impl ThousandIsland.Handler
    def handle_shutdown(_socket, state), do: send(state.test, {:handle_shutdown, self()})
  end

  defmodule Nifsock.ThousandIslandTest.Http do
    @moduledoc false
    # HTTP/1.1-ish, keep-alive: GET /hello, GET /file (sendfile), POST /echo
    # (a body read with passive recv inside handle_data); "connection: close"
    # closes after the response.
    use ThousandIsland.Handler

    @impl ThousandIsland.Handler
    def handle_connection(_socket, state), do: {:continue, Map.put(state, :buf, "")}

    @impl ThousandIsland.Handler
    def handle_data(data, socket, state), do: serve(state.buf <> data, socket, state)

    defp serve(buf, socket, state) do
      case :binary.split(buf, "\r\n\r\n") do
        [_] ->
          {:continue, %{state | buf: buf}}

        [head, rest] ->
          [request_line | header_lines] = String.split(head, "\r\n")
          [method, path, "HTTP/1.1"] = String.split(request_line, " ")

          headers =
            Map.new(header_lines, fn line ->
              [k, v] = String.split(line, ":", parts: 2)
              {String.downcase(k), String.trim(v)}
            end)

          rest = respond(method, path, headers, rest, socket, state)

          if headers["connection"] == "close",
            do: {:close, state},
            else: serve(rest, socket, state)
      end
    end

    defp respond("GET", "/hello", _headers, rest, socket, _state) do
      reply(socket, "hello world")
      rest
    end

    defp respond("GET", "/file", _headers, rest, socket, state) do
      size = File.stat!(state.file).size
      :ok = ThousandIsland.Socket.send(socket, head(size))
      {:ok, ^size} = ThousandIsland.Socket.sendfile(socket, state.file, 0, size)
      rest
    end

    defp respond("POST", "/echo", headers, rest, socket, _state) do
      len = String.to_integer(headers["content-length"])

      {body, rest} =
        if byte_size(rest) >= len do
          <<body::binary-size(len), rest::binary>> = rest
          {body, rest}
        else
          {:ok, more} = ThousandIsland.Socket.recv(socket, len - byte_size(rest))
          {rest <> more, ""}
        end

      reply(socket, body)
      rest
    end

    defp reply(socket, body),
      do: :ok = ThousandIsland.Socket.send(socket, [head(byte_size(body)), body])

    defp head(len), do: "HTTP/1.1 200 OK\r\ncontent-length: #{len}\r\n\r\n"
  end
end

defmodule Nifsock.ThousandIslandTest.Server do
  use ExUnit.Case, async: false
  import Nifsock.ThousandIslandTest.Lib
  alias Nifsock.ThousandIslandTest.{Echo, Http}

  if thousand_island?() do
    setup_all do
      {:ok, _} = Application.ensure_all_started(:telemetry)
      :ok
    end
  else
    @skip_reason (case System.get_env("NIFSOCK_THOUSAND_ISLAND_DEPS") do
                    v when v in [nil, ""] -> "NIFSOCK_THOUSAND_ISLAND_DEPS is not set"
                    v -> "no thousand_island in NIFSOCK_THOUSAND_ISLAND_DEPS=#{v} (DIR/*/ebin)"
                  end) <> " (README, \"Thousand Island / Bandit\")"
    @moduletag skip: @skip_reason
    IO.puts("Nifsock.ThousandIslandTest.Server: skipped, " <> @skip_reason)
  end

  defp serve(transport, handler, options) do
    pid =
      start_supervised!(
        {ThousandIsland,
         port: 0,
         handler_module: handler,
         handler_options: Map.put(options, :test, self()),
         transport_module: transport,
         transport_options: [ip: :loopback]},
        id: :server
      )

    # (apply: no "undefined" warning where Thousand Island is missing)
    {:ok, {_ip, port}} = apply(ThousandIsland, :listener_info, [pid])
    port
  end

  for t <- [Nifsock.ThousandIsland, ThousandIsland.Transports.TCP] do
    @tag transport: t
    # Several connections at once, each greeted through a passive recv, then
    # echoed through handle_data; a client close reaches handle_close.
    test "server_echo_connections #{inspect(t)}", %{transport: t} do
      port = serve(t, Echo, %{})
      clients = for i <- 1..8, do: {i, client(port)}

      for {i, c} <- clients do
        :ok = :gen_tcp.send(c, "hello#{i}")
        assert {:ok, "hi hello#{i}"} == :gen_tcp.recv(c, 9, 5_000)
        assert_receive {:connected, _pid, ^t}, 5_000
      end

      for round <- 1..5, {i, c} <- clients do
        msg = "round #{round} from #{i}"
        :ok = :gen_tcp.send(c, msg)
        assert {:ok, msg} == :gen_tcp.recv(c, byte_size(msg), 5_000)
      end

      {_, c1} = hd(clients)
      :ok = :gen_tcp.close(c1)
      assert_receive {:handle_close, _}, 5_000

      for {_, c} <- tl(clients) do
        :ok = :gen_tcp.send(c, "bye")
        assert {:ok, "ciao"} = :gen_tcp.recv(c, 4, 5_000)
        assert {:error, :closed} = :gen_tcp.recv(c, 0, 5_000)
      end
    end

    @tag transport: t
    # Stopping the server closes the listener under its blocked acceptors and
    # the open connections (handle_shutdown, then close).
    test "server_stop_closes_connections #{inspect(t)}", %{transport: t} do
      port = serve(t, Echo, %{})
      c = client(port)
      :ok = :gen_tcp.send(c, "hello!")
      assert {:ok, "hi hello!"} = :gen_tcp.recv(c, 9, 5_000)
      assert_receive {:connected, _pid, ^t}, 5_000

      :ok = stop_supervised(:server)
      assert_received {:handle_shutdown, _}
      assert {:error, :closed} = :gen_tcp.recv(c, 0, 5_000)
      # (refused, or reset when the SYN met the closing listener)
      assert {:error, reason} = :gen_tcp.connect({127, 0, 0, 1}, port, [])
      assert reason in [:econnrefused, :econnreset]
    end

    @tag transport: t
    # Keep-alive requests on one connection (a small reply, a sendfile'd 1 MiB
    # file, a POST body read with recv), then "connection: close".
    test "server_http_keepalive_sendfile #{inspect(t)}", %{transport: t} do
      {path, data} = tmp_file("http", 1024 * 1024)
      port = serve(t, Http, %{file: path})
      c = client(port)

      for _ <- 1..3 do
        :ok = :gen_tcp.send(c, "GET /hello HTTP/1.1\r\nhost: x\r\n\r\n")
        assert {200, _, "hello world"} = http_response(c)
      end

      :ok = :gen_tcp.send(c, "GET /file HTTP/1.1\r\nhost: x\r\n\r\n")
      assert {200, %{"content-length" => "1048576"}, ^data} = http_response(c)

      # the headers first, the body later: the handler waits in recv
      body = :binary.copy("0123456789", 1000)
      :ok = :gen_tcp.send(c, "POST /echo HTTP/1.1\r\ncontent-length: 10000\r\n\r\n" <> "01234")
      :ok = :gen_tcp.send(c, binary_part(body, 5, 9995))
      assert {200, _, ^body} = http_response(c)

      :ok = :gen_tcp.send(c, "GET /hello HTTP/1.1\r\nconnection: close\r\n\r\n")
      assert {200, _, "hello world"} = http_response(c)
      assert {:error, :closed} = :gen_tcp.recv(c, 0, 5_000)
      File.rm!(path)
    end
  end
end
