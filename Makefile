# nifsock — the two commands: `make bench` (side-by-side comparison) and `make test`.
.PHONY: all setup build test test-rust test-erlang test-elixir test-valgrind lint bench clean

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

test-elixir: setup
	MIX_ENV=test mix test

test-valgrind: build
	bash test/valgrind/run

test: test-rust test-erlang test-elixir test-valgrind

lint: build
	rebar3 dialyzer

bench: build
	bash bench/run $(if $(FULL),--full,)

clean:
	rebar3 clean
	cargo clean
	rm -f priv/libnifsock.so
