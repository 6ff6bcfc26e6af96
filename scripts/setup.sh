#!/usr/bin/env bash
# One command from a fresh machine: install dependencies, build, and run the main job on the bundled
# default model (import + raise to partition units, print the recovered configuration).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
scripts/install-deps.sh
echo "[setup] configuring and building (build/)"
cmake --preset default >/dev/null
cmake --build build
model="${HELM_MODEL:-test/models/qwen3-kv-fp32/model.onnx}"
echo "[setup] helmc $model --emit=config"
build/bin/helmc "$model" --emit=config
echo "[setup] helmc $model --emit=helm -o build/default-model.helm.mlir"
build/bin/helmc "$model" --emit=helm -o build/default-model.helm.mlir
grep -c "helm.unit" build/default-model.helm.mlir | xargs -I{} echo "[setup] {} partition units written to build/default-model.helm.mlir"
