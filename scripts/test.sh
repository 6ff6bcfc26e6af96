#!/usr/bin/env bash
# The whole test suite: build, then ctest (lit + GoogleTest + importer conformance + end-to-end
# generation against ONNX Runtime + tokenizer against Hugging Face tokenizers), the unit tests again
# under ASan+UBSan, and the fuzzers (importer, package reader, GGUF reader, tokenizer.json, target profile, helm-rt and helmc command lines,
# chat templates, the server's request bodies) for a bounded time each. Exits non-zero on any failure.
#   HELM_FUZZ_SECONDS  fuzzing time (default 60)
#   HELM_SKIP_SANITIZERS=1 / HELM_SKIP_FUZZ=1  skip those stages (local iteration only; CI runs all)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
[ -x .venv/bin/python ] || scripts/install-deps.sh
jobs="${HELM_JOBS:-2}"

# llama.cpp, the reference for GGUF files (e2e-gguf), built once from the llama-cpp-python sdist
# on PyPI into bench/.cache/llama.cpp/ (idempotent: a second run only checks its stamp).
echo "== llama.cpp (the GGUF reference), the default model's GGUF file and the real Gemma 3 file"
bench/build-llama-cpp.sh
.venv/bin/python scripts/fetch-default-model.py --gguf-only >/dev/null
.venv/bin/python scripts/fetch-gguf.py gemma3-270m >/dev/null

echo "== build (default preset)"
cmake --preset default >/dev/null
cmake --build build -j "$jobs"
# The GPU machine's binaries (scripts/gpu-check.sh prepare) are not in the default build: build
# them here too, so that a link they lose shows before a GPU is lent.
if cmake --build build --target help | grep -q 'helm-device-gpu-tests'; then
  echo "== build (the GPU check's binaries)"
  cmake --build build -j "$jobs" --target helm-device-gpu-tests helm-gpu-linear-bench helm-rt-portable
fi
echo "== ctest"
ctest --test-dir build --output-on-failure

if [ "${HELM_SKIP_SANITIZERS:-0}" != 1 ]; then
  echo "== unit tests under ASan+UBSan"
  cmake --preset asan >/dev/null
  cmake --build build-asan -j "$jobs" --target helm-unit-tests
  ASAN_OPTIONS=detect_leaks=0 ctest --test-dir build-asan -E '^(lit|import-config-conformance|e2e-generation|e2e-quantized|e2e-onnx-quantized|e2e-perplexity|e2e-split-emu|e2e-kv-offload|e2e-gguf|e2e-server|tokenizer-vs-hf)$' --output-on-failure
fi

if [ "${HELM_SKIP_FUZZ:-0}" != 1 ]; then
  secs="${HELM_FUZZ_SECONDS:-60}"
  cmake --preset fuzz >/dev/null
  # run_fuzzer NAME TARGET SEED_DIR...: a bounded libFuzzer run on a scratch copy of the seeds and
  # regression inputs. max_len is the largest seed (at least 64 KiB), so every seed reaches the
  # target whole; any crash, leak of the time limit or sanitizer report makes the run, and the
  # script, fail.
  scratch=()
  trap 'rm -rf "${scratch[@]}"' EXIT
  run_fuzzer() {
    local name="$1" target="$2"; shift 2
    echo "== ${name} fuzzer (${secs} s, libFuzzer + ASan/UBSan)"
    cmake --build build-fuzz -j "$jobs" --target "$target"
    local work; work="$(mktemp -d)"
    scratch+=("$work")
    local dir; for dir in "$@"; do [ -d "$dir" ] && find "$dir" -maxdepth 1 -type f -exec cp {} "$work/" \; ; done
    local largest; largest="$(find "$work" -type f -printf '%s\n' | sort -n | tail -n 1)"
    local max_len=$(( ${largest:-0} > 65536 ? ${largest:-0} : 65536 ))
    ASAN_OPTIONS=detect_leaks=0 "build-fuzz/test/fuzz/$target" "$work" \
      -max_total_time="$secs" -max_len="$max_len" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 2>&1 | tail -n 12
  }
  run_fuzzer importer helm-import-fuzzer test/fuzz/corpus test/fuzz/regressions/importer
  run_fuzzer package helm-package-fuzzer test/fuzz/package-corpus test/fuzz/regressions/package
  run_fuzzer gguf helm-gguf-fuzzer test/fuzz/gguf-corpus test/fuzz/regressions/gguf
  run_fuzzer tokenizer helm-tokenizer-fuzzer test/fuzz/tokenizer-corpus test/fuzz/regressions/tokenizer \
    test/unit/runtime/tokenizer/data
  run_fuzzer profile helm-profile-fuzzer test/fuzz/profile-corpus test/fuzz/regressions/profile
  run_fuzzer helm-rt-cli helm-cli-fuzzer test/fuzz/cli-corpus test/fuzz/regressions/cli
  run_fuzzer helmc-cli helmc-cli-fuzzer test/fuzz/helmc-cli-corpus test/fuzz/regressions/helmc-cli
  run_fuzzer chat-template helm-chat-template-fuzzer test/fuzz/chat-template-corpus test/fuzz/regressions/chat-template
  run_fuzzer server-request helm-server-request-fuzzer test/fuzz/server-request-corpus test/fuzz/regressions/server-request
  echo "fuzz: 9 passed, 0 failed"
fi
