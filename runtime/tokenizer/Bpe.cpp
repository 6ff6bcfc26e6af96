//===- Bpe.cpp - encoding: added tokens, normalizers, pre-tokenizers, the BPE model --===//
//
// A segment of text between added tokens is normalized, split again on `normalized` added tokens,
// pre-tokenized into words (PreTokenizer.cpp's matchers), and each word is encoded by the BPE
// model: merges applied lowest rank first (a priority queue over adjacent pairs), with byte
// fallback or the unknown token for symbols outside the vocabulary. Encoded words are cached.
//
//===----------------------------------------------------------------------------===//
#include "runtime/tokenizer/TokenizerImpl.h"

#include <algorithm>
#include <queue>

namespace helm::tok {

namespace {

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

} // namespace helm::tok
