#!/usr/bin/env bash
# Builds the llama.cpp that bench/compare_bench.py measures, from PyPI only: the source distribution
# of llama-cpp-python vendors llama.cpp (vendor/llama.cpp, with its CMake build, llama-bench and
# convert_hf_to_gguf.py). Everything goes to bench/.cache/llama.cpp/ (git-ignored):
#
#   llama_cpp_python-<v>.tar.gz   the sdist (pip download --no-binary :all:)
#   src/                          it, unpacked; src/vendor/llama.cpp is the llama.cpp tree
#   build/bin/                    llama-bench, llama-quantize, llama-tokenize, libllama.so,
#                                 libggml*.so (Release, GGML_NATIVE=ON,
#                                 CPU only: no CUDA, no OpenSSL, no tests/examples; the
#                                 server only with --server)
#   bin/llama-greedy              bench/llama_greedy.c linked against that libllama
#   bin/llama-score               bench/llama_score.c (helm-rt --perplexity's scoring) likewise
#
# Idempotent: each step is skipped when its output exists (a stamp records the version and flags).
# The compile steps hold /tmp/helm-build.lock, like every build on the shared cores.
#
#   bench/build-llama-cpp.sh            (called by scripts/install-deps.sh --bench)
#   bench/build-llama-cpp.sh --server   also llama-server (bench/serve_bench.py), in the same build
#   LLAMA_CPP_PYTHON_VERSION=0.3.36 JOBS=2 bench/build-llama-cpp.sh
set -euo pipefail
server=0
for arg in "$@"; do
  case "$arg" in
    --server) server=1 ;;
    *) echo "build-llama-cpp.sh: unknown flag '$arg' (--server)" >&2; exit 1 ;;
  esac
done
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
version="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
jobs="${JOBS:-$(nproc)}"
dir="$here/bench/.cache/llama.cpp"
lock=/tmp/helm-build.lock
py="$here/.venv/bin/python"
[ -x "$py" ] || py=python3
mkdir -p "$dir"

sdist="$dir/llama_cpp_python-$version.tar.gz"
if [ ! -f "$sdist" ]; then
  echo "[llama.cpp] downloading llama-cpp-python $version (sdist) from PyPI"
  tmp="$(mktemp -d "$dir/dl.XXXXXX")"
  "$py" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    -d "$tmp" "llama-cpp-python==$version"
  mv "$tmp/llama_cpp_python-$version.tar.gz" "$sdist"
  rm -rf "$tmp"
fi

src="$dir/src"
if [ ! -f "$src/.version-$version" ]; then
  echo "[llama.cpp] unpacking $(basename "$sdist")"
  rm -rf "$src" "$dir/build" "$dir/bin"
  mkdir -p "$src"
  tar -xzf "$sdist" -C "$src" --strip-components=1
  touch "$src/.version-$version"
fi
tree="$src/vendor/llama.cpp"
[ -f "$tree/CMakeLists.txt" ] || { echo "[llama.cpp] $tree has no CMakeLists.txt" >&2; exit 1; }

flags=(
  -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON
  -DGGML_NATIVE=ON -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF
  -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF
  -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_COMMON=ON
)
targets=(llama-bench llama-quantize llama-tokenize)
if [ "$server" = 1 ]; then
  # The same build with the server switched on: the libraries' objects are unchanged, so only the
  # server's own sources compile (and switching back later only reconfigures).
  flags=("${flags[@]/-DLLAMA_BUILD_SERVER=OFF/-DLLAMA_BUILD_SERVER=ON}")
  targets+=(llama-server)
fi
build="$dir/build"
stamp="$build/.helm-stamp"
want="$version ${flags[*]}"
missing=0
for t in "${targets[@]}"; do [ -x "$build/bin/$t" ] || missing=1; done
if [ "$missing" = 1 ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "[llama.cpp] configuring and building ${targets[*]} (waits for $lock)"
  flock "$lock" cmake -S "$tree" -B "$build" "${flags[@]}" > "$dir/cmake.log"
  grep -E "GGML_|CPU|x86|AVX|OpenMP" "$dir/cmake.log" | sed 's/^/[llama.cpp]   /' | head -20 || true
  flock "$lock" cmake --build "$build" --target "${targets[@]}" -j "$jobs"
  echo "$want" > "$stamp"
fi

greedy="$dir/bin/llama-greedy"
if [ ! -x "$greedy" ] || [ "$here/bench/llama_greedy.c" -nt "$greedy" ] || [ "$stamp" -nt "$greedy" ]; then
  echo "[llama.cpp] compiling bench/llama_greedy.c"
  mkdir -p "$dir/bin"
  flock "$lock" cc -O2 -std=c11 -Wall -o "$greedy" "$here/bench/llama_greedy.c" \
    -I"$tree/include" -I"$tree/ggml/include" -L"$build/bin" -lllama -lggml -lggml-base \
    -Wl,-rpath,"$build/bin"
fi
score="$dir/bin/llama-score"
if [ ! -x "$score" ] || [ "$here/bench/llama_score.c" -nt "$score" ] || [ "$stamp" -nt "$score" ]; then
  echo "[llama.cpp] compiling bench/llama_score.c"
  mkdir -p "$dir/bin"
  flock "$lock" cc -O2 -std=c11 -Wall -o "$score" "$here/bench/llama_score.c" \
    -I"$tree/include" -I"$tree/ggml/include" -L"$build/bin" -lllama -lggml -lggml-base -lm \
    -Wl,-rpath,"$build/bin"
fi
echo "[llama.cpp] ready: $build/bin/llama-bench, $greedy, $score"
