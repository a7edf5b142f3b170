#!/usr/bin/env bash
# The GPU measurement kit: one command that measures trawl's GPU backends on a machine with a
# GPU and no Rust toolchain, from what bench/gpu/stage.sh staged (executables, the Vulkan
# loader, a prepared small dataset). Nothing is built or installed there.
#
#   bench/gpu/kit.sh [--stage DIR] [--out DIR] [--budget SECONDS]
#   bench/gpu/kit.sh --local [--out DIR]
#
# Steps (each under a time limit, all of them under --budget, default 450 s):
#   env      the GPU (nvidia-smi), the Vulkan ICD files and loaders found, what wgpu
#            enumerates and opens (`trawl info --accel`); points the loader at the NVIDIA
#            driver when its ICD file is missing from the standard folders, and at the
#            driver's EGL library when the GLX one it names opens nothing (a headless machine)
#   tests    the GPU-vs-CPU equality tests (the library's `accel::` tests and the flash
#            search's GPU test), with TRAWL_REQUIRE_GPU=1
#   accel    `trawl accel-bench`: the FusionANNS filter stage (dedup → ADC → top-n) in
#            queries/s and PQ distances/s, and the FlashANNS step at 1024…8192 slots, GPU
#            against the CPU backend on every core
#   flash    `trawl bench --strategy flash` on the prepared graph index with --engine memory
#            and --engine sim:80 (no disk in the way): the GPU at flash batch 1024…8192 on one
#            search thread against the CPU backend on every core
#   disk     end to end on the device's disk (O_DIRECT, 8,192 queries): the IVF index (GPU
#            filter stage against the CPU's) and the flash search
#   report   kit.json and kit.md from the steps' JSON (bench/gpu/report.py)
# Without a usable GPU every step still runs its CPU side, and the report says what was found.
# Writes kit.md, kit.json, kit.log, env.txt and tests.log into --out (default $OUT, else
# ./gpukit-out; target/gpukit-local with --local). Exit status: 0 when every step that ran
# passed.
#
# --local is the dry run: stages a tiny kit from the `test` profile's build (what `cargo test`
# made), runs every step at tiny sizes on whatever Vulkan driver this machine has (Mesa's
# lavapipe in CI), then checks that every step passed and every output parses; with
# TRAWL_REQUIRE_GPU=1 (set by .ci/run) it also fails when no Vulkan device opened.
set -uo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)

local=0
stage=.gpukit
out=${OUT:-}
budget=450
while [ $# -gt 0 ]; do
  case "$1" in
    --local) local=1; shift ;;
    --stage) stage=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    *) echo "kit.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -z "$out" ]; then
  if [ "$local" = 1 ]; then out=target/gpukit-local; else out=gpukit-out; fi
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d /tmp/trawl-kit.XXXXXX)
trap 'rm -rf "$work"' EXIT

if [ "$local" = 1 ]; then
  stage=$work/stage
  bash bench/gpu/stage.sh --out "$stage" --profile test --size tiny || exit 1
fi
[ -f "$stage/bin.tar.gz" ] || { echo "kit.sh: no staged kit in $stage (run bench/gpu/stage.sh)" >&2; exit 1; }
stage=$(cd "$stage" && pwd)

exec > >(tee "$out/kit.log") 2>&1
t0=$(date +%s)
echo "== trawl GPU kit $(date -u +%FT%TZ) (local: $local, budget ${budget} s)"
tar -C "$work" -xzf "$stage/bin.tar.gz" || exit 1
trawl=$work/bin/trawl
data=$stage/data
cores=$(nproc)
[ -n "${XDG_RUNTIME_DIR:-}" ] || { export XDG_RUNTIME_DIR=$work/xdg; mkdir -p "$XDG_RUNTIME_DIR"; chmod 700 "$XDG_RUNTIME_DIR"; }
: >"$work/steps.tsv"

# step NAME LIMIT CMD...: runs CMD under min(LIMIT, what is left of the budget); records its
# exit status and seconds.
step() {
  local name=$1 limit=$2 left rc s
  shift 2
  left=$((budget - ($(date +%s) - t0)))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 5 ]; then
    echo "-- $name: skipped, the budget is spent"
    printf '%s\tskipped\t0\n' "$name" >>"$work/steps.tsv"
    return 0
  fi
  if [ "$1" = bash ]; then echo "-- $name (limit ${limit} s)"; else echo "-- $name (limit ${limit} s): $*"; fi
  s=$(date +%s.%N)
  timeout -k 5 "$limit" "$@"
  rc=$?
  printf '%s\t%s\t%s\n' "$name" "$rc" "$(echo "$(date +%s.%N) $s" | awk '{printf "%.1f", $1 - $2}')" >>"$work/steps.tsv"
  [ "$rc" = 124 ] && echo "-- $name: stopped at its time limit"
  [ "$rc" = 0 ] || echo "-- $name: exit status $rc"
  return 0
}

# ---------------------------------------------------------------- env
env_report() {
  echo "date: $(date -u +%FT%TZ)"
  echo "host: $(uname -srm); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'); $cores cores"
  echo "staged: $(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["commit"][:12], "profile", s["profile"], "size", s["size"], "dirty" if s["dirty"] else "clean")' "$stage/STAGE.json")"
  if command -v nvidia-smi >/dev/null; then
    echo "nvidia-smi: $(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>&1 | head -4)"
  else
    echo "nvidia-smi: not found"
  fi
  echo "Vulkan ICD files:"
  local found=0 d f
  for d in /etc/vulkan/icd.d /usr/share/vulkan/icd.d /usr/local/share/vulkan/icd.d \
           /usr/local/nvidia/share/vulkan/icd.d /usr/local/nvidia/icd.d /etc/glvnd/egl_vendor.d; do
    for f in "$d"/*.json; do
      [ -f "$f" ] || continue
      found=1
      echo "  $f: $(tr -d '\n ' <"$f" | head -c 300)"
    done
  done
  [ "$found" = 1 ] || echo "  none in the standard folders"
  echo "libraries (ldconfig):"
  ldconfig -p 2>/dev/null | grep -E 'libvulkan|libGLX_nvidia|libnvidia-glcore|libEGL_nvidia|libcuda\.so' | sed 's/^/  /' || true
  for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do
    [ -d "$d" ] && ls "$d" 2>/dev/null | grep -E 'libGLX_nvidia|libvulkan|libnvidia-glcore' | sed "s|^|  $d/|"
  done
  echo "loader used: $loader"
  if [ -n "${VK_DRIVER_FILES:-}" ]; then
    echo "driver files: $VK_DRIVER_FILES${icd_note:+ — $icd_note}"
  else
    echo "driver files: the loader's own search"
  fi
}

# The Vulkan loader: the system's when it has one, else the staged one.
if ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1 '; then
  loader="system ($(ldconfig -p | grep -m1 'libvulkan\.so\.1 ' | sed 's/.*=> //'))"
else
  export LD_LIBRARY_PATH="$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  loader="staged ($stage/lib/libvulkan.so.1)"
fi
# The NVIDIA driver's ICD: a file outside the loader's standard folders is named to it; a
# driver library without any ICD file gets one written here.
icd_note=""
have_icd=0
for f in /etc/vulkan/icd.d/*nvidia*.json /usr/share/vulkan/icd.d/*nvidia*.json; do
  [ -f "$f" ] && have_icd=1
done
if [ -z "${VK_DRIVER_FILES:-}" ] && [ "$have_icd" = 0 ]; then
  for f in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/local/nvidia/icd.d/nvidia_icd.json /usr/local/share/vulkan/icd.d/nvidia_icd.json; do
    if [ -f "$f" ]; then
      export VK_DRIVER_FILES=$f VK_ICD_FILENAMES=$f
      icd_note="the NVIDIA ICD file found outside the standard folders"
      break
    fi
  done
  if [ -z "${VK_DRIVER_FILES:-}" ]; then
    glx=$(ldconfig -p 2>/dev/null | grep -m1 'libGLX_nvidia\.so\.0' | sed 's/.*=> //')
    [ -n "$glx" ] || glx=$(ls /usr/local/nvidia/lib64/libGLX_nvidia.so.0 2>/dev/null || true)
    if [ -n "$glx" ]; then
      mkdir -p "$work/icd"
      printf '{"file_format_version":"1.0.0","ICD":{"library_path":"%s","api_version":"1.3.0"}}\n' "$glx" >"$work/icd/nvidia_icd.json"
      export VK_DRIVER_FILES=$work/icd/nvidia_icd.json VK_ICD_FILENAMES=$work/icd/nvidia_icd.json
      icd_note="no NVIDIA ICD file; one written for $glx"
    fi
  fi
fi
# A headless machine: the driver's GLX library, which the NVIDIA ICD file names, answers no
# vkCreateInstance without a display server ("Could not get 'vkCreateInstance' via
# 'vk_icdGetInstanceProcAddr' for ICD libGLX_nvidia.so.0"); its EGL library carries the same
# Vulkan driver and works headless. When the GPU backend does not open and that library is
# there, an ICD file naming it is written and used.
if [ -z "${TRAWL_KIT_KEEP_ICD:-}" ] && ! timeout 60 "$trawl" info --accel gpu >/dev/null 2>&1; then
  egl=$(ldconfig -p 2>/dev/null | grep -m1 'libEGL_nvidia\.so\.0' | sed 's/.*=> //')
  [ -n "$egl" ] || egl=$(ls /usr/local/nvidia/lib64/libEGL_nvidia.so.0 2>/dev/null || true)
  if [ -n "$egl" ]; then
    mkdir -p "$work/icd"
    printf '{"file_format_version":"1.0.0","ICD":{"library_path":"%s","api_version":"1.3.0"}}\n' "$egl" >"$work/icd/nvidia_egl_icd.json"
    if VK_DRIVER_FILES=$work/icd/nvidia_egl_icd.json VK_ICD_FILENAMES=$work/icd/nvidia_egl_icd.json \
        timeout 60 "$trawl" info --accel gpu >/dev/null 2>&1; then
      export VK_DRIVER_FILES=$work/icd/nvidia_egl_icd.json VK_ICD_FILENAMES=$work/icd/nvidia_egl_icd.json
      icd_note="the GPU backend did not open through the ICD files found (GLX, headless); one written for $egl"
    fi
  fi
fi
step env 60 bash -c "$(declare -f env_report); $(declare -p loader icd_note stage cores); env_report" | tee "$out/env.txt"
# What wgpu enumerates and whether the GPU backend opens (its error says why not).
step accel-info 60 sh -c "'$trawl' info --accel auto --json >'$work/accel.json' && { '$trawl' info --accel gpu 2>&1 || true; }" | tee -a "$out/env.txt"

# Whether the accelerator that opened is a GPU the measurement counts: a real one, or in the
# dry run any Vulkan device (lavapipe).
gpu=$(python3 - "$work/accel.json" "$local" <<'EOF'
import json, sys
try:
    a = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    print(0); sys.exit()
ok = a.get("backend") == "gpu" and (sys.argv[2] == "1" or not a.get("adapter", "").endswith("Cpu device"))
print(1 if ok else 0)
EOF
)
if [ "$gpu" = 1 ]; then
  echo "GPU: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["adapter"])' "$work/accel.json")"
  accels=cpu,gpu
else
  echo "GPU: none usable — the CPU sides are measured alone (see env.txt for what was found)"
  accels=cpu
fi

# ---------------------------------------------------------------- tests
run_tests() {
  local rc=0
  if [ "$gpu" = 1 ]; then export TRAWL_REQUIRE_GPU=1; fi
  "$work/bin/accel-tests" accel:: --test-threads=4 || rc=1
  "$work/bin/flash-search-tests" gpu_backend --test-threads=2 || rc=1
  return $rc
}
step tests 150 bash -c "$(declare -f run_tests); $(declare -p work gpu); run_tests" >"$out/tests.log" 2>&1
grep -E '^test result|skipping a GPU test|panicked|FAILED' "$out/tests.log" | sort | uniq -c

# ---------------------------------------------------------------- accel
if [ "$local" = 1 ]; then
  sizes=(-n 20000 --batches 4,16 --cands 500 --top-n 50 --slots 16,64 --list 16 --degree 16 --query-steps 8 --seconds 0.2)
  batches=(16 64); fl=16; cpu_batch=8; nprobe=2,4; gpu_ivf_batch=16
else
  sizes=(-n 1000000 --batches 16,64,256,1024,4096 --cands 20000 --top-n 1000 --slots 1024,2048,4096,8192 --list 64 --degree 64 --query-steps 64 --seconds 1)
  batches=(1024 2048 4096 8192); fl=64; cpu_batch=32; nprobe=8,16,32; gpu_ivf_batch=256
fi
step accel 150 "$trawl" accel-bench --accel "$accels" --threads 0 "${sizes[@]}" --json "$work/accel-bench.json"

# ---------------------------------------------------------------- flash (memory, sim)
q=(--queries "$data/queries.u8bin" --gt "$data/gt.bin" -k 10 --quiet)
qd=("${q[@]}" --max-queries 8192)
flash_runs() {
  local e=$1 b tag rc=0
  tag=${e//:/-}
  "$trawl" bench "$data/graph" "${q[@]}" -L "$fl" --strategy flash --engine "$e" --accel cpu \
    --threads "$cores" --flash-batch "$cpu_batch" --json "$work/flash-$tag-cpu-t$cores-b$cpu_batch.json" || rc=1
  [ "$gpu" = 1 ] || return $rc
  for b in "${batches[@]}"; do
    # A batch whose buffers pass one binding of the device ("use a smaller batch") is a limit
    # of the device, reported as such; any other failure fails the step.
    if ! "$trawl" bench "$data/graph" "${q[@]}" -L "$fl" --strategy flash --engine "$e" --accel gpu \
        --threads 1 --flash-batch "$b" --json "$work/flash-$tag-gpu-t1-b$b.json" 2>"$work/err"; then
      cat "$work/err" >&2
      if grep -q 'use a smaller batch' "$work/err"; then
        echo "flash batch $b: does not fit this device (above), not measured"
      else
        rc=1
      fi
    fi
  done
  # The CPU backend with the GPU's largest batch spread over its threads.
  b=${batches[-1]}
  "$trawl" bench "$data/graph" "${q[@]}" -L "$fl" --strategy flash --engine "$e" --accel cpu \
    --threads "$cores" --flash-batch $((b / cores)) --json "$work/flash-$tag-cpu-t$cores-b$((b / cores)).json" || rc=1
  return $rc
}
fdef="$(declare -f flash_runs); $(declare -p trawl data q fl cores cpu_batch gpu batches work)"
step flash-memory 120 bash -c "$fdef; flash_runs memory"
step flash-sim 120 bash -c "$fdef; flash_runs sim:80"

# ---------------------------------------------------------------- disk (O_DIRECT)
disk_runs() {
  local rc=0 b
  "$trawl" bench "$data/ivf" "${qd[@]}" -L "$nprobe" --accel cpu --threads "$cores" \
    --json "$work/disk-ivf-cpu-t$cores.json" || rc=1
  "$trawl" bench "$data/graph" "${qd[@]}" -L "$fl" --strategy flash --accel cpu --threads "$cores" \
    --flash-batch "$cpu_batch" --json "$work/disk-flash-cpu-t$cores-b$cpu_batch.json" || rc=1
  [ "$gpu" = 1 ] || return $rc
  "$trawl" bench "$data/ivf" "${qd[@]}" -L "$nprobe" --accel gpu --threads "$cores" \
    --json "$work/disk-ivf-gpu-t$cores.json" || rc=1
  "$trawl" bench "$data/ivf" "${qd[@]}" -L "$nprobe" --accel gpu --threads 4 --accel-batch "$gpu_ivf_batch" \
    --json "$work/disk-ivf-gpu-t4-ab$gpu_ivf_batch.json" || rc=1
  for b in "${batches[0]}" "${batches[-2]}"; do
    "$trawl" bench "$data/graph" "${qd[@]}" -L "$fl" --strategy flash --accel gpu --threads 1 \
      --flash-batch "$b" --json "$work/disk-flash-gpu-t1-b$b.json" || rc=1
  done
  return $rc
}
# At most `disk_queries` queries: the device's IOPS, not the GPU, bound these runs.
step disk 120 bash -c "$(declare -f disk_runs); $(declare -p trawl data qd fl nprobe cores cpu_batch gpu batches gpu_ivf_batch work); disk_runs"

# ---------------------------------------------------------------- report
check=()
[ "$local" = 1 ] && check=(--check)
[ "$local" = 1 ] && [ "${TRAWL_REQUIRE_GPU:-}" = 1 ] && check+=(--require-gpu)
python3 "$repo/bench/gpu/report.py" --work "$work" --stage "$stage" --out "$out" --gpu "$gpu" "${check[@]}"
rc=$?
echo "== done in $(($(date +%s) - t0)) s: $out/kit.md"
exit $rc
