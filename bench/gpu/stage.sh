#!/usr/bin/env bash
# Stages the GPU measurement kit (bench/gpu/kit.sh) into one folder that travels to a GPU
# machine with no Rust toolchain and no network:
#
#   bin.tar.gz                 the executables, stripped and compressed (kit.sh unpacks them):
#     bin/trawl                the CLI
#     bin/accel-tests          the library's unit tests (run with the filter `accel::`: the GPU
#                              backends against the CPU backend)
#     bin/flash-search-tests   the flash search's integration tests (one of them GPU vs CPU)
#   lib/libvulkan.so.1         the Vulkan loader of this machine's distribution package
#   data/                      a prepared small dataset: queries, ground truth, a graph index
#                              and an IVF index
#   STAGE.json                 what was staged: commit, profile, sizes, the data's shape
#
# Usage: bench/gpu/stage.sh [--out DIR] [--profile release|test] [--size full|tiny]
#   --out      the folder to fill (default .gpukit in the repository root; emptied first)
#   --profile  cargo profile of the `trawl` binary: release (default, what a measurement
#              uses) or test (the build `cargo test` already made: the dry run's)
#   --size     full (default): 50,000 u8 vectors of dimension 128 and 16,384 queries;
#              tiny: 3,000 vectors and 256 queries (the dry run's)
# The test binaries are always the `test` profile's (optimised, as `cargo test` builds them);
# with --profile test every executable is the one `cargo test --workspace --all-targets` built.
# Fails when the folder plus the repository's tracked files pass 64 MiB (what travels).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)

out=.gpukit
profile=release
size=full
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --profile) profile=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    *) echo "stage.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$profile" in release|test) ;; *) echo "stage.sh: --profile release or test" >&2; exit 2 ;; esac
case "$size" in
  full) n=50000; nq=16384; dim=128 ;;
  tiny) n=3000; nq=256; dim=32 ;;
  *) echo "stage.sh: --size full or tiny" >&2; exit 2 ;;
esac

command -v cargo >/dev/null || { echo "stage.sh: cargo not found" >&2; exit 1; }
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')

echo "== building (profile $profile)"
# The executables are taken from cargo's own listing. For the test profile that is the build
# `cargo test --workspace --all-targets` made (same features, so nothing is compiled again);
# a build of one package alone can unify features differently and recompile the dependencies.
if [ "$profile" = test ]; then
  listing=$(cargo test --no-run --locked --workspace --all-targets --message-format=json 2>/dev/null)
else
  cargo build --locked --release -p trawl-cli
  listing=$(cargo test --no-run --locked -p trawl --lib --test flash_search --message-format=json 2>/dev/null)
fi
found=$(printf '%s\n' "$listing" | python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    kind, name, test = m["target"]["kind"], m["target"]["name"], m["profile"]["test"]
    if kind == ["lib"] and name == "trawl" and test:
        print("lib=" + m["executable"])
    elif kind == ["test"] and name == "flash_search":
        print("flash=" + m["executable"])
    elif kind == ["bin"] and name == "trawl" and not test:
        print("bin=" + m["executable"])
')
lib_tests=$(printf '%s\n' "$found" | sed -n 's/^lib=//p' | head -1)
flash_tests=$(printf '%s\n' "$found" | sed -n 's/^flash=//p' | head -1)
if [ "$profile" = test ]; then
  trawl_bin=$(printf '%s\n' "$found" | sed -n 's/^bin=//p' | head -1)
else
  trawl_bin=$target/release/trawl
fi
[ -x "$lib_tests" ] && [ -x "$flash_tests" ] && [ -x "$trawl_bin" ] ||
  { echo "stage.sh: executables not found: $found" >&2; exit 1; }

loader=""
for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib /lib/x86_64-linux-gnu; do
  if [ -e "$d/libvulkan.so.1" ]; then loader=$(readlink -f "$d/libvulkan.so.1"); break; fi
done
[ -n "$loader" ] || { echo "stage.sh: libvulkan.so.1 not found (install the libvulkan1 package)" >&2; exit 1; }

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/data"
strip -o "$out/bin/trawl" "$trawl_bin"
strip -o "$out/bin/accel-tests" "$lib_tests"
strip -o "$out/bin/flash-search-tests" "$flash_tests"
cp "$loader" "$out/lib/libvulkan.so.1"
tr=$out/bin/trawl

echo "== data ($size: n $n, $nq queries, dimension $dim, u8)"
d=$out/data
"$tr" --quiet gen "$d/base.u8bin" --queries "$d/queries.u8bin" -n "$n" --nq "$nq" --dim "$dim" --seed 41
"$tr" --quiet gt "$d/base.u8bin" "$d/queries.u8bin" --metric l2 -k 10 -o "$d/gt.bin"
"$tr" --quiet build "$d/base.u8bin" "$d/graph" --metric l2 -R 32 -L 64 --pq-bytes 32 >/dev/null
"$tr" --quiet build "$d/base.u8bin" "$d/ivf" --metric l2 --kind ivf --pq-bytes 32 >/dev/null
rm "$d/base.u8bin"
tar -C "$out" -czf "$out/bin.tar.gz" bin
rm -r "$out/bin"

staged=$(du -sb "$out" | cut -f1)
tracked=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
limit=$((64 << 20))
python3 - "$out" "$profile" "$size" "$n" "$nq" "$dim" "$staged" "$tracked" "$limit" <<'EOF'
import json, os, subprocess, sys
out, profile, size, n, nq, dim, staged, tracked, limit = sys.argv[1:]
files = {}
for base, _, names in os.walk(out):
    for name in names:
        p = os.path.join(base, name)
        files[os.path.relpath(p, out)] = os.path.getsize(p)
commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                            capture_output=True, text=True).stdout.strip())
stage = {"commit": commit, "dirty": dirty, "profile": profile, "size": size,
         "data": {"n": int(n), "queries": int(nq), "dim": int(dim), "dtype": "u8", "metric": "l2", "k": 10},
         "staged_bytes": int(staged), "tracked_bytes": int(tracked), "limit_bytes": int(limit),
         "files": dict(sorted(files.items()))}
with open(os.path.join(out, "STAGE.json"), "w") as f:
    json.dump(stage, f, indent=2)
EOF
total=$((staged + tracked))
python3 -c 'import sys; s, t = int(sys.argv[1]), int(sys.argv[2]); print(f"staged {sys.argv[3]}: {s / 2**20:.1f} MiB; with the repository'"'"'s tracked files {(s + t) / 2**20:.1f} MiB of the 64 MiB that travel")' \
  "$staged" "$tracked" "$out"
if [ "$total" -gt "$limit" ]; then
  echo "stage.sh: the kit is too large to travel ($total bytes > $limit)" >&2
  exit 1
fi
