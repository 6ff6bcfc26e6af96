//===- Decoder.cpp - decoding: the decoder chain, Tokenizer::decode, StreamDecoder ---===//
#include "runtime/tokenizer/TokenizerImpl.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>

namespace helm::tok {

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
