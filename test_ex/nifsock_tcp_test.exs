defmodule Nifsock.TCPTest do
  use ExUnit.Case, async: false

  defp pair(opts) do
    {:ok, l} = Nifsock.TCP.listen(0, [:binary, active: false, reuseaddr: true] ++ opts)
    {:ok, port} = Nifsock.TCP.port(l)
    {:ok, c} = Nifsock.TCP.connect({127, 0, 0, 1}, port, [:binary, active: false] ++ opts)
    {:ok, s} = Nifsock.TCP.accept(l, 5_000)
    :ok = Nifsock.TCP.close(l)
    {c, s}
  end

  test "passive echo with gen_tcp shapes" do
    {c, s} = pair([])
    assert {:ok, {{127, 0, 0, 1}, _}} = Nifsock.TCP.peername(c)
    assert {:ok, {{127, 0, 0, 1}, _}} = Nifsock.TCP.sockname(s)

    assert :ok = Nifsock.TCP.send(c, ["pi", "ng"])
    assert {:ok, "ping"} = Nifsock.TCP.recv(s, 4, 5_000)
    assert {:error, :timeout} = Nifsock.TCP.recv(s, 1, 10)

    assert :ok = Nifsock.TCP.close(c)
    assert {:error, :closed} = Nifsock.TCP.recv(s, 0, 5_000)
    assert :ok = Nifsock.TCP.close(s)
  end

  test "active once with 2-byte packets delivers one message per packet" do
    {c, s} = pair(packet: 2)
    :ok = Nifsock.TCP.send(c, "one")
    :ok = Nifsock.TCP.send(c, "two")
    :ok = Nifsock.TCP.setopts(s, active: :once)
    assert_receive {:nifsock, ^s, "one"}, 2_000
    refute_receive {:nifsock, ^s, _}, 50
    assert {:ok, [active: false, packet: 2]} = Nifsock.TCP.getopts(s, [:active, :packet])
    :ok = Nifsock.TCP.setopts(s, active: :once)
    assert_receive {:nifsock, ^s, "two"}, 2_000
    Enum.each([c, s], &Nifsock.TCP.close/1)
  end

  test "every function of :nifsock_tcp has a Nifsock.TCP delegate" do
    Code.ensure_loaded!(Nifsock.TCP)

    missing =
      for {f, a} <- :nifsock_tcp.module_info(:exports),
          f != :module_info,
          not function_exported?(Nifsock.TCP, f, a),
          do: {f, a}

    assert missing == []
  end
end
