//===- Tokenizer.h - Hugging Face tokenizer.json: BPE encode/decode -------------===//
//
// Loads a Hugging Face `tokenizer.json` and encodes text to token ids / decodes ids to text.
// Supported (docs/tokenizer.md has the full list and the errors):
//   - model BPE: byte-level (GPT-2, Llama 3, Qwen2) and SentencePiece-style with byte fallback
//     (Llama 2, Mistral, Phi-3); merges as "a b" strings or [a, b] pairs; ignore_merges.
//   - added tokens (split out before normalization and the model), TemplateProcessing BOS/EOS.
//   - normalizers NFC, Prepend, Replace (string), Sequence; pre-tokenizers ByteLevel, Split
//     (the GPT-2 / Llama 3 / Qwen2 patterns, or a literal string), Metaspace, Sequence.
//   - decoders ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence.
// Anything else is rejected at load time with an llvm::Error naming the field.
//
//===----------------------------------------------------------------------------===//
#ifndef HELM_RUNTIME_TOKENIZER_TOKENIZER_H
#define HELM_RUNTIME_TOKENIZER_TOKENIZER_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace helm::tok {

class TokenizerImpl;

class Tokenizer {
public:
  /// Parses tokenizer.json text. `nameForErrors` prefixes every error message.
  static llvm::Expected<std::unique_ptr<Tokenizer>> fromJson(llvm::StringRef jsonText,
                                                             llvm::StringRef nameForErrors);
  static llvm::Expected<std::unique_ptr<Tokenizer>> fromFile(llvm::StringRef path);
  ~Tokenizer();

  /// Encodes UTF-8 text (invalid UTF-8 is tokenized byte by byte, never rejected). Added tokens in
  /// the text (e.g. "<|endoftext|>") always become their ids; `addSpecialTokens` applies the
  /// post-processor template (e.g. a leading BOS).
  std::vector<int32_t> encode(llvm::StringRef text, bool addSpecialTokens) const;

  /// Decodes ids to UTF-8 text (invalid byte sequences become U+FFFD). Unknown id: error.
  llvm::Expected<std::string> decode(llvm::ArrayRef<int32_t> ids, bool skipSpecial = false) const;

  /// One past the largest token id (model vocabulary and added tokens).
  size_t vocabSize() const;
  /// The token the post-processor template puts before the text, if any.
  std::optional<int32_t> bosId() const;
  /// End-of-sequence guesses: added tokens such as </s>, <|endoftext|>, <|im_end|>, <|eot_id|>,
  /// <|end_of_text|>, <|end|>, <end_of_turn>, <|eom_id|> present in this vocabulary, sorted.
  std::vector<int32_t> eosIds() const;
  std::optional<int32_t> tokenToId(llvm::StringRef token) const;
  /// The token string for `id` ("" for an id outside the vocabulary).
  llvm::StringRef idToToken(int32_t id) const;
  /// Whether `id` is an added token marked `special`.
  bool isSpecial(int32_t id) const;

private:
  Tokenizer();
  std::unique_ptr<TokenizerImpl> impl;
};

/// Streaming decode: push the generated ids one at a time; each push returns the text that became
/// complete (never half of a multi-byte character; possibly ""). flush() returns what is held back.
/// The concatenation of all pushes and the flush equals tokenizer.decode(all ids).
class StreamDecoder {
public:
  explicit StreamDecoder(const Tokenizer &tokenizer, bool skipSpecial = false);
  llvm::Expected<std::string> push(int32_t id);
  std::string flush();

private:
  /// Drops ids[0, from): the rest become the settled prefix that the next push decodes after.
  void settle(size_t from);

  const Tokenizer &tok;
  bool skipSpecial;
  std::vector<int32_t> ids; ///< ids since the last settled prefix start
  size_t prefixIndex = 0;   ///< ids[0, prefixIndex) decode to `prefix`
  std::string prefix;
};

} // namespace helm::tok

#endif // HELM_RUNTIME_TOKENIZER_TOKENIZER_H
