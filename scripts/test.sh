#!/usr/bin/env bash
# The whole test suite: build, then ctest (lit + GoogleTest + importer conformance + end-to-end
# generation against ONNX Runtime + tokenizer against Hugging Face tokenizers), the unit tests again
# under ASan+UBSan, and the importer and package-reader fuzzers for a bounded time each. Exits
# non-zero on any failure.
#   HELM_FUZZ_SECONDS  fuzzing time (default 60)
#   HELM_SKIP_SANITIZERS=1 / HELM_SKIP_FUZZ=1  skip those stages (local iteration only; CI runs all)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
[ -x .venv/bin/python ] || scripts/install-deps.sh
jobs="${HELM_JOBS:-2}"

echo "== build (default preset)"
cmake --preset default >/dev/null
cmake --build build -j "$jobs"
echo "== ctest"
ctest --test-dir build --output-on-failure

if [ "${HELM_SKIP_SANITIZERS:-0}" != 1 ]; then
  echo "== unit tests under ASan+UBSan"
  cmake --preset asan >/dev/null
  cmake --build build-asan -j "$jobs" --target helm-unit-tests
  ASAN_OPTIONS=detect_leaks=0 ctest --test-dir build-asan -E '^(lit|import-config-conformance|e2e-generation|e2e-split-emu|e2e-kv-offload|tokenizer-vs-hf)$' --output-on-failure
fi

if [ "${HELM_SKIP_FUZZ:-0}" != 1 ]; then
  secs="${HELM_FUZZ_SECONDS:-60}"
  echo "== importer fuzzer (${secs} s, libFuzzer + ASan/UBSan)"
  cmake --preset fuzz >/dev/null
  cmake --build build-fuzz -j "$jobs" --target helm-import-fuzzer
  work="$(mktemp -d)"
  cp test/fuzz/corpus/* "$work/"
  ASAN_OPTIONS=detect_leaks=0 build-fuzz/test/fuzz/helm-import-fuzzer "$work" \
    -max_total_time="$secs" -max_len=65536 -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 2>&1 | tail -n 12
  echo "== package fuzzer (${secs} s, libFuzzer + ASan/UBSan)"
  cmake --build build-fuzz -j "$jobs" --target helm-package-fuzzer
  pwork="$(mktemp -d)"
  cp test/fuzz/package-corpus/* "$pwork/"
  ASAN_OPTIONS=detect_leaks=0 build-fuzz/test/fuzz/helm-package-fuzzer "$pwork" \
    -max_total_time="$secs" -max_len=65536 -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 2>&1 | tail -n 12
  echo "fuzz: 2 passed, 0 failed"
fi
