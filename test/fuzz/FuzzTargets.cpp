// The fuzz targets' bodies (FuzzTargets.h).
#include "test/fuzz/FuzzTargets.h"

#include "compiler/Pipeline.h"
#include "compiler/gguf/GgufFile.h"
#include "compiler/gguf/GgufImporter.h"
#include "compiler/gguf/GgufTokenizer.h"
#include "compiler/onnx/OnnxImporter.h"
#include "dialects/helm/HelmDialect.h"
#include "contract/format/Checksum.h"
#include "passes/plan/TargetProfile.h"
#include "runtime/chat/ChatTemplate.h"
#include "contract/format/Package.h"
#include "runtime/tokenizer/Tokenizer.h"
#include "runtime/cli/Options.h"
#include "tools/helmc/Options.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/JSON.h"

#include <cstring>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

using namespace helm::pkg;

namespace {

void check(llvm::ArrayRef<char> bytes, Package::Verify verify) {
  auto pkg = Package::fromBuffer(bytes, "fuzz.helmpkg", verify);
  if (!pkg) {
    std::string message = llvm::toString(pkg.takeError());
    if (message.rfind("fuzz.helmpkg: ", 0) != 0 || message.size() <= 14 ||
        message.find('\n') != std::string::npos)
      __builtin_trap(); // errors are one line naming the file
    return;
  }
  const Package &p = **pkg;
  if (p.manifest().data() < bytes.data() ||
      p.manifest().data() + p.manifest().size() > bytes.data() + bytes.size())
    __builtin_trap();
  volatile char sink = 0;
  for (const Package::Section &s : p.sections()) {
    if (s.bytes.data() < bytes.data() || s.offset + s.size > bytes.size())
      __builtin_trap();
    if (!s.bytes.empty())
      sink = sink + s.bytes.front() + s.bytes.back();
    llvm::Error e = p.verifySection(s);
    if (verify == Package::Verify::All && e)
      __builtin_trap(); // a fully verified package has good checksums
    llvm::consumeError(std::move(e));
    if (p.find(s.kind, s.name) == nullptr)
      __builtin_trap();
  }
}

// Recomputes the checksums a mutation broke, where the header/table are in bounds.
void reseal(std::vector<char> &b) {
  using namespace llvm::support::endian;
  if (b.size() < kHeaderSize || std::memcmp(b.data(), kMagic, 8) != 0)
    return;
  uint32_t count = read32le(b.data() + 16);
  uint64_t table = read64le(b.data() + 24);
  if (count > kMaxSections || table > b.size() || uint64_t(count) * kSectionEntrySize > b.size() - table)
    return;
  char *t = b.data() + table;
  for (uint32_t i = 0; i < count; ++i) {
    char *e = t + size_t(i) * kSectionEntrySize;
    uint64_t off = read64le(e + 40), size = read64le(e + 48);
    if (off <= b.size() && size <= b.size() - off) {
      // Skip sections that overlap the table: rewriting them would change the table under us.
      if (off < table + uint64_t(count) * kSectionEntrySize && table < off + size)
        continue;
      write64le(e + 56, checksum64(b.data() + off, size_t(size)));
    }
  }
  write64le(b.data() + 48, checksum64(t, size_t(count) * kSectionEntrySize));
  write64le(b.data() + 56, checksum64(b.data(), kHeaderChecksumSpan));
}

} // namespace

namespace helm::fuzz {

void packageInput(const uint8_t *data, size_t size) {
  // Exact-size heap copy: ASan flags any read past the end.
  std::vector<char> bytes(reinterpret_cast<const char *>(data), reinterpret_cast<const char *>(data) + size);
  check(bytes, Package::Verify::All);
  check(bytes, Package::Verify::HeaderOnly);
  reseal(bytes);
  check(bytes, Package::Verify::All);
  check(bytes, Package::Verify::HeaderOnly);
}

void importerInput(const uint8_t *data, size_t size) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<helm::HelmDialect, mlir::func::FuncDialect>();
  mlir::ScopedDiagnosticHandler quiet(&ctx, [](mlir::Diagnostic &) { return mlir::success(); });
  helm::ImportOptions options;
  options.requireWeightData = false; // never touch the file system for external data
  auto model = helm::importOnnxBytes(ctx, data, size, "fuzz.onnx", "/nonexistent", options);
  if (!model) {
    std::string message = llvm::toString(model.takeError());
    // A failed import says why (the importer's fallback message means a path that did not).
    if (message.empty() || message == "fuzz.onnx: internal error: the import failed without a reason")
      __builtin_trap();
    return;
  }
  llvm::consumeError(helm::runPhase(*model->module, helm::CompilePhase::Raise, {}, "fuzz.onnx"));
}

void ggufInput(const uint8_t *data, size_t size) {
  auto buffer = llvm::MemoryBuffer::getMemBuffer(llvm::StringRef(reinterpret_cast<const char *>(data), size),
                                                 "fuzz.gguf", /*RequiresNullTerminator=*/false);
  auto file = helm::gguf::File::parse(std::move(buffer), "fuzz.gguf");
  if (!file) {
    std::string message = llvm::toString(file.takeError());
    if (!llvm::StringRef(message).starts_with("fuzz.gguf: ") || message.find('\n') != std::string::npos)
      __builtin_trap(); // one line naming the file
    return;
  }
  // Read everything the view claims to hold: ASan reports any byte outside the input.
  volatile uint64_t sink = 0;
  for (const auto &[key, value] : (*file)->metadata()) {
    sink = sink + key.size() + uint64_t(value.asInt().value_or(0)) + uint64_t(value.asFloat().value_or(0) != 0) +
           value.asString().value_or("").size() + value.asU64().value_or(0);
    for (uint64_t i = 0; i < value.count && value.type == helm::gguf::ValueType::Array; ++i) {
      if (value.elementType == helm::gguf::ValueType::String) {
        llvm::StringRef s = value.stringAt(i).value_or("");
        sink = sink + s.size() + (s.empty() ? 0 : uint8_t(s.back()));
      } else {
        sink = sink + uint64_t(value.intAt(i).value_or(0)) + uint64_t(value.floatAt(i).value_or(0) != 0) +
               value.u64At(i).value_or(0);
      }
    }
  }
  for (const helm::gguf::TensorInfo &t : (*file)->tensors()) {
    if (t.data.size() != t.bytes || !t.typeInfo || (*file)->findTensor(t.name) != &t)
      __builtin_trap();
    // The byte count is the shape's, computed without wrapping around.
    unsigned __int128 elements = 1;
    for (uint64_t d : t.dims)
      elements *= d;
    if (elements != t.elements ||
        elements / uint64_t(t.typeInfo->blockWeights) * uint64_t(t.typeInfo->blockBytes) != t.bytes)
      __builtin_trap();
    if (!t.data.empty())
      sink = sink + t.data.front() + t.data.back();
  }
  // The tokenizer helmc builds from the metadata: valid JSON that loads, or a one-line refusal.
  if ((*file)->find("tokenizer.ggml.model")) {
    auto json = helm::tokenizerJsonFromGguf(**file);
    if (!json) {
      std::string message = llvm::toString(json.takeError());
      if (!llvm::StringRef(message).starts_with("fuzz.gguf: ") || message.find('\n') != std::string::npos)
        __builtin_trap();
    } else if (auto tokenizer = helm::tok::Tokenizer::fromJson(*json, "fuzz.gguf")) {
      sink = sink + (*tokenizer)->encode("Hello 123 world", true).size();
    } else {
      llvm::consumeError(tokenizer.takeError());
    }
  }
  // The GGUF front end on the same bytes: a module that verifies, or one line naming the file.
  mlir::MLIRContext ctx;
  ctx.printOpOnDiagnostic(false);
  auto imported = helm::importGgufBuffer(
      ctx,
      llvm::MemoryBuffer::getMemBuffer(llvm::StringRef(reinterpret_cast<const char *>(data), size), "fuzz.gguf",
                                       /*RequiresNullTerminator=*/false),
      "fuzz.gguf", /*maxContext=*/8192); // beyond Phi-3's 4096: the LongRoPE seeds take their long table
  if (!imported) {
    std::string message = llvm::toString(imported.takeError());
    if (!llvm::StringRef(message).starts_with("fuzz.gguf: ") || message.find('\n') != std::string::npos)
      __builtin_trap();
  }
}

void tokenizerInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  auto tokenizer = helm::tok::Tokenizer::fromJson(text, "fuzz.json");
  if (!tokenizer) {
    if (llvm::toString(tokenizer.takeError()).empty())
      __builtin_trap(); // a refused tokenizer says why
    return;
  }
  static const char *const kSample =
      "Hello, world! It's 2026-11-26 \t\n  spaces   and \xc3\xa9\xc3\x9f \xe4\xb8\xad\xe6\x96\x87 "
      "\xf0\x9f\x98\x80 <|endoftext|> \xff\xfe";
  for (bool special : {false, true}) {
    std::vector<int32_t> ids = (*tokenizer)->encode(kSample, special);
    llvm::consumeError((*tokenizer)->decode(ids).takeError());
    llvm::consumeError((*tokenizer)->decode(ids, /*skipSpecial=*/true).takeError());
  }
}

void targetProfileInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  auto profile = helm::parseTargetProfile(text);
  if (!profile) {
    if (llvm::toString(profile.takeError()).empty())
      __builtin_trap(); // a refused profile names the field
    return;
  }
  // What was accepted writes a document that parses to the same profile.
  std::string json = helm::targetProfileToJson(*profile);
  auto again = helm::parseTargetProfile(json);
  if (!again) {
    llvm::consumeError(again.takeError());
    __builtin_trap();
  }
  if (helm::targetProfileToJson(*again) != json)
    __builtin_trap();
}

namespace {
/// `data` split at NUL bytes into at most 64 arguments after `program`.
std::vector<std::string> splitArguments(const char *program, const uint8_t *data, size_t size) {
  std::vector<std::string> args{program};
  std::string current;
  for (size_t i = 0; i < size && args.size() < 64; ++i) {
    if (data[i] == 0) {
      args.push_back(current);
      current.clear();
    } else {
      current.push_back(char(data[i]));
    }
  }
  if (!current.empty() && args.size() < 64)
    args.push_back(current);
  return args;
}
} // namespace

void helmRtArgsInput(const uint8_t *data, size_t size) {
  std::vector<std::string> args = splitArguments("helm-rt", data, size);
  std::vector<const char *> argv;
  for (const std::string &a : args)
    argv.push_back(a.c_str());
  helm::rt::cli::Options o;
  std::string error = helm::rt::cli::parseArgs(int(argv.size()), argv.data(), o);
  if (error == "help")
    return;
  if (!error.empty()) {
    if (error.find('\n') != std::string::npos)
      __builtin_trap(); // one line
    return;
  }
  // Accepted values are what helm-rt's help promises.
  if (o.threads < 0 || o.threads > 1024 || (o.batch != 0 && o.batch < 1) || o.seed < -1 ||
      o.kvPage < 0 || o.kvPage > (1 << 20) || !(o.kvWatermark > 0 && o.kvWatermark <= 1) ||
      o.temperature != o.temperature || o.topP != o.topP)
    __builtin_trap();
}

void helmcArgsInput(const uint8_t *data, size_t size) {
  std::vector<std::string> args = splitArguments("helmc", data, size);
  std::vector<const char *> argv;
  for (const std::string &a : args)
    argv.push_back(a.c_str());
  auto parsed = helm::helmc::parseCommandLine(int(argv.size()), argv.data());
  if (!parsed) {
    if (llvm::toString(parsed.takeError()).find('\n') != std::string::npos)
      __builtin_trap(); // one line
    return;
  }
  const helm::helmc::Options &o = *parsed;
  if (o.listTargets || o.request != helm::helmc::Request::Compile)
    return;
  // What main relies on after parsing.
  const helm::CompileOptions &c = o.compile;
  if (c.inputPath.empty() || (o.packaging() && (c.outputPath.empty() || c.outputPath == "-")) ||
      (o.planning() && o.targetSpec.empty()) ||
      (o.planning() && (c.plan.batch < 1 || c.plan.context < 0 || c.plan.promptLen < 1 ||
                        (c.plan.forceSplit && *c.plan.forceSplit < 0))))
    __builtin_trap();
}

namespace {
// A conversation touching what real templates read: a system prompt, tool calls and a tool
// answer, reasoning, unicode, and the usual flags.
const char kChatContext[] = R"({
  "messages": [
    {"role": "system", "content": "You are helpful. /no_think"},
    {"role": "user", "content": "Hi \u00e9\u4e2d\ud83d\ude00 {{ x }}\n"},
    {"role": "assistant", "content": "<think>\nhm\n</think>\n\nHello!", "reasoning_content": "hm"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "abcdefghi", "type": "function",
      "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}]},
    {"role": "tool", "content": "{\"temp\": 21.5}", "tool_call_id": "abcdefghi"},
    {"role": "user", "content": ""}
  ],
  "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
  "add_generation_prompt": true, "enable_thinking": false, "bos_token": "<s>", "eos_token": "</s>"
})";
} // namespace

void chatTemplateInput(const uint8_t *data, size_t size) {
  using namespace helm::chat;
  auto oneLineError = [](llvm::Error error) {
    std::string message = llvm::toString(std::move(error));
    if (message.empty() || message.find('\n') != std::string::npos)
      __builtin_trap(); // errors are one line that says something
  };
  auto chat = ChatTemplate::parse(llvm::StringRef(reinterpret_cast<const char *>(data), size));
  if (!chat)
    return oneLineError(chat.takeError());
  static const Value context = [] {
    auto parsed = Value::parseJson(kChatContext);
    if (!parsed)
      __builtin_trap();
    return *parsed;
  }();
  // Tight limits keep each input fast (the defaults allow a second of work); a fixed clock keeps
  // strftime_now's output the same across the two renders.
  RenderOptions options;
  options.maxOutputBytes = 1 << 20;
  options.maxSteps = 200000;
  options.maxBytesMade = 16 << 20;
  options.now = std::tm{};
  std::optional<std::string> first;
  for (int round = 0; round < 2; ++round) {
    auto text = chat->render(context, options);
    if (!text) {
      oneLineError(text.takeError());
      if (first)
        __builtin_trap(); // the second render fails where the first succeeded
      continue;
    }
    if (text->size() > options.maxOutputBytes || !llvm::json::isUTF8(*text))
      __builtin_trap();
    if (round == 1 && first != *text)
      __builtin_trap(); // rendering is deterministic
    first = std::move(*text);
  }
}

} // namespace helm::fuzz
