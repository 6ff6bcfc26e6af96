//===- ChatTemplate.cpp - parse and render: the library's two entry points ------------===//
//
// Everything the engine throws (TemplateError, and std::bad_alloc should memory run out before a
// limit is reached) stops here and becomes a one-line llvm::Error.
//
//===----------------------------------------------------------------------------===//
#include "runtime/chat/ChatTemplate.h"

#include "runtime/chat/Engine.h"
#include "runtime/chat/PythonText.h"
#include "contract/format/OneLine.h"

namespace helm::chat {

namespace {
llvm::Error toError(const TemplateError &e) {
  std::string message =
      e.line > 0 && !e.raisedByTemplate ? "line " + std::to_string(e.line) + ": " + e.message : e.message;
  return llvm::createStringError(llvm::inconvertibleErrorCode(), oneLine(message));
}
llvm::Error outOfMemory(llvm::StringRef what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), "out of memory " + what.str());
}
} // namespace

llvm::Expected<ChatTemplate> ChatTemplate::parse(llvm::StringRef source) {
  if (!py::isValidUtf8(source))
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "the template is not valid UTF-8");
  try {
    return ChatTemplate(parseTemplate(source));
  } catch (const TemplateError &e) {
    return toError(e);
  } catch (const std::bad_alloc &) {
    return outOfMemory("parsing the template");
  }
}

llvm::Expected<std::string> ChatTemplate::render(const Value &variables, const RenderOptions &options) const {
  if (!variables.isDict())
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "the template's variables must be a dict");
  try {
    Renderer renderer(*ast_, options);
    return renderer.render(variables);
  } catch (const TemplateError &e) {
    return toError(e);
  } catch (const std::bad_alloc &) {
    return outOfMemory("rendering the template");
  }
}

} // namespace helm::chat
