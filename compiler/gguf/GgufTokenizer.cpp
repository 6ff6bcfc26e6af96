//===- GgufTokenizer.cpp - the tokenizer a GGUF file's metadata describes ------------===//
#include "compiler/gguf/GgufTokenizer.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <tuple>

namespace helm {

namespace {

// llama.cpp's token types (llama_token_type).
enum TokenType : int64_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

/// The pre-tokenizers llama.cpp applies that HELM reproduces (byte-level BPE vocabularies only).
enum class PreTokenizer { Gpt2, Llama3, Qwen2, SmolLM };

/// The pre-tokenizer of a `tokenizer.ggml.pre` name; nullopt for names HELM does not reproduce
/// (llama.cpp's "default" runs four regexes one after another, for instance).
std::optional<PreTokenizer> preTokenizerNamed(llvm::StringRef pre) {
  if (pre == "gpt-2" || pre == "gpt2" || pre == "phi-2")
    return PreTokenizer::Gpt2;
  if (pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe")
    return PreTokenizer::Llama3;
  if (pre == "qwen2" || pre == "deepseek-r1-qwen")
    return PreTokenizer::Qwen2;
  if (pre == "smollm")
    return PreTokenizer::SmolLM;
  return std::nullopt;
}

/// What the tokenizer.json is written from: the file's `tokenizer.ggml.*` keys, checked.
struct Vocabulary {
  bool spm = false;                     // "llama": SentencePiece BPE; else "gpt2": byte-level BPE
  const gguf::Value *tokens = nullptr;  // tokenizer.ggml.tokens: `size` strings
  const gguf::Value *types = nullptr;   // tokenizer.ggml.token_type, when present
  const gguf::Value *scores = nullptr;  // tokenizer.ggml.scores (SentencePiece: always present)
  const gguf::Value *merges = nullptr;  // tokenizer.ggml.merges (byte-level BPE: always present)
  uint64_t size = 0;
  std::optional<int64_t> bos, unk;
  bool addBos = false, addSpacePrefix = false;
  std::optional<PreTokenizer> pre;      // byte-level BPE: always present

  bool bpe() const { return !spm; }
  llvm::StringRef token(uint64_t i) const { return tokens->stringAt(i).value_or(""); }
  int64_t tokenType(uint64_t i) const { return types ? types->intAt(i).value_or(kNormal) : int64_t(kNormal); }
};

llvm::Error fail(const gguf::File &file, const llvm::Twine &message) {
  return llvm::createStringError(file.name() + ": " + message);
}

//===--- reading the metadata -----------------------------------------------===//

std::optional<llvm::StringRef> readString(const gguf::File &file, llvm::StringRef key) {
  const gguf::Value *v = file.find(key);
  return v ? v->asString() : std::nullopt;
}

bool readFlag(const gguf::File &file, llvm::StringRef key, bool fallback) {
  const gguf::Value *v = file.find(key);
  return v && v->asBool() ? *v->asBool() : fallback;
}

/// A token id key: nullopt when absent, an error when it is not an id of the vocabulary.
llvm::Expected<std::optional<int64_t>> readTokenId(const gguf::File &file, llvm::StringRef key, uint64_t size) {
  const gguf::Value *v = file.find(key);
  if (!v)
    return std::nullopt;
  std::optional<int64_t> id = v->asInt();
  if (!id || *id < 0 || uint64_t(*id) >= size)
    return fail(file, llvm::formatv("'{0}' is not a token id below {1}", key, size).str());
  return id;
}

/// tokenizer.ggml.model: which of the two tokenizer kinds.
llvm::Error readTokenizerModel(const gguf::File &file, Vocabulary &v) {
  std::optional<llvm::StringRef> model = readString(file, "tokenizer.ggml.model");
  if (!model)
    return fail(file, "'tokenizer.ggml.model' is missing or not a string");
  if (*model != "gpt2" && *model != "llama")
    return fail(file, "tokenizer model " + gguf::quoted(*model) +
                          " is not supported (gpt2: byte-level BPE; llama: SentencePiece BPE)");
  v.spm = *model == "llama";
  return llvm::Error::success();
}

/// The per-token arrays (tokens, types, scores) and the merges, with what each kind needs.
llvm::Error readTokenTables(const gguf::File &file, Vocabulary &v) {
  v.tokens = file.find("tokenizer.ggml.tokens");
  if (!v.tokens || !v.tokens->isArrayOf(gguf::ValueType::String) || v.tokens->count == 0 ||
      v.tokens->count > (uint64_t(1) << 24))
    return fail(file, "'tokenizer.ggml.tokens' is missing or not a non-empty array of strings");
  v.size = v.tokens->count;
  v.types = file.find("tokenizer.ggml.token_type");
  if (v.types && (v.types->type != gguf::ValueType::Array || v.types->count != v.size || !v.types->intAt(0)))
    return fail(file, llvm::formatv("'tokenizer.ggml.token_type' must be {0} integers", v.size).str());
  v.scores = file.find("tokenizer.ggml.scores");
  if (v.scores && (v.scores->type != gguf::ValueType::Array || v.scores->count != v.size || !v.scores->floatAt(0)))
    return fail(file, llvm::formatv("'tokenizer.ggml.scores' must be {0} numbers", v.size).str());
  v.merges = file.find("tokenizer.ggml.merges");
  if (v.merges && !v.merges->isArrayOf(gguf::ValueType::String))
    return fail(file, "'tokenizer.ggml.merges' must be an array of strings");
  if (v.bpe() && !v.merges)
    return fail(file, "'tokenizer.ggml.merges' is missing (a gpt2 tokenizer needs its merges)");
  if (v.spm && !v.scores)
    return fail(file, "'tokenizer.ggml.scores' is missing (a llama tokenizer ranks its merges by them)");
  return llvm::Error::success();
}

/// The BOS and unknown tokens and what is added to every prompt.
llvm::Error readSpecialTokens(const gguf::File &file, Vocabulary &v) {
  auto bos = readTokenId(file, "tokenizer.ggml.bos_token_id", v.size);
  if (!bos)
    return bos.takeError();
  v.bos = *bos;
  auto unk = readTokenId(file, "tokenizer.ggml.unknown_token_id", v.size);
  if (!unk)
    return unk.takeError();
  v.unk = *unk;
  // llama.cpp's defaults: SentencePiece vocabularies add BOS and a space prefix, BPE ones neither.
  v.addBos = readFlag(file, "tokenizer.ggml.add_bos_token", v.spm);
  v.addSpacePrefix = readFlag(file, "tokenizer.ggml.add_space_prefix", v.spm);
  if (v.addBos && !v.bos)
    return fail(file, "'tokenizer.ggml.add_bos_token' is set but 'tokenizer.ggml.bos_token_id' is missing");
  if (readFlag(file, "tokenizer.ggml.add_eos_token", false))
    return fail(file, "'tokenizer.ggml.add_eos_token' is set: appending EOS to every prompt is not supported");
  return llvm::Error::success();
}

/// tokenizer.ggml.pre, for byte-level BPE vocabularies (SentencePiece ones have none).
llvm::Error readPreTokenizer(const gguf::File &file, Vocabulary &v) {
  if (v.spm)
    return llvm::Error::success();
  llvm::StringRef name = readString(file, "tokenizer.ggml.pre").value_or("");
  v.pre = preTokenizerNamed(name);
  if (!v.pre)
    return fail(file, "pre-tokenizer " + gguf::quoted(name.empty() ? llvm::StringRef("(none)") : name) +
                          " (tokenizer.ggml.pre) is not supported (gpt-2, llama-bpe, qwen2, smollm)");
  return llvm::Error::success();
}

//===--- writing tokenizer.json ---------------------------------------------===//

/// The first id of every token string (llama.cpp's token_to_id keeps the last; neither is ever
/// produced by the merges twice).
llvm::StringMap<int64_t> firstIds(const Vocabulary &v) {
  llvm::StringMap<int64_t> ids;
  for (uint64_t i = 0; i < v.size; ++i)
    ids.try_emplace(v.token(i), int64_t(i));
  return ids;
}

/// Control and user-defined tokens are matched in the text before the model, as llama.cpp's
/// tokenizer does with special-token parsing on.
void writeAddedTokens(llvm::json::OStream &j, const Vocabulary &v) {
  j.attributeArray("added_tokens", [&] {
    for (uint64_t i = 0; i < v.size; ++i) {
      int64_t type = v.tokenType(i);
      if (type != kControl && type != kUserDefined)
        continue;
      llvm::StringRef content = v.token(i);
      if (content.empty())
        continue;
      j.object([&] {
        j.attribute("id", int64_t(i));
        j.attribute("content", content);
        j.attribute("single_word", false);
        j.attribute("lstrip", false);
        j.attribute("rstrip", false);
        j.attribute("normalized", false);
        j.attribute("special", type == kControl);
      });
    }
  });
}

/// SentencePiece: spaces become U+2581, with one prepended when the vocabulary adds a space prefix.
void writeNormalizer(llvm::json::OStream &j, const Vocabulary &v) {
  if (v.bpe()) {
    j.attribute("normalizer", nullptr);
    return;
  }
  j.attributeObject("normalizer", [&] {
    j.attribute("type", "Sequence");
    j.attributeArray("normalizers", [&] {
      if (v.addSpacePrefix)
        j.object([&] {
          j.attribute("type", "Prepend");
          j.attribute("prepend", "\xE2\x96\x81");
        });
      j.object([&] {
        j.attribute("type", "Replace");
        j.attributeObject("pattern", [&] { j.attribute("String", " "); });
        j.attribute("content", "\xE2\x96\x81");
      });
    });
  });
}

/// The pre-tokenizer llama.cpp applies, as tokenizer.json pre-tokenizers.
void writePreTokenizer(llvm::json::OStream &j, const Vocabulary &v) {
  if (v.spm) {
    j.attribute("pre_tokenizer", nullptr);
    return;
  }
  auto split = [&](llvm::StringRef regex) {
    j.object([&] {
      j.attribute("type", "Split");
      j.attributeObject("pattern", [&] { j.attribute("Regex", regex); });
      j.attribute("behavior", "Isolated");
      j.attribute("invert", false);
    });
  };
  auto byteLevel = [&](bool useRegex) {
    j.object([&] {
      j.attribute("type", "ByteLevel");
      j.attribute("add_prefix_space", false);
      j.attribute("trim_offsets", true);
      j.attribute("use_regex", useRegex);
    });
  };
  // The three patterns of HELM's tokenizer (runtime/tokenizer/TokenizerJson.cpp), written as the
  // Hugging Face files have them; llama.cpp's spellings of the same patterns only avoid `(?i:`.
  static constexpr llvm::StringLiteral kLlama3 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  static constexpr llvm::StringLiteral kQwen2 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  j.attributeBegin("pre_tokenizer");
  switch (*v.pre) {
  case PreTokenizer::Gpt2:
    byteLevel(true);
    break;
  case PreTokenizer::Llama3:
  case PreTokenizer::Qwen2:
    j.object([&] {
      j.attribute("type", "Sequence");
      j.attributeArray("pretokenizers", [&] {
        split(*v.pre == PreTokenizer::Llama3 ? kLlama3 : kQwen2);
        byteLevel(false);
      });
    });
    break;
  case PreTokenizer::SmolLM:
    // llama.cpp: every digit on its own, then GPT-2's pattern.
    j.object([&] {
      j.attribute("type", "Sequence");
      j.attributeArray("pretokenizers", [&] {
        j.object([&] {
          j.attribute("type", "Digits");
          j.attribute("individual_digits", true);
        });
        byteLevel(true);
      });
    });
    break;
  }
  j.attributeEnd();
}

/// BOS before every text, when the vocabulary adds it.
void writePostProcessor(llvm::json::OStream &j, const Vocabulary &v) {
  if (!v.addBos) {
    j.attribute("post_processor", nullptr);
    return;
  }
  std::string bosText = v.token(uint64_t(*v.bos)).str();
  j.attributeObject("post_processor", [&] {
    j.attribute("type", "TemplateProcessing");
    j.attributeArray("single", [&] {
      j.object([&] {
        j.attributeObject("SpecialToken", [&] {
          j.attribute("id", bosText);
          j.attribute("type_id", 0);
        });
      });
      j.object([&] {
        j.attributeObject("Sequence", [&] {
          j.attribute("id", "A");
          j.attribute("type_id", 0);
        });
      });
    });
    j.attributeArray("pair", [] {});
    j.attributeObject("special_tokens", [&] {
      j.attributeObject(bosText, [&] {
        j.attribute("id", bosText);
        j.attributeArray("ids", [&] { j.value(*v.bos); });
        j.attributeArray("tokens", [&] { j.value(bosText); });
      });
    });
  });
}

/// SentencePiece: U+2581 back to spaces, <0xNN> pieces to bytes, and the space prefix dropped;
/// byte-level BPE: bytes back from their printable stand-ins.
void writeDecoder(llvm::json::OStream &j, const Vocabulary &v) {
  if (v.bpe()) {
    j.attributeObject("decoder", [&] {
      j.attribute("type", "ByteLevel");
      j.attribute("add_prefix_space", true);
      j.attribute("trim_offsets", true);
      j.attribute("use_regex", true);
    });
    return;
  }
  j.attributeObject("decoder", [&] {
    j.attribute("type", "Sequence");
    j.attributeArray("decoders", [&] {
      j.object([&] {
        j.attribute("type", "Replace");
        j.attributeObject("pattern", [&] { j.attribute("String", "\xE2\x96\x81"); });
        j.attribute("content", " ");
      });
      j.object([&] { j.attribute("type", "ByteFallback"); });
      j.object([&] { j.attribute("type", "Fuse"); });
      if (v.addSpacePrefix)
        j.object([&] {
          j.attribute("type", "Strip");
          j.attribute("content", " ");
          j.attribute("start", 1);
          j.attribute("stop", 0);
        });
    });
  });
}

/// SentencePiece BPE merges the adjacent pair whose concatenation has the highest score; as
/// ranked merges: every split of every normal or user-defined token into two vocabulary pieces,
/// best score first (Hugging Face's conversion of SentencePiece models does the same): the
/// (left, right) ids of each merge, in rank order.
std::vector<std::pair<int64_t, int64_t>> sentencePieceMerges(const Vocabulary &v,
                                                             const llvm::StringMap<int64_t> &ids) {
  std::vector<std::tuple<double, int64_t, int64_t, int64_t>> ranked; // -score, id, left, right
  for (uint64_t i = 0; i < v.size; ++i) {
    if (v.tokenType(i) != kNormal && v.tokenType(i) != kUserDefined)
      continue;
    llvm::StringRef t = v.token(i);
    for (size_t cut = 1; cut < t.size(); ++cut) {
      if ((uint8_t(t[cut]) & 0xC0) == 0x80) // inside a UTF-8 character
        continue;
      auto l = ids.find(t.take_front(cut)), r = ids.find(t.drop_front(cut));
      if (l != ids.end() && r != ids.end())
        ranked.emplace_back(-v.scores->floatAt(i).value_or(0.0), int64_t(i), l->second, r->second);
    }
  }
  std::stable_sort(ranked.begin(), ranked.end());
  std::vector<std::pair<int64_t, int64_t>> merges;
  merges.reserve(ranked.size());
  for (const auto &[score, id, left, right] : ranked)
    merges.emplace_back(left, right);
  return merges;
}

/// The BPE model: its vocabulary (a string that appears twice keeps its first id) and merges.
void writeModel(llvm::json::OStream &j, const Vocabulary &v) {
  j.attributeObject("model", [&] {
    j.attribute("type", "BPE");
    j.attribute("dropout", nullptr);
    if (v.spm && v.unk)
      j.attribute("unk_token", v.token(uint64_t(*v.unk)));
    else
      j.attribute("unk_token", nullptr);
    j.attribute("continuing_subword_prefix", nullptr);
    j.attribute("end_of_word_suffix", nullptr);
    j.attribute("fuse_unk", v.spm);
    j.attribute("byte_fallback", v.spm);
    // llama.cpp (and Llama 3's tokenizer.json) look a whole pre-token up in the vocabulary
    // before merging it.
    j.attribute("ignore_merges", v.bpe() && v.pre == PreTokenizer::Llama3);
    llvm::StringMap<int64_t> ids = firstIds(v);
    j.attributeObject("vocab", [&] {
      for (uint64_t i = 0; i < v.size; ++i) {
        llvm::StringRef t = v.token(i);
        if (ids.lookup(t) == int64_t(i))
          j.attribute(t, int64_t(i));
      }
    });
    j.attributeArray("merges", [&] {
      if (v.bpe()) {
        for (uint64_t i = 0; i < v.merges->count; ++i)
          j.value(v.merges->stringAt(i).value_or(""));
        return;
      }
      for (const auto &[left, right] : sentencePieceMerges(v, ids))
        j.array([&] { // pairs, not "a b": a SentencePiece piece may hold a space
          j.value(v.token(uint64_t(left)));
          j.value(v.token(uint64_t(right)));
        });
    });
  });
}

} // namespace

llvm::Expected<std::string> tokenizerJsonFromGguf(const gguf::File &file) {
  Vocabulary v;
  if (llvm::Error e = readTokenizerModel(file, v))
    return std::move(e);
  if (llvm::Error e = readTokenTables(file, v))
    return std::move(e);
  if (llvm::Error e = readSpecialTokens(file, v))
    return std::move(e);
  if (llvm::Error e = readPreTokenizer(file, v))
    return std::move(e);

  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::json::OStream j(os);
  j.object([&] {
    j.attribute("version", "1.0");
    j.attribute("truncation", nullptr);
    j.attribute("padding", nullptr);
    writeAddedTokens(j, v);
    writeNormalizer(j, v);
    writePreTokenizer(j, v);
    writePostProcessor(j, v);
    writeDecoder(j, v);
    writeModel(j, v);
  });
  return text;
}

} // namespace helm
