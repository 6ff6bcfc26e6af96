#!/usr/bin/env bash
# The CUDA checks, for a GPU machine that has the CUDA toolkit and a driver but no LLVM/MLIR (the
# device machines this project is sometimes lent; docs/devices.md). Two halves:
#
#   scripts/gpu-check.sh prepare [--no-speed] [BUILD]   here, with a CUDA-enabled build (default
#       build/): builds helm-device-gpu-tests and helm-rt-portable (LLVM and libstdc++ linked
#       statically, no oneDNN: they need only cuBLAS and system libraries there),
#       compiles CUDA packages of corpus models (--target=h100-pcie, all on the GPU and split
#       cpu(2)->cuda), runs each model's all-CPU package here for the references (greedy ids at
#       batch 1 and 2, the first step's logits), and, for the speed part, packages of Llama-3-8B-
#       and Qwen3-0.6B-shaped models at f16 and q4_k_m whose weights repeat (bench/gpu/
#       make_periodic_gguf.py: 16 GB packages that zstd --long=30 shrinks to a few MB; the GGUF
#       files are cached in models/.cache/gpu, ~17 GB, and the step takes several minutes;
#       GPU_CHECK_SPEED=qwen3 keeps only the packages whose name contains it), and packs it all
#       into .gpu/bundle.tar.xz.
#   scripts/gpu-check.sh run               there, from the repository root, with .gpu carried:
#       runs every CUDA unit test, then --check and every package, and compares each against its
#       all-CPU reference; then the speed part (not a check): per realistic-size package decode and
#       prefill tok/s, batch-16 decode, GB/s and % of the device copy bandwidth it measures, the
#       time per token beyond its weights' bytes, allocations and host waits per step, and the
#       plan's prediction beside the measurement. Writes the log to $OUT/gpu-check.log (or
#       .gpu/gpu-check.log); exit 1 when a check failed.
#
# The tree that travels to the GPU machine is limited (64 MiB with the tracked files), so the
# bundle carries only what the checks need, compressed, and the references rather than the
# all-CPU packages.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
gpu_dir=$root/.gpu
# A model, or model@format for a package compiled with --quantize=format.
models=(llama-fp32 qwen3-kv-fp32 llama-kv-gqa-fp32 phi3-fp32 mistral-fp32
        qwen2-extdata-fp16 qwen3-kv-fp32@q8_0 qwen3-kv-fp32@q4_k_m
        llama-kv-gqa-fp32@q4_0 llama-fp16@q4_1)
splits=(0 2)
prompt1=1,2,3,4,5
prompt2=7,8,9
# A prompt past the GEMV's 32 rows: its prefill multiplies on the tensor cores (block weights:
# f16 panels or TF32 products, 11-bit roundings of weights and activations), checked against the
# all-CPU logits within prefill_tolerance.
prompt40=$(seq -s, 1 40)
prefill_tolerance=1e-2
new_tokens=32
long_tokens=200
# First-step logits against the all-CPU package's, relative to the largest: f32 models within 1e-3
# (a GPU sums in another order; seen: below 2e-6); f16 models within 4e-3, four f16 steps of
# 2^-10 (seen on an H200: 1.7e-3, where the GPU and the CPU round f16 intermediates at different
# points, e.g. cuBLAS's f32 accumulation against our GEMV's).
# Packages with weights in blocks (model@format) are compared with their all-CPU package run
# with HELM_QUANT_EXACT=1: the CPU then multiplies f32 activations with the dequantized weights,
# as the GPU does (by default the CPU quantizes each linear's input to 8 bits per block for
# integer dot products, docs/quantization.md), so the same tolerances and identical ids apply.
# The split packages' CPU stage runs with it too.
tolerance_for() { [[ $1 == *fp16* ]] && echo 4e-3 || echo 1e-3; }

die() { echo "gpu-check: $*" >&2; exit 2; }

# The speed part's packages: name, make_periodic_gguf.py preset, helmc flags, helm-rt flags. They
# are planned for the H200 machine these checks ran on (bench/gpu/h200.json: its measured
# bandwidths), so the plan's prediction can be held against the measurement there; the split one
# for that H200 with its GPU capped at 8 GiB, and runs with that budget.
speed_packages=(
  "qwen3-0.6b-f16-gpu|qwen3-0.6b|--target=bench/gpu/h200.json|"
  "qwen3-0.6b-q4_k_m-gpu|qwen3-0.6b|--target=bench/gpu/h200.json --quantize=q4_k_m|"
  "llama-8b-f16-gpu|llama-8b|--target=bench/gpu/h200.json|"
  "llama-8b-q4_k_m-gpu|llama-8b|--target=bench/gpu/h200.json --quantize=q4_k_m|"
  "llama-8b-f16-split-8g|llama-8b|--target=bench/gpu/h200-capped-8g.json|--gpu-memory 8G"
)

prepare_speed() {
  local build=$1 stage=$2 cache=$root/models/.cache/gpu
  mkdir -p "$cache" "$stage/speed" "$stage/tools"
  local zstd_bin
  zstd_bin=$(command -v zstd) || die "the speed part needs zstd here (apt-get install zstd)"
  # A GPU machine may lack zstd: this one's binary, with its one uncommon library, travels along.
  cp "$zstd_bin" "$stage/tools/zstd"
  local lz4
  lz4=$(ldd "$zstd_bin" | awk '/liblz4/ {print $3}')
  [[ -n $lz4 ]] && cp "$lz4" "$stage/tools/"
  local entry name preset flags
  for entry in "${speed_packages[@]}"; do
    IFS='|' read -r name preset flags _ <<<"$entry"
    [[ $name == *${GPU_CHECK_SPEED:-}* ]] || continue
    local gguf=$cache/$preset.gguf
    if [[ ! -f $gguf ]]; then
      echo "gpu-check: generating $gguf"
      "$root/.venv/bin/python" "$root/bench/gpu/make_periodic_gguf.py" --preset "$preset" --out "$gguf" ||
        die "make_periodic_gguf.py failed"
    fi
    echo "gpu-check: compiling $name ($flags)"
    # shellcheck disable=SC2086
    (cd "$root" && "$build/bin/helmc" "$gguf" -q $flags --emit=plan-json -o "$stage/speed/$name.plan.json") ||
      die "helmc --emit=plan-json failed on $name"
    # shellcheck disable=SC2086
    (cd "$root" && "$build/bin/helmc" "$gguf" -q $flags -o "$cache/$name.helmpkg") || die "helmc failed on $name"
    zstd -q -f --long=30 -T0 -3 "$cache/$name.helmpkg" -o "$stage/speed/$name.helmpkg.zst" ||
      die "zstd failed on $name"
    rm -f "$cache/$name.helmpkg"
  done
}

prepare() {
  local speed=1
  if [[ ${1:-} == --no-speed ]]; then
    speed=0
    shift
  fi
  local build=${1:-$root/build}
  [[ -f $build/build.ninja ]] || die "no build in $build (run the README's install first)"
  grep -q 'HELM_HAVE_CUDA\|cudart_static' "$build/build.ninja" ||
    die "$build was configured without CUDA (nvcc not found)"
  echo "gpu-check: building helm-rt-portable, helm-device-gpu-tests and helmc in $build"
  ninja -C "$build" helm-rt-portable helm-device-gpu-tests helm-gpu-linear-bench helmc helm-rt \
    >/dev/null ||
    die "build failed"
  rm -rf "$gpu_dir/stage" && mkdir -p "$gpu_dir/stage/pkg" "$gpu_dir/stage/ref"
  local stage=$gpu_dir/stage
  cp "$build/bin/helm-rt-portable" "$stage/helm-rt"
  cp "$build/test/unit/runtime/helm-device-gpu-tests" "$build/test/unit/runtime/helm-gpu-linear-bench" \
    "$stage/"
  strip "$stage/helm-rt" "$stage/helm-device-gpu-tests" "$stage/helm-gpu-linear-bench"
  local model k
  for model in "${models[@]}"; do
    local onnx=$root/test/models/${model%@*}/model.onnx
    [[ -f $onnx ]] || die "missing corpus model $onnx"
    local quantize=()
    [[ $model == *@* ]] && quantize=(--quantize="${model#*@}")
    local cpu_pkg=$gpu_dir/cpu-$model.helmpkg
    "$build/bin/helmc" "$onnx" -q "${quantize[@]}" -o "$cpu_pkg" || die "helmc failed on $model"
    if [[ $model == *@* ]]; then export HELM_QUANT_EXACT=1; else unset HELM_QUANT_EXACT; fi
    "$build/bin/helm-rt" "$cpu_pkg" --prompt-ids $prompt1 -n $new_tokens --temperature 0 \
      --ignore-eos --emit-ids -q 2>/dev/null >"$stage/ref/$model.b1.ids" || die "reference run failed: $model"
    "$build/bin/helm-rt" "$cpu_pkg" --prompt-ids $prompt1 --prompt-ids $prompt2 -n $new_tokens \
      --temperature 0 --ignore-eos --emit-ids -q 2>/dev/null >"$stage/ref/$model.b2.ids" ||
      die "reference run failed: $model (batch 2)"
    "$build/bin/helm-rt" "$cpu_pkg" --prompt-ids $prompt1 -n 1 --temperature 0 -q \
      --logits-out "$stage/ref/$model.logits" >/dev/null 2>&1 || die "reference logits failed: $model"
    "$build/bin/helm-rt" "$cpu_pkg" --prompt-ids "$prompt40" -n 1 --temperature 0 -q \
      --logits-out "$stage/ref/$model.logits40" >/dev/null 2>&1 || die "reference logits failed: $model (40 tokens)"
    "$build/bin/helm-rt" "$cpu_pkg" --prompt-ids $prompt1 -n $long_tokens --temperature 0 \
      --ignore-eos --emit-ids -q 2>/dev/null >"$stage/ref/$model.long.ids" ||
      die "reference run failed: $model (long)"
    unset HELM_QUANT_EXACT
    rm -f "$cpu_pkg"
    for k in "${splits[@]}"; do
      "$build/bin/helmc" "$onnx" -q "${quantize[@]}" --target=h100-pcie --force-split=$k \
        -o "$stage/pkg/$model.k$k.helmpkg" || die "helmc --target=h100-pcie failed on $model"
    done
  done
  [[ $speed == 1 ]] && prepare_speed "$build" "$stage"
  echo "gpu-check: packing $gpu_dir/bundle.tar.xz"
  tar cf - -C "$stage" . | xz -9e -T2 >"$gpu_dir/bundle.tar.xz" || die "packing failed"
  rm -rf "$stage"
  # The device tool counts disk blocks (du), not bytes.
  local tracked bundle
  tracked=$(cd "$root" && git ls-files -z | xargs -0 du -ck 2>/dev/null | tail -1 | cut -f1)
  bundle=$(du -k "$gpu_dir/bundle.tar.xz" | cut -f1)
  echo "gpu-check: bundle $bundle KiB; with the tracked files $((bundle + tracked)) KiB of the" \
    "65536 KiB that may travel"
  echo "gpu-check: on the GPU machine: carry .gpu, run 'bash scripts/gpu-check.sh run'"
}

run() {
  local out=${OUT:-$gpu_dir}
  mkdir -p "$out"
  local log=$out/gpu-check.log
  exec > >(tee "$log") 2>&1
  [[ -f $gpu_dir/bundle.tar.xz ]] || die "no $gpu_dir/bundle.tar.xz (run 'prepare' first, carry .gpu)"
  local work=/tmp/helm-gpu-check
  rm -rf "$work" && mkdir -p "$work" && xz -dc "$gpu_dir/bundle.tar.xz" | tar xf - -C "$work" ||
    die "cannot unpack the bundle"
  local cublas
  cublas=$(find /usr/local/cuda*/ /usr/lib /opt -name 'libcublas.so.13' 2>/dev/null | head -1)
  [[ -n $cublas ]] || echo "gpu-check: warning: no libcublas.so.13 found"
  export LD_LIBRARY_PATH=${cublas:+$(dirname "$cublas")}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  echo "== machine"
  nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader
  grep -m1 'model name' /proc/cpuinfo
  echo "cuBLAS: ${cublas:-none}"
  local failures=0
  echo "== CUDA unit tests (helm-device-gpu-tests)"
  timeout 300 "$work/helm-device-gpu-tests" --gtest_brief=1 || failures=$((failures + 1))
  echo "== packages against their all-CPU references"
  local pkg
  for pkg in "$work"/pkg/*.helmpkg; do
    local name model
    name=$(basename "$pkg" .helmpkg)
    model=${name%.k*}
    echo "-- $name"
    # A split package's CPU stage computes as its reference did (see tolerance_for).
    if [[ $model == *@* ]]; then export HELM_QUANT_EXACT=1; else unset HELM_QUANT_EXACT; fi
    timeout 60 "$work/helm-rt" "$pkg" --check || { failures=$((failures + 1)); continue; }
    local got1 got2
    got1=$(timeout 120 "$work/helm-rt" "$pkg" --prompt-ids $prompt1 -n $new_tokens --temperature 0 \
      --ignore-eos --emit-ids -q --stats-json "$work/$name.b1.json")
    got2=$(timeout 120 "$work/helm-rt" "$pkg" --prompt-ids $prompt1 --prompt-ids $prompt2 \
      -n $new_tokens --temperature 0 --ignore-eos --emit-ids -q)
    timeout 120 "$work/helm-rt" "$pkg" --prompt-ids $prompt1 -n 1 --temperature 0 -q \
      --logits-out "$work/$name.logits" >/dev/null
    timeout 120 "$work/helm-rt" "$pkg" --prompt-ids "$prompt40" -n 1 --temperature 0 -q \
      --logits-out "$work/$name.logits40" >/dev/null
    python3 - "$work/ref/$model.logits40" "$work/$name.logits40" "$prefill_tolerance" <<'EOF' ||
import struct, sys
def floats(path):
    try:
        data = open(path, "rb").read()
    except OSError:
        return ()
    return struct.unpack(f"<{len(data) // 4}f", data)
want, got, tol = floats(sys.argv[1]), floats(sys.argv[2]), float(sys.argv[3])
if len(want) != len(got) or not want:
    print(f"   40-token prompt logits: {len(got)} values, want {len(want)}")
    sys.exit(1)
err = max(abs(a - b) for a, b in zip(want, got))
scale = max(abs(a) for a in want)
print(f"   40-token prompt logits: max |diff| {err:.3g}, {err / scale:.3g} of the largest: "
      f"{'within' if err <= tol * scale else 'OUTSIDE'} {tol}")
sys.exit(0 if err <= tol * scale else 1)
EOF
      failures=$((failures + 1))
    python3 - "$work/ref/$model.b1.ids" "$work/ref/$model.b2.ids" "$work/ref/$model.logits" \
      "$work/$name.logits" "$work/$name.b1.json" "$(tolerance_for "$model")" "$got1" "$got2" <<'EOF' ||
import json, struct, sys
ref1, ref2, ref_logits, got_logits, stats, tol, got1, got2 = sys.argv[1:9]
ok = True
def compare(label, want_text, got_text):
    global ok
    want = [l.split(",") for l in want_text.split()]
    got = [l.split(",") for l in got_text.split()]
    if want == got:
        print(f"   {label}: ids identical ({sum(map(len, want))} tokens)")
        return
    ok = False
    first = next((i for i, (a, b) in enumerate(zip(sum(want, []), sum(got, []))) if a != b), None)
    print(f"   {label}: ids DIFFER (first at flat index {first}): want {want} got {got}")
compare("batch 1", open(ref1).read(), got1)
compare("batch 2", open(ref2).read(), got2)
def floats(path):
    data = open(path, "rb").read()
    return struct.unpack(f"<{len(data) // 4}f", data)
want, got = floats(ref_logits), floats(got_logits)
if len(want) != len(got) or not want:
    ok = False
    print(f"   first logits: {len(got)} values, want {len(want)}")
else:
    err = max(abs(a - b) for a, b in zip(want, got))
    scale = max(abs(a) for a in want)
    good = err <= float(tol) * scale
    ok &= good
    print(f"   first logits: max |diff| {err:.3g}, {err / scale:.3g} of the largest ({scale:.3g}): "
          f"{'within' if good else 'OUTSIDE'} {tol}")
try:
    s = json.load(open(stats))
    keys = ("device", "link_bytes_per_step", "link_transfers_per_step", "link_load_bytes",
            "device_peak_bytes", "decode_tok_s", "ttft_ms")
    print("   stats: " + ", ".join(f"{k}={s[k]}" for k in keys if k in s))
except (OSError, ValueError) as e:
    ok = False
    print(f"   stats: unreadable ({e})")
sys.exit(0 if ok else 1)
EOF
      failures=$((failures + 1))
    # All on the GPU: a long run on a small budget, so KV pages are evicted to host RAM and
    # streamed back for attention, against the all-CPU ids.
    if [[ $name == *.k0 ]]; then
      local load budget long
      load=$(python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["link_load_bytes"]))' \
        "$work/$name.b1.json" 2>/dev/null || echo 0)
      budget=$((load + 512 * 1024))
      long=$(timeout 120 "$work/helm-rt" "$pkg" --prompt-ids $prompt1 -n $long_tokens --temperature 0 \
        --ignore-eos --emit-ids -q --kv-page 16 --gpu-memory $budget --kv-watermark 0.1 \
        --stats-json "$work/$name.long.json")
      python3 - "$work/ref/$model.long.ids" "$work/$name.long.json" "$long" "$budget" <<'EOF' ||
import json, sys
ref, stats, got, budget = sys.argv[1:5]
want = open(ref).read().split()
s = json.load(open(stats)) if got else {}
same = got.split() == want
evicted = s.get("kv_pages_evicted", 0)
print(f"   {len(want[0].split(',')) if want else 0} tokens on {int(budget) // 1024} KiB of GPU memory: "
      f"ids {'identical' if same else 'DIFFER'}; KV pages evicted {evicted}, "
      f"prefetched {s.get('kv_pages_prefetched', 0)}, at most {s.get('kv_device_pages_peak', 0)} "
      f"on the device")
sys.exit(0 if same and evicted > 0 else 1)
EOF
        failures=$((failures + 1))
    fi
  done
  echo "== linear speed (helm-gpu-linear-bench; not a check)"
  timeout 240 "$work/helm-gpu-linear-bench" --repeats 20 || echo "helm-gpu-linear-bench failed"
  echo "== the same decode calls on the staged GEMV (HELM_CUDA_QGEMV=staged; not a check)"
  HELM_CUDA_QGEMV=staged timeout 120 "$work/helm-gpu-linear-bench" --repeats 10 --decode-only ||
    echo "helm-gpu-linear-bench failed"
  echo "== the same decode calls on the q4_k lane GEMV (HELM_CUDA_QGEMV=lanes; not a check)"
  HELM_CUDA_QGEMV=lanes timeout 120 "$work/helm-gpu-linear-bench" --repeats 10 --decode-only ||
    echo "helm-gpu-linear-bench failed"
  run_speed "$work"
  echo "== result: $failures failing group(s)"
  [[ $failures -eq 0 ]]
}

# The speed part: each realistic-size package in turn, unpacked, run and deleted (the 8B f16
# packages are 16 GB each). Figures only; nothing here fails the check.
run_speed() {
  local work=$1
  [[ -d $work/speed ]] || { echo "== speed: not in this bundle (prepared with --no-speed)"; return 0; }
  echo "== speed at realistic size (not a check)"
  local zstd_cmd=zstd
  if ! command -v zstd >/dev/null; then
    chmod +x "$work/tools/zstd"
    zstd_cmd=$work/tools/zstd
    export LD_LIBRARY_PATH=$work/tools${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
  local copy
  copy=$(timeout 60 "$work/helm-gpu-linear-bench" --bandwidth | sed -n 's/^device copy: \([0-9.]*\) GB.*/\1/p')
  echo "device copy bandwidth (read + write): ${copy:-unknown} GB/s"
  local prompt128 prompts16=() i
  prompt128=$(seq -s, 10 137)
  for i in $(seq 1 16); do prompts16+=(--prompt-ids "$(seq -s, $((100 * i)) $((100 * i + 31)))"); done
  local entry name preset flags runflags
  for entry in "${speed_packages[@]}"; do
    IFS='|' read -r name preset flags runflags <<<"$entry"
    local zst=$work/speed/$name.helmpkg.zst pkg=$work/speed.helmpkg
    [[ -f $zst ]] || continue
    echo "-- $name ($flags${runflags:+; helm-rt $runflags})"
    local t0=$SECONDS
    "$zstd_cmd" -q -d -f --long=30 "$zst" -o "$pkg" || { echo "   cannot unpack"; continue; }
    echo "   unpacked $(du -BM "$pkg" | cut -f1) in $((SECONDS - t0)) s"
    local n=128
    [[ $name == *split* ]] && n=32
    # shellcheck disable=SC2086
    timeout 300 "$work/helm-rt" "$pkg" --prompt-ids "$prompt128" -n $n --temperature 0 --ignore-eos -q \
      --stats-json "$work/$name.b1.json" $runflags >/dev/null 2>"$work/$name.err" ||
      { echo "   batch 1 run failed:"; tail -3 "$work/$name.err"; }
    if [[ $name != *split* ]]; then
      # shellcheck disable=SC2086
      timeout 300 "$work/helm-rt" "$pkg" "${prompts16[@]}" -n 64 --temperature 0 --ignore-eos -q \
        --stats-json "$work/$name.b16.json" $runflags >/dev/null 2>"$work/$name.err" ||
        { echo "   batch 16 run failed:"; tail -3 "$work/$name.err"; }
    fi
    # The q4_k weights once more on the lane GEMV (off by default; the q6_k ones stay on the
    # byte-load GEMV): batch-1 decode beside the default's.
    local lanes=
    if [[ $name == *q4_k* ]]; then
      # shellcheck disable=SC2086
      if HELM_CUDA_QGEMV=lanes timeout 300 "$work/helm-rt" "$pkg" --prompt-ids "$prompt128" -n $n \
        --temperature 0 --ignore-eos -q --stats-json "$work/$name.lanes.json" $runflags \
        >/dev/null 2>"$work/$name.err"; then
        lanes=$(python3 -c 'import json, sys
lanes, default = (json.load(open(p)).get("decode_tok_s", 0) for p in sys.argv[1:3])
print(f"decode {lanes:.1f} tok/s (default GEMV: {default:.1f} tok/s)")' \
          "$work/$name.lanes.json" "$work/$name.b1.json" 2>&1)
      else
        lanes="run failed: $(tail -1 "$work/$name.err")"
      fi
    fi
    rm -f "$pkg"
    python3 "$root/scripts/gpu_speed_report.py" "$work/$name.b1.json" "$work/$name.b16.json" \
      "$work/speed/$name.plan.json" "${copy:-0}"
    if [[ -n $lanes ]]; then echo "   with HELM_CUDA_QGEMV=lanes: $lanes"; fi
  done
}

case ${1:-} in
  prepare) shift; prepare "$@" ;;
  run) run ;;
  *) echo "usage: scripts/gpu-check.sh prepare [BUILD] | run" >&2; exit 2 ;;
esac
