# Sourced by the bench scripts after build-dirs.sh ($root and $rebar_base set):
# when NIFSOCK_COWBOY_DEPS is not set, the rebar3 profile `cowboy`'s build for
# this release, if there is one (`make bench-deps`, bench/deps: Cowboy 2.12,
# Ranch 2.1 and Cowlib 2.13 from Hex into $rebar_base/cowboy/lib, or, with
# clones in _checkouts/, into $rebar_base/cowboy/checkouts, then looked at
# first: a build from Hex before the clones came stays in lib). `none` leaves
# the Cowboy workload out (unset here). Consumers take DIR/*/ebin except
# DIR/nifsock (the profile's own build of nifsock: this tree's $nifsock_ebin
# is the one benchmarked).
if [ "${NIFSOCK_COWBOY_DEPS:-}" = none ]; then
    unset NIFSOCK_COWBOY_DEPS
elif [ -z "${NIFSOCK_COWBOY_DEPS:-}" ]; then
    cowboy_dirs=("$root/$rebar_base/cowboy/lib")
    if [ -d "$root/_checkouts/cowboy" ]; then
        cowboy_dirs=("$root/$rebar_base/cowboy/checkouts" "${cowboy_dirs[@]}")
    fi
    for cowboy_dir in "${cowboy_dirs[@]}"; do
        if [ -f "$cowboy_dir/cowboy/ebin/cowboy.beam" ] && [ -f "$cowboy_dir/ranch/ebin/ranch.beam" ]; then
            export NIFSOCK_COWBOY_DEPS="$cowboy_dir"
            break
        fi
    done
    unset cowboy_dir cowboy_dirs
fi
