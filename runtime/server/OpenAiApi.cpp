//===- OpenAiApi.cpp ----------------------------------------------------------------===//
#include "runtime/server/OpenAiApi.h"

#include "contract/format/JsonDepth.h"

#include <cmath>
#include <limits>

namespace helm::rt::serve {

std::string ApiError::body() const {
  Json error = {{"message", message},
                {"type", type},
                {"param", param.empty() ? Json(nullptr) : Json(param)},
                {"code", nullptr}};
  return Json{{"error", std::move(error)}}.dump(-1, ' ', false, Json::error_handler_t::replace);
}

namespace {

/// Request bodies nest a few levels (messages, content parts, tool calls); deeper is hostile.
constexpr unsigned kMaxDepth = 64;

ApiError invalid(std::string message, std::string param = {}) {
  ApiError e;
  e.message = std::move(message);
  e.param = std::move(param);
  return e;
}

const char *typeName(const Json &v) {
  switch (v.type()) {
  case Json::value_t::null: return "null";
  case Json::value_t::object: return "an object";
  case Json::value_t::array: return "an array";
  case Json::value_t::string: return "a string";
  case Json::value_t::boolean: return "a boolean";
  case Json::value_t::number_integer:
  case Json::value_t::number_unsigned: return "an integer";
  case Json::value_t::number_float: return "a number";
  default: return "an unknown value";
  }
}

/// A client's string inside an error message: control characters escaped (the message stays one
/// line) and at most 64 bytes, cut at a character boundary.
std::string shown(const std::string &value) {
  std::string out;
  size_t end = value.size();
  if (end > 64) {
    end = 64;
    while (end > 0 && (static_cast<unsigned char>(value[end]) & 0xC0) == 0x80)
      --end;
  }
  for (size_t i = 0; i < end; ++i) {
    unsigned char c = static_cast<unsigned char>(value[i]);
    if (c < 0x20 || c == 0x7F) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      out += escaped;
    } else {
      out += char(c);
    }
  }
  return end < value.size() ? out + "..." : out;
}

ApiError wrongType(const std::string &field, const char *expected, const Json &got) {
  return invalid("'" + field + "' must be " + expected + ", got " + typeName(got), field);
}

/// An integer field (JSON integers, or floats with an integral value, as Python clients may send).
std::optional<ApiError> readInteger(const Json &body, const char *field, int64_t lo, int64_t hi,
                                    int64_t &out) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null())
    return std::nullopt;
  const Json &v = *it;
  double d;
  if (v.is_number_integer() && !v.is_number_unsigned()) {
    int64_t i = v.get<int64_t>();
    if (i < lo || i > hi)
      return invalid("'" + std::string(field) + "' must be in " + std::to_string(lo) + ".." +
                         std::to_string(hi) + ", got " + std::to_string(i),
                     field);
    out = i;
    return std::nullopt;
  }
  if (v.is_number_unsigned()) {
    // nlohmann reads every non-negative integer literal as unsigned.
    uint64_t u = v.get<uint64_t>();
    if (u > uint64_t(hi) || (lo > 0 && u < uint64_t(lo)))
      return invalid("'" + std::string(field) + "' must be in " + std::to_string(lo) + ".." +
                         std::to_string(hi) + ", got " + std::to_string(u),
                     field);
    out = int64_t(u);
    return std::nullopt;
  }
  // double(hi) may round up past hi (2^63 for INT64_MAX): compare below 2^63 strictly.
  if (v.is_number_float() && std::isfinite(d = v.get<double>()) && d == std::floor(d) &&
      d >= double(lo) && d <= double(hi) && d < 0x1p63 && d >= -0x1p63) {
    out = int64_t(d);
    return std::nullopt;
  }
  return wrongType(field, ("an integer in " + std::to_string(lo) + ".." + std::to_string(hi)).c_str(), v);
}

std::optional<ApiError> readNumber(const Json &body, const char *field, double lo, double hi,
                                   bool loOpen, double &out) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null())
    return std::nullopt;
  if (!it->is_number())
    return wrongType(field, "a number", *it);
  double d = it->get<double>();
  if (!std::isfinite(d) || d < lo || (loOpen && d == lo) || d > hi) {
    char range[64];
    std::snprintf(range, sizeof range, "%s%g, %g]", loOpen ? "(" : "[", lo, hi);
    return invalid("'" + std::string(field) + "' must be in " + range, field);
  }
  out = d;
  return std::nullopt;
}

std::optional<ApiError> readBool(const Json &body, const char *field, bool &out) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null())
    return std::nullopt;
  if (!it->is_boolean())
    return wrongType(field, "a boolean", *it);
  out = it->get<bool>();
  return std::nullopt;
}

/// A field HELM does not implement: accepted at its no-op value, refused otherwise.
std::optional<ApiError> refuseUnlessNeutral(const Json &body, const char *field) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null())
    return std::nullopt;
  const Json &v = *it;
  bool neutral = (v.is_boolean() && !v.get<bool>()) || (v.is_number() && v.get<double>() == 0) ||
                 (v.is_string() && v.get_ref<const std::string &>().empty()) ||
                 (v.is_object() && v.empty()) || (v.is_array() && v.empty());
  if (std::string_view(field) == "n" || std::string_view(field) == "best_of")
    neutral = v.is_number() && v.get<double>() == 1;
  if (neutral)
    return std::nullopt;
  return invalid("'" + std::string(field) + "' is not supported by this server" +
                     (std::string_view(field) == "n" ? " (only n = 1; send one request per completion)" : ""),
                 field);
}

/// The text of a message's content: a string, null (an assistant turn with tool calls), or a list
/// of parts of which only {"type": "text", "text": ...} are understood.
std::optional<ApiError> readContent(const Json &content, const std::string &param, std::string &out) {
  if (content.is_null()) {
    out.clear();
    return std::nullopt;
  }
  if (content.is_string()) {
    out = content.get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array())
    return wrongType(param, "a string or an array of content parts", content);
  out.clear();
  for (size_t i = 0; i < content.size(); ++i) {
    const Json &part = content[i];
    std::string where = param + "[" + std::to_string(i) + "]";
    if (!part.is_object())
      return wrongType(where, "an object", part);
    auto type = part.find("type");
    if (type == part.end() || !type->is_string())
      return invalid("'" + where + ".type' must be a string", where + ".type");
    if (type->get<std::string>() != "text")
      return invalid("content part type '" + shown(type->get<std::string>()) +
                         "' is not supported (text only)",
                     where + ".type");
    auto text = part.find("text");
    if (text == part.end() || !text->is_string())
      return invalid("'" + where + ".text' must be a string", where + ".text");
    out += text->get<std::string>();
  }
  return std::nullopt;
}

std::optional<ApiError> readMessages(const Json &body, CompletionParams &params) {
  auto it = body.find("messages");
  if (it == body.end())
    return invalid("'messages' is required", "messages");
  if (!it->is_array())
    return wrongType("messages", "an array", *it);
  if (it->empty())
    return invalid("'messages' must hold at least one message", "messages");
  if (it->size() > kMaxMessages)
    return invalid("'messages' holds " + std::to_string(it->size()) + " messages; at most " +
                       std::to_string(kMaxMessages) + " are accepted",
                   "messages");
  for (size_t i = 0; i < it->size(); ++i) {
    const Json &m = (*it)[i];
    std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object())
      return wrongType(where, "an object", m);
    auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      return invalid("'" + where + ".role' must be a string", where + ".role");
    std::string r = role->get<std::string>();
    if (r != "system" && r != "user" && r != "assistant" && r != "tool" && r != "developer")
      return invalid("'" + where + ".role' must be system, developer, user, assistant or tool, got '" +
                         shown(r) + "'",
                     where + ".role");
    auto content = m.find("content");
    std::string text;
    if (content == m.end()) {
      if (r != "assistant")
        return invalid("'" + where + ".content' is required", where + ".content");
    } else if (auto e = readContent(*content, where + ".content", text)) {
      return e;
    }
    ChatMessage message;
    message.fields = Json::object();
    message.fields["role"] = r;
    message.fields["content"] = text;
    for (auto field = m.begin(); field != m.end(); ++field)
      if (field.key() != "role" && field.key() != "content")
        message.fields[field.key()] = field.value();
    params.messages.push_back(std::move(message));
  }
  return std::nullopt;
}

std::optional<ApiError> readPrompt(const Json &body, CompletionParams &params) {
  auto it = body.find("prompt");
  if (it == body.end())
    return invalid("'prompt' is required", "prompt");
  const Json &p = *it;
  if (p.is_string()) {
    params.promptText = p.get<std::string>();
    if (params.promptText.empty())
      return invalid("'prompt' is empty", "prompt");
    return std::nullopt;
  }
  if (!p.is_array())
    return wrongType("prompt", "a string or an array of token ids", p);
  if (p.empty())
    return invalid("'prompt' is empty", "prompt");
  if (p[0].is_string() || p[0].is_array())
    return invalid("a list of prompts is not supported; send one request per prompt", "prompt");
  params.promptIsIds = true;
  params.promptIds.reserve(p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    const Json &id = p[i];
    if (!id.is_number_integer())
      return invalid("'prompt[" + std::to_string(i) + "]' must be a token id (an integer), got " +
                         typeName(id),
                     "prompt");
    if (id.is_number_unsigned() && id.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
      return invalid("'prompt[" + std::to_string(i) + "]' is not a token id", "prompt");
    params.promptIds.push_back(id.get<int64_t>());
  }
  return std::nullopt;
}

std::optional<ApiError> readStop(const Json &body, CompletionParams &params) {
  auto it = body.find("stop");
  if (it == body.end() || it->is_null())
    return std::nullopt;
  auto add = [&](const Json &s, const std::string &where) -> std::optional<ApiError> {
    if (!s.is_string())
      return wrongType(where, "a string", s);
    std::string text = s.get<std::string>();
    if (text.size() > kMaxStopLength)
      return invalid("'" + where + "' is longer than " + std::to_string(kMaxStopLength) + " bytes", "stop");
    if (!text.empty())
      params.stop.push_back(std::move(text));
    return std::nullopt;
  };
  if (it->is_string())
    return add(*it, "stop");
  if (!it->is_array())
    return wrongType("stop", "a string or an array of strings", *it);
  if (it->size() > kMaxStopStrings)
    return invalid("'stop' holds " + std::to_string(it->size()) + " strings; at most " +
                       std::to_string(kMaxStopStrings) + " are accepted",
                   "stop");
  for (size_t i = 0; i < it->size(); ++i)
    if (auto e = add((*it)[i], "stop[" + std::to_string(i) + "]"))
      return e;
  return std::nullopt;
}

} // namespace

std::variant<CompletionParams, ApiError> parseCompletionRequest(std::string_view text, bool chat) {
  if (jsonDepth(llvm::StringRef(text.data(), text.size()), kMaxDepth) > kMaxDepth)
    return invalid("the request body nests deeper than " + std::to_string(kMaxDepth) + " levels");
  // JSON has no raw NUL byte (inside strings it is escaped), and nlohmann's reader would take one
  // as the end of the input and accept what came before.
  if (text.find('\0') != std::string_view::npos)
    return invalid("the request body is not valid JSON (it holds a NUL byte)");
  Json body = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded())
    return invalid("the request body is not valid JSON");
  if (!body.is_object())
    return invalid(std::string("the request body must be a JSON object, got ") + typeName(body));

  CompletionParams params;
  params.chat = chat;
  if (auto it = body.find("model"); it != body.end() && !it->is_null()) {
    if (!it->is_string())
      return wrongType("model", "a string", *it);
    params.model = it->get<std::string>();
  }
  if (auto e = chat ? readMessages(body, params) : readPrompt(body, params))
    return *e;
  if (chat && body.contains("prompt"))
    return invalid("'prompt' belongs to /v1/completions; chat requests send 'messages'", "prompt");
  if (!chat && body.contains("messages"))
    return invalid("'messages' belongs to /v1/chat/completions; completions send 'prompt'", "messages");

  int64_t maxTokens = 0;
  const int64_t maxInt = std::numeric_limits<int32_t>::max();
  if (auto e = readInteger(body, "max_tokens", 1, maxInt, maxTokens))
    return *e;
  if (auto e = readInteger(body, "max_completion_tokens", 1, maxInt, maxTokens))
    return *e;
  params.maxTokens = maxTokens;
  if (auto e = readNumber(body, "temperature", 0, 2, false, params.temperature))
    return *e;
  if (auto e = readNumber(body, "top_p", 0, 1, true, params.topP))
    return *e;
  if (auto e = readInteger(body, "top_k", 0, maxInt, params.topK))
    return *e;
  int64_t seed = -1;
  if (auto e = readInteger(body, "seed", std::numeric_limits<int64_t>::min(),
                           std::numeric_limits<int64_t>::max(), seed))
    return *e;
  if (body.contains("seed") && !body["seed"].is_null())
    params.seed = uint64_t(seed);
  if (auto e = readStop(body, params))
    return *e;
  if (auto e = readBool(body, "stream", params.stream))
    return *e;
  if (auto e = readBool(body, "return_token_ids", params.returnTokenIds))
    return *e;
  if (auto e = readBool(body, "ignore_eos", params.ignoreEos))
    return *e;
  if (auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
    if (!it->is_object())
      return wrongType("stream_options", "an object", *it);
    if (auto e = readBool(*it, "include_usage", params.includeUsage))
      return *e;
  }
  for (const char *field : {"n", "best_of", "logprobs", "top_logprobs", "echo", "presence_penalty",
                            "frequency_penalty", "logit_bias", "tools", "functions", "suffix"})
    if (auto e = refuseUnlessNeutral(body, field))
      return *e;
  if (auto it = body.find("user"); it != body.end() && !it->is_null() && !it->is_string())
    return wrongType("user", "a string", *it);
  if (auto it = body.find("response_format"); it != body.end() && !it->is_null()) {
    if (!it->is_object() || !it->contains("type") || (*it)["type"] != "text")
      return invalid("'response_format' other than {\"type\": \"text\"} is not supported",
                     "response_format");
  }
  return params;
}

size_t findStop(std::string_view text, const std::vector<std::string> &stops) {
  size_t best = std::string_view::npos;
  for (const std::string &s : stops) {
    size_t at = text.find(s);
    if (at < best)
      best = at;
  }
  return best;
}

size_t pendingStopPrefix(std::string_view text, const std::vector<std::string> &stops) {
  size_t longest = 0;
  for (const std::string &s : stops)
    for (size_t k = std::min(s.size() - 1, text.size()); k > longest; --k)
      if (text.substr(text.size() - k) == std::string_view(s).substr(0, k)) {
        longest = k;
        break;
      }
  return longest;
}

} // namespace helm::rt::serve
