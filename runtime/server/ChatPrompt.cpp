//===- ChatPrompt.cpp ---------------------------------------------------------------===//
#include "runtime/server/ChatPrompt.h"

#include "runtime/chat/ChatTemplate.h"
#include "runtime/tokenizer/Tokenizer.h"

namespace helm::rt::serve {

llvm::Expected<ChatRenderer> makeChatRenderer(llvm::StringRef templateText, const tok::Tokenizer &tokenizer,
                                              const ModelInfo &info) {
  auto parsed = chat::ChatTemplate::parse(templateText);
  if (!parsed)
    return parsed.takeError();
  auto compiled = std::make_shared<chat::ChatTemplate>(std::move(*parsed));
  std::string bos = info.bosId >= 0 ? tokenizer.idToToken(info.bosId).str() : std::string();
  std::string eos = info.eosIds.empty() ? std::string() : tokenizer.idToToken(info.eosIds.front()).str();
  return ChatRenderer([compiled, bos, eos](const std::vector<ChatMessage> &messages) -> llvm::Expected<std::string> {
    // The variables as JSON text, read back by the engine's own parser, which keeps every
    // object's keys in the order the request gave them (a template's tojson shows that order).
    Json variables = Json::object();
    Json list = Json::array();
    for (const ChatMessage &message : messages)
      list.push_back(message.fields);
    variables["messages"] = std::move(list);
    variables["add_generation_prompt"] = true;
    variables["bos_token"] = bos;
    variables["eos_token"] = eos;
    auto value = chat::Value::parseJson(variables.dump(-1, ' ', false, Json::error_handler_t::replace));
    if (!value)
      return value.takeError();
    return compiled->render(*value);
  });
}

} // namespace helm::rt::serve
