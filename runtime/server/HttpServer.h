//===- HttpServer.h - the OpenAI-compatible HTTP API over a BatchScheduler -----------===//
//
// Endpoints (docs/server.md): POST /v1/completions, POST /v1/chat/completions (both with
// `stream`), GET /v1/models, GET /health, GET /metrics. Every error is OpenAI's error JSON with
// its status. The HTTP layer is cpp-httplib (Debian's libcpp-httplib); its worker threads only
// parse, tokenize, submit and stream: the model runs on the scheduler's one thread.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_RUNTIME_SERVER_HTTPSERVER_H
#define HELM_RUNTIME_SERVER_HTTPSERVER_H

#include "runtime/server/BatchScheduler.h"
#include "runtime/server/OpenAiApi.h"

#include "llvm/Support/Error.h"

#include <functional>
#include <memory>
#include <string>

namespace helm::tok {
class Tokenizer;
}

namespace helm::rt::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                 // 0: any free port (port() says which)
  std::string apiKey;              // empty: no authentication
  size_t maxBodyBytes = 1 << 20;   // larger bodies: 413
  double timeoutSeconds = 600;     // per request, from admission to the last token
  std::string modelId = "helm";    // what /v1/models lists and responses carry
};

/// Renders a chat request's messages into the prompt text (the package's chat template with
/// add_generation_prompt); an error is the template's (raise_exception included).
using ChatRenderer = std::function<llvm::Expected<std::string>(const std::vector<ChatMessage> &)>;

class HttpServer {
public:
  /// `tokenizer` may be null (prompts as token ids only); `renderChat` may be empty (no chat).
  HttpServer(const LoadedModel &model, const tok::Tokenizer *tokenizer, ChatRenderer renderChat,
             BatchScheduler &scheduler, ServerOptions options);
  ~HttpServer();
  /// Binds the address; one line when it cannot (port in use, bad host).
  llvm::Error bind();
  /// The bound port.
  int port() const { return port_; }
  /// Serves until stop(); returns when the listening socket is closed.
  void run();
  /// From now on requests get 503 (the listening socket stays open; safe from another thread).
  void refuseNew();
  /// Closes the listening socket and ends run() once the running handlers return (safe from
  /// another thread, idempotent; does nothing before run()'s listen loop has started).
  void stop();
  /// Whether run()'s listen loop is running.
  bool listening() const;
  /// Requests being answered now.
  int64_t inFlight() const;
  /// Whether refuseNew() or stop() was called.
  bool stopped() const;

private:
  class Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

} // namespace helm::rt::serve

#endif
