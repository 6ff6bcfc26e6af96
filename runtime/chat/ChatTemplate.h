//===- ChatTemplate.h - Hugging Face chat templates (a Jinja2 subset) ----------------===//
//
// A model's chat template turns a conversation into the prompt text the model was trained on. It
// is Jinja2 source, and transformers renders it with
//   jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
//                                                extensions=[loopcontrols, generation])
// plus the globals raise_exception, strftime_now, namespace and dict, and its own tojson filter.
// This engine renders the same subset of Jinja2 byte for byte as that environment does (checked
// against jinja2 itself by test/e2e/check_chat_templates.py on the real templates of
// llama.cpp's collection); docs/chat-templates.md lists the subset and what is refused.
//
// parse() refuses what the subset lacks in one line naming the construct and its line (e.g.
// "line 3: unsupported tag 'include'"). render() fails in one line where jinja2 would raise
// (raise_exception(msg) gives "template raised: msg"; an undefined value used as an object, a
// type error), and where the limits below are passed: a template is untrusted input, and no input
// may crash, hang or exhaust memory.
//
// Only the C++ standard library and LLVM Support are used.
//
//===----------------------------------------------------------------------------===//
#ifndef HELM_RUNTIME_CHAT_CHATTEMPLATE_H
#define HELM_RUNTIME_CHAT_CHATTEMPLATE_H

#include "runtime/chat/Value.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstddef>
#include <ctime>
#include <memory>
#include <optional>
#include <string>

namespace helm::chat {

struct TemplateAst;

/// The bounds one render works within; passing one is an error naming it, never a crash.
struct RenderOptions {
  /// The rendered text, and any one string a template builds.
  size_t maxOutputBytes = size_t(16) << 20;
  /// Evaluation steps (an expression node, a statement, a loop iteration, a character a filter
  /// visits): a few thousand for a real conversation, so this only stops runaway loops, in about
  /// a second.
  size_t maxSteps = 20'000'000;
  /// Bytes of strings and list slots made over the whole render (a template that doubles a string
  /// in a loop stops here even if every single string is below maxOutputBytes). A long conversation
  /// with a 16 MiB prompt makes well under 100 MiB.
  size_t maxBytesMade = size_t(256) << 20;
  /// Nesting at run time: macro calls, blocks and expressions inside each other.
  unsigned maxDepth = 512;
  /// strftime_now's time; unset: the local time when render() runs.
  std::optional<std::tm> now;
};

class ChatTemplate {
public:
  /// Parses template text. A syntax error, or a construct outside the subset: one line
  /// "line N: what". Templates nest at most 256 levels deep (blocks, parentheses, operators).
  static llvm::Expected<ChatTemplate> parse(llvm::StringRef source);

  /// Renders with `variables` (messages, add_generation_prompt, bos_token, eos_token, tools, ...)
  /// bound as the template's names: a dict with string keys (Value::parseJson keeps a JSON
  /// object's key order). A parsed template is immutable: any number of
  /// threads may render it at once.
  llvm::Expected<std::string> render(const Value &variables, const RenderOptions &options = {}) const;

private:
  explicit ChatTemplate(std::shared_ptr<const TemplateAst> ast) : ast_(std::move(ast)) {}
  std::shared_ptr<const TemplateAst> ast_;
};

} // namespace helm::chat

#endif
