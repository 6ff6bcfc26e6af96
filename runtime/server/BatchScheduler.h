//===- BatchScheduler.h - continuous batching over one session's KV slots ------------===//
//
// The server's engine. One session holds `parallel` KV slots of `slotTokens` positions each. A
// request waits in a bounded queue until a slot is free, then its prompt is prefilled in chunks,
// one chunk per step, while every sequence already decoding advances one token in the same step:
// a long prompt delays the others by one chunk per step, never by its whole length. Each sequence
// keeps its own positions and its own KV slot, which is cleared when it finishes or is cancelled.
//
// One thread (the scheduler's) runs the model; request threads only submit, read their events and
// cancel. A cancelled sequence (client gone, stop string found, timeout) leaves its slot at the
// next step.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_RUNTIME_SERVER_BATCHSCHEDULER_H
#define HELM_RUNTIME_SERVER_BATCHSCHEDULER_H

#include "runtime/core/Model.h"
#include "runtime/core/Sampler.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace helm::rt::serve {

struct SchedulerOptions {
  int32_t parallel = 4;      // KV slots: sequences decoded together
  int64_t slotTokens = 0;    // positions per slot (prompt + generated); 0: the package's context
  int64_t prefillChunk = 256; // prompt tokens per step and sequence (rounded to whole KV pages)
  int64_t queueLimit = 64;   // requests waiting for a slot before new ones are refused
};

struct SequenceRequest {
  std::vector<int64_t> prompt; // as the stages take ids; submit() checks them
  int64_t maxTokens = 0; // 0: until the slot is full
  SamplingOptions sampling;
  std::vector<int32_t> stopIds; // end-of-sequence ids
};

enum class FinishReason {
  None,
  Stop,      // an end-of-sequence id
  Length,    // maxTokens reached
  Context,   // the slot's positions are used up (reported to clients as "length")
  Cancelled, // cancel(): the client went away, a stop string matched, the server stops
  Error,     // the model failed (a device error); `error` says why
};

/// One request's sequence, shared by the scheduler (which appends tokens) and the request's thread
/// (which reads them).
class Sequence {
public:
  struct Events {
    std::vector<int32_t> tokens; // new since the last read
    bool finished = false;
    FinishReason reason = FinishReason::None;
    std::string error;
  };
  /// Waits until there are new tokens, the sequence finished, or `timeout` passes; moves the new
  /// tokens out. False on timeout with nothing new.
  bool next(Events &out, std::chrono::milliseconds timeout);
  /// Asks the scheduler to drop the sequence at its next step (idempotent).
  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }
  int64_t promptTokens() const { return int64_t(request_.prompt.size()); }

private:
  friend class BatchScheduler;
  explicit Sequence(SequenceRequest request) : request_(std::move(request)), sampler_(request_.sampling) {}
  void push(int32_t token);
  void finish(FinishReason reason, std::string error = {});

  // Written by the scheduler's thread only.
  SequenceRequest request_;
  Sampler sampler_;
  int32_t slot_ = -1;
  int64_t fed_ = 0;      // prompt tokens in the KV cache
  int64_t produced_ = 0; // tokens sampled
  int32_t last_ = 0;     // the token the next decode step feeds
  std::atomic<bool> cancelled_{false};

  std::mutex mutex_;
  std::condition_variable ready_;
  std::vector<int32_t> pending_;
  bool finished_ = false;
  FinishReason reason_ = FinishReason::None;
  std::string error_;
};

/// What submit() answers: a sequence, or the HTTP status and message of a refusal.
struct Admission {
  std::shared_ptr<Sequence> sequence;
  int status = 200; // 400: can never fit; 503: the queue is full; 503 also while stopping
  std::string message;
};

struct SchedulerMetrics {
  uint64_t admitted = 0, finished = 0, cancelled = 0, rejectedFull = 0;
  uint64_t promptTokens = 0, generatedTokens = 0, steps = 0;
  int64_t queued = 0, activeSlots = 0, slots = 0;
  uint64_t kvBytes = 0;         // held by the session's KV caches now
  PagingCounters kvPaging;      // the GPU stage's paged cache (zero without one)
  int64_t kvPageTokens = 0;
  double busySeconds = 0;       // time spent in model steps
};

class BatchScheduler {
public:
  /// Sizes the session (fails in one line when its KV cache cannot fit) and starts the thread.
  static llvm::Expected<std::unique_ptr<BatchScheduler>> create(const LoadedModel &model,
                                                                const SchedulerOptions &options);
  ~BatchScheduler();
  /// Queues a request, or refuses it: a prompt that cannot fit a slot with one generated token
  /// (400), ids outside the vocabulary (400), a full queue (503), a stopping scheduler (503).
  Admission submit(SequenceRequest request);
  /// Stops admitting, cancels everything queued and running, and joins the thread.
  void stop();
  SchedulerMetrics metrics() const;
  const SchedulerOptions &options() const { return options_; }
  int64_t slotTokens() const { return options_.slotTokens; }

private:
  BatchScheduler(const LoadedModel &model, SchedulerOptions options)
      : model_(model), options_(options) {}
  void loop();
  /// One step: admit, prefill one chunk, decode every decoding sequence.
  void step();
  void release(Sequence &sequence, FinishReason reason, std::string error = {});
  /// After a sampled token: finished by it, or by its count or the slot's end.
  void accept(Sequence &sequence, int32_t token);

  const LoadedModel &model_;
  SchedulerOptions options_;
  std::unique_ptr<LoadedModel::Session> session_;
  int64_t pageTokens_ = 0;

  mutable std::mutex mutex_; // guards queue_, stopping_, metrics_
  std::mutex joinMutex_;     // stop()'s join
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Sequence>> queue_;
  bool stopping_ = false;
  SchedulerMetrics metrics_;

  // The scheduler thread's own state.
  std::vector<std::shared_ptr<Sequence>> slots_; // by slot; null: free
  size_t nextPrefill_ = 0;                        // round robin over prefilling slots
  std::vector<float> logits_;
  std::thread thread_;
};

} // namespace helm::rt::serve

#endif
