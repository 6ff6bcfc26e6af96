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

/// The pre-tokenizer llama.cpp applies for a `tokenizer.ggml.pre` name, as tokenizer.json
/// pre-tokenizers: byte-level BPE vocabularies only. Returns false for names HELM does not
/// reproduce (llama.cpp's "default" runs four regexes one after another, for instance).
bool writePreTokenizer(llvm::StringRef pre, llvm::json::OStream &j) {
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
  if (pre == "gpt-2" || pre == "gpt2" || pre == "phi-2") {
    byteLevel(true);
  } else if (pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe") {
    j.object([&] {
      j.attribute("type", "Sequence");
      j.attributeArray("pretokenizers", [&] {
        split(kLlama3);
        byteLevel(false);
      });
    });
  } else if (pre == "qwen2" || pre == "deepseek-r1-qwen") {
    j.object([&] {
      j.attribute("type", "Sequence");
      j.attributeArray("pretokenizers", [&] {
        split(kQwen2);
        byteLevel(false);
      });
    });
  } else if (pre == "smollm") {
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
  } else {
    return false;
  }
  return true;
}

llvm::Error fail(const gguf::File &file, const llvm::Twine &message) {
  return llvm::createStringError(file.name() + ": " + message);
}

} // namespace

llvm::Expected<std::string> tokenizerJsonFromGguf(const gguf::File &file) {
  auto stringKey = [&](llvm::StringRef key) -> std::optional<llvm::StringRef> {
    const gguf::Value *v = file.find(key);
    return v ? v->asString() : std::nullopt;
  };
  std::optional<llvm::StringRef> model = stringKey("tokenizer.ggml.model");
  if (!model)
    return fail(file, "'tokenizer.ggml.model' is missing or not a string");
  bool bpe = *model == "gpt2", spm = *model == "llama";
  if (!bpe && !spm)
    return fail(file, "tokenizer model " + gguf::quoted(*model) +
                          " is not supported (gpt2: byte-level BPE; llama: SentencePiece BPE)");
  const gguf::Value *tokens = file.find("tokenizer.ggml.tokens");
  if (!tokens || !tokens->isArrayOf(gguf::ValueType::String) || tokens->count == 0 ||
      tokens->count > (uint64_t(1) << 24))
    return fail(file, "'tokenizer.ggml.tokens' is missing or not a non-empty array of strings");
  const uint64_t n = tokens->count;
  const gguf::Value *types = file.find("tokenizer.ggml.token_type");
  if (types && (types->type != gguf::ValueType::Array || types->count != n || !types->intAt(0)))
    return fail(file, llvm::formatv("'tokenizer.ggml.token_type' must be {0} integers", n).str());
  const gguf::Value *scores = file.find("tokenizer.ggml.scores");
  if (scores && (scores->type != gguf::ValueType::Array || scores->count != n || !scores->floatAt(0)))
    return fail(file, llvm::formatv("'tokenizer.ggml.scores' must be {0} numbers", n).str());
  const gguf::Value *merges = file.find("tokenizer.ggml.merges");
  if (merges && !merges->isArrayOf(gguf::ValueType::String))
    return fail(file, "'tokenizer.ggml.merges' must be an array of strings");
  if (bpe && !merges)
    return fail(file, "'tokenizer.ggml.merges' is missing (a gpt2 tokenizer needs its merges)");
  if (spm && !scores)
    return fail(file, "'tokenizer.ggml.scores' is missing (a llama tokenizer ranks its merges by them)");
  auto tokenType = [&](uint64_t i) { return types ? types->intAt(i).value_or(kNormal) : int64_t(kNormal); };
  auto idKey = [&](llvm::StringRef key) -> llvm::Expected<std::optional<int64_t>> {
    const gguf::Value *v = file.find(key);
    if (!v)
      return std::nullopt;
    std::optional<int64_t> id = v->asInt();
    if (!id || *id < 0 || uint64_t(*id) >= n)
      return fail(file, llvm::formatv("'{0}' is not a token id below {1}", key, n).str());
    return id;
  };
  auto boolKey = [&](llvm::StringRef key, bool fallback) {
    const gguf::Value *v = file.find(key);
    return v && v->asBool() ? *v->asBool() : fallback;
  };
  auto bos = idKey("tokenizer.ggml.bos_token_id");
  if (!bos)
    return bos.takeError();
  auto unk = idKey("tokenizer.ggml.unknown_token_id");
  if (!unk)
    return unk.takeError();
  // llama.cpp's defaults: SentencePiece vocabularies add BOS and a space prefix, BPE ones neither.
  bool addBos = boolKey("tokenizer.ggml.add_bos_token", spm);
  bool addSpacePrefix = boolKey("tokenizer.ggml.add_space_prefix", spm);
  if (addBos && !*bos)
    return fail(file, "'tokenizer.ggml.add_bos_token' is set but 'tokenizer.ggml.bos_token_id' is missing");
  if (boolKey("tokenizer.ggml.add_eos_token", false))
    return fail(file, "'tokenizer.ggml.add_eos_token' is set: appending EOS to every prompt is not supported");

  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::json::OStream j(os);
  std::string error;
  j.object([&] {
    j.attribute("version", "1.0");
    j.attribute("truncation", nullptr);
    j.attribute("padding", nullptr);
    // Control and user-defined tokens are matched in the text before the model, as llama.cpp's
    // tokenizer does with special-token parsing on.
    j.attributeArray("added_tokens", [&] {
      for (uint64_t i = 0; i < n; ++i) {
        int64_t type = tokenType(i);
        if (type != kControl && type != kUserDefined)
          continue;
        llvm::StringRef content = tokens->stringAt(i).value_or("");
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
    if (spm) {
      j.attributeObject("normalizer", [&] {
        j.attribute("type", "Sequence");
        j.attributeArray("normalizers", [&] {
          if (addSpacePrefix)
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
      j.attribute("pre_tokenizer", nullptr);
    } else {
      j.attribute("normalizer", nullptr);
      llvm::StringRef pre = stringKey("tokenizer.ggml.pre").value_or("");
      j.attributeBegin("pre_tokenizer");
      if (!writePreTokenizer(pre, j)) {
        error = "pre-tokenizer " + gguf::quoted(pre.empty() ? llvm::StringRef("(none)") : pre) +
                " (tokenizer.ggml.pre) is not supported (gpt-2, llama-bpe, qwen2, smollm)";
        j.value(nullptr);
      }
      j.attributeEnd();
    }
    j.attributeBegin("post_processor");
    if (addBos) {
      std::string bosText = tokens->stringAt(uint64_t(**bos)).value_or("").str();
      j.object([&] {
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
            j.attributeArray("ids", [&] { j.value(**bos); });
            j.attributeArray("tokens", [&] { j.value(bosText); });
          });
        });
      });
    } else {
      j.value(nullptr);
    }
    j.attributeEnd();
    if (spm) {
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
          if (addSpacePrefix)
            j.object([&] {
              j.attribute("type", "Strip");
              j.attribute("content", " ");
              j.attribute("start", 1);
              j.attribute("stop", 0);
            });
        });
      });
    } else {
      j.attributeObject("decoder", [&] {
        j.attribute("type", "ByteLevel");
        j.attribute("add_prefix_space", true);
        j.attribute("trim_offsets", true);
        j.attribute("use_regex", true);
      });
    }
    j.attributeObject("model", [&] {
      j.attribute("type", "BPE");
      j.attribute("dropout", nullptr);
      if (spm && *unk)
        j.attribute("unk_token", tokens->stringAt(uint64_t(**unk)).value_or(""));
      else
        j.attribute("unk_token", nullptr);
      j.attribute("continuing_subword_prefix", nullptr);
      j.attribute("end_of_word_suffix", nullptr);
      j.attribute("fuse_unk", spm);
      j.attribute("byte_fallback", spm);
      // llama.cpp (and Llama 3's tokenizer.json) look a whole pre-token up in the vocabulary
      // before merging it.
      llvm::StringRef pre = stringKey("tokenizer.ggml.pre").value_or("");
      j.attribute("ignore_merges", bpe && (pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe"));
      // A string that appears twice keeps its first id (llama.cpp's token_to_id keeps the last;
      // neither is ever produced by the merges twice).
      llvm::StringMap<int64_t> ids;
      j.attributeObject("vocab", [&] {
        for (uint64_t i = 0; i < n; ++i) {
          llvm::StringRef t = tokens->stringAt(i).value_or("");
          if (ids.try_emplace(t, int64_t(i)).second)
            j.attribute(t, int64_t(i));
        }
      });
      j.attributeArray("merges", [&] {
        if (bpe) {
          for (uint64_t i = 0; i < merges->count; ++i)
            j.value(merges->stringAt(i).value_or(""));
          return;
        }
        // SentencePiece BPE merges the adjacent pair whose concatenation has the highest score;
        // as ranked merges: every split of every normal token into two vocabulary pieces, best
        // score first (Hugging Face's conversion of SentencePiece models does the same).
        std::vector<std::tuple<double, int64_t, int64_t, int64_t>> ranked; // -score, id, left, right
        for (uint64_t i = 0; i < n; ++i) {
          if (tokenType(i) != kNormal && tokenType(i) != kUserDefined)
            continue;
          llvm::StringRef t = tokens->stringAt(i).value_or("");
          for (size_t cut = 1; cut < t.size(); ++cut) {
            if ((uint8_t(t[cut]) & 0xC0) == 0x80) // inside a UTF-8 character
              continue;
            auto l = ids.find(t.take_front(cut)), r = ids.find(t.drop_front(cut));
            if (l != ids.end() && r != ids.end())
              ranked.emplace_back(-scores->floatAt(i).value_or(0.0), int64_t(i), l->second, r->second);
          }
        }
        std::stable_sort(ranked.begin(), ranked.end());
        for (const auto &[score, id, left, right] : ranked)
          j.array([&] { // pairs, not "a b": a SentencePiece piece may hold a space
            j.value(tokens->stringAt(uint64_t(left)).value_or(""));
            j.value(tokens->stringAt(uint64_t(right)).value_or(""));
          });
      });
    });
  });
  if (!error.empty())
    return fail(file, error);
  return text;
}

} // namespace helm
