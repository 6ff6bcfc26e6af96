//===- helm_tokenize.cpp - test CLI for the runtime tokenizer ------------------===//
//
//   helm-tokenize encode TOKENIZER.json TEXT_FILE [--special] [--whole]
//       one line of space-separated ids per input line ('\n' separated, the newline not
//       included); --whole: the whole file as one string instead; --separator S: the texts between
//       occurrences of S instead (llama.cpp's vocabulary tests separate theirs that way).
//   helm-tokenize decode TOKENIZER.json IDS_FILE [--skip-special] [--stream]
//       IDS_FILE has one line of space-separated ids per text; prints each decoded text as a JSON
//       string on its own line. --stream decodes through StreamDecoder (push each id, then flush).
//   helm-tokenize info TOKENIZER.json
//       vocab size, BOS and EOS guesses, load time.
//
// Exit code 1 with one line on stderr on any error.
//===----------------------------------------------------------------------------===//
#include "runtime/tokenizer/Tokenizer.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>

using namespace helm::tok;

static int die(const llvm::Twine &msg) {
  llvm::errs() << "helm-tokenize: " << msg << "\n";
  return 1;
}

static std::string jsonString(llvm::StringRef s) {
  std::string out;
  llvm::raw_string_ostream os(out);
  os << llvm::json::Value(llvm::json::fixUTF8(s));
  return out;
}

int main(int argc, char **argv) {
  if (argc < 3)
    return die("usage: helm-tokenize encode|decode|info TOKENIZER.json [FILE] [flags]");
  llvm::StringRef mode = argv[1];
  bool special = false, whole = false, skipSpecial = false, stream = false;
  std::string separator;
  for (int i = 4; i < argc; ++i) {
    llvm::StringRef f = argv[i];
    if (f == "--separator" && i + 1 < argc && argv[i + 1][0])
      separator = argv[++i];
    else if (f == "--special")
      special = true;
    else if (f == "--whole")
      whole = true;
    else if (f == "--skip-special")
      skipSpecial = true;
    else if (f == "--stream")
      stream = true;
    else
      return die("unknown flag '" + f + "'");
  }
  auto t0 = std::chrono::steady_clock::now();
  auto tokOr = Tokenizer::fromFile(argv[2]);
  if (!tokOr)
    return die(llvm::toString(tokOr.takeError()));
  double loadMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const Tokenizer &tok = **tokOr;
  if (mode == "info") {
    llvm::outs() << "vocab_size " << tok.vocabSize() << "\nbos ";
    if (auto b = tok.bosId())
      llvm::outs() << *b;
    else
      llvm::outs() << "none";
    llvm::outs() << "\neos";
    for (int32_t e : tok.eosIds())
      llvm::outs() << " " << e;
    llvm::outs() << "\nload_ms " << llvm::format("%.1f", loadMs) << "\n";
    return 0;
  }
  if (argc < 4)
    return die("missing input file");
  auto buf = llvm::MemoryBuffer::getFile(argv[3], /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buf)
    return die(llvm::Twine(argv[3]) + ": " + buf.getError().message());
  llvm::StringRef input = (*buf)->getBuffer();

  if (mode == "encode") {
    llvm::SmallVector<llvm::StringRef> lines;
    if (whole)
      lines.push_back(input);
    else if (!separator.empty())
      input.split(lines, separator);
    else {
      input.split(lines, '\n');
      if (!lines.empty() && lines.back().empty() && input.ends_with("\n"))
        lines.pop_back();
    }
    for (llvm::StringRef line : lines) {
      std::vector<int32_t> ids = tok.encode(line, special);
      for (size_t i = 0; i < ids.size(); ++i)
        llvm::outs() << (i ? " " : "") << ids[i];
      llvm::outs() << "\n";
    }
    return 0;
  }
  if (mode == "decode") {
    llvm::SmallVector<llvm::StringRef> lines;
    input.split(lines, '\n');
    if (!lines.empty() && lines.back().empty())
      lines.pop_back();
    for (llvm::StringRef line : lines) {
      std::vector<int32_t> ids;
      llvm::SmallVector<llvm::StringRef> fields;
      line.split(fields, ' ', -1, /*KeepEmpty=*/false);
      for (llvm::StringRef f : fields) {
        int32_t v;
        if (f.getAsInteger(10, v))
          return die("bad id '" + f + "'");
        ids.push_back(v);
      }
      std::string text;
      if (stream) {
        StreamDecoder sd(tok, skipSpecial);
        for (int32_t id : ids) {
          auto piece = sd.push(id);
          if (!piece)
            return die(llvm::toString(piece.takeError()));
          text += *piece;
        }
        text += sd.flush();
      } else {
        auto d = tok.decode(ids, skipSpecial);
        if (!d)
          return die(llvm::toString(d.takeError()));
        text = std::move(*d);
      }
      llvm::outs() << jsonString(text) << "\n";
    }
    return 0;
  }
  return die("unknown mode '" + mode + "'");
}
