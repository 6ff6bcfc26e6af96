//===- ChatPrompt.h - a chat request's messages through the package's template -------===//
#ifndef HELM_RUNTIME_SERVER_CHATPROMPT_H
#define HELM_RUNTIME_SERVER_CHATPROMPT_H

#include "runtime/core/Model.h"
#include "runtime/server/HttpServer.h"

#include "llvm/Support/Error.h"

namespace helm::tok {
class Tokenizer;
}

namespace helm::rt::serve {

/// Parses the package's chat template once and returns the renderer the server calls per request:
/// messages, add_generation_prompt = true, bos_token and eos_token (the tokens of the package's
/// BOS id and its first end-of-sequence id). A template outside the supported subset: one line.
llvm::Expected<ChatRenderer> makeChatRenderer(llvm::StringRef templateText, const tok::Tokenizer &tokenizer,
                                              const ModelInfo &info);

} // namespace helm::rt::serve

#endif
