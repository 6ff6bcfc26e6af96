//===- OpenAiApi.h - OpenAI-style request bodies: parsed, checked, answered ----------===//
//
// The request side of /v1/completions and /v1/chat/completions without any HTTP: a body becomes a
// CompletionParams or an ApiError (status, type, message, param), so the parser can be fuzzed and
// unit-tested alone. Field names and error shapes follow the OpenAI API; what HELM does not
// support (n > 1, logprobs, penalties, logit_bias, echo, suffix, tools) is refused by name rather
// than ignored, so a client never gets silently different behaviour.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_RUNTIME_SERVER_OPENAIAPI_H
#define HELM_RUNTIME_SERVER_OPENAIAPI_H

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace helm::rt::serve {

using Json = nlohmann::ordered_json;

struct ApiError {
  int status = 400;
  std::string type = "invalid_request_error"; // OpenAI's error.type
  std::string message;
  std::string param; // the offending field, or empty
  /// {"error": {"message", "type", "param", "code"}}
  std::string body() const;
};

/// One chat message as the template sees it: role, content (text parts joined), and the
/// message's other fields as sent (name, tool_calls, reasoning_content, ...), in order.
struct ChatMessage {
  Json fields; // an object: role and content always present, content a string
};

struct CompletionParams {
  bool chat = false;
  std::string model;
  // /v1/completions: the prompt as text, or as token ids.
  std::string promptText;
  std::vector<int64_t> promptIds;
  bool promptIsIds = false;
  // /v1/chat/completions
  std::vector<ChatMessage> messages;
  // Sampling; defaults are helm-rt's.
  int64_t maxTokens = 0; // 0: until an end-of-sequence token or the sequence's last position
  double temperature = 0.8, topP = 0.95;
  int64_t topK = 40;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  bool stream = false;
  bool includeUsage = false; // stream_options.include_usage: a final chunk with usage
  /// HELM's extension `return_token_ids`: choices[0].token_ids, the generated ids (streamed: the
  /// new ids of each chunk), for packages without a tokenizer and for tests.
  bool returnTokenIds = false;
  /// `ignore_eos` (as llama-server's): end-of-sequence tokens do not end the completion; for
  /// benchmarks that need exactly max_tokens tokens.
  bool ignoreEos = false;
};

/// Largest accepted values (beyond them: 400 naming the field).
inline constexpr size_t kMaxStopStrings = 4;
inline constexpr size_t kMaxStopLength = 256;
inline constexpr size_t kMaxMessages = 4096;

/// Parses and checks a request body. `chat` selects the endpoint's schema.
std::variant<CompletionParams, ApiError> parseCompletionRequest(std::string_view body, bool chat);

/// Where a stop string could still be completed by text to come: the length of the longest suffix
/// of `text` that is a proper prefix of one of `stops` (streamed text holds that much back).
size_t pendingStopPrefix(std::string_view text, const std::vector<std::string> &stops);
/// The position of the earliest complete stop string in `text`, or npos.
size_t findStop(std::string_view text, const std::vector<std::string> &stops);

} // namespace helm::rt::serve

#endif
