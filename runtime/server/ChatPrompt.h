//===- ChatPrompt.h - a chat request's messages through the package's template -------===//
#ifndef HELM_RUNTIME_SERVER_CHATPROMPT_H
#define HELM_RUNTIME_SERVER_CHATPROMPT_H

#include "runtime/chat/Value.h"
#include "runtime/core/Model.h"
#include "runtime/server/HttpServer.h"

#include "llvm/Support/Error.h"

namespace helm::tok {
class Tokenizer;
}

namespace helm::rt::serve {

/// A request's JSON as a template value: objects become dicts in the order sent (a template's
/// tojson shows it), integers that fit int64 ints, other numbers floats. The request parser has
/// bounded the nesting already.
chat::Value templateValue(const Json &json);

/// The variables a chat template renders with: messages, add_generation_prompt = true, bos_token
/// and eos_token.
chat::Value chatVariables(const std::vector<ChatMessage> &messages, const std::string &bos,
                          const std::string &eos);

/// Parses the package's chat template once and returns the renderer the server calls per request,
/// with bos_token and eos_token the tokens of the package's BOS id and its first end-of-sequence
/// id. A template outside the supported subset: one line.
llvm::Expected<ChatRenderer> makeChatRenderer(llvm::StringRef templateText, const tok::Tokenizer &tokenizer,
                                              const ModelInfo &info);

} // namespace helm::rt::serve

#endif
