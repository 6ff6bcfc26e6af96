//===- ServerRequestTarget.cpp - the server's request bodies as a fuzz target ----------===//
//
// Kept apart from FuzzTargets.cpp so that only this file includes nlohmann-json. The chat
// messages go through chatVariables, the server's own conversion.
//
//===----------------------------------------------------------------------===//
#include "test/fuzz/FuzzTargets.h"

#include "runtime/chat/ChatTemplate.h"
#include "runtime/server/ChatPrompt.h"
#include "runtime/server/OpenAiApi.h"

#include "llvm/Support/JSON.h"

#include <string>
#include <string_view>

namespace helm::fuzz {

namespace {
// A chat template of the usual shape (the default model's), to render what a chat body parses to.
constexpr const char *kTemplate =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
} // namespace

void serverRequestInput(const uint8_t *data, size_t size) {
  using namespace helm::rt::serve;
  if (size == 0)
    return;
  // The first byte picks the endpoint; the rest is the body.
  const bool chat = data[0] & 1;
  std::string_view body(reinterpret_cast<const char *>(data) + 1, size - 1);
  auto result = parseCompletionRequest(body, chat);
  if (auto *error = std::get_if<ApiError>(&result)) {
    if (error->message.empty() || error->message.find('\n') != std::string::npos ||
        error->status < 400 || error->status > 599)
      __builtin_trap(); // an error is one line with an error status
    Json parsedBack = Json::parse(error->body(), nullptr, false);
    if (parsedBack.is_discarded() || !parsedBack["error"]["message"].is_string())
      __builtin_trap(); // the error body is OpenAI's JSON
    return;
  }
  const CompletionParams &params = std::get<CompletionParams>(result);
  if (chat != params.chat || (chat && params.messages.empty()) ||
      (!chat && params.promptText.empty() && params.promptIds.empty()))
    __builtin_trap();
  if (params.stop.size() > kMaxStopStrings || params.maxTokens < 0 || !(params.temperature >= 0) ||
      !(params.topP > 0 && params.topP <= 1) || params.topK < 0)
    __builtin_trap(); // the parser let a value out of its range through
  // Stop strings against the prompt text, as streaming checks generated text.
  size_t at = findStop(params.promptText, params.stop);
  size_t pending = pendingStopPrefix(params.promptText, params.stop);
  if ((at != std::string::npos && at >= params.promptText.size()) || pending > params.promptText.size())
    __builtin_trap();
  if (!chat)
    return;
  static const chat::ChatTemplate compiled = [] {
    auto parsed = chat::ChatTemplate::parse(kTemplate);
    if (!parsed)
      __builtin_trap();
    return std::move(*parsed);
  }();
  // The messages as the server hands them to the template.
  chat::Value variables = chatVariables(params.messages, "<s>", "</s>");
  chat::RenderOptions options;
  options.maxSteps = 200000;
  auto text = compiled.render(variables, options);
  if (text ? !llvm::json::isUTF8(*text) : llvm::toString(text.takeError()).find('\n') != std::string::npos)
    __builtin_trap();
}

} // namespace helm::fuzz
