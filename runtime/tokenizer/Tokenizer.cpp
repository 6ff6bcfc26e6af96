//===- Tokenizer.cpp - Hugging Face tokenizer.json: BPE encode/decode -----------===//
//
// The pipeline follows the `tokenizers` library: added tokens are split out of the raw text first
// (leftmost-longest), every other segment is normalized, split again on `normalized` added
// tokens, pre-tokenized into words and each word is encoded by the BPE model. Decoding maps ids
// to token strings and runs the decoder chain over them.
//
//===----------------------------------------------------------------------------===//
#include "runtime/tokenizer/Tokenizer.h"

#include "runtime/support/JsonDepth.h"

#include "runtime/tokenizer/Unicode.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <mutex>
#include <queue>
#include <unordered_map>

namespace helm::tok {

namespace json = llvm::json;

namespace {

constexpr llvm::StringLiteral kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr llvm::StringLiteral kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr llvm::StringLiteral kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// ---------------------------------------------------------------------------------------------
// Byte-level alphabet (GPT-2): printable bytes map to themselves, the rest to U+0100 onwards.
struct ByteAlphabet {
  std::array<std::string, 256> toChar;
  std::array<int16_t, 0x144> fromChar; // code point -> byte, -1 if none

  ByteAlphabet() {
    fromChar.fill(-1);
    unsigned next = 0;
    for (unsigned b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      uint32_t cp = printable ? b : 256 + next++;
      appendUtf8(toChar[b], cp);
      fromChar[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteAlphabet &byteAlphabet() {
  static const ByteAlphabet a;
  return a;
}

// ---------------------------------------------------------------------------------------------
// Characters of a string with the classes the pre-tokenizer patterns use.
enum : uint8_t { kL = 1, kN = 2, kS = 4 };

struct Ch {
  uint32_t cp;
  uint32_t off;
  uint8_t len;
  uint8_t cls;
};

std::vector<Ch> chars(llvm::StringRef s) {
  std::vector<Ch> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    unsigned n = decodeUtf8(s, i, cp);
    uint8_t cls = 0;
    if (cp != kInvalidCodePoint) {
      if (isLetter(cp))
        cls = kL;
      else if (isNumber(cp))
        cls = kN;
      else if (isWhiteSpace(cp))
        cls = kS;
    }
    out.push_back({cp, static_cast<uint32_t>(i), static_cast<uint8_t>(n), cls});
    i += n;
  }
  return out;
}

enum class PatternKind { Gpt2, Llama3, Qwen2 };

/// Length in characters of the match of `kind` starting at chars[i] (0: none), with the leftmost-
/// first alternation and backtracking of a regex engine.
size_t matchAt(PatternKind kind, const std::vector<Ch> &c, size_t i) {
  const size_t n = c.size();
  auto isL = [&](size_t k) { return c[k].cls == kL; };
  auto isN = [&](size_t k) { return c[k].cls == kN; };
  auto isS = [&](size_t k) { return c[k].cls == kS; };
  auto isO = [&](size_t k) { return c[k].cls == 0; }; // [^\s\p{L}\p{N}]
  auto isNl = [&](size_t k) { return c[k].cp == '\r' || c[k].cp == '\n'; };
  auto run = [&](size_t k, auto pred) {
    size_t j = k;
    while (j < n && pred(j))
      ++j;
    return j - k;
  };
  bool ci = kind != PatternKind::Gpt2;

  // Contractions: 's 't 're 've 'm 'll 'd (case-insensitive for Llama 3 / Qwen2).
  if (c[i].cp == '\'' && i + 1 < n) {
    auto lower = [&](uint32_t cp) -> uint32_t {
      if (!ci)
        return cp;
      if (cp >= 'A' && cp <= 'Z')
        return cp + 32;
      if (cp == 0x17F) // LATIN SMALL LETTER LONG S case-folds to 's'
        return 's';
      return cp;
    };
    uint32_t a = lower(c[i + 1].cp);
    if (a == 's' || a == 't' || a == 'm' || a == 'd')
      return 2;
    if (i + 2 < n) {
      uint32_t b = lower(c[i + 2].cp);
      if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
        return 3;
    }
  }

  if (kind == PatternKind::Gpt2) {
    // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+'
    auto spaced = [&](auto pred) -> size_t {
      if (c[i].cp == ' ' && i + 1 < n && pred(i + 1))
        return 1 + run(i + 1, pred);
      if (pred(i))
        return run(i, pred);
      return 0;
    };
    if (size_t m = spaced(isL))
      return m;
    if (size_t m = spaced(isN))
      return m;
    if (size_t m = spaced(isO))
      return m;
  } else {
    // '[^\r\n\p{L}\p{N}]?\p{L}+'
    if (!isL(i) && !isN(i) && !isNl(i) && i + 1 < n && isL(i + 1))
      return 1 + run(i + 1, isL);
    if (isL(i))
      return run(i, isL);
    // '\p{N}{1,3}' or '\p{N}'
    if (isN(i)) {
      size_t m = run(i, isN);
      return std::min<size_t>(m, kind == PatternKind::Llama3 ? 3 : 1);
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
    size_t j = i;
    if (c[i].cp == ' ' && i + 1 < n && isO(i + 1))
      j = i + 1;
    if (isO(j)) {
      j += run(j, isO);
      j += run(j, isNl);
      return j - i;
    }
    // '\s*[\r\n]+': the whitespace run up to its last line break
    if (isS(i)) {
      size_t end = i + run(i, isS);
      for (size_t p = end; p > i; --p)
        if (isNl(p - 1))
          return p - i;
    }
  }
  // '\s+(?!\S)' then '\s+'
  if (isS(i)) {
    size_t m = run(i, isS);
    if (i + m == n || m == 1)
      return m;
    return m - 1;
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

struct Piece {
  std::string text;
  bool atTextStart; ///< starts at offset 0 of the original input (Metaspace prepend_scheme=first)
};

/// Applies a split behaviour to a covering list of (begin, end, isMatch) byte ranges of `p`.
void applySplit(const Piece &p, std::vector<std::tuple<size_t, size_t, bool>> parts,
                SplitBehavior behavior, bool invert, std::vector<Piece> &out) {
  if (invert)
    for (auto &t : parts)
      std::get<2>(t) = !std::get<2>(t);
  std::vector<std::pair<size_t, size_t>> ranges;
  switch (behavior) {
  case SplitBehavior::Isolated:
    for (auto &[b, e, m] : parts)
      ranges.push_back({b, e});
    break;
  case SplitBehavior::Removed:
    for (auto &[b, e, m] : parts)
      if (!m)
        ranges.push_back({b, e});
    break;
  case SplitBehavior::Contiguous: {
    bool prev = false;
    for (auto &[b, e, m] : parts) {
      if (m == prev && !ranges.empty())
        ranges.back().second = e;
      else
        ranges.push_back({b, e});
      prev = m;
    }
    break;
  }
  case SplitBehavior::MergedWithPrevious: {
    bool prev = false;
    for (auto &[b, e, m] : parts) {
      if (m && !prev && !ranges.empty())
        ranges.back().second = e;
      else
        ranges.push_back({b, e});
      prev = m;
    }
    break;
  }
  case SplitBehavior::MergedWithNext: {
    bool prev = false;
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
      auto &[b, e, m] = *it;
      if (m && !prev && !ranges.empty())
        ranges.back().first = b;
      else
        ranges.push_back({b, e});
      prev = m;
    }
    std::reverse(ranges.begin(), ranges.end());
    break;
  }
  }
  for (auto [b, e] : ranges)
    if (e > b)
      out.push_back({p.text.substr(b, e - b), p.atTextStart && b == 0});
}

/// Covering (begin, end, isMatch) byte ranges of the pattern's matches in `s`.
std::vector<std::tuple<size_t, size_t, bool>> patternParts(PatternKind kind, llvm::StringRef s) {
  std::vector<Ch> c = chars(s);
  std::vector<std::tuple<size_t, size_t, bool>> parts;
  size_t gapStart = 0;
  auto off = [&](size_t k) { return k < c.size() ? size_t(c[k].off) : s.size(); };
  for (size_t i = 0; i < c.size();) {
    size_t m = matchAt(kind, c, i);
    if (m == 0) {
      ++i;
      continue;
    }
    if (off(i) > gapStart)
      parts.push_back({gapStart, off(i), false});
    parts.push_back({off(i), off(i + m), true});
    i += m;
    gapStart = off(i);
  }
  if (gapStart < s.size())
    parts.push_back({gapStart, s.size(), false});
  return parts;
}

std::vector<std::tuple<size_t, size_t, bool>> literalParts(llvm::StringRef lit, llvm::StringRef s) {
  std::vector<std::tuple<size_t, size_t, bool>> parts;
  size_t gapStart = 0;
  if (!lit.empty()) {
    for (size_t pos = s.find(lit); pos != llvm::StringRef::npos; pos = s.find(lit, pos)) {
      if (pos > gapStart)
        parts.push_back({gapStart, pos, false});
      parts.push_back({pos, pos + lit.size(), true});
      pos += lit.size();
      gapStart = pos;
    }
  }
  if (gapStart < s.size())
    parts.push_back({gapStart, s.size(), false});
  return parts;
}

std::string replaceAll(llvm::StringRef s, llvm::StringRef from, llvm::StringRef to) {
  if (from.empty())
    return s.str();
  std::string r;
  r.reserve(s.size());
  for (size_t i = 0;;) {
    size_t p = s.find(from, i);
    if (p == llvm::StringRef::npos) {
      r.append(s.substr(i));
      return r;
    }
    r.append(s.substr(i, p - i));
    r.append(to);
    i = p + from.size();
  }
}

// ---------------------------------------------------------------------------------------------
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

/// Start of the UTF-8 character that ends at s[end - 1]: steps back over at most three
/// continuation bytes, never below `lo` (< end).
size_t lastCharStart(llvm::StringRef s, size_t end, size_t lo) {
  size_t i = end - 1;
  while (i > lo && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80 && end - i < 4)
    --i;
  return i;
}

/// Whether the character at s[i] is a word character (\w: letter, number or '_').
bool wordCharAt(llvm::StringRef s, size_t i) {
  uint32_t cp;
  decodeUtf8(s, i, cp);
  return cp != kInvalidCodePoint && (isLetter(cp) || isNumber(cp) || cp == '_');
}

bool lastCharIsWord(llvm::StringRef s) { return !s.empty() && wordCharAt(s, lastCharStart(s, s.size(), 0)); }

bool firstCharIsWord(llvm::StringRef s) { return !s.empty() && wordCharAt(s, 0); }

} // namespace

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

// ---------------------------------------------------------------------------------------------
// Loading.

namespace {
std::string kindName(const json::Value &v) {
  switch (v.kind()) {
  case json::Value::Null:
    return "null";
  case json::Value::Boolean:
    return "a boolean";
  case json::Value::Number:
    return "a number";
  case json::Value::String:
    return "a string";
  case json::Value::Array:
    return "an array";
  case json::Value::Object:
    return "an object";
  }
  return "?";
}
} // namespace

llvm::Error TokenizerImpl::load(const json::Value &root) {
  const json::Object *o = root.getAsObject();
  if (!o)
    return fail("the top level is " + kindName(root) + ", not an object");
  const json::Value *model = o->get("model");
  if (!model || !model->getAsObject())
    return fail("model is missing or not an object");
  if (auto e = loadModel(*model->getAsObject()))
    return e;
  if (const json::Value *v = o->get("added_tokens"))
    if (auto e = loadAddedTokens(*v))
      return e;
  if (const json::Value *v = o->get("normalizer"))
    if (auto e = loadComponents(*v, "normalizer", "normalizers", &TokenizerImpl::loadNormalizer))
      return e;
  if (const json::Value *v = o->get("pre_tokenizer"))
    if (auto e = loadComponents(*v, "pre_tokenizer", "pretokenizers", &TokenizerImpl::loadPreTokenizer))
      return e;
  if (const json::Value *v = o->get("decoder")) {
    if (auto e = loadComponents(*v, "decoder", "decoders", &TokenizerImpl::loadDecoder))
      return e;
    haveDecoder = v->kind() != json::Value::Null;
  }
  if (const json::Value *v = o->get("post_processor"))
    if (auto e = loadComponents(*v, "post_processor", "processors", &TokenizerImpl::loadPostProcessor))
      return e;
  if (const json::Value *v = o->get("truncation"); v && v->kind() != json::Value::Null)
    return fail("truncation is not supported (must be null)");
  if (const json::Value *v = o->get("padding"); v && v->kind() != json::Value::Null)
    return fail("padding is not supported (must be null)");
  return llvm::Error::success();
}

llvm::Error TokenizerImpl::loadModel(const json::Object &m) {
  if (const json::Value *t = m.get("type")) {
    auto s = t->getAsString();
    if (!s)
      return fail("model.type is " + kindName(*t) + ", not a string");
    if (*s != "BPE")
      return fail("model.type '" + *s + "' is not supported (BPE only)");
  }
  const json::Object *vocabObj = m.getObject("vocab");
  if (!vocabObj)
    return fail("model.vocab is missing or not an object");
  const json::Value *mergesV = m.get("merges");
  const json::Array *mergesArr = mergesV ? mergesV->getAsArray() : nullptr;
  if (!mergesArr)
    return fail("model.merges is missing or not an array");

  auto optString = [&](llvm::StringRef key, std::optional<std::string> &out) -> llvm::Error {
    const json::Value *v = m.get(key);
    if (!v || v->kind() == json::Value::Null)
      return llvm::Error::success();
    auto s = v->getAsString();
    if (!s)
      return fail("model." + key + " is " + kindName(*v) + ", not a string or null");
    out = s->str();
    return llvm::Error::success();
  };
  if (auto e = optString("unk_token", unkToken))
    return e;
  if (auto e = optString("continuing_subword_prefix", continuingPrefix))
    return e;
  if (auto e = optString("end_of_word_suffix", endSuffix))
    return e;
  for (auto [key, ptr] : {std::pair<const char *, bool *>{"fuse_unk", &fuseUnk},
                          {"byte_fallback", &byteFallback},
                          {"ignore_merges", &ignoreMerges}})
    if (auto e = readBool(m, key, "model", *ptr, /*nullOk=*/true))
      return e;
  if (const json::Value *d = m.get("dropout"); d && d->kind() != json::Value::Null) {
    auto x = d->getAsNumber();
    if (!x)
      return fail("model.dropout is " + kindName(*d) + ", not a number or null");
    if (*x != 0.0 && *x != 1.0)
      return fail("model.dropout " + std::to_string(*x) + " is not supported (only null)");
  }

  vocab = llvm::StringMap<int32_t>(static_cast<unsigned>(vocabObj->size()));
  int64_t maxId = -1;
  for (const auto &kv : *vocabObj) {
    auto id = kv.second.getAsInteger();
    if (!id || *id < 0 || *id > INT32_MAX - 1)
      return fail("model.vocab['" + llvm::StringRef(kv.first) + "'] is not a valid id");
    maxId = std::max(maxId, *id);
    vocab[kv.first] = static_cast<int32_t>(*id);
  }
  if (maxId >= static_cast<int64_t>(vocabObj->size()) * 4 + 1024)
    return fail("model.vocab has an id " + llvm::Twine(maxId) + " far beyond its " +
                llvm::Twine(vocabObj->size()) + " entries");
  idToTok.assign(maxId + 1, llvm::StringRef());
  idUsed.assign(maxId + 1, false);
  for (const auto &kv : vocab) {
    if (idUsed[kv.second])
      return fail("model.vocab has two tokens with id " + llvm::Twine(kv.second));
    idUsed[kv.second] = true;
    idToTok[kv.second] = kv.first(); // StringMap entries do not move when the table grows
  }
  vocabEnd = maxId + 1;

  if (unkToken) {
    auto it = vocab.find(*unkToken);
    if (it == vocab.end())
      return fail("model.unk_token '" + *unkToken + "' is not in model.vocab");
    unkId = it->second;
  }
  byteTokens.fill(-1);
  if (byteFallback) {
    for (unsigned b = 0; b < 256; ++b) {
      char buf[8];
      snprintf(buf, sizeof buf, "<0x%02X>", b);
      auto it = vocab.find(buf);
      if (it != vocab.end())
        byteTokens[b] = it->second;
    }
  }

  merges.reserve(mergesArr->size());
  size_t prefixLen = continuingPrefix ? continuingPrefix->size() : 0;
  std::string merged;
  for (size_t rank = 0; rank < mergesArr->size(); ++rank) {
    const json::Value &mv = (*mergesArr)[rank];
    llvm::StringRef a, b;
    if (auto s = mv.getAsString()) {
      llvm::SmallVector<llvm::StringRef, 3> parts;
      s->split(parts, ' ');
      if (parts.size() != 2)
        return fail("model.merges[" + llvm::Twine(rank) + "] '" + *s + "' is not two tokens separated by one space");
      a = parts[0];
      b = parts[1];
    } else if (const json::Array *p = mv.getAsArray()) {
      if (p->size() != 2 || !(*p)[0].getAsString() || !(*p)[1].getAsString())
        return fail("model.merges[" + llvm::Twine(rank) + "] is not a pair of strings");
      a = *(*p)[0].getAsString();
      b = *(*p)[1].getAsString();
    } else {
      return fail("model.merges[" + llvm::Twine(rank) + "] is " + kindName(mv) +
                  ", not a string or a pair");
    }
    auto ia = vocab.find(a), ib = vocab.find(b);
    if (ia == vocab.end() || ib == vocab.end())
      return fail("model.merges[" + llvm::Twine(rank) + "]: token '" + (ia == vocab.end() ? a : b) +
                  "' is not in model.vocab");
    merged.assign(a.data(), a.size());
    merged += (prefixLen && b.starts_with(*continuingPrefix)) ? b.drop_front(prefixLen) : b;
    auto im = vocab.find(merged);
    if (im == vocab.end())
      return fail("model.merges[" + llvm::Twine(rank) + "]: merged token '" + merged +
                  "' is not in model.vocab");
    uint64_t key = (uint64_t(uint32_t(ia->second)) << 32) | uint32_t(ib->second);
    merges[key] = {static_cast<int32_t>(rank), im->second};
  }
  return llvm::Error::success();
}

llvm::Error TokenizerImpl::loadAddedTokens(const json::Value &v) {
  if (v.kind() == json::Value::Null)
    return llvm::Error::success();
  const json::Array *arr = v.getAsArray();
  if (!arr)
    return fail("added_tokens is " + kindName(v) + ", not an array");
  int64_t maxAddedId = -1;
  for (size_t i = 0; i < arr->size(); ++i) {
    std::string path = "added_tokens[" + std::to_string(i) + "]";
    const json::Object *o = (*arr)[i].getAsObject();
    if (!o)
      return fail(path + " is not an object");
    AddedToken t;
    auto id = o->getInteger("id");
    if (!id || *id < 0 || *id > INT32_MAX - 1)
      return fail(path + ".id is missing or not a valid id");
    auto content = o->getString("content");
    if (!content)
      return fail(path + ".content is missing or not a string");
    t.id = static_cast<int32_t>(*id);
    t.content = content->str();
    for (auto [key, ptr] : {std::pair<const char *, bool *>{"single_word", &t.singleWord},
                            {"lstrip", &t.lstrip},
                            {"rstrip", &t.rstrip},
                            {"normalized", &t.normalized},
                            {"special", &t.special}})
      if (auto e = readBool(*o, key, path, *ptr))
        return e;
    if (t.content.empty() || addedByContent.count(t.content))
      continue; // like `tokenizers`: an empty or repeated content is not added again
    // Ids are assigned the way `tokenizers` does when it loads the file: the model's id when the
    // content is in the model vocabulary, else the next id after the vocabulary and the added
    // tokens so far. For a consistent file this is the id written in it.
    auto inModel = vocab.find(t.content);
    if (inModel != vocab.end()) {
      t.id = inModel->second;
    } else {
      int64_t modelSize = static_cast<int64_t>(vocab.size());
      t.id = static_cast<int32_t>(maxAddedId < 0 ? modelSize
                                  : (maxAddedId >= modelSize || modelSize == 0) ? maxAddedId + 1
                                                                               : modelSize);
    }
    maxAddedId = std::max<int64_t>(maxAddedId, t.id);
    size_t index = added.size();
    addedById[t.id] = index;
    addedByContent.try_emplace(t.content, t.id);
    if (t.normalized)
      normMatcher.add(t.content, static_cast<int32_t>(index));
    else
      rawMatcher.add(t.content, static_cast<int32_t>(index));
    vocabEnd = std::max(vocabEnd, static_cast<size_t>(t.id) + 1);
    added.push_back(std::move(t));
  }
  return llvm::Error::success();
}

llvm::Error TokenizerImpl::readBool(const json::Object &o, llvm::StringRef key,
                                   const std::string &path, bool &out, bool nullOk) const {
  const json::Value *v = o.get(key);
  if (!v || (nullOk && v->kind() == json::Value::Null))
    return llvm::Error::success();
  auto b = v->getAsBoolean();
  if (!b)
    return fail(path + "." + key + " is " + kindName(*v) + ", not a boolean");
  out = *b;
  return llvm::Error::success();
}

llvm::Error TokenizerImpl::readReplace(const json::Object &o, const std::string &path,
                                      std::string &from, std::string &to) const {
  const json::Object *pat = o.getObject("pattern");
  auto content = o.getString("content");
  if (!pat || !content)
    return fail(path + ": Replace needs pattern and content");
  auto s = pat->getString("String");
  if (!s)
    return fail(path + ".pattern: only a String pattern is supported (not Regex)");
  if (s->empty())
    return fail(path + ".pattern.String is empty");
  from = s->str();
  to = content->str();
  return llvm::Error::success();
}

llvm::Error TokenizerImpl::loadComponents(const json::Value &v, const std::string &path,
                                          llvm::StringRef listKey, ComponentLoader loadOne) {
  if (v.kind() == json::Value::Null)
    return llvm::Error::success();
  const json::Object *o = v.getAsObject();
  if (!o)
    return fail(path + " is " + kindName(v) + ", not an object");
  auto type = o->getString("type");
  if (!type)
    return fail(path + ".type is missing");
  if (*type != "Sequence")
    return (this->*loadOne)(*o, *type, path);
  const json::Array *arr = o->getArray(listKey);
  if (!arr)
    return fail(path + "." + listKey + " is missing or not an array");
  for (size_t i = 0; i < arr->size(); ++i)
    if (auto e = loadComponents((*arr)[i], path + "." + listKey.str() + "[" + std::to_string(i) + "]",
                                listKey, loadOne))
      return e;
  return llvm::Error::success();
}

llvm::Error TokenizerImpl::loadNormalizer(const json::Object &o, llvm::StringRef type,
                                          const std::string &path) {
  if (type == "NFC") {
    normalizers.push_back({Normalizer::NFC, "", ""});
    return llvm::Error::success();
  }
  if (type == "Prepend") {
    auto p = o.getString("prepend");
    if (!p)
      return fail(path + ".prepend is missing or not a string");
    normalizers.push_back({Normalizer::Prepend, p->str(), ""});
    return llvm::Error::success();
  }
  if (type == "Replace") {
    Normalizer n{Normalizer::Replace, "", ""};
    if (auto e = readReplace(o, path, n.a, n.b))
      return e;
    normalizers.push_back(std::move(n));
    return llvm::Error::success();
  }
  return fail(path + ".type '" + type +
              "' is not supported (NFC, Prepend, Replace, Sequence only)");
}

llvm::Error TokenizerImpl::loadPreTokenizer(const json::Object &o, llvm::StringRef type,
                                            const std::string &path) {
  auto boolField = [&](llvm::StringRef key, bool &out) { return readBool(o, key, path, out); };
  PreTokenizer p;
  if (type == "ByteLevel") {
    p.kind = PreTokenizer::ByteLevel;
    if (auto e = boolField("add_prefix_space", p.addPrefixSpace))
      return e;
    if (auto e = boolField("use_regex", p.useRegex))
      return e;
    p.pattern = PatternKind::Gpt2;
  } else if (type == "Split") {
    p.kind = PreTokenizer::Split;
    const json::Object *pat = o.getObject("pattern");
    if (!pat)
      return fail(path + ".pattern is missing or not an object");
    if (auto s = pat->getString("String")) {
      if (s->empty())
        return fail(path + ".pattern.String is empty");
      p.isLiteral = true;
      p.literal = s->str();
    } else if (auto r = pat->getString("Regex")) {
      if (*r == kGpt2Pattern)
        p.pattern = PatternKind::Gpt2;
      else if (*r == kLlama3Pattern)
        p.pattern = PatternKind::Llama3;
      else if (*r == kQwen2Pattern)
        p.pattern = PatternKind::Qwen2;
      else
        return fail(path + ".pattern.Regex is not one of the supported patterns (GPT-2, Llama 3, "
                           "Qwen2): '" + *r + "'");
    } else {
      return fail(path + ".pattern needs a String or Regex");
    }
    auto beh = o.getString("behavior");
    if (!beh)
      return fail(path + ".behavior is missing or not a string");
    if (*beh == "Removed")
      p.behavior = SplitBehavior::Removed;
    else if (*beh == "Isolated")
      p.behavior = SplitBehavior::Isolated;
    else if (*beh == "MergedWithPrevious")
      p.behavior = SplitBehavior::MergedWithPrevious;
    else if (*beh == "MergedWithNext")
      p.behavior = SplitBehavior::MergedWithNext;
    else if (*beh == "Contiguous")
      p.behavior = SplitBehavior::Contiguous;
    else
      return fail(path + ".behavior '" + *beh + "' is not a known split behavior");
    if (auto e = boolField("invert", p.invert))
      return e;
  } else if (type == "Metaspace") {
    p.kind = PreTokenizer::Metaspace;
    auto rep = o.getString("replacement");
    if (!rep || rep->empty())
      return fail(path + ".replacement is missing or not a string");
    p.replacement = rep->str();
    if (auto scheme = o.getString("prepend_scheme")) {
      if (*scheme == "always")
        p.prepend = PreTokenizer::Always;
      else if (*scheme == "first")
        p.prepend = PreTokenizer::First;
      else if (*scheme == "never")
        p.prepend = PreTokenizer::Never;
      else
        return fail(path + ".prepend_scheme '" + *scheme + "' is not always, first or never");
    } else {
      bool addPrefix = true;
      if (auto e = boolField("add_prefix_space", addPrefix))
        return e;
      p.prepend = addPrefix ? PreTokenizer::Always : PreTokenizer::Never;
    }
    if (auto e = boolField("split", p.split))
      return e;
  } else {
    return fail(path + ".type '" + type +
                "' is not supported (ByteLevel, Split, Metaspace, Sequence only)");
  }
  preTokenizers.push_back(std::move(p));
  return llvm::Error::success();
}

llvm::Error TokenizerImpl::loadDecoder(const json::Object &o, llvm::StringRef type,
                                       const std::string &path) {
  Decoder d;
  if (type == "ByteLevel") {
    d.kind = Decoder::ByteLevel;
  } else if (type == "ByteFallback") {
    d.kind = Decoder::ByteFallback;
  } else if (type == "Fuse") {
    d.kind = Decoder::Fuse;
  } else if (type == "Replace") {
    d.kind = Decoder::Replace;
    if (auto e = readReplace(o, path, d.a, d.b))
      return e;
  } else if (type == "Strip") {
    d.kind = Decoder::Strip;
    auto content = o.getString("content");
    auto start = o.getInteger("start"), stop = o.getInteger("stop");
    if (!content || !start || !stop || *start < 0 || *stop < 0)
      return fail(path + ": Strip needs content, start and stop");
    uint32_t cp;
    if (content->empty() || decodeUtf8(*content, 0, cp) != content->size() || cp == kInvalidCodePoint)
      return fail(path + ".content must be one character");
    d.stripChar = cp;
    d.start = static_cast<size_t>(std::min<int64_t>(*start, 1 << 20));
    d.stop = static_cast<size_t>(std::min<int64_t>(*stop, 1 << 20));
  } else if (type == "Metaspace") {
    d.kind = Decoder::Metaspace;
    auto rep = o.getString("replacement");
    if (!rep || rep->empty())
      return fail(path + ".replacement is missing or not a string");
    d.a = rep->str();
    if (auto scheme = o.getString("prepend_scheme"))
      d.prependFirst = *scheme != "never";
    else if (auto b = o.getBoolean("add_prefix_space"))
      d.prependFirst = *b;
  } else {
    return fail(path + ".type '" + type +
                "' is not supported (ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, "
                "Sequence only)");
  }
  decoders.push_back(std::move(d));
  return llvm::Error::success();
}

llvm::Error TokenizerImpl::loadPostProcessor(const json::Object &o, llvm::StringRef type,
                                             const std::string &path) {
  if (type == "ByteLevel")
    return llvm::Error::success(); // offsets only
  if (type != "TemplateProcessing")
    return fail(path + ".type '" + type +
                "' is not supported (TemplateProcessing, ByteLevel, Sequence only)");
  if (!prefixIds.empty() || !suffixIds.empty())
    return fail(path + ": more than one TemplateProcessing");
  const json::Array *single = o.getArray("single");
  if (!single)
    return fail(path + ".single is missing or not an array");
  const json::Object *specials = o.getObject("special_tokens");
  bool seenA = false;
  for (size_t i = 0; i < single->size(); ++i) {
    std::string ipath = path + ".single[" + std::to_string(i) + "]";
    const json::Object *item = (*single)[i].getAsObject();
    if (!item)
      return fail(ipath + " is not an object");
    if (const json::Object *seq = item->getObject("Sequence")) {
      auto id = seq->getString("id");
      if (!id || *id != "A")
        return fail(ipath + ".Sequence.id must be 'A' for a single sequence");
      if (seenA)
        return fail(ipath + ": $A appears twice");
      seenA = true;
      continue;
    }
    const json::Object *sp = item->getObject("SpecialToken");
    if (!sp)
      return fail(ipath + " is neither Sequence nor SpecialToken");
    auto id = sp->getString("id");
    if (!id)
      return fail(ipath + ".SpecialToken.id is missing");
    const json::Object *entry = specials ? specials->getObject(*id) : nullptr;
    if (!entry)
      return fail(path + ".special_tokens has no entry '" + *id + "'");
    const json::Array *ids = entry->getArray("ids");
    if (!ids)
      return fail(path + ".special_tokens['" + *id + "'].ids is missing");
    for (const json::Value &x : *ids) {
      auto n = x.getAsInteger();
      if (!n || *n < 0 || *n >= static_cast<int64_t>(vocabEnd))
        return fail(path + ".special_tokens['" + *id + "'].ids has an id outside the vocabulary");
      (seenA ? suffixIds : prefixIds).push_back(static_cast<int32_t>(*n));
    }
  }
  if (!seenA)
    return fail(path + ".single has no $A sequence");
  if (!prefixIds.empty())
    bos = prefixIds.front();
  return llvm::Error::success();
}

// ---------------------------------------------------------------------------------------------
// Encoding.

std::vector<std::tuple<size_t, size_t, int32_t>>
TokenizerImpl::splitAdded(llvm::StringRef s, const AddedMatcher &m) const {
  std::vector<std::tuple<size_t, size_t, int32_t>> out;
  if (m.empty()) {
    out.push_back({0, s.size(), -1});
    return out;
  }
  size_t startOffset = 0;
  for (size_t i = 0; i < s.size();) {
    int32_t index = -1;
    size_t len = m.longestAt(s, i, index);
    if (len == 0) {
      ++i;
      continue;
    }
    const AddedToken &t = added[index];
    size_t start = i, stop = i + len;
    if (t.singleWord) {
      bool startOk = start == 0 || !lastCharIsWord(s.substr(0, start));
      bool stopOk = stop == s.size() || !firstCharIsWord(s.substr(stop));
      if (!startOk || !stopOk) {
        ++i;
        continue;
      }
    }
    if (t.lstrip) {
      size_t ns = start;
      while (ns > startOffset) {
        // Step back over one whitespace character (ASCII or multi-byte).
        size_t k = lastCharStart(s, ns, startOffset);
        uint32_t cp;
        if (decodeUtf8(s, k, cp) != ns - k || cp == kInvalidCodePoint || !isWhiteSpace(cp))
          break;
        ns = k;
      }
      start = ns;
    }
    if (t.rstrip) {
      while (stop < s.size()) {
        uint32_t cp;
        unsigned n = decodeUtf8(s, stop, cp);
        if (cp == kInvalidCodePoint || !isWhiteSpace(cp))
          break;
        stop += n;
      }
    }
    if (startOffset < start)
      out.push_back({startOffset, start, -1});
    out.push_back({start, stop, index});
    startOffset = stop;
    i = stop;
  }
  if (startOffset < s.size())
    out.push_back({startOffset, s.size(), -1});
  return out;
}

std::string TokenizerImpl::normalize(llvm::StringRef s) const {
  std::string r = s.str();
  for (const Normalizer &n : normalizers) {
    switch (n.kind) {
    case Normalizer::NFC:
      r = nfc(r);
      break;
    case Normalizer::Prepend:
      if (!r.empty())
        r = n.a + r;
      break;
    case Normalizer::Replace:
      r = replaceAll(r, n.a, n.b);
      break;
    }
  }
  return r;
}

void TokenizerImpl::encodeSegment(llvm::StringRef text, bool atTextStart,
                                  std::vector<int32_t> &out) const {
  std::string norm = normalize(text);
  for (auto [b, e, index] : splitAdded(norm, normMatcher)) {
    if (index >= 0)
      out.push_back(added[index].id);
    else
      encodeNormalized(llvm::StringRef(norm).substr(b, e - b), atTextStart && b == 0, out);
  }
}

void TokenizerImpl::encodeNormalized(llvm::StringRef text, bool atTextStart,
                                     std::vector<int32_t> &out) const {
  std::vector<Piece> pieces{{text.str(), atTextStart}}, next;
  for (const PreTokenizer &p : preTokenizers) {
    next.clear();
    for (Piece &piece : pieces) {
      switch (p.kind) {
      case PreTokenizer::ByteLevel: {
        if (p.addPrefixSpace && !llvm::StringRef(piece.text).starts_with(" "))
          piece.text = " " + piece.text;
        std::vector<Piece> split;
        if (p.useRegex)
          applySplit(piece, patternParts(PatternKind::Gpt2, piece.text), SplitBehavior::Isolated,
                     false, split);
        else if (!piece.text.empty())
          split.push_back(piece);
        const ByteAlphabet &alpha = byteAlphabet();
        for (Piece &sp : split) {
          std::string mapped;
          mapped.reserve(sp.text.size() * 2);
          for (unsigned char c : sp.text)
            mapped += alpha.toChar[c];
          next.push_back({std::move(mapped), sp.atTextStart});
        }
        break;
      }
      case PreTokenizer::Split:
        applySplit(piece, p.isLiteral ? literalParts(p.literal, piece.text) : patternParts(p.pattern, piece.text),
                   p.behavior, p.invert, next);
        break;
      case PreTokenizer::Metaspace: {
        std::string t = replaceAll(piece.text, " ", p.replacement);
        bool prepend = p.prepend == PreTokenizer::Always ||
                       (p.prepend == PreTokenizer::First && piece.atTextStart);
        if (prepend && !llvm::StringRef(t).starts_with(p.replacement))
          t = p.replacement + t;
        Piece mp{std::move(t), piece.atTextStart};
        if (p.split)
          applySplit(mp, literalParts(p.replacement, mp.text), SplitBehavior::MergedWithNext, false,
                     next);
        else if (!mp.text.empty())
          next.push_back(std::move(mp));
        break;
      }
      }
    }
    std::swap(pieces, next);
  }
  for (const Piece &piece : pieces)
    if (!piece.text.empty())
      encodeWord(piece.text, out);
}

void TokenizerImpl::encodeWord(llvm::StringRef word, std::vector<int32_t> &out) const {
  if (ignoreMerges) {
    auto it = vocab.find(word);
    if (it != vocab.end()) {
      out.push_back(it->second);
      return;
    }
  }
  constexpr size_t kMaxCachedWord = 256, kMaxCacheEntries = 1 << 16;
  bool cacheable = word.size() <= kMaxCachedWord;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cacheMutex);
    auto it = cache.find(word);
    if (it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids = bpe(word);
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cacheMutex);
    if (cache.size() >= kMaxCacheEntries)
      cache.clear();
    cache.try_emplace(word, std::move(ids));
  }
}

std::vector<int32_t> TokenizerImpl::bpe(llvm::StringRef w) const {
  struct Sym {
    int32_t id;
    int32_t prev, next;
    bool alive;
  };
  std::vector<Sym> syms;
  syms.reserve(w.size());
  auto addSym = [&](int32_t id) {
    int32_t idx = static_cast<int32_t>(syms.size());
    syms.push_back({id, idx - 1, idx + 1, true});
  };
  int32_t pendingUnk = -1; // an <unk> not yet added (fuse_unk extends it)
  std::string tmp;
  for (size_t i = 0; i < w.size();) {
    uint32_t cp;
    unsigned n = decodeUtf8(w, i, cp);
    bool first = i == 0, last = i + n == w.size();
    llvm::StringRef ch = w.substr(i, n);
    llvm::StringRef key = ch;
    if ((!first && continuingPrefix && !continuingPrefix->empty()) ||
        (last && endSuffix && !endSuffix->empty())) {
      tmp.clear();
      if (!first && continuingPrefix)
        tmp += *continuingPrefix;
      tmp += ch;
      if (last && endSuffix)
        tmp += *endSuffix;
      key = tmp;
    }
    i += n;
    auto it = vocab.find(key);
    if (it != vocab.end()) {
      if (pendingUnk >= 0) {
        addSym(pendingUnk);
        pendingUnk = -1;
      }
      addSym(it->second);
      continue;
    }
    if (byteFallback) {
      bool all = true;
      for (unsigned char c : key)
        all &= byteTokens[c] >= 0;
      if (all) {
        for (unsigned char c : key)
          addSym(byteTokens[c]);
        continue;
      }
    }
    if (unkId) {
      if (pendingUnk >= 0 && !fuseUnk)
        addSym(pendingUnk);
      pendingUnk = *unkId;
    }
  }
  if (pendingUnk >= 0)
    addSym(pendingUnk);
  if (syms.empty())
    return {};
  syms.back().next = -1;

  struct Cand {
    int32_t rank, pos, newId;
    bool operator<(const Cand &o) const { // max-heap: lowest rank, then leftmost, on top
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  auto lookup = [&](int32_t a, int32_t b) -> const std::pair<int32_t, int32_t> * {
    auto it = merges.find((uint64_t(uint32_t(a)) << 32) | uint32_t(b));
    return it == merges.end() ? nullptr : &it->second;
  };
  std::priority_queue<Cand> q;
  for (size_t k = 0; k + 1 < syms.size(); ++k)
    if (auto *m = lookup(syms[k].id, syms[k + 1].id))
      q.push({m->first, static_cast<int32_t>(k), m->second});
  while (!q.empty()) {
    Cand top = q.top();
    q.pop();
    Sym &s = syms[top.pos];
    if (!s.alive || s.next < 0)
      continue;
    Sym &r = syms[s.next];
    auto *m = lookup(s.id, r.id);
    if (!m || m->second != top.newId)
      continue;
    s.id = top.newId;
    r.alive = false;
    s.next = r.next;
    if (s.next >= 0)
      syms[s.next].prev = top.pos;
    if (s.prev >= 0)
      if (auto *pm = lookup(syms[s.prev].id, s.id))
        q.push({pm->first, s.prev, pm->second});
    if (s.next >= 0)
      if (auto *nm = lookup(s.id, syms[s.next].id))
        q.push({nm->first, top.pos, nm->second});
  }
  std::vector<int32_t> ids;
  for (const Sym &s : syms)
    if (s.alive)
      ids.push_back(s.id);
  return ids;
}

// ---------------------------------------------------------------------------------------------
// Decoding.

std::vector<std::string> TokenizerImpl::runDecoders(std::vector<std::string> tokens) const {
  for (const Decoder &d : decoders) {
    switch (d.kind) {
    case Decoder::ByteLevel: {
      const ByteAlphabet &alpha = byteAlphabet();
      std::string bytes;
      for (const std::string &t : tokens) {
        std::string tb;
        bool ok = true;
        for (size_t i = 0; i < t.size() && ok;) {
          uint32_t cp;
          unsigned n = decodeUtf8(t, i, cp);
          if (cp < alpha.fromChar.size() && alpha.fromChar[cp] >= 0)
            tb.push_back(static_cast<char>(alpha.fromChar[cp]));
          else
            ok = false;
          i += n;
        }
        bytes += ok ? tb : t;
      }
      tokens.assign(1, utf8Lossy(bytes));
      break;
    }
    case Decoder::Replace:
      for (std::string &t : tokens)
        t = replaceAll(t, d.a, d.b);
      break;
    case Decoder::ByteFallback: {
      std::vector<std::string> out;
      std::string pending;
      auto flushPending = [&] {
        if (pending.empty())
          return;
        if (isValidUtf8(pending))
          out.push_back(pending);
        else
          for (size_t i = 0; i < pending.size(); ++i)
            out.push_back("\xEF\xBF\xBD");
        pending.clear();
      };
      for (std::string &t : tokens) {
        if (t.size() == 6 && llvm::StringRef(t).starts_with("<0x") && t[5] == '>' &&
            llvm::isHexDigit(t[3]) && llvm::isHexDigit(t[4])) {
          pending.push_back(static_cast<char>(llvm::hexFromNibbles(t[3], t[4])));
          continue;
        }
        flushPending();
        out.push_back(std::move(t));
      }
      flushPending();
      tokens = std::move(out);
      break;
    }
    case Decoder::Fuse: {
      std::string all;
      for (const std::string &t : tokens)
        all += t;
      tokens.assign(1, std::move(all));
      break;
    }
    case Decoder::Strip:
      for (std::string &t : tokens) {
        std::vector<std::pair<size_t, uint32_t>> cs; // (byte offset, code point)
        for (size_t i = 0; i < t.size();) {
          uint32_t cp;
          unsigned n = decodeUtf8(t, i, cp);
          cs.push_back({i, cp});
          i += n;
        }
        size_t startCut = 0, stopCut = cs.size();
        for (size_t i = 0; i < std::min(d.start, cs.size()) && cs[i].second == d.stripChar; ++i)
          startCut = i + 1;
        for (size_t i = 0; i < std::min(d.stop, cs.size()) && cs[cs.size() - 1 - i].second == d.stripChar; ++i)
          stopCut = cs.size() - 1 - i;
        if (stopCut <= startCut) {
          t.clear();
          continue;
        }
        size_t b = cs[startCut].first;
        size_t e = stopCut < cs.size() ? cs[stopCut].first : t.size();
        t = t.substr(b, e - b);
      }
      break;
    case Decoder::Metaspace:
      for (size_t i = 0; i < tokens.size(); ++i)
        tokens[i] = replaceAll(tokens[i], d.a, (i == 0 && d.prependFirst) ? "" : " ");
      break;
    }
  }
  return tokens;
}

// -----------------------------------------------------------------------------------------------
// Public API.

Tokenizer::Tokenizer() : impl(std::make_unique<TokenizerImpl>()) {}
Tokenizer::~Tokenizer() = default;

llvm::Expected<std::unique_ptr<Tokenizer>> Tokenizer::fromJson(llvm::StringRef jsonText,
                                                               llvm::StringRef nameForErrors) {
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  t->impl->name = nameForErrors.str();
  // llvm::json::parse recurses once per nesting level: bound the depth before parsing so that a
  // hostile file cannot exhaust the stack.
  constexpr unsigned kMaxDepth = 256;
  if (jsonDepth(jsonText, kMaxDepth) > kMaxDepth)
    return t->impl->fail("invalid JSON: nested deeper than " + llvm::Twine(kMaxDepth) + " levels");
  llvm::Expected<json::Value> root = json::parse(jsonText);
  if (!root)
    return t->impl->fail("invalid JSON: " + llvm::toString(root.takeError()));
  if (auto e = t->impl->load(*root))
    return std::move(e);
  return std::move(t);
}

llvm::Expected<std::unique_ptr<Tokenizer>> Tokenizer::fromFile(llvm::StringRef path) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buf)
    return llvm::createStringError(buf.getError(), path + ": cannot read: " + buf.getError().message());
  return fromJson((*buf)->getBuffer(), path);
}

std::vector<int32_t> Tokenizer::encode(llvm::StringRef text, bool addSpecialTokens) const {
  const TokenizerImpl &m = *impl;
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (addSpecialTokens)
    ids.insert(ids.end(), m.prefixIds.begin(), m.prefixIds.end());
  for (auto [b, e, index] : m.splitAdded(text, m.rawMatcher)) {
    if (index >= 0)
      ids.push_back(m.added[index].id);
    else
      m.encodeSegment(text.substr(b, e - b), b == 0, ids);
  }
  if (addSpecialTokens)
    ids.insert(ids.end(), m.suffixIds.begin(), m.suffixIds.end());
  return ids;
}

llvm::Expected<std::string> Tokenizer::decode(llvm::ArrayRef<int32_t> ids, bool skipSpecial) const {
  const TokenizerImpl &m = *impl;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (const AddedToken *a = m.findAdded(id)) {
      if (!(skipSpecial && a->special))
        tokens.push_back(a->content);
      continue;
    }
    std::optional<llvm::StringRef> t = m.modelToken(id);
    if (!t)
      return m.fail("cannot decode unknown token id " + llvm::Twine(id) + " (vocabulary size " +
                    llvm::Twine(m.vocabEnd) + ")");
    tokens.push_back(t->str());
  }
  if (!m.haveDecoder) {
    std::string r;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i)
        r += ' ';
      r += tokens[i];
    }
    return r;
  }
  std::string r;
  for (const std::string &t : m.runDecoders(std::move(tokens)))
    r += t;
  return r;
}

size_t Tokenizer::vocabSize() const { return impl->vocabEnd; }

std::optional<int32_t> Tokenizer::bosId() const { return impl->bos; }

std::vector<int32_t> Tokenizer::eosIds() const {
  static const char *const kNames[] = {"</s>",        "<|endoftext|>", "<|im_end|>",     "<|eot_id|>",
                                       "<|end_of_text|>", "<|end|>",   "<end_of_turn>", "<|eom_id|>"};
  std::vector<int32_t> r;
  for (const char *n : kNames) {
    auto it = impl->addedByContent.find(n);
    if (it != impl->addedByContent.end())
      r.push_back(it->second);
  }
  std::sort(r.begin(), r.end());
  r.erase(std::unique(r.begin(), r.end()), r.end());
  return r;
}

std::optional<int32_t> Tokenizer::tokenToId(llvm::StringRef token) const {
  auto a = impl->addedByContent.find(token);
  if (a != impl->addedByContent.end())
    return a->second;
  auto it = impl->vocab.find(token);
  if (it != impl->vocab.end())
    return it->second;
  return std::nullopt;
}

llvm::StringRef Tokenizer::idToToken(int32_t id) const {
  if (const AddedToken *a = impl->findAdded(id))
    return a->content;
  return impl->modelToken(id).value_or("");
}

bool Tokenizer::isSpecial(int32_t id) const {
  const AddedToken *a = impl->findAdded(id);
  return a && a->special;
}

// ---------------------------------------------------------------------------------------------
// Streaming.

StreamDecoder::StreamDecoder(const Tokenizer &tokenizer, bool skipSpecial)
    : tok(tokenizer), skipSpecial(skipSpecial) {}

llvm::Expected<std::string> StreamDecoder::push(int32_t id) {
  // decode(..., skipSpecial) drops a skipped special token before the decoders run, so it never
  // changes the text: keep it out of the window (a model repeating EOS must not grow the window
  // and make every later push re-decode all of it).
  if (skipSpecial && tok.isSpecial(id))
    return std::string();
  ids.push_back(id);
  llvm::Expected<std::string> s = tok.decode(ids, skipSpecial);
  if (!s) {
    ids.pop_back();
    return s.takeError();
  }
  llvm::StringRef text = *s;
  if (text.size() <= prefix.size() || text.ends_with("\xEF\xBF\xBD"))
    return std::string(); // nothing new, or an incomplete character at the end: hold it back
  if (!text.starts_with(prefix)) {
    // The decoders rewrote earlier text (not expected for the supported decoders): restart the
    // window at this token and emit what the whole window gives beyond the common prefix.
    size_t common = 0;
    while (common < prefix.size() && prefix[common] == text[common])
      ++common;
    std::string out = text.substr(common).str();
    settle(ids.size() - 1);
    return out;
  }
  std::string out = text.substr(prefix.size()).str();
  // Keep only the tokens of the group just emitted as context for the next one.
  settle(prefixIndex);
  return out;
}

void StreamDecoder::settle(size_t from) {
  ids.erase(ids.begin(), ids.begin() + from);
  prefixIndex = ids.size();
  llvm::Expected<std::string> p = tok.decode(ids, skipSpecial); // ids were all decoded before
  prefix = p ? std::move(*p) : (llvm::consumeError(p.takeError()), std::string());
}

std::string StreamDecoder::flush() {
  std::string out;
  llvm::Expected<std::string> s = tok.decode(ids, skipSpecial);
  if (s) {
    if (s->size() > prefix.size())
      out = llvm::StringRef(*s).starts_with(prefix) ? s->substr(prefix.size()) : *s;
  } else {
    llvm::consumeError(s.takeError());
  }
  ids.clear();
  prefix.clear();
  prefixIndex = 0;
  return out;
}

} // namespace helm::tok
