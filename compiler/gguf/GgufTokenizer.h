//===- GgufTokenizer.h - the tokenizer a GGUF file's metadata describes ---------------===//
//
// llama.cpp keeps the tokenizer in the metadata (`tokenizer.ggml.*`); HELM's runtime reads Hugging
// Face tokenizer.json. This writes the one as the other, so a package compiled from a GGUF file
// carries its tokenizer and `helm-rt -p` needs no tokenizer.json. What is supported and why:
// docs/gguf.md, "The tokenizer".
//
//===----------------------------------------------------------------------===//
#ifndef HELM_COMPILER_GGUF_GGUFTOKENIZER_H
#define HELM_COMPILER_GGUF_GGUFTOKENIZER_H

#include "compiler/gguf/GgufFile.h"

#include "llvm/Support/Error.h"

#include <string>

namespace helm {

/// tokenizer.json text for the file's `tokenizer.ggml.*` metadata. An error (one line, naming the
/// key or value) when a key is missing or malformed, or the tokenizer model or pre-tokenizer is
/// one HELM does not reproduce.
llvm::Expected<std::string> tokenizerJsonFromGguf(const gguf::File &file);

} // namespace helm

#endif
