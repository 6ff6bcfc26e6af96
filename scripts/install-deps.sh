#!/usr/bin/env bash
# Installs everything HELM needs to build and test, with apt and pip only. Idempotent: a second run
# finds everything present and only re-checks. Python tooling lives in a project venv (.venv).
#
#   scripts/install-deps.sh            build + test dependencies (no torch)
#   scripts/install-deps.sh --corpus   also the exporters used to regenerate test/models (torch, transformers)
#   scripts/install-deps.sh --bench    also what bench/compare_bench.py needs: the --corpus exporters,
#                                      sentencepiece, and llama.cpp (llama-bench + libllama) built from the
#                                      llama-cpp-python sdist on PyPI into bench/.cache/llama.cpp/
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
want_corpus=0
want_bench=0
for a in "$@"; do
  case "$a" in
    --corpus) want_corpus=1 ;;
    --bench) want_corpus=1; want_bench=1 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "install-deps.sh: unknown flag '$a' (try --help)" >&2; exit 1 ;;
  esac
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# LLVM/MLIR 22 (see docs/toolchain.md): llvm-22-dev and libmlir-22-dev must come in one apt call.
apt_pkgs=(
  cmake ninja-build g++ git python3-venv
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
  clang-22 libclang-rt-22-dev libfuzzer-22-dev lld-22
  libprotobuf-dev protobuf-compiler libonnx-dev
  libgtest-dev libgmock-dev
  libdnnl-dev ocl-icd-opencl-dev opencl-c-headers
  libcpp-httplib-dev nlohmann-json3-dev pkgconf
  zstd  # scripts/gpu-check.sh prepare packs the realistic-size GPU packages with it
)
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[install-deps] apt: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
else
  echo "[install-deps] apt: all ${#apt_pkgs[@]} packages present"
fi

# Python tooling (ONNX Runtime oracle, onnx checker, lit) in the project venv.
py="${PYTHON:-python3}"
if [ ! -x "$here/.venv/bin/python" ]; then
  echo "[install-deps] creating $here/.venv"
  "$py" -m venv "$here/.venv"
fi
pip="$here/.venv/bin/pip"
"$pip" install -q --disable-pip-version-check -r "$here/scripts/requirements.txt"
if [ "$want_corpus" = 1 ]; then
  "$pip" install -q --disable-pip-version-check -r "$here/scripts/requirements-corpus.txt"
fi
if [ "$want_bench" = 1 ]; then
  "$pip" install -q --disable-pip-version-check -r "$here/scripts/requirements-bench.txt"
  "$here/bench/build-llama-cpp.sh"
fi
echo "[install-deps] done"
