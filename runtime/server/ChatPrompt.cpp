//===- ChatPrompt.cpp ---------------------------------------------------------------===//
#include "runtime/server/ChatPrompt.h"

#include "runtime/chat/ChatTemplate.h"
#include "runtime/tokenizer/Tokenizer.h"

namespace helm::rt::serve {

chat::Value templateValue(const Json &json) {
  switch (json.type()) {
  case Json::value_t::null:
    return chat::Value::none();
  case Json::value_t::boolean:
    return chat::Value::boolean(json.get<bool>());
  case Json::value_t::number_integer:
    return chat::Value::integer(json.get<int64_t>());
  case Json::value_t::number_unsigned:
    if (json.get<uint64_t>() <= uint64_t(INT64_MAX))
      return chat::Value::integer(int64_t(json.get<uint64_t>()));
    return chat::Value::number(json.get<double>());
  case Json::value_t::number_float:
    return chat::Value::number(json.get<double>());
  case Json::value_t::string:
    return chat::Value::string(json.get<std::string>());
  case Json::value_t::array: {
    std::vector<chat::Value> items;
    items.reserve(json.size());
    for (const Json &item : json)
      items.push_back(templateValue(item));
    return chat::Value::list(std::move(items));
  }
  case Json::value_t::object: {
    std::vector<std::pair<std::string, chat::Value>> entries;
    entries.reserve(json.size());
    for (auto it = json.begin(); it != json.end(); ++it)
      entries.emplace_back(it.key(), templateValue(it.value()));
    return chat::Value::dict(std::move(entries));
  }
  default: // binary values and `discarded` never come out of the request parser
    return chat::Value::none();
  }
}

chat::Value chatVariables(const std::vector<ChatMessage> &messages, const std::string &bos,
                          const std::string &eos) {
  std::vector<chat::Value> list;
  list.reserve(messages.size());
  for (const ChatMessage &message : messages)
    list.push_back(templateValue(message.fields));
  return chat::Value::dict(std::vector<std::pair<std::string, chat::Value>>{
      {"messages", chat::Value::list(std::move(list))},
      {"add_generation_prompt", chat::Value::boolean(true)},
      {"bos_token", chat::Value::string(bos)},
      {"eos_token", chat::Value::string(eos)}});
}

llvm::Expected<ChatRenderer> makeChatRenderer(llvm::StringRef templateText, const tok::Tokenizer &tokenizer,
                                              const ModelInfo &info) {
  auto parsed = chat::ChatTemplate::parse(templateText);
  if (!parsed)
    return parsed.takeError();
  auto compiled = std::make_shared<chat::ChatTemplate>(std::move(*parsed));
  std::string bos = info.bosId >= 0 ? tokenizer.idToToken(info.bosId).str() : std::string();
  std::string eos = info.eosIds.empty() ? std::string() : tokenizer.idToToken(info.eosIds.front()).str();
  return ChatRenderer([compiled, bos, eos](const std::vector<ChatMessage> &messages) {
    return compiled->render(chatVariables(messages, bos, eos));
  });
}

} // namespace helm::rt::serve
