defmodule NifsockTest do
  # Not async: the owner-death case compares process-wide fd counters.
  use ExUnit.Case, async: false

  @loopback %{family: :inet, addr: :loopback, port: 0}

  defp listener do
    {:ok, l} = Nifsock.open(:inet, :stream, :tcp)
    :ok = Nifsock.setopt(l, {:socket, :reuseaddr}, true)
    :ok = Nifsock.bind(l, @loopback)
    :ok = Nifsock.listen(l, 16)
    {:ok, %{port: port}} = Nifsock.sockname(l)
    {l, port}
  end

  defp connect(port) do
    {:ok, c} = Nifsock.open(:inet, :stream)
    :ok = Nifsock.connect(c, %{family: :inet, addr: {127, 0, 0, 1}, port: port})
    c
  end

  # Polls `fun` every 10 ms until it returns true or `timeout` ms have passed.
  defp wait_until(fun, timeout \\ 2_000) do
    cond do
      fun.() -> true
      timeout <= 0 -> false
      true -> Process.sleep(10) && wait_until(fun, timeout - 10)
    end
  end

  test "echo over loopback: iolist send, exact-length recv, closed after close" do
    parent = self()

    server =
      Task.async(fn ->
        {l, port} = listener()
        send(parent, {:port, port})
        {:ok, s} = Nifsock.accept(l, 5_000)
        true = Nifsock.is_socket?(s)
        {:ok, data} = Nifsock.recv(s, 11, 5_000)
        :ok = Nifsock.send(s, [data])
        # Wait for the client to finish before closing.
        {:error, :closed} = Nifsock.recv(s, 0, 5_000)
        :ok = Nifsock.close(s)
        :ok = Nifsock.close(l)
        data
      end)

    assert_receive {:port, port}, 5_000
    c = connect(port)
    assert Nifsock.is_socket?(c)
    refute Nifsock.is_socket?(make_ref())

    assert :ok = Nifsock.send(c, ["hel", ?l, ["o", " "], "world"])
    assert {:ok, "hello world"} = Nifsock.recv(c, 11, 5_000)
    assert {:ok, %{family: :inet, port: ^port}} = Nifsock.peername(c)

    assert :ok = Nifsock.close(c)
    assert {:error, :closed} = Nifsock.recv(c, 0)
    assert {:error, :closed} = Nifsock.send(c, "more")
    assert Task.await(server, 5_000) == "hello world"
  end

  test "nowait recv returns select info, then a select message when data arrives" do
    {l, port} = listener()
    c = connect(port)
    {:ok, s} = Nifsock.accept(l, 5_000)

    assert {:select, {:select_info, :recv, handle}} = Nifsock.recv(s, 0, :nowait)
    assert is_reference(handle)
    refute_received {:"$nifsock", ^s, :select, ^handle}

    :ok = Nifsock.send(c, "ping")
    assert_receive {:"$nifsock", ^s, :select, ^handle}, 2_000
    assert {:ok, "ping"} = Nifsock.recv(s, 0, :nowait)

    # A withdrawn wait sends nothing.
    assert {:select, {:select_info, :recv, _} = info} = Nifsock.recv(s, 0, :nowait)
    assert :ok = Nifsock.cancel(s, info)

    Enum.each([s, c, l], &Nifsock.close/1)
  end

  test "a socket is closed when its owner exits" do
    before = Nifsock.info()[:fds]
    parent = self()

    {pid, ref} =
      spawn_monitor(fn ->
        {l, port} = listener()
        c = connect(port)
        {:ok, s} = Nifsock.accept(l, 5_000)
        send(parent, {:opened, [l, c, s], Nifsock.info()[:fds]})
        receive do: (:exit -> :ok)
      end)

    assert_receive {:opened, socks, during}, 5_000
    assert during == before + 3

    send(pid, :exit)
    assert_receive {:DOWN, ^ref, :process, ^pid, :normal}, 5_000

    assert wait_until(fn -> Nifsock.info()[:fds] == before end),
           "fds stayed at #{Nifsock.info()[:fds]}, expected #{before}"

    for sock <- socks do
      assert {:error, :closed} = Nifsock.recv(sock, 0, 0)
    end
  end

  test "sendfile sends a raw file's bytes" do
    path = Path.join(System.tmp_dir!(), "nifsock_sendfile_#{System.unique_integer([:positive])}")
    File.write!(path, "0123456789")
    on_exit(fn -> File.rm(path) end)
    {l, port} = listener()
    c = connect(port)
    {:ok, s} = Nifsock.accept(l, 5_000)

    {:ok, file} = File.open(path, [:raw, :read, :binary])
    assert {:ok, 4} = Nifsock.sendfile(c, file, 3, 4)
    assert {:ok, 10} = Nifsock.sendfile(c, file)
    :ok = File.close(file)
    assert {:ok, "34560123456789"} = Nifsock.recv(s, 14, 5_000)

    Enum.each([s, c, l], &Nifsock.close/1)
  end

  test "every function of :nifsock has a Nifsock delegate" do
    expected =
      for {name, arity} <- :nifsock.module_info(:exports), name not in [:module_info] do
        if name == :is_socket, do: {:is_socket?, arity}, else: {name, arity}
      end

    Code.ensure_loaded!(Nifsock)
    missing = Enum.reject(expected, fn {f, a} -> function_exported?(Nifsock, f, a) end)
    assert missing == []
  end
end
