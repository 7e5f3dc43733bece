# nifsock — the two commands: `make bench` (side-by-side comparison) and `make test`.
.PHONY: all setup build test test-rust test-erlang test-readiness test-elixir test-valgrind test-otp lint bench bench-deps bench-all-otp clean

all: build

setup:
	@sh scripts/setup

build: setup
	rebar3 compile

test-rust: setup
	cargo test --release -p nifsock_unit
	cargo clippy --release --workspace --all-targets -- -D warnings
	cargo fmt --all -- --check
	scripts/check-layers
	@echo "layer greps: crate::nif outside nif/, crate:: other than sys in sys/"
	@! grep -rn 'crate::nif' native/nifsock/src | grep -v 'src/nif/'
	@! grep -rn 'use crate::' native/nifsock/src/sys | grep -v 'crate::sys'

test-erlang: build
	rebar3 ct
	rebar3 xref
	rebar3 dialyzer

# Every suite again over the other readiness paths (nifsock_readiness: the
# app env key `readiness'; test-erlang ran the default, driver): select, the
# fallback, and pump, side by side (scripts/ct-passes: ERL_FLAGS reaches the
# CT node and the peer nodes the suites start; each pass its own build and
# log dirs). The two fuzz properties run 60 cases per function here (300 in
# test-erlang): their calls are bad input, refused before any wait.
test-readiness: build
	scripts/ct-passes select pump

test-elixir: setup
	MIX_ENV=test mix test

test-valgrind: build
	bash test/valgrind/run

test: test-rust test-erlang test-readiness test-elixir test-valgrind

# The Common Test suites under OTP 27 (Debian trixie) and 29 (sid), in cached
# debootstrap chroots with this build of the NIF (root; see scripts/otp-chroot).
test-otp: build
	scripts/ct-passes otp27 otp29

lint: build
	rebar3 dialyzer

# OTP=27 or OTP=29 runs it under that release (bench/on-otp: scripts/otp-chroot,
# root), the results in bench/results/otpNN; without OTP (or OTP=25, the
# host's) on the host. ARGS adds bench/run options, e.g.
# ARGS="--workloads keepalive,pingpong16 --rounds 2".
bench: build
	$(if $(OTP),bash bench/on-otp $(OTP),bash) bench/run $(if $(FULL),--full,) $(ARGS)

# The Cowboy workload's dependencies (Cowboy 2.12, Ranch 2.1, Cowlib 2.13) from
# Hex, by the rebar3 profile `cowboy` (bench/deps; OTP=NN: that release's
# build). `make bench` then runs the Cowboy workload too.
bench-deps: build
	$(if $(OTP),bash bench/on-otp $(OTP),bash) bench/deps

# bench/run on OTP 25, 27 and 29 one after another, then each release's
# section of bench/RESULTS.md (bench/all-otp; root, for the chroots).
bench-all-otp: build
	bash bench/all-otp $(if $(FULL),--full,) $(ARGS)

clean:
	rebar3 clean
	cargo clean
	rm -f priv/libnifsock.so
