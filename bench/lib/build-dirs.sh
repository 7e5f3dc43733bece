# Sourced by the bench scripts, with $root set to the tree's top: where this
# tree's builds are for the Erlang/OTP release the script runs under.
# scripts/otp-chroot NN sets REBAR_BASE_DIR=_build/otpNN: that release's
# ebins, its own build of the bench modules and its own results; the host's
# (_build, bench/_build, bench/results) are left as they are.
#   rebar_base    rebar3's base dir (_build or _build/otpNN)
#   otp_tag       "" on the host, otpNN under scripts/otp-chroot NN
#   nifsock_ebin  nifsock's compiled Erlang modules
#   bench_build   where the bench's own modules are compiled to
rebar_base=${REBAR_BASE_DIR:-_build}
otp_tag=""
[ "$rebar_base" = _build ] || otp_tag=$(basename "$rebar_base")
nifsock_ebin="$root/$rebar_base/default/lib/nifsock/ebin"
bench_build="$root/bench/_build${otp_tag:+/$otp_tag}"
