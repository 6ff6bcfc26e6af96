//===- TokenizerJson.cpp - loading tokenizer.json into a TokenizerImpl ----------===//
//
// Every field this tokenizer supports is read here; anything else is rejected with an llvm::Error
// that names the field (docs/tokenizer.md lists them).
//
//===----------------------------------------------------------------------------===//
#include "runtime/tokenizer/TokenizerImpl.h"

#include "contract/format/JsonDepth.h"

#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cstdio>

namespace helm::tok {

namespace {

constexpr llvm::StringLiteral kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr llvm::StringLiteral kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr llvm::StringLiteral kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

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
  } else if (type == "Digits") {
    // Only individual digits: the grouped form (runs of digits) appears in no tokenizer HELM
    // has met, and a wrong guess would change the ids silently.
    bool individual = false;
    if (auto e = boolField("individual_digits", individual))
      return e;
    if (!individual)
      return fail(path + ".individual_digits: only individual digits (true) are supported");
    p.kind = PreTokenizer::Split;
    p.pattern = PatternKind::Digits;
    p.behavior = SplitBehavior::Isolated;
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

} // namespace helm::tok
