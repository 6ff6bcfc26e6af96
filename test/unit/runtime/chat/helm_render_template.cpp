//===- helm_render_template.cpp - test CLI for the chat-template engine ---------------===//
//
//   helm-render-template TEMPLATE_FILE CONTEXT_JSON_FILE [--now "YYYY-MM-DD HH:MM:SS"]
//       renders the template with the JSON object's keys as its variables (key order kept) and
//       writes the text to stdout, byte for byte; exit 1 with one line on stderr on any error.
//   helm-render-template TEMPLATE_FILE CONTEXTS_JSONL_FILE --jsonl [--now ...]
//       one JSON object per input line; one output line per context, {"text": "..."} or
//       {"error": "..."} (so test/e2e/check_chat_templates.py runs thousands of renders in one
//       process). Exit 1 only if the template does not parse.
//   helm-render-template --cases CASES_JSONL_FILE [--now ...]
//       one {"template": "...", "context": {...}} per line, each parsed and rendered on its own;
//       one output line per case as above (a template that does not parse gives its error).
//   --now fixes strftime_now's clock (the comparison with jinja2 needs a deterministic date).
//
// The comparison with Python's jinja2 lives in test/e2e/check_chat_templates.py.
//===----------------------------------------------------------------------------===//
#include "runtime/chat/ChatTemplate.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <ctime>

using namespace helm::chat;

static int die(const llvm::Twine &msg) {
  llvm::errs() << "helm-render-template: " << msg << "\n";
  return 1;
}

static std::string jsonLine(llvm::StringRef key, llvm::StringRef text) {
  auto value = Value::dict(std::vector<std::pair<std::string, Value>>{{key.str(), Value::string(text.str())}});
  auto json = value.toJson();
  return json ? *json : std::string("{\"error\": \"cannot write the result\"}");
}

static std::string renderLine(llvm::StringRef source, const Value &variables, const RenderOptions &options) {
  auto chat = ChatTemplate::parse(source);
  if (!chat)
    return jsonLine("error", llvm::toString(chat.takeError()));
  auto text = chat->render(variables, options);
  if (!text)
    return jsonLine("error", llvm::toString(text.takeError()));
  return jsonLine("text", *text);
}

int main(int argc, char **argv) {
  if (argc < 3)
    return die("usage: helm-render-template TEMPLATE_FILE CONTEXT_JSON_FILE [--jsonl] [--now \"YYYY-MM-DD HH:MM:SS\"], "
               "or --cases CASES_JSONL_FILE [--now ...]");
  bool jsonl = false, cases = llvm::StringRef(argv[1]) == "--cases";
  RenderOptions options;
  for (int i = 3; i < argc; ++i) {
    llvm::StringRef flag = argv[i];
    if (flag == "--jsonl") {
      jsonl = true;
    } else if (flag == "--now" && i + 1 < argc) {
      std::tm tm{};
      if (std::sscanf(argv[++i], "%d-%d-%d %d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                      &tm.tm_sec) != 6)
        return die("--now wants \"YYYY-MM-DD HH:MM:SS\"");
      tm.tm_year -= 1900;
      tm.tm_mon -= 1;
      // timegm fills in the weekday and the day of the year (%A, %j).
      std::time_t t = timegm(&tm);
      gmtime_r(&t, &tm);
      options.now = tm;
    } else {
      return die("unknown flag '" + flag + "'");
    }
  }
  if (cases) {
    auto lines = llvm::MemoryBuffer::getFile(argv[2], /*IsText=*/false, /*RequiresNullTerminator=*/false);
    if (!lines)
      return die(llvm::Twine(argv[2]) + ": cannot read: " + lines.getError().message());
    llvm::SmallVector<llvm::StringRef, 0> entries;
    (*lines)->getBuffer().split(entries, '\n', -1, /*KeepEmpty=*/false);
    for (llvm::StringRef entry : entries) {
      auto parsed = Value::parseJson(entry);
      const Value *source = parsed ? parsed->find("template") : nullptr;
      const Value *context = parsed ? parsed->find("context") : nullptr;
      if (!parsed)
        llvm::consumeError(parsed.takeError());
      if (!source || !source->isString() || !context)
        return die(llvm::Twine(argv[2]) + ": each line must be {\"template\": \"...\", \"context\": {...}}");
      llvm::outs() << renderLine(source->asString(), *context, options) << "\n";
    }
    return 0;
  }
  auto source = llvm::MemoryBuffer::getFile(argv[1], /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!source)
    return die(llvm::Twine(argv[1]) + ": cannot read: " + source.getError().message());
  auto contexts = llvm::MemoryBuffer::getFile(argv[2], /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!contexts)
    return die(llvm::Twine(argv[2]) + ": cannot read: " + contexts.getError().message());
  auto chat = ChatTemplate::parse((*source)->getBuffer());
  if (!chat)
    return die(llvm::Twine(argv[1]) + ": " + llvm::toString(chat.takeError()));
  if (!jsonl) {
    auto variables = Value::parseJson((*contexts)->getBuffer());
    if (!variables)
      return die(llvm::Twine(argv[2]) + ": " + llvm::toString(variables.takeError()));
    auto text = chat->render(*variables, options);
    if (!text)
      return die(llvm::toString(text.takeError()));
    llvm::outs() << *text;
    return 0;
  }
  llvm::SmallVector<llvm::StringRef, 0> lines;
  (*contexts)->getBuffer().split(lines, '\n', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef line : lines) {
    auto variables = Value::parseJson(line);
    if (!variables) {
      llvm::outs() << jsonLine("error", llvm::toString(variables.takeError())) << "\n";
      continue;
    }
    auto text = chat->render(*variables, options);
    if (text)
      llvm::outs() << jsonLine("text", *text) << "\n";
    else
      llvm::outs() << jsonLine("error", llvm::toString(text.takeError())) << "\n";
  }
  return 0;
}
