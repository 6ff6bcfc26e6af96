//===- OpenAiApiTest.cpp - request bodies: parsed fields, refusals, stop strings ---------===//
#include "runtime/server/OpenAiApi.h"

#include <gtest/gtest.h>

using namespace helm::rt::serve;

namespace {

CompletionParams parsed(const std::string &body, bool chat = false) {
  auto result = parseCompletionRequest(body, chat);
  if (auto *error = std::get_if<ApiError>(&result)) {
    ADD_FAILURE() << "refused: " << error->message << " for " << body;
    return {};
  }
  return std::get<CompletionParams>(result);
}

ApiError refused(const std::string &body, bool chat = false) {
  auto result = parseCompletionRequest(body, chat);
  if (auto *error = std::get_if<ApiError>(&result))
    return *error;
  ADD_FAILURE() << "accepted: " << body;
  return {};
}

TEST(OpenAiApi, CompletionFields) {
  CompletionParams p = parsed(R"({"model": "m", "prompt": "Hello", "max_tokens": 7, "temperature": 0,
                                  "top_p": 0.5, "top_k": 3, "seed": 42, "stop": ["a", "bc"], "stream": true,
                                  "stream_options": {"include_usage": true}, "n": 1, "logprobs": null,
                                  "presence_penalty": 0, "user": "u"})");
  EXPECT_EQ(p.model, "m");
  EXPECT_EQ(p.promptText, "Hello");
  EXPECT_FALSE(p.promptIsIds);
  EXPECT_EQ(p.maxTokens, 7);
  EXPECT_EQ(p.temperature, 0);
  EXPECT_EQ(p.topP, 0.5);
  EXPECT_EQ(p.topK, 3);
  ASSERT_TRUE(p.seed.has_value());
  EXPECT_EQ(*p.seed, 42u);
  EXPECT_EQ(p.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_TRUE(p.stream);
  EXPECT_TRUE(p.includeUsage);
}

TEST(OpenAiApi, Defaults) {
  CompletionParams p = parsed(R"({"prompt": [5, 6, 7]})");
  EXPECT_TRUE(p.promptIsIds);
  EXPECT_EQ(p.promptIds, (std::vector<int64_t>{5, 6, 7}));
  EXPECT_EQ(p.maxTokens, 0);
  EXPECT_FLOAT_EQ(float(p.temperature), 0.8f);
  EXPECT_EQ(p.topK, 40);
  EXPECT_FALSE(p.seed.has_value());
  EXPECT_FALSE(p.stream);
  // An integral float is an integer (Python clients send 16.0).
  EXPECT_EQ(parsed(R"({"prompt": [1], "max_tokens": 16.0})").maxTokens, 16);
  EXPECT_EQ(parsed(R"({"prompt": [1], "max_completion_tokens": 9})").maxTokens, 9);
  EXPECT_EQ(parsed(R"({"prompt": [1], "stop": "x"})").stop, (std::vector<std::string>{"x"}));
}

TEST(OpenAiApi, ChatMessages) {
  CompletionParams p = parsed(R"({"messages": [
      {"role": "system", "content": "S"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": null, "tool_calls": []},
      {"role": "user", "content": "Q", "name": "bob"}]})",
                              true);
  ASSERT_EQ(p.messages.size(), 4u);
  EXPECT_EQ(p.messages[0].fields["role"], "system");
  EXPECT_EQ(p.messages[1].fields["content"], "ab");
  EXPECT_EQ(p.messages[2].fields["content"], "");
  EXPECT_TRUE(p.messages[2].fields.contains("tool_calls"));
  EXPECT_EQ(p.messages[3].fields["name"], "bob");
  // role and content come first, the rest in the order sent.
  auto it = p.messages[3].fields.begin();
  EXPECT_EQ(it.key(), "role");
  EXPECT_EQ((++it).key(), "content");
  EXPECT_EQ((++it).key(), "name");
}

TEST(OpenAiApi, Refusals) {
  struct Case {
    const char *body;
    bool chat;
    const char *param;
  } cases[] = {
      {"{", false, ""},
      {"[]", false, ""},
      {"{}", false, "prompt"},
      {R"({"prompt": 1})", false, "prompt"},
      {R"({"prompt": ""})", false, "prompt"},
      {R"({"prompt": []})", false, "prompt"},
      {R"({"prompt": ["a"]})", false, "prompt"},
      {R"({"prompt": [[1]]})", false, "prompt"},
      {R"({"prompt": [1, "a"]})", false, "prompt"},
      {R"({"prompt": [1, 1.5]})", false, "prompt"},
      {R"({"prompt": [18446744073709551615]})", false, "prompt"},
      {R"({"prompt": [1], "max_tokens": 0})", false, "max_tokens"},
      {R"({"prompt": [1], "max_tokens": 1e300})", false, "max_tokens"},
      {R"({"prompt": [1], "max_tokens": 2.5})", false, "max_tokens"},
      {R"({"prompt": [1], "max_tokens": true})", false, "max_tokens"},
      {R"({"prompt": [1], "temperature": 3})", false, "temperature"},
      {R"({"prompt": [1], "temperature": "hot"})", false, "temperature"},
      {R"({"prompt": [1], "top_p": 0})", false, "top_p"},
      {R"({"prompt": [1], "top_p": 1.5})", false, "top_p"},
      {R"({"prompt": [1], "top_k": -1})", false, "top_k"},
      {R"({"prompt": [1], "max_tokens": 0.0})", false, "max_tokens"},
      {R"({"prompt": [1], "stop": 1})", false, "stop"},
      {R"({"prompt": [1], "stop": ["a", 1]})", false, "stop[1]"},
      {R"({"prompt": [1], "stop": ["a","b","c","d","e"]})", false, "stop"},
      {R"({"prompt": [1], "stream": 1})", false, "stream"},
      {R"({"prompt": [1], "stream_options": 1})", false, "stream_options"},
      {R"({"prompt": [1], "n": 2})", false, "n"},
      {R"({"prompt": [1], "best_of": 3})", false, "best_of"},
      {R"({"prompt": [1], "logprobs": 2})", false, "logprobs"},
      {R"({"prompt": [1], "echo": true})", false, "echo"},
      {R"({"prompt": [1], "frequency_penalty": 0.5})", false, "frequency_penalty"},
      {R"({"prompt": [1], "logit_bias": {"5": 1}})", false, "logit_bias"},
      {R"({"prompt": [1], "model": 3})", false, "model"},
      {R"({"prompt": [1], "messages": []})", false, "messages"},
      {R"({"prompt": [1], "response_format": {"type": "json_object"}})", false, "response_format"},
      {R"({"messages": []})", true, "messages"},
      {R"({"messages": {}})", true, "messages"},
      {R"({"messages": [1]})", true, "messages[0]"},
      {R"({"messages": [{"content": "x"}]})", true, "messages[0].role"},
      {R"({"messages": [{"role": "king", "content": "x"}]})", true, "messages[0].role"},
      {R"({"messages": [{"role": "user"}]})", true, "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": 5}]})", true, "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", true, "messages[0].content[0].type"},
      {R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})", true, "messages[0].content[0].text"},
      {R"({"messages": [{"role": "user", "content": "x"}], "prompt": "y"})", true, "prompt"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": [{}]})", true, "tools"},
  };
  for (const Case &c : cases) {
    ApiError e = refused(c.body, c.chat);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << ": " << e.message;
    EXPECT_FALSE(e.message.empty());
    EXPECT_EQ(e.message.find('\n'), std::string::npos) << e.message;
    // The error body is OpenAI's shape.
    Json body = Json::parse(e.body());
    EXPECT_EQ(body["error"]["message"], e.message);
    EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  }
}

TEST(OpenAiApi, HostileBodies) {
  std::string deep = "{\"prompt\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_EQ(refused(deep).status, 400);
  EXPECT_EQ(refused(std::string("{\"prompt\": \"\xff\"}")).status, 400); // invalid UTF-8
  EXPECT_EQ(refused(std::string("{\"prompt\": [1]}\0", 16)).status, 400);
  std::string many = R"({"messages": [)";
  for (int i = 0; i < 5000; ++i)
    many += std::string(i ? "," : "") + R"({"role": "user", "content": "x"})";
  many += "]}";
  EXPECT_EQ(refused(many, true).param, "messages");
}

TEST(OpenAiApi, ClientTextInMessagesStaysOneLine) {
  // Found by fuzzing: a role with a newline was echoed into the message as it was.
  ApiError e = refused(R"({"messages": [{"role": "a\nb\u0000c", "content": "x"}]})", true);
  EXPECT_EQ(e.message.find('\n'), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("a\\x0ab\\x00c"), std::string::npos) << e.message;
  std::string longRole(1000, 'r');
  e = refused(R"({"messages": [{"role": ")" + longRole + R"(", "content": "x"}]})", true);
  EXPECT_LT(e.message.size(), 200u);
}

TEST(OpenAiApi, StopStrings) {
  std::vector<std::string> stops = {"END", "\n\n"};
  EXPECT_EQ(findStop("abc END x", stops), 4u);
  EXPECT_EQ(findStop("a\n\nEND", stops), 1u);
  EXPECT_EQ(findStop("nothing", stops), std::string::npos);
  // What streaming holds back: the longest tail that could still become a stop string.
  EXPECT_EQ(pendingStopPrefix("abc EN", stops), 2u);
  EXPECT_EQ(pendingStopPrefix("abc E", stops), 1u);
  EXPECT_EQ(pendingStopPrefix("abc\n", stops), 1u);
  EXPECT_EQ(pendingStopPrefix("abc", stops), 0u);
  EXPECT_EQ(pendingStopPrefix("", stops), 0u);
  EXPECT_EQ(pendingStopPrefix("EN", {"ENDING"}), 2u);
}

} // namespace
