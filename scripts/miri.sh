#!/usr/bin/env bash
# Runs the unit tests of trawl's modules with `unsafe` code under Miri (see docs/miri.md for
# what runs, what is skipped and why, and what was found).
#
#   scripts/miri.sh                 # every run below, in order
#   scripts/miri.sh sb tb           # some of them: sb, tb, avx2, avx512
#
# Needs a nightly toolchain with the miri and rust-src components
# (`rustup component add --toolchain nightly miri rust-src`). MIRI_TOOLCHAIN picks another
# toolchain than `nightly`. Each run builds into its own target directory under target/, so the
# runs neither rebuild each other's dependencies nor wait on the lock of the normal build.
set -euo pipefail
cd "$(dirname "$0")/.."

toolchain="${MIRI_TOOLCHAIN:-nightly}"

# Proptest would open its regression files next to the sources, a host access that Miri's
# isolation (left on) refuses; everything else runs isolated.
base_flags="-Zmiri-env-set=PROPTEST_DISABLE_FAILURE_PERSISTENCE=1"

# The modules with `unsafe` code, as test-name filters.
modules=(data::matrix io:: mem:: vamana::adjacency vamana::store kernels:: exact::tile)

# Tests that run work on rayon's thread pool. rayon's work-stealing deques use crossbeam-epoch,
# which breaks the Stacked Borrows rules (crossbeam-rs/crossbeam#545; it passes Tree Borrows),
# and the pool's threads outlive `main`. These run in the Tree Borrows run, without the leak
# check, and are skipped by the others.
rayon_tests=(
    vamana::store::tests::
    kernels::kmeans::tests::duplicates_and_empty_clusters
    kernels::kmeans::tests::splits_the_largest_cluster_when_one_empties
    kernels::kmeans::tests::cancel_stops_training
    kernels::kmeans::tests::every_cluster_is_used
)
skip_rayon=()
for t in "${rayon_tests[@]}"; do
    skip_rayon+=(--skip "$t")
done

# The SIMD kernels run under Miri only when their features are enabled at compile time: Miri
# reports exactly those to run-time detection. Only the kernel modules differ between builds.
simd_modules=(kernels:: exact::tile)
# Miri lacks two AVX-512 intrinsics trawl uses: `vpdpwssd` (u8/i8 kernels) and
# `_mm512_cmp_ps_mask` (exact::tile). The AVX-512 run takes the tests of f32 kernels only.
avx512_tests=(
    kernels::dispatch
    kernels::tests::kernels_f32
    kernels::tests::kernels_many
    kernels::tests::kernels_cols
    kernels::tests::kernels_distance_metrics
    kernels::tests::kernels_distance_sign
)

miri_test() {
    local target="$1" rustflags="$2" miriflags="$3"
    shift 3
    echo "== MIRIFLAGS='$miriflags' RUSTFLAGS='$rustflags' -- $*" >&2
    CARGO_TARGET_DIR="target/$target" RUSTFLAGS="$rustflags" MIRIFLAGS="$miriflags" \
        nice -n 10 cargo "+$toolchain" miri test -p trawl --lib --locked -- "$@"
}

run() {
    case "$1" in
    # Stacked Borrows (Miri's default aliasing model), strict provenance, leak check on,
    # scalar kernels only (the default x86-64 target has no AVX).
    sb) miri_test miri "" "$base_flags -Zmiri-strict-provenance" \
        "${modules[@]}" "${skip_rayon[@]}" ;;
    # Tree Borrows, for the tests on rayon's pool (see above).
    tb) miri_test miri "" "$base_flags -Zmiri-tree-borrows -Zmiri-ignore-leaks" \
        "${rayon_tests[@]}" ;;
    # The AVX2 + FMA kernel table.
    avx2) miri_test miri-avx2 "-C target-feature=+avx2,+fma" \
        "$base_flags -Zmiri-strict-provenance" "${simd_modules[@]}" "${skip_rayon[@]}" ;;
    # The f32 kernels of the AVX-512 (F + BW + VNNI) table.
    avx512) miri_test miri-avx512 "-C target-feature=+avx2,+fma,+avx512f,+avx512bw,+avx512vnni" \
        "$base_flags -Zmiri-strict-provenance" "${avx512_tests[@]}" ;;
    *)
        echo "unknown run '$1' (sb, tb, avx2, avx512)" >&2
        exit 2
        ;;
    esac
}

cargo "+$toolchain" miri setup
if [ "$#" -eq 0 ]; then
    set -- sb tb avx2 avx512
fi
for r in "$@"; do
    run "$r"
done
