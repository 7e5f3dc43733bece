# Sourced by the bench scripts that start bench_server nodes themselves, after
# build-dirs.sh: compiles bench/src into $bench_build/ebin when bench/run has
# not (bench_server.beam missing), and sets bebin to that directory.
bebin="$bench_build/ebin"
if [ ! -f "$bebin/bench_server.beam" ]; then
  mkdir -p "$bebin"
  erlc -o "$bebin" "$root/bench/src/bench_backend.erl"
  erlc -o "$bebin" -pa "$bebin" -I "$root/bench/src" "$root"/bench/src/*.erl
fi
