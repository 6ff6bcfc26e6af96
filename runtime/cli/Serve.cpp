//===- Serve.cpp - helm-rt serve: load the package, schedule, answer HTTP ------------===//
//
// The server runs inside helm-rt's executable because the package's CPU stage resolves the
// kernels against it (ENABLE_EXPORTS). SIGINT and SIGTERM are taken by one thread with sigwait:
// new requests get 503, running ones have --shutdown-timeout seconds to finish, the rest are
// cancelled, and helm-rt exits 0.
//
//===----------------------------------------------------------------------===//
#include "runtime/cli/Serve.h"

#include "runtime/cli/Run.h"

#include "runtime/core/Model.h"
#include "runtime/server/BatchScheduler.h"
#include "runtime/server/ChatPrompt.h"
#include "runtime/server/HttpServer.h"
#include "runtime/tokenizer/Tokenizer.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <csignal>
#include <pthread.h>
#include <thread>
#include <unistd.h>
#include <atomic>

using namespace llvm;

namespace helm::rt::cli {

int runServe(const Options &o, int (*startThreads)(const Options &)) {
  // The key first: a missing key file is an error before the (long) package load.
  std::string apiKey = o.apiKey;
  if (!o.apiKeyFile.empty()) {
    auto text = MemoryBuffer::getFile(o.apiKeyFile, /*IsText=*/true);
    if (!text)
      return fail(o.apiKeyFile + ": cannot read: " + text.getError().message());
    apiKey = (*text)->getBuffer().split('\n').first.trim().str();
    if (apiKey.empty())
      return fail(o.apiKeyFile + ": the first line holds no key");
  }

  // SIGINT/SIGTERM go to the waiting thread below only: blocked here, before any thread starts, so
  // every thread inherits the mask. SIGPIPE (a client that closed its socket) is ignored: the
  // write fails and the stream ends.
  sigset_t stopSignals;
  sigemptyset(&stopSignals);
  sigaddset(&stopSignals, SIGINT);
  sigaddset(&stopSignals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stopSignals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  auto loaded = LoadedModel::load(o.packagePath, loadOptionsOf(o));
  if (!loaded)
    return fail(toString(loaded.takeError()));
  LoadedModel &model = **loaded;

  std::unique_ptr<tok::Tokenizer> tokenizer;
  if (model.info().hasTokenizer) {
    auto t = tok::Tokenizer::fromJson(model.tokenizerJson(), o.packagePath + ": tokenizer");
    if (!t)
      return fail(toString(t.takeError()));
    tokenizer = std::move(*t);
  }
  serve::ChatRenderer renderChat;
  if (!model.info().chatTemplate.empty() && tokenizer) {
    auto renderer = serve::makeChatRenderer(model.info().chatTemplate, *tokenizer, model.info());
    if (!renderer)
      return fail(o.packagePath + ": chat template: " + toString(renderer.takeError()));
    renderChat = std::move(*renderer);
  }

  int nThreads = startThreads(o);
  serve::SchedulerOptions schedulerOptions;
  schedulerOptions.parallel = o.parallel;
  schedulerOptions.slotTokens = o.ctxPerSlot;
  schedulerOptions.prefillChunk = o.prefillChunk;
  schedulerOptions.queueLimit = o.queueLimit;
  auto scheduler = serve::BatchScheduler::create(model, schedulerOptions);
  if (!scheduler)
    return fail(toString(scheduler.takeError()));

  serve::ServerOptions serverOptions;
  serverOptions.host = o.host;
  serverOptions.port = o.port;
  serverOptions.apiKey = apiKey;
  serverOptions.maxBodyBytes = size_t(o.maxBodyBytes);
  serverOptions.timeoutSeconds = o.timeoutSeconds;
  serverOptions.modelId =
      o.modelName.empty() ? sys::path::stem(o.packagePath).str() : o.modelName;
  serve::HttpServer server(model, tokenizer.get(), renderChat, **scheduler, serverOptions);
  if (Error e = server.bind())
    return fail(toString(std::move(e)));

  // The line a script waits for (the port matters with --port 0).
  outs() << formatv("helm-rt: serving {0} as '{1}' on http://{2}:{3} ({4} slots of {5} positions, "
                    "{6} threads{7}{8})\n",
                    o.packagePath, serverOptions.modelId, o.host, server.port(), o.parallel,
                    (*scheduler)->slotTokens(), nThreads, renderChat ? ", chat template" : "",
                    apiKey.empty() ? "" : ", API key required");
  outs().flush();
  if (o.host != "127.0.0.1" && o.host != "localhost" && o.host != "::1" && apiKey.empty())
    errs() << "helm-rt: warning: listening on " << o.host
           << " without --api-key: anyone who can reach this address can use the model\n";

  std::atomic<bool> serving{true};
  auto sleepMs = [](int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); };
  std::thread signals([&] {
    int signal = 0;
    sigwait(&stopSignals, &signal);
    if (!serving.load())
      return; // the listener ended by itself and woke this thread
    // A second signal ends the process at once, whatever is still running.
    std::thread([set = stopSignals] {
      int again = 0;
      sigwait(&set, &again);
      _exit(130);
    }).detach();
    errs() << formatv("helm-rt: {0}: no new requests; running ones have {1} s to finish\n",
                      signal == SIGINT ? "SIGINT" : "SIGTERM", o.shutdownSeconds);
    server.refuseNew(); // new requests get 503 while running ones finish
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::milliseconds(int64_t(o.shutdownSeconds * 1000));
    while (server.inFlight() > 0 && std::chrono::steady_clock::now() < deadline)
      sleepMs(20);
    // Whatever still runs is cancelled: its stream ends with what it has, then [DONE].
    (*scheduler)->stop();
    for (int i = 0; i < 500 && server.inFlight() > 0; ++i)
      sleepMs(20);
    // A signal right after start may come before the listen loop runs, when stopping it would
    // do nothing: wait for it (or for the listener to have ended by itself).
    while (!server.listening() && serving.load())
      sleepMs(10);
    server.stop();
  });
  server.run();
  bool failed = serving.exchange(false) && !server.stopped();
  if (failed)
    kill(getpid(), SIGTERM); // no signal came: wake the waiting thread (the signal stays blocked)
  signals.join();
  (*scheduler)->stop();
  if (failed)
    return fail("the HTTP listener on " + o.host + ":" + Twine(server.port()) + " stopped unexpectedly");
  serve::SchedulerMetrics m = (*scheduler)->metrics();
  errs() << formatv("helm-rt: stopped: {0} sequences finished, {1} cancelled, {2} prompt and {3} "
                    "generated tokens\n",
                    m.finished, m.cancelled, m.promptTokens, m.generatedTokens);
  return 0;
}

} // namespace helm::rt::cli
