defmodule Mix.Tasks.Compile.NifsockCargo do
  @moduledoc """
  Builds the Rust NIF (`native/nifsock`) with cargo and puts it in `priv/`.

  Runs `scripts/build-nif` (`cargo build --release -p nifsock`, then a copy of
  `target/release/libnifsock.so` to `priv/libnifsock.so`). Cargo decides what is
  stale, so a no-op build costs a fraction of a second. Needs `cargo` on the PATH
  and no network beyond what cargo's own registry cache already holds.
  """
  use Mix.Task.Compiler

  @root __DIR__

  @impl Mix.Task.Compiler
  def run(_args) do
    # build-nif always refreshes priv/; cargo's own output tells whether it
    # rebuilt anything.
    before = mtime(cargo_output())

    case System.cmd("sh", [Path.join(@root, "scripts/build-nif")],
           cd: @root,
           stderr_to_stdout: true,
           into: IO.stream(:stdio, :line)
         ) do
      {_, 0} ->
        # compile.all links priv/ into _build before the compilers run; on a
        # clean checkout priv/ did not exist then, so link (or copy) it now.
        Mix.Project.build_structure()

        if mtime(cargo_output()) == before do
          {:noop, []}
        else
          Mix.shell().info("Compiled priv/libnifsock.so (cargo)")
          {:ok, []}
        end

      {_, status} ->
        Mix.raise("scripts/build-nif (cargo build --release) failed with status #{status}")
    end
  end

  @impl Mix.Task.Compiler
  def clean do
    File.rm(Path.join(@root, "priv/libnifsock.so"))
    :ok
  end

  defp cargo_output do
    ext = if match?({:unix, :darwin}, :os.type()), do: "dylib", else: "so"
    Path.join(@root, "target/release/libnifsock.#{ext}")
  end

  defp mtime(path) do
    case File.stat(path, time: :posix) do
      {:ok, %File.Stat{mtime: mtime, size: size}} -> {mtime, size}
      {:error, _} -> nil
    end
  end
end

defmodule Nifsock.MixProject do
  use Mix.Project

  # One source of truth for the version, description and application
  # resource: the OTP app file that rebar3 uses.
  {:ok, [{:application, :nifsock, app}]} =
    :file.consult(Path.join(__DIR__, "lib/nifsock.app.src"))

  @app app
  @version app |> Keyword.fetch!(:vsn) |> to_string()
  @description app |> Keyword.fetch!(:description) |> to_string()

  # Nifsock.ThousandIsland is compiled only when ThousandIsland.Transport is
  # on the code path. NIFSOCK_THOUSAND_ISLAND_DEPS, a directory of built
  # applications (DIR/*/ebin: thousand_island, telemetry), puts them there, so
  # `mix test` compiles the module and runs the Thousand Island tests. Such a
  # build goes to its own build path: mix cannot tell that what it compiles
  # depends on the variable.
  @ti_deps (case System.get_env("NIFSOCK_THOUSAND_ISLAND_DEPS") do
              nil -> []
              "" -> []
              dir -> Path.wildcard(Path.join(Path.expand(dir), "*/ebin"))
            end)
  for ebin <- @ti_deps, do: Code.prepend_path(ebin)

  def project do
    [
      app: :nifsock,
      version: @version,
      description: @description,
      elixir: "~> 1.14",
      # rebar3 owns _build/default and _build/test; mix builds under
      # _build/mix/<env> so `rebar3 ct` and `MIX_ENV=test mix test` never share
      # an ebin. (When nifsock is a dependency, the parent's build path wins.)
      build_path: if(@ti_deps == [], do: "_build/mix", else: "_build/mix_ti"),
      # (Elixir 1.15+ would otherwise drop those directories from the path)
      prune_code_paths: @ti_deps == [],
      compilers: [:nifsock_cargo] ++ Mix.compilers(),
      elixirc_paths: ["lib"],
      erlc_paths: ["lib"],
      erlc_options: [:debug_info, :warn_unused_vars, :warn_shadow_vars, :warn_unused_import],
      test_paths: ["test_ex"],
      start_permanent: Mix.env() == :prod,
      deps: deps()
    ]
  end

  # When nifsock is a dependency (a parent project is loading this file),
  # Thousand Island is an optional dependency: not fetched unless the parent
  # has it, and if it has, compiled before nifsock, so Nifsock.ThousandIsland
  # exists. Not declared for nifsock's own build (its tests must run with no
  # Hex and no Thousand Island) nor where Hex is missing (a Hex requirement
  # would then fail to load).
  defp deps do
    if Mix.Project.get() not in [nil, __MODULE__] and Code.ensure_loaded?(Hex) do
      [{:thousand_island, "~> 1.0", optional: true}]
    else
      []
    end
  end

  def application do
    Keyword.take(@app, [:mod, :registered, :env]) ++
      [extra_applications: Keyword.get(@app, :applications, []) -- [:kernel, :stdlib]]
  end
end
