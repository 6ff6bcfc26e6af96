//===- Tokenizer.cpp - Hugging Face tokenizer.json: the public API --------------===//
//
// The tokenizer's pipeline is spread over its files by concern (TokenizerImpl.h lists them); this
// one holds encode, the vocabulary queries and the string helper they share.
//
//===----------------------------------------------------------------------------===//
#include "runtime/tokenizer/TokenizerImpl.h"

#include <algorithm>

namespace helm::tok {

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

Tokenizer::Tokenizer() : impl(std::make_unique<TokenizerImpl>()) {}
Tokenizer::~Tokenizer() = default;

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

} // namespace helm::tok
