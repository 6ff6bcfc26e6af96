//===- BatchScheduler.cpp -----------------------------------------------------------===//
#include "runtime/server/BatchScheduler.h"

#include "runtime/kv/KvCache.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <numeric>

namespace helm::rt::serve {

namespace {
using Clock = std::chrono::steady_clock;
llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message.str());
}
} // namespace

bool Sequence::next(Events &out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  ready_.wait_for(lock, timeout, [&] { return !pending_.empty() || finished_; });
  out.tokens.clear();
  out.tokens.swap(pending_);
  out.finished = finished_;
  out.reason = reason_;
  out.error = error_;
  return !out.tokens.empty() || out.finished;
}

void Sequence::push(int32_t token) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.push_back(token);
  }
  ready_.notify_all();
}

void Sequence::finish(FinishReason reason, std::string error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (finished_)
      return;
    finished_ = true;
    reason_ = reason;
    error_ = std::move(error);
  }
  ready_.notify_all();
}

llvm::Expected<std::unique_ptr<BatchScheduler>>
BatchScheduler::create(const LoadedModel &model, const SchedulerOptions &requested) {
  const ModelInfo &info = model.info();
  SchedulerOptions options = requested;
  if (options.parallel < 1)
    return fail("--parallel must be at least 1 (got " + llvm::Twine(options.parallel) + ")");
  if (options.slotTokens == 0)
    options.slotTokens = info.maxContext;
  if (options.slotTokens < 2 || options.slotTokens > info.maxContext)
    return fail("--ctx-per-slot " + llvm::Twine(options.slotTokens) +
                " is outside 2.." + llvm::Twine(info.maxContext) +
                " (the package's context limit; compile with a larger --max-context)");
  if (options.prefillChunk < 1)
    return fail("the prefill chunk must be at least 1 token");
  if (options.queueLimit < 0)
    return fail("the queue limit must not be negative");
  auto session = model.newSession(options.parallel, options.slotTokens);
  if (!session)
    return session.takeError();
  std::unique_ptr<BatchScheduler> scheduler(new BatchScheduler(model, options));
  scheduler->session_ = std::move(*session);
  for (const auto &cache : scheduler->session_->caches)
    if (cache->pageTokens() > 0)
      scheduler->pageTokens_ = cache->pageTokens();
  // A paged device cache takes its prompt one page per call, page-aligned (as generate() does), so
  // a chunk completes at most one page, which can then be evicted.
  if (scheduler->pageTokens_ > 0)
    scheduler->options_.prefillChunk = scheduler->pageTokens_;
  scheduler->slots_.resize(size_t(options.parallel));
  scheduler->metrics_.slots = options.parallel;
  scheduler->metrics_.kvPageTokens = scheduler->pageTokens_;
  scheduler->thread_ = std::thread([s = scheduler.get()] { s->loop(); });
  return scheduler;
}

BatchScheduler::~BatchScheduler() { stop(); }

Admission BatchScheduler::submit(SequenceRequest request) {
  const ModelInfo &info = model_.info();
  Admission answer;
  int64_t length = int64_t(request.prompt.size());
  if (length == 0) {
    answer.status = 400;
    answer.message = "the prompt is empty (no tokens)";
    return answer;
  }
  for (int64_t id : request.prompt)
    if (id < 0 || id >= info.vocab) {
      answer.status = 400;
      answer.message = "token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                       std::to_string(info.vocab - 1) + ")";
      return answer;
    }
  if (length >= options_.slotTokens) {
    answer.status = 400;
    answer.message = "the prompt has " + std::to_string(length) +
                     " tokens; a sequence holds at most " + std::to_string(options_.slotTokens) +
                     " positions, prompt and completion together";
    return answer;
  }
  if (request.maxTokens < 0) {
    answer.status = 400;
    answer.message = "max_tokens must be at least 1";
    return answer;
  }
  std::shared_ptr<Sequence> sequence(new Sequence(std::move(request)));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) {
      answer.status = 503;
      answer.message = "the server is shutting down";
      return answer;
    }
    // Free slots take requests at the next step, so they count as room besides the queue.
    int64_t room = options_.queueLimit + std::max<int64_t>(0, options_.parallel - metrics_.activeSlots);
    if (int64_t(queue_.size()) >= room) {
      ++metrics_.rejectedFull;
      answer.status = 503;
      answer.message = "every slot is busy and " + std::to_string(queue_.size()) +
                       " requests are waiting; retry later";
      return answer;
    }
    queue_.push_back(sequence);
    metrics_.queued = int64_t(queue_.size());
  }
  wake_.notify_all();
  answer.sequence = std::move(sequence);
  return answer;
}

void BatchScheduler::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  // Two threads may stop at once (a signal's and the owner's): one joins.
  std::lock_guard<std::mutex> joining(joinMutex_);
  if (thread_.joinable())
    thread_.join();
}

SchedulerMetrics BatchScheduler::metrics() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return metrics_;
}

void BatchScheduler::loop() {
  for (;;) {
    bool busy = llvm::any_of(slots_, [](const auto &s) { return s != nullptr; });
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (!busy)
        wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) {
        for (auto &queued : queue_)
          queued->finish(FinishReason::Cancelled);
        metrics_.cancelled += queue_.size();
        queue_.clear();
        metrics_.queued = 0;
        break;
      }
    }
    try {
      step();
    } catch (...) {
      // Out of memory in a step's buffers: every running sequence ends with the error; the
      // scheduler goes on with the next requests.
      for (auto &slot : slots_)
        if (slot)
          release(*slot, FinishReason::Error, "the server ran out of memory during a step");
    }
  }
  for (auto &slot : slots_)
    if (slot)
      release(*slot, FinishReason::Cancelled);
}

void BatchScheduler::release(Sequence &sequence, FinishReason reason, std::string error) {
  int32_t slot = sequence.slot_;
  if (slot >= 0) {
    for (auto &cache : session_->caches)
      cache->reset(slot);
    std::shared_ptr<Sequence> keep = std::move(slots_[size_t(slot)]);
    sequence.slot_ = -1;
    sequence.finish(reason, std::move(error));
  } else {
    sequence.finish(reason, std::move(error));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (reason == FinishReason::Cancelled)
    ++metrics_.cancelled;
  else
    ++metrics_.finished;
}

void BatchScheduler::accept(Sequence &sequence, int32_t token) {
  ++sequence.produced_;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++metrics_.generatedTokens;
  }
  const SequenceRequest &request = sequence.request_;
  if (llvm::is_contained(request.stopIds, token)) {
    release(sequence, FinishReason::Stop);
    return;
  }
  sequence.push(token);
  sequence.last_ = token;
  if (request.maxTokens > 0 && sequence.produced_ >= request.maxTokens)
    release(sequence, FinishReason::Length);
  else if (sequence.fed_ + sequence.produced_ >= options_.slotTokens)
    // The token just sampled takes the slot's last position: nothing more fits.
    release(sequence, FinishReason::Context);
}

void BatchScheduler::step() {
  const int64_t vocab = model_.info().vocab;
  auto start = Clock::now();
  // Cancelled sequences leave first, so their slots serve the queue in this very step.
  for (auto &slot : slots_)
    if (slot && slot->cancelled())
      release(*slot, FinishReason::Cancelled);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t s = 0; s < slots_.size() && !queue_.empty(); ++s) {
      if (slots_[s])
        continue;
      std::shared_ptr<Sequence> next;
      while (!queue_.empty() && !next) {
        next = std::move(queue_.front());
        queue_.pop_front();
        if (next->cancelled()) {
          next->finish(FinishReason::Cancelled);
          ++metrics_.cancelled;
          next.reset();
        }
      }
      if (!next)
        break;
      next->slot_ = int32_t(s);
      slots_[s] = std::move(next);
      ++metrics_.admitted;
      ++metrics_.activeSlots; // at once, so submit() counts the room left right
    }
    metrics_.queued = int64_t(queue_.size());
  }

  // One prefill chunk, for the next prefilling slot in round-robin order.
  const size_t n = slots_.size();
  for (size_t k = 0; k < n; ++k) {
    size_t s = (nextPrefill_ + k) % n;
    std::shared_ptr<Sequence> sequence = slots_[s];
    if (!sequence || sequence->fed_ >= sequence->promptTokens())
      continue;
    nextPrefill_ = (s + 1) % n;
    const auto &prompt = sequence->request_.prompt;
    int64_t at = sequence->fed_;
    int64_t count = std::min(options_.prefillChunk, int64_t(prompt.size()) - at);
    std::vector<int64_t> positions(static_cast<size_t>(count));
    std::iota(positions.begin(), positions.end(), at);
    int32_t slot = int32_t(s);
    logits_.assign(size_t(vocab), 0.0f);
    if (llvm::Error e = model_.run(*session_, &slot, &at, prompt.data() + at, positions.data(),
                                   logits_.data(), 1, count)) {
      release(*sequence, FinishReason::Error, llvm::toString(std::move(e)));
      break;
    }
    sequence->fed_ += count;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      metrics_.promptTokens += uint64_t(count);
    }
    if (sequence->fed_ == sequence->promptTokens())
      accept(*sequence, sequence->sampler_.sample(logits_.data(), vocab));
    break;
  }

  // One decode step for every sequence past its prompt.
  std::vector<std::shared_ptr<Sequence>> rows;
  for (auto &slot : slots_)
    if (slot && slot->fed_ == slot->promptTokens() && slot->produced_ > 0 && !slot->cancelled())
      rows.push_back(slot);
  if (!rows.empty()) {
    int64_t b = int64_t(rows.size());
    std::vector<int32_t> slotOfRow(static_cast<size_t>(b));
    std::vector<int64_t> ids(static_cast<size_t>(b)), positions(static_cast<size_t>(b));
    for (int64_t r = 0; r < b; ++r) {
      const Sequence &sequence = *rows[size_t(r)];
      slotOfRow[size_t(r)] = sequence.slot_;
      ids[size_t(r)] = sequence.last_;
      positions[size_t(r)] = sequence.fed_ + sequence.produced_ - 1;
    }
    logits_.assign(size_t(b * vocab), 0.0f);
    if (llvm::Error e = model_.run(*session_, slotOfRow.data(), positions.data(), ids.data(),
                                   positions.data(), logits_.data(), b, 1)) {
      std::string message = llvm::toString(std::move(e));
      for (auto &sequence : rows)
        release(*sequence, FinishReason::Error, message);
    } else {
      for (int64_t r = 0; r < b; ++r) {
        Sequence &sequence = *rows[size_t(r)];
        accept(sequence, sequence.sampler_.sample(logits_.data() + r * vocab, vocab));
      }
    }
  }

  // The metrics' view of the slots and the caches, taken here, on the thread that owns them.
  int64_t active = 0;
  for (auto &slot : slots_)
    active += slot != nullptr;
  uint64_t kvBytes = 0;
  PagingCounters paging;
  for (const auto &cache : session_->caches) {
    kvBytes += cache->bytes();
    if (cache->pageTokens() > 0)
      paging = cache->paging();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  ++metrics_.steps;
  metrics_.activeSlots = active;
  metrics_.kvBytes = kvBytes;
  metrics_.kvPaging = paging;
  metrics_.busySeconds += std::chrono::duration<double>(Clock::now() - start).count();
}

} // namespace helm::rt::serve
