//===- HttpServer.cpp ---------------------------------------------------------------===//
#include "runtime/server/HttpServer.h"

#include "runtime/tokenizer/Tokenizer.h"

#include <httplib.h>

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdlib>
#include <ctime>
#include <map>
#include <mutex>
#include <random>

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

namespace helm::rt::serve {

namespace {
using Clock = std::chrono::steady_clock;

std::string jsonText(const Json &value) {
  // Generated text may end in the middle of nothing worse than a replaced character: the stream
  // decoder never splits one, but a model may emit invalid byte sequences, which become U+FFFD.
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

void sendError(httplib::Response &res, const ApiError &error) {
  res.status = error.status;
  res.set_content(error.body(), "application/json");
}

ApiError apiError(int status, std::string type, std::string message, std::string param = {}) {
  ApiError e;
  e.status = status;
  e.type = std::move(type);
  e.message = std::move(message);
  e.param = std::move(param);
  return e;
}

/// Equal-length comparison whose time does not depend on where the strings differ.
bool constantTimeEquals(const std::string &given, const std::string &expected) {
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i)
    diff |= static_cast<unsigned char>(expected[i] ^ (i < given.size() ? given[i] : 0));
  return diff == 0;
}

const char *finishReasonName(FinishReason reason) {
  switch (reason) {
  case FinishReason::Stop:
    return "stop";
  default:
    return "length";
  }
}

/// A sequence's text as it streams: decoded token by token, cut at the first stop string, and
/// held back while its end could still become one.
class CompletionText {
public:
  CompletionText(const tok::Tokenizer *tokenizer, std::vector<std::string> stops)
      : stops_(std::move(stops)) {
    if (tokenizer)
      decoder_ = std::make_unique<tok::StreamDecoder>(*tokenizer, /*skipSpecial=*/true);
  }
  /// Adds generated ids; false once a stop string matched (the rest of the ids are dropped).
  llvm::Error add(const std::vector<int32_t> &tokens) {
    for (int32_t token : tokens) {
      if (stopped_)
        break;
      ids_.push_back(token);
      if (!decoder_)
        continue;
      auto piece = decoder_->push(token);
      if (!piece)
        return piece.takeError();
      text_ += *piece;
      cutAtStop();
    }
    return llvm::Error::success();
  }
  void finish() {
    if (decoder_ && !stopped_) {
      text_ += decoder_->flush();
      cutAtStop();
    }
    finished_ = true;
  }
  bool stopped() const { return stopped_; }
  const std::vector<int32_t> &ids() const { return ids_; }
  const std::string &text() const { return text_; }
  /// Text not yet streamed that no stop string can still claim.
  /// Ids not yet streamed (all of them once finished; before, those whose text is streamable is
  /// not tracked: ids go out as they come, text as it settles).
  std::vector<int32_t> takeNewIds() {
    std::vector<int32_t> out(ids_.begin() + std::ptrdiff_t(idsSent_), ids_.end());
    idsSent_ = ids_.size();
    return out;
  }
  std::string takeStreamable() {
    size_t end = text_.size();
    if (!finished_ && !stopped_)
      end -= pendingStopPrefix(text_, stops_);
    std::string out = end > sent_ ? text_.substr(sent_, end - sent_) : std::string();
    sent_ = std::max(sent_, end);
    return out;
  }

private:
  void cutAtStop() {
    if (stops_.empty())
      return;
    // Only a match that ends in the new text can be new: search from where it could start.
    size_t longest = 0;
    for (const std::string &stop : stops_)
      longest = std::max(longest, stop.size());
    size_t from = searched_ > longest ? searched_ - longest : 0;
    size_t at = findStop(std::string_view(text_).substr(from), stops_);
    searched_ = text_.size();
    if (at != std::string::npos) {
      text_.resize(from + at);
      stopped_ = true;
    }
  }
  std::unique_ptr<tok::StreamDecoder> decoder_;
  std::vector<std::string> stops_;
  std::vector<int32_t> ids_;
  std::string text_;
  size_t sent_ = 0, idsSent_ = 0, searched_ = 0;
  bool stopped_ = false, finished_ = false;
};

/// A request's TCP connection, found among this process's sockets: httplib 0.11 hands a handler no
/// socket, and a non-streaming response writes nothing until it is done, so without this a client
/// that left would hold its slot until max_tokens or --timeout. The connection is the socket whose
/// peer is the request's remote address and port and whose local port is the server's (Linux:
/// /proc/self/fd). A client gone means its end reads EOF or an error, as httplib's own liveness
/// check in later releases decides; pipelined bytes of a next request read as alive.
class ClientConnection {
public:
  ClientConnection(std::string address, int port, int localPort)
      : address_(std::move(address)), port_(std::to_string(port)), localPort_(localPort) {}

  /// Whether the client closed or reset the connection. False when its socket cannot be found
  /// (nothing is cancelled on a guess).
  bool gone() {
    if (!searched_) {
      searched_ = true;
      fd_ = find();
    }
    if (fd_ < 0 || !matches(fd_))
      return false;
    pollfd p{fd_, POLLIN | POLLRDHUP, 0};
    if (::poll(&p, 1, 0) <= 0)
      return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR))
      return true;
    char byte;
    ssize_t n = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
  }

private:
  bool matches(int fd) const {
    sockaddr_storage peer{}, local{};
    socklen_t peerLength = sizeof(peer), localLength = sizeof(local);
    if (::getpeername(fd, reinterpret_cast<sockaddr *>(&peer), &peerLength) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr *>(&local), &localLength) != 0)
      return false;
    char host[NI_MAXHOST], service[NI_MAXSERV], localService[NI_MAXSERV];
    if (::getnameinfo(reinterpret_cast<sockaddr *>(&peer), peerLength, host, sizeof(host), service,
                      sizeof(service), NI_NUMERICHOST | NI_NUMERICSERV) != 0 ||
        ::getnameinfo(reinterpret_cast<sockaddr *>(&local), localLength, nullptr, 0, localService,
                      sizeof(localService), NI_NUMERICSERV) != 0)
      return false;
    return address_ == host && port_ == service && std::atoi(localService) == localPort_;
  }

  int find() const {
    DIR *dir = ::opendir("/proc/self/fd");
    if (!dir)
      return -1;
    int found = -1;
    while (dirent *entry = ::readdir(dir)) {
      char *end = nullptr;
      long fd = std::strtol(entry->d_name, &end, 10);
      if (end == entry->d_name || *end != '\0' || fd == ::dirfd(dir))
        continue;
      struct stat st;
      if (::fstat(int(fd), &st) == 0 && S_ISSOCK(st.st_mode) && matches(int(fd))) {
        found = int(fd);
        break;
      }
    }
    ::closedir(dir);
    return found;
  }

  std::string address_, port_;
  int localPort_;
  int fd_ = -1;
  bool searched_ = false;
};

/// Where a request's sequence stands, as advance() leaves it.
struct Progress {
  bool finished = false;
  FinishReason reason = FinishReason::None; // the finish_reason, once finished
  bool timedOut = false;                    // finished by --timeout
  std::string error;                        // finished by a failure (the model's, the decoder's)
};

/// Waits up to 100 ms for the sequence once: new tokens go into `text`; a stop string, the
/// sequence's end, a failure or the deadline finish it (the sequence is cancelled where it would
/// go on). Returns whether anything changed.
bool advance(Sequence &sequence, CompletionText &text, Clock::time_point deadline, Progress &progress) {
  if (Clock::now() > deadline) {
    sequence.cancel();
    progress.finished = progress.timedOut = true;
    return true;
  }
  Sequence::Events events;
  if (!sequence.next(events, std::chrono::milliseconds(100)))
    return false;
  if (llvm::Error e = text.add(events.tokens)) {
    sequence.cancel();
    progress.finished = true;
    progress.error = llvm::toString(std::move(e));
    return true;
  }
  if (text.stopped()) {
    sequence.cancel();
    progress.finished = true;
  } else if (events.finished) {
    progress.finished = true;
    progress.reason = events.reason;
    if (events.reason == FinishReason::Error)
      progress.error = events.error;
  }
  if (progress.finished) {
    text.finish();
    if (text.stopped()) // also a stop string completed by the decoder's held-back bytes
      progress.reason = FinishReason::Stop;
  }
  return true;
}

} // namespace

class HttpServer::Impl {
public:
  Impl(const LoadedModel &model, const tok::Tokenizer *tokenizer, ChatRenderer renderChat,
       BatchScheduler &scheduler, ServerOptions options)
      : model(model), tokenizer(tokenizer), renderChat(std::move(renderChat)), scheduler(scheduler),
        options(std::move(options)), started(std::time(nullptr)) {}

  void routes();
  void completions(const httplib::Request &req, httplib::Response &res, bool chat);
  /// Counts an answer under its endpoint; a path that is not one (any text a client sends) is
  /// "other", so labels stay a fixed set of safe strings.
  void count(const std::string &path, int status) {
    static const char *const endpoints[] = {"/v1/completions", "/v1/chat/completions", "/v1/models",
                                            "/health", "/metrics"};
    std::string endpoint = "other";
    for (const char *known : endpoints)
      if (path == known)
        endpoint = known;
    std::lock_guard<std::mutex> lock(mutex);
    ++requests[{endpoint, status}];
  }
  std::string metricsText();

  const LoadedModel &model;
  const tok::Tokenizer *tokenizer;
  ChatRenderer renderChat;
  BatchScheduler &scheduler;
  ServerOptions options;
  httplib::Server http;
  std::time_t started;
  std::atomic<int64_t> inFlight{0};
  std::atomic<uint64_t> nextId{1};
  std::atomic<bool> stopping{false}, closed{false};
  std::mutex mutex;
  std::map<std::pair<std::string, int>, uint64_t> requests;
  std::atomic<uint64_t> timedOut{0};
  std::atomic<uint64_t> clientsGone{0};
  int localPort = 0; // the port the server listens on, once bound
};

namespace {
/// Counts a request in flight for as long as its handler (or its stream) runs.
struct InFlight {
  explicit InFlight(std::atomic<int64_t> &n) : n(n) { ++n; }
  ~InFlight() { --n; }
  std::atomic<int64_t> &n;
};
} // namespace

void HttpServer::Impl::completions(const httplib::Request &req, httplib::Response &res, bool chat) {
  const std::string endpoint = chat ? "/v1/chat/completions" : "/v1/completions";
  auto refuse = [&](const ApiError &error) {
    sendError(res, error);
    if (error.status == 503)
      res.set_header("Retry-After", "1");
    count(endpoint, error.status);
  };
  auto parsed = parseCompletionRequest(req.body, chat);
  if (auto *error = std::get_if<ApiError>(&parsed))
    return refuse(*error);
  CompletionParams params = std::move(std::get<CompletionParams>(parsed));

  // The prompt's ids; the scheduler checks them against the vocabulary and the slot.
  SequenceRequest request;
  auto encode = [&](llvm::StringRef text, bool addSpecialTokens) {
    std::vector<int32_t> ids = tokenizer->encode(text, addSpecialTokens);
    request.prompt.assign(ids.begin(), ids.end());
  };
  if (chat) {
    if (!renderChat)
      return refuse(apiError(400, "invalid_request_error",
                             "this model has no chat template; use /v1/completions "
                             "(or compile the model with a chat template)"));
    if (!tokenizer)
      return refuse(apiError(400, "invalid_request_error",
                             "this model has no tokenizer, so chat messages cannot be encoded"));
    auto text = renderChat(params.messages);
    if (!text)
      return refuse(apiError(400, "invalid_request_error",
                             "the chat template failed: " + llvm::toString(text.takeError()),
                             "messages"));
    // As transformers' apply_chat_template(tokenize=True): the template writes the special
    // tokens itself, so none are added.
    encode(*text, /*addSpecialTokens=*/false);
  } else if (params.promptIsIds) {
    request.prompt = std::move(params.promptIds);
  } else {
    if (!tokenizer)
      return refuse(apiError(400, "invalid_request_error",
                             "this model has no tokenizer: send the prompt as token ids", "prompt"));
    // As helm-rt -p: the tokenizer's special tokens (a leading BOS) are added.
    encode(params.promptText, /*addSpecialTokens=*/true);
  }
  if (!params.stop.empty() && !tokenizer)
    return refuse(apiError(400, "invalid_request_error",
                           "'stop' matches text, and this model has no tokenizer to decode it", "stop"));

  request.maxTokens = params.maxTokens;
  request.sampling.temperature = float(params.temperature);
  request.sampling.topK = int(params.topK);
  request.sampling.topP = float(params.topP);
  request.sampling.seed = params.seed ? *params.seed : std::random_device{}();
  if (!params.ignoreEos)
    request.stopIds = model.info().eosIds;
  const int64_t promptTokens = int64_t(request.prompt.size());
  if (stopping.load())
    return refuse(apiError(503, "server_error", "the server is shutting down"));
  Admission admission = scheduler.submit(std::move(request));
  if (!admission.sequence)
    return refuse(apiError(admission.status, admission.status == 503 ? "server_error" : "invalid_request_error",
                           admission.message, admission.status == 400 ? "prompt" : ""));
  std::shared_ptr<Sequence> sequence = admission.sequence;

  const std::string id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(nextId++);
  const std::string object = chat ? (params.stream ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  const std::time_t created = std::time(nullptr);
  const std::string modelId = options.modelId;
  const bool returnIds = params.returnTokenIds;
  const auto deadline =
      Clock::now() + std::chrono::milliseconds(int64_t(options.timeoutSeconds * 1000));
  const std::string timeoutMessage = "the request did not finish within --timeout " +
                                     std::to_string(int64_t(options.timeoutSeconds)) + " s";
  // A response body: id, object, created, model, then `choices` and (with usage) `usage`.
  auto body = [=](Json choices, const CompletionText *usageOf) {
    Json out = {{"id", id}, {"object", object}, {"created", created}, {"model", modelId},
                {"choices", std::move(choices)}};
    if (usageOf) {
      int64_t completion = int64_t(usageOf->ids().size());
      out["usage"] = {{"prompt_tokens", promptTokens},
                      {"completion_tokens", completion},
                      {"total_tokens", promptTokens + completion}};
    }
    return out;
  };
  auto text = std::make_shared<CompletionText>(tokenizer, params.stop);

  if (!params.stream) {
    InFlight guard(inFlight);
    Progress progress;
    ClientConnection client(req.remote_addr, req.remote_port, localPort);
    Clock::time_point lastLook = Clock::now();
    while (!progress.finished) {
      advance(*sequence, *text, deadline, progress);
      if (progress.finished || Clock::now() - lastLook < std::chrono::milliseconds(250))
        continue;
      lastLook = Clock::now();
      if (client.gone()) {
        // Nobody reads an answer: the slot is freed at the next step. 499 (nginx's "client closed
        // request") only labels the metric; httplib's write of it fails quietly.
        sequence->cancel();
        ++clientsGone;
        res.status = 499;
        count(endpoint, 499);
        return;
      }
    }
    if (progress.timedOut) {
      ++timedOut;
      return refuse(apiError(504, "server_error", timeoutMessage));
    }
    if (!progress.error.empty())
      return refuse(apiError(500, "server_error", progress.error));
    Json choice = {{"index", 0}};
    if (chat)
      choice["message"] = {{"role", "assistant"}, {"content", text->text()}};
    else
      choice["text"] = text->text();
    choice["logprobs"] = nullptr;
    choice["finish_reason"] = finishReasonName(progress.reason);
    if (returnIds)
      choice["token_ids"] = text->ids();
    res.set_content(jsonText(body(Json::array({std::move(choice)}), text.get())), "application/json");
    count(endpoint, 200);
    return;
  }

  // Streaming: server-sent events, one per batch of new text, then the finish, usage, [DONE].
  count(endpoint, 200);
  const bool includeUsage = params.includeUsage;
  auto chunk = [=](const Json &delta, const char *finish, const std::vector<int32_t> *ids = nullptr) {
    Json choice = {{"index", 0}};
    if (chat) {
      choice["delta"] = delta;
    } else {
      choice["text"] = delta.value("content", std::string());
      choice["logprobs"] = nullptr;
    }
    if (ids)
      choice["token_ids"] = *ids;
    choice["finish_reason"] = finish ? Json(finish) : Json(nullptr);
    return "data: " + jsonText(body(Json::array({std::move(choice)}), nullptr)) + "\n\n";
  };
  struct StreamState {
    bool sentRole = false;
    Progress progress;
    Clock::time_point lastWrite = Clock::now();
  };
  auto state = std::make_shared<StreamState>();
  auto flight = std::make_shared<InFlight>(inFlight);
  res.set_header("Cache-Control", "no-cache");
  // httplib calls the provider until sink.done(); each call waits for the sequence once.
  res.set_chunked_content_provider(
      "text/event-stream",
      [=, this](size_t, httplib::DataSink &sink) -> bool {
        // httplib calls this outside its own exception handling: nothing may escape.
        try {
          auto send = [&](const std::string &data) {
            state->lastWrite = Clock::now();
            if (sink.write(data.data(), data.size()))
              return true;
            sequence->cancel(); // the client went away: its slot is freed at the next step
            ++clientsGone;
            return false;
          };
          if (chat && !state->sentRole) {
            state->sentRole = true;
            if (!send(chunk(Json{{"role", "assistant"}, {"content", ""}}, nullptr)))
              return false;
          }
          Progress &progress = state->progress;
          if (!advance(*sequence, *text, deadline, progress)) {
            // Nothing to send yet (queued, or text held back for a stop string): an SSE comment
            // each second finds a client that went away, which frees its place at once.
            return Clock::now() - state->lastWrite <= std::chrono::seconds(1) || send(": waiting\n\n");
          }
          std::string piece = text->takeStreamable();
          std::vector<int32_t> newIds = returnIds ? text->takeNewIds() : std::vector<int32_t>();
          if ((!piece.empty() || !newIds.empty()) &&
              !send(chunk(Json{{"content", piece}}, nullptr, returnIds ? &newIds : nullptr)))
            return false;
          if (!progress.finished)
            return true;
          if (progress.timedOut)
            ++timedOut;
          if (progress.timedOut || !progress.error.empty()) {
            const std::string &why = progress.timedOut ? timeoutMessage : progress.error;
            if (!send("data: " + apiError(500, "server_error", why).body() + "\n\n"))
              return false;
          } else {
            if (!send(chunk(Json::object(), finishReasonName(progress.reason))))
              return false;
            if (includeUsage && !send("data: " + jsonText(body(Json::array(), text.get())) + "\n\n"))
              return false;
          }
          if (!send("data: [DONE]\n\n"))
            return false;
          sink.done();
          return true;
        } catch (...) {
          sequence->cancel();
          return false;
        }
      },
      [sequence, flight](bool) { sequence->cancel(); });
}

std::string HttpServer::Impl::metricsText() {
  SchedulerMetrics m = scheduler.metrics();
  std::string out;
  auto metric = [&](const char *name, const char *type, const char *help, double value) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " ";
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%.17g", value);
    out += buffer;
    out += "\n";
  };
  out += "# HELP helm_requests_total HTTP requests answered, by endpoint and status.\n"
         "# TYPE helm_requests_total counter\n";
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto &[key, n] : requests)
      out += "helm_requests_total{endpoint=\"" + key.first + "\",status=\"" +
             std::to_string(key.second) + "\"} " + std::to_string(n) + "\n";
  }
  metric("helm_requests_timed_out_total", "counter", "Requests cancelled by --timeout.", double(timedOut.load()));
  metric("helm_requests_client_gone_total", "counter",
         "Requests whose client left before the answer was complete (their sequence is cancelled).",
         double(clientsGone.load()));
  metric("helm_requests_in_flight", "gauge", "Requests being answered now.", double(inFlight.load()));
  metric("helm_sequences_admitted_total", "counter", "Sequences given a KV slot.", double(m.admitted));
  metric("helm_sequences_finished_total", "counter", "Sequences that ended (stop, length, error).", double(m.finished));
  metric("helm_sequences_cancelled_total", "counter",
         "Sequences cancelled (client gone, stop string, timeout, shutdown).", double(m.cancelled));
  metric("helm_requests_rejected_total", "counter", "Requests refused with 503 because the queue was full.",
         double(m.rejectedFull));
  metric("helm_prompt_tokens_total", "counter", "Prompt tokens prefilled.", double(m.promptTokens));
  metric("helm_generated_tokens_total", "counter", "Tokens sampled.", double(m.generatedTokens));
  metric("helm_tokens_per_second", "gauge", "Prompt and generated tokens per second of model time.",
         m.busySeconds > 0 ? double(m.promptTokens + m.generatedTokens) / m.busySeconds : 0);
  metric("helm_steps_total", "counter", "Scheduler steps (one prefill chunk and one decode batch each).",
         double(m.steps));
  metric("helm_queue_length", "gauge", "Requests waiting for a KV slot.", double(m.queued));
  metric("helm_active_slots", "gauge", "KV slots holding a sequence.", double(m.activeSlots));
  metric("helm_slots", "gauge", "KV slots (--parallel).", double(m.slots));
  metric("helm_kv_bytes", "gauge", "Bytes held by the KV caches of every stage.", double(m.kvBytes));
  metric("helm_kv_page_tokens", "gauge", "Positions per page of the GPU stage's KV cache (0: not paged).",
         double(m.kvPageTokens));
  metric("helm_kv_pages_in_use", "gauge", "KV pages held, on the device and evicted to host RAM.",
         double(m.kvPaging.devicePages + m.kvPaging.hostPages));
  metric("helm_kv_pages_device", "gauge", "KV pages resident on the device.", double(m.kvPaging.devicePages));
  metric("helm_kv_pages_evicted_total", "counter", "KV pages evicted to host RAM.", double(m.kvPaging.evicted));
  return out;
}

void HttpServer::Impl::routes() {
  http.set_payload_max_length(options.maxBodyBytes);
  // Every request holds a worker while it waits or streams: enough for every slot and the queue.
  size_t workers = size_t(scheduler.options().parallel) + size_t(scheduler.options().queueLimit) + 8;
  http.new_task_queue = [workers] { return new httplib::ThreadPool(workers); };

  http.set_pre_routing_handler([this](const httplib::Request &req, httplib::Response &res) {
    // This runs before the body is read: a refusal here closes the connection, so unread body
    // bytes are never taken for the next request.
    if (req.method == "POST" && (!req.has_header("Content-Length") ||
                                 req.get_header_value("Transfer-Encoding").find("chunked") != std::string::npos)) {
      // httplib checks --max-body against Content-Length only: a body without one is refused
      // rather than read without a bound.
      sendError(res, apiError(411, "invalid_request_error", "a request body needs a Content-Length header"));
      res.set_header("Connection", "close");
      count(req.path, 411);
      return httplib::Server::HandlerResponse::Handled;
    }
    if (options.apiKey.empty() || req.path == "/health")
      return httplib::Server::HandlerResponse::Unhandled;
    std::string given = req.get_header_value("Authorization");
    if (given.rfind("Bearer ", 0) == 0 && constantTimeEquals(given.substr(7), options.apiKey))
      return httplib::Server::HandlerResponse::Unhandled;
    ApiError error = apiError(401, "invalid_request_error",
                              given.empty() ? "missing 'Authorization: Bearer <key>'" : "incorrect API key");
    sendError(res, error);
    res.set_header("Connection", "close");
    count(req.path, 401);
    return httplib::Server::HandlerResponse::Handled;
  });
  http.set_error_handler([this](const httplib::Request &req, httplib::Response &res) {
    if (!res.body.empty())
      return;
    ApiError error;
    error.status = res.status;
    if (res.status == 404) {
      error.message = "no endpoint " + req.method + " " + req.path;
    } else if (res.status == 413) {
      error.message = "the request body is larger than " + std::to_string(options.maxBodyBytes) + " bytes";
    } else {
      error.message = "HTTP " + std::to_string(res.status);
    }
    sendError(res, error);
    count(req.path, res.status);
  });
  http.set_exception_handler([this](const httplib::Request &req, httplib::Response &res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      if (ep)
        std::rethrow_exception(ep);
    } catch (const std::exception &e) {
      what = e.what();
    } catch (...) {
    }
    sendError(res, apiError(500, "server_error", what));
    count(req.path, 500);
  });

  http.Post("/v1/completions", [this](const httplib::Request &req, httplib::Response &res) {
    completions(req, res, false);
  });
  http.Post("/v1/chat/completions", [this](const httplib::Request &req, httplib::Response &res) {
    completions(req, res, true);
  });
  for (const char *path : {"/v1/completions", "/v1/chat/completions"})
    http.Get(path, [this, path](const httplib::Request &, httplib::Response &res) {
      sendError(res, apiError(405, "invalid_request_error", std::string(path) + " takes POST"));
      count(path, 405);
    });
  http.Get("/v1/models", [this](const httplib::Request &, httplib::Response &res) {
    Json model = {{"id", options.modelId},
                  {"object", "model"},
                  {"created", int64_t(started)},
                  {"owned_by", "helm"}};
    res.set_content(jsonText(Json{{"object", "list"}, {"data", Json::array({model})}}), "application/json");
    count("/v1/models", 200);
  });
  http.Get("/health", [this](const httplib::Request &, httplib::Response &res) {
    if (stopping.load()) {
      sendError(res, apiError(503, "server_error", "the server is shutting down"));
      return;
    }
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  http.Get("/metrics", [this](const httplib::Request &, httplib::Response &res) {
    res.set_content(metricsText(), "text/plain; version=0.0.4");
    count("/metrics", 200);
  });
}

HttpServer::HttpServer(const LoadedModel &model, const tok::Tokenizer *tokenizer, ChatRenderer renderChat,
                       BatchScheduler &scheduler, ServerOptions options)
    : impl_(std::make_unique<Impl>(model, tokenizer, std::move(renderChat), scheduler, std::move(options))) {
  impl_->routes();
}

HttpServer::~HttpServer() = default;

llvm::Error HttpServer::bind() {
  const ServerOptions &o = impl_->options;
  if (o.port == 0) {
    port_ = impl_->http.bind_to_any_port(o.host);
    if (port_ <= 0)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "cannot listen on " + o.host + " (any port)");
    impl_->localPort = port_;
    return llvm::Error::success();
  }
  if (!impl_->http.bind_to_port(o.host, o.port))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cannot listen on " + o.host + ":" + std::to_string(o.port) +
                                       " (in use, or not an address of this machine)");
  port_ = o.port;
  impl_->localPort = port_;
  return llvm::Error::success();
}

void HttpServer::run() { impl_->http.listen_after_bind(); }

void HttpServer::refuseNew() { impl_->stopping.store(true); }

void HttpServer::stop() {
  impl_->stopping.store(true);
  // httplib asserts on a second stop, and ignores one before its listen loop runs.
  if (impl_->http.is_running() && !impl_->closed.exchange(true))
    impl_->http.stop();
}

bool HttpServer::listening() const { return impl_->http.is_running(); }

int64_t HttpServer::inFlight() const { return impl_->inFlight.load(); }

bool HttpServer::stopped() const { return impl_->stopping.load(); }

} // namespace helm::rt::serve
