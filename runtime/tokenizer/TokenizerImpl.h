//===- TokenizerImpl.h - what the tokenizer's files share (private) -------------===//
//
// Private to runtime/tokenizer: the loaded tokenizer (TokenizerImpl) and the pipeline components
// it is made of. The files by concern:
//   TokenizerJson.cpp  loading tokenizer.json (Tokenizer::fromJson/fromFile, every component)
//   PreTokenizer.cpp   the pre-tokenizer matchers (the GPT-2 / Llama 3 / Qwen2 split patterns,
//                      literal splits, split behaviours) and the byte-level alphabet
//   Bpe.cpp            encoding: added tokens, normalizers, pre-tokenizers, the BPE model
//   Decoder.cpp        decoding: the decoder chain, Tokenizer::decode, StreamDecoder
//   Tokenizer.cpp      the rest of the public API (encode, vocabulary queries)
//
// The pipeline follows the `tokenizers` library: added tokens are split out of the raw text first
// (leftmost-longest), every other segment is normalized, split again on `normalized` added
// tokens, pre-tokenized into words and each word is encoded by the BPE model. Decoding maps ids
// to token strings and runs the decoder chain over them.
//
//===----------------------------------------------------------------------------===//
#ifndef HELM_RUNTIME_TOKENIZER_TOKENIZERIMPL_H
#define HELM_RUNTIME_TOKENIZER_TOKENIZERIMPL_H

#include "runtime/tokenizer/Tokenizer.h"
#include "runtime/tokenizer/Unicode.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace helm::tok {

namespace json = llvm::json;

// ---------------------------------------------------------------------------------------------
// Byte-level alphabet (GPT-2): printable bytes map to themselves, the rest to U+0100 onwards.
struct ByteAlphabet {
  std::array<std::string, 256> toChar;
  std::array<int16_t, 0x144> fromChar; // code point -> byte, -1 if none
  ByteAlphabet();
};
const ByteAlphabet &byteAlphabet();

// ---------------------------------------------------------------------------------------------
// Pre-tokenizer matching (PreTokenizer.cpp).

/// The split patterns of the pre-tokenizers this tokenizer knows (recognised by their text).
/// Digits: every \p{N} character on its own (the Digits pre-tokenizer with individual_digits).
enum class PatternKind { Gpt2, Llama3, Qwen2, Digits };

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

struct Piece {
  std::string text;
  bool atTextStart; ///< starts at offset 0 of the original input (Metaspace prepend_scheme=first)
};

/// Applies a split behaviour to a covering list of (begin, end, isMatch) byte ranges of `p`.
void applySplit(const Piece &p, std::vector<std::tuple<size_t, size_t, bool>> parts,
                SplitBehavior behavior, bool invert, std::vector<Piece> &out);
/// Covering (begin, end, isMatch) byte ranges of the pattern's matches in `s`.
std::vector<std::tuple<size_t, size_t, bool>> patternParts(PatternKind kind, llvm::StringRef s);
/// Covering (begin, end, isMatch) byte ranges of the occurrences of `lit` in `s`.
std::vector<std::tuple<size_t, size_t, bool>> literalParts(llvm::StringRef lit, llvm::StringRef s);

/// `s` with every occurrence of `from` replaced by `to` (Tokenizer.cpp).
std::string replaceAll(llvm::StringRef s, llvm::StringRef from, llvm::StringRef to);

// ---------------------------------------------------------------------------------------------
// Pipeline components.
struct Normalizer {
  enum Kind { NFC, Prepend, Replace } kind;
  std::string a, b; // Prepend: a; Replace: a -> b
};

struct PreTokenizer {
  enum Kind { ByteLevel, Split, Metaspace } kind;
  // ByteLevel
  bool addPrefixSpace = false, useRegex = true;
  // Split
  bool isLiteral = false;
  std::string literal;
  PatternKind pattern = PatternKind::Gpt2;
  SplitBehavior behavior = SplitBehavior::Isolated;
  bool invert = false;
  // Metaspace
  std::string replacement;
  enum Prepend { Always, First, Never } prepend = Always;
  bool split = true;
};

struct Decoder {
  enum Kind { ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace } kind;
  std::string a, b; // Replace: a -> b; Strip: content a; Metaspace: replacement a
  uint32_t stripChar = 0;
  size_t start = 0, stop = 0;
  bool prependFirst = true; // Metaspace: prepend_scheme != never
};

struct AddedToken {
  int32_t id;
  std::string content;
  bool singleWord = false, lstrip = false, rstrip = false, normalized = false, special = false;
};

/// Leftmost-longest matcher over added-token contents (a byte trie).
class AddedMatcher {
public:
  void add(llvm::StringRef s, int32_t tokenIndex) {
    if (s.empty())
      return;
    if (nodes.empty())
      nodes.emplace_back();
    uint32_t cur = 0;
    for (unsigned char c : s) {
      auto it = nodes[cur].next.find(c);
      if (it == nodes[cur].next.end()) {
        nodes.emplace_back();
        uint32_t id = static_cast<uint32_t>(nodes.size() - 1);
        nodes[cur].next[c] = id;
        cur = id;
      } else {
        cur = it->second;
      }
    }
    if (nodes[cur].token < 0)
      nodes[cur].token = tokenIndex;
    firstBytes[static_cast<unsigned char>(s[0])] = true;
  }
  bool empty() const { return nodes.empty(); }
  /// Longest match starting at s[i]: returns its length (0: none) and the token index.
  size_t longestAt(llvm::StringRef s, size_t i, int32_t &token) const {
    if (!firstBytes[static_cast<unsigned char>(s[i])])
      return 0;
    uint32_t cur = 0;
    size_t best = 0;
    for (size_t k = i; k < s.size(); ++k) {
      auto it = nodes[cur].next.find(static_cast<unsigned char>(s[k]));
      if (it == nodes[cur].next.end())
        break;
      cur = it->second;
      if (nodes[cur].token >= 0) {
        best = k + 1 - i;
        token = nodes[cur].token;
      }
    }
    return best;
  }

private:
  struct Node {
    llvm::SmallDenseMap<unsigned char, uint32_t, 4> next;
    int32_t token = -1;
  };
  std::vector<Node> nodes;
  std::array<bool, 256> firstBytes{};
};

// -----------------------------------------------------------------------------------------------
class TokenizerImpl {
public:
  std::string name;
  // Model.
  llvm::StringMap<int32_t> vocab;
  std::vector<llvm::StringRef> idToTok; // model vocabulary by id (keys of `vocab`; "" where unused)
  std::vector<bool> idUsed;
  llvm::DenseMap<uint64_t, std::pair<int32_t, int32_t>> merges; // (a, b) -> (rank, merged id)
  std::optional<std::string> continuingPrefix, endSuffix, unkToken;
  std::optional<int32_t> unkId;
  bool fuseUnk = false, byteFallback = false, ignoreMerges = false;
  std::array<int32_t, 256> byteTokens; // <0xNN> ids, -1 if absent
  // Pipeline.
  std::vector<Normalizer> normalizers;
  std::vector<PreTokenizer> preTokenizers;
  std::vector<Decoder> decoders;
  bool haveDecoder = false;
  std::vector<int32_t> prefixIds, suffixIds; // post-processor template, single sequence
  std::optional<int32_t> bos;
  // Added tokens.
  std::vector<AddedToken> added;
  std::unordered_map<int32_t, size_t> addedById; // not DenseMap: any int32 id may be looked up
  llvm::StringMap<int32_t> addedByContent;
  AddedMatcher rawMatcher, normMatcher;
  size_t vocabEnd = 0;
  // Word cache.
  mutable std::mutex cacheMutex;
  mutable llvm::StringMap<std::vector<int32_t>> cache;

  llvm::Error fail(const llvm::Twine &msg) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), name + ": " + msg);
  }

  llvm::Error load(const json::Value &root);
  llvm::Error loadModel(const json::Object &m);
  /// normalizer, pre_tokenizer, decoder and post_processor share one form: null (none), or an
  /// object with a "type", where "Sequence" lists more of them under `listKey`. Calls `loadOne`
  /// for each object that is not a Sequence.
  using ComponentLoader = llvm::Error (TokenizerImpl::*)(const json::Object &o, llvm::StringRef type,
                                                        const std::string &path);
  llvm::Error loadComponents(const json::Value &v, const std::string &path, llvm::StringRef listKey,
                             ComponentLoader loadOne);
  llvm::Error loadNormalizer(const json::Object &o, llvm::StringRef type, const std::string &path);
  llvm::Error loadPreTokenizer(const json::Object &o, llvm::StringRef type, const std::string &path);
  llvm::Error loadDecoder(const json::Object &o, llvm::StringRef type, const std::string &path);
  llvm::Error loadPostProcessor(const json::Object &o, llvm::StringRef type, const std::string &path);
  /// Sets `out` from the boolean `path.key` if present (null counts as absent when `nullOk`).
  llvm::Error readBool(const json::Object &o, llvm::StringRef key, const std::string &path, bool &out,
                       bool nullOk = false) const;
  /// The String pattern and content of a Replace normalizer or decoder.
  llvm::Error readReplace(const json::Object &o, const std::string &path, std::string &from,
                          std::string &to) const;
  llvm::Error loadAddedTokens(const json::Value &v);

  void encodeSegment(llvm::StringRef text, bool atTextStart, std::vector<int32_t> &out) const;
  void encodeNormalized(llvm::StringRef text, bool atTextStart, std::vector<int32_t> &out) const;
  void encodeWord(llvm::StringRef word, std::vector<int32_t> &out) const;
  std::vector<int32_t> bpe(llvm::StringRef word) const;
  /// (begin, end, added token index or -1) segments of `s`.
  std::vector<std::tuple<size_t, size_t, int32_t>> splitAdded(llvm::StringRef s,
                                                              const AddedMatcher &m) const;
  std::string normalize(llvm::StringRef s) const;
  std::vector<std::string> runDecoders(std::vector<std::string> tokens) const;

  /// The added token with this id, or nullptr.
  const AddedToken *findAdded(int32_t id) const {
    auto a = addedById.find(id);
    return a == addedById.end() ? nullptr : &added[a->second];
  }
  /// The model vocabulary token with this id, if there is one.
  std::optional<llvm::StringRef> modelToken(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= idUsed.size() || !idUsed[id])
      return std::nullopt;
    return idToTok[id];
  }
};

} // namespace helm::tok

#endif // HELM_RUNTIME_TOKENIZER_TOKENIZERIMPL_H
