//===- Generator.cpp ---------------------------------------------------------------===//
#include "runtime/core/Generator.h"

#include "runtime/kv/KvCache.h"

#include <algorithm>
#include <chrono>
#include <numeric>

namespace helm::rt {

namespace {
using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}
llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message.str());
}
} // namespace

int64_t sessionTokens(const ModelInfo &info, const GenerateRequest &request) {
  int64_t longestPrompt = 0;
  for (const auto &p : request.prompts)
    longestPrompt = std::max<int64_t>(longestPrompt, int64_t(p.size()));
  return std::min<int64_t>(info.maxContext,
                           longestPrompt + std::max<int64_t>(request.maxNewTokens, 0));
}

llvm::Error validateRequest(const ModelInfo &info, const GenerateRequest &request) {
  int n = int(request.prompts.size());
  if (n == 0)
    return fail("no prompt given");
  if (request.maxNewTokens < 1)
    return fail("the number of tokens to generate must be at least 1 (got " +
                llvm::Twine(request.maxNewTokens) + ")");
  for (int i = 0; i < n; ++i) {
    const auto &p = request.prompts[size_t(i)];
    if (p.empty())
      return fail("prompt " + llvm::Twine(i) + " is empty (no tokens)");
    if (int64_t(p.size()) >= info.maxContext)
      return fail("prompt " + llvm::Twine(i) + " has " + llvm::Twine(p.size()) +
                  " tokens; the context limit is " + llvm::Twine(info.maxContext) +
                  " (compile with a larger --max-context)");
    for (int32_t id : p)
      if (id < 0 || id >= info.vocab)
        return fail("token id " + llvm::Twine(id) + " is outside the vocabulary (0.." +
                    llvm::Twine(info.vocab - 1) + ")");
  }
  return llvm::Error::success();
}

llvm::Error generate(const LoadedModel &model, const GenerateRequest &request,
                     const TokenCallback &onToken, const LogitsCallback &onLogits,
                     GenerateStats &stats) {
  const ModelInfo &info = model.info();
  if (llvm::Error e = validateRequest(info, request))
    return e;
  int n = int(request.prompts.size());

  int64_t maxTokens = sessionTokens(info, request);
  auto session = model.newSession(n, maxTokens);
  if (!session)
    return session.takeError();
  std::vector<Sampler> samplers;
  for (int i = 0; i < n; ++i) {
    SamplingOptions s = request.sampling;
    s.seed = request.sampling.seed + uint64_t(i);
    samplers.emplace_back(s);
  }
  std::vector<int64_t> past(static_cast<size_t>(n), 0);
  std::vector<int32_t> last(static_cast<size_t>(n), 0);
  std::vector<int64_t> produced(static_cast<size_t>(n), 0);
  std::vector<bool> active(static_cast<size_t>(n), true);
  std::vector<float> logits;
  Device *device = model.device();
  // The GPU stage's paged cache, if there is one.
  const KvCache *paged = nullptr;
  for (const auto &cache : (*session)->caches)
    if (cache->pageTokens() > 0)
      paged = cache.get();
  const int64_t pageTokens = paged ? paged->pageTokens() : 0;
  stats.kvPageTokens = pageTokens;
  DeviceCounters linkStart = device ? device->counters() : DeviceCounters();

  auto accept = [&](int i, int32_t token) {
    last[size_t(i)] = token;
    ++produced[size_t(i)];
    ++stats.generatedTokens;
    bool keep = onToken ? onToken(i, token) : true;
    if (!keep || produced[size_t(i)] >= request.maxNewTokens ||
        llvm::is_contained(request.stopIds, token)) {
      active[size_t(i)] = false;
    } else if (past[size_t(i)] + 1 >= info.maxContext) {
      // The sampled token takes the last position: nothing more fits, though more was asked for.
      active[size_t(i)] = false;
      stats.contextLimited.push_back(i);
    }
  };

  auto start = Clock::now();
  // Prefill: each prompt alone, at positions 0..len-1.
  for (int i = 0; i < n; ++i) {
    const auto &p = request.prompts[size_t(i)];
    int64_t len = int64_t(p.size());
    std::vector<int64_t> ids(p.begin(), p.end()), positions(static_cast<size_t>(len));
    std::iota(positions.begin(), positions.end(), 0);
    int32_t row = i;
    logits.assign(static_cast<size_t>(info.vocab), 0.0f);
    auto t0 = Clock::now();
    // With a paged device KV cache the prompt goes in chunks of one page (page-aligned, since it
    // starts at position 0): each stage call completes at most one page, which can then be
    // evicted, so the device never needs more pages than the batch's tails.
    int64_t chunk = pageTokens > 0 ? pageTokens : len;
    for (int64_t at = 0; at < len; at += chunk) {
      int64_t count = std::min(chunk, len - at);
      if (llvm::Error e = model.run(**session, &row, &at, ids.data() + at, positions.data() + at,
                                    logits.data(), 1, count))
        return e;
    }
    stats.prefillMs += msSince(t0);
    stats.promptTokens += len;
    past[size_t(i)] = len;
    if (onLogits)
      onLogits(logits.data(), 1, &i);
    int32_t token = samplers[size_t(i)].sample(logits.data(), info.vocab);
    if (i == 0)
      stats.ttftMs = msSince(start);
    accept(i, token);
  }

  // Decode: every unfinished sequence advances by one token per step. The stage buffers the
  // prompt's chunks left for reuse are sized for them, not for a decode step: given back now, so
  // that what the device keeps is the larger of the two, not their sum.
  if (device) {
    device->releaseKeptStageBuffers();
    stats.prefillDevice = device->counters() - linkStart;
  }
  auto decodeStart = Clock::now();
  for (;;) {
    std::vector<int> rows;
    for (int i = 0; i < n; ++i)
      if (active[size_t(i)])
        rows.push_back(i);
    if (rows.empty())
      break;
    int64_t b = int64_t(rows.size());
    std::vector<int64_t> ids(static_cast<size_t>(b)), positions(static_cast<size_t>(b)), rowPast(static_cast<size_t>(b));
    std::vector<int32_t> slots(static_cast<size_t>(b));
    for (int64_t r = 0; r < b; ++r) {
      int i = rows[size_t(r)];
      ids[size_t(r)] = last[size_t(i)];
      positions[size_t(r)] = past[size_t(i)];
      rowPast[size_t(r)] = past[size_t(i)];
      slots[size_t(r)] = i;
    }
    logits.assign(static_cast<size_t>(b * info.vocab), 0.0f);
    DeviceCounters before = device ? device->counters() : DeviceCounters();
    if (llvm::Error e = model.run(**session, slots.data(), rowPast.data(), ids.data(),
                                  positions.data(), logits.data(), b, 1))
      return e;
    ++stats.decodeSteps;
    if (device) {
      DeviceCounters step = device->counters() - before;
      stats.decodeDevice = stats.decodeDevice + step;
      if (stats.decodeSteps == 1)
        stats.firstStepAllocations = step.allocations;
      stats.maxStepLinkBytes = std::max(stats.maxStepLinkBytes, step.bytes());
      stats.minStepLinkBytes =
          stats.decodeSteps == 1 ? step.bytes() : std::min(stats.minStepLinkBytes, step.bytes());
    }
    if (onLogits)
      onLogits(logits.data(), b, rows.data());
    for (int64_t r = 0; r < b; ++r) {
      int i = rows[size_t(r)];
      ++past[size_t(i)];
      int32_t token = samplers[size_t(i)].sample(logits.data() + r * info.vocab, info.vocab);
      ++stats.decodeTokens;
      accept(i, token);
    }
  }
  stats.decodeMs = msSince(decodeStart);
  // The next request's shapes are its own: nothing stays held between requests.
  if (device)
    device->releaseKeptStageBuffers();
  std::sort(stats.contextLimited.begin(), stats.contextLimited.end());
  if (paged)
    stats.kvPaging = paged->paging();
  return llvm::Error::success();
}

llvm::Error score(const LoadedModel &model, const std::vector<std::vector<int32_t>> &sequences, int batch,
                  ScoreStats &stats) {
  const ModelInfo &info = model.info();
  if (sequences.empty())
    return fail("nothing to score");
  if (batch < 1)
    return fail("the scoring batch must be at least 1");
  for (size_t i = 0; i < sequences.size(); ++i) {
    const auto &s = sequences[i];
    if (s.size() < 2)
      return fail("sequence " + llvm::Twine(i) + " has " + llvm::Twine(s.size()) +
                  " tokens; scoring needs at least 2");
    if (int64_t(s.size()) > info.maxContext)
      return fail("sequence " + llvm::Twine(i) + " has " + llvm::Twine(s.size()) +
                  " tokens; the context limit is " + llvm::Twine(info.maxContext));
    for (int32_t id : s)
      if (id < 0 || id >= info.vocab)
        return fail("token id " + llvm::Twine(id) + " is outside the vocabulary (0.." +
                    llvm::Twine(info.vocab - 1) + ")");
  }
  auto start = Clock::now();
  std::vector<float> logits;
  for (size_t first = 0; first < sequences.size(); first += size_t(batch)) {
    size_t n = std::min(sequences.size() - first, size_t(batch));
    int64_t longest = 0;
    for (size_t i = 0; i < n; ++i)
      longest = std::max<int64_t>(longest, int64_t(sequences[first + i].size()));
    auto session = model.newSession(int(n), longest);
    if (!session)
      return session.takeError();
    // Position t of every sequence that still has a token after it, all in one step.
    for (int64_t t = 0; t + 1 < longest; ++t) {
      std::vector<int32_t> slots;
      std::vector<int64_t> ids, positions;
      for (size_t i = 0; i < n; ++i)
        if (t + 1 < int64_t(sequences[first + i].size())) {
          slots.push_back(int32_t(i));
          ids.push_back(sequences[first + i][size_t(t)]);
          positions.push_back(t);
        }
      int64_t rows = int64_t(slots.size());
      logits.assign(size_t(rows * info.vocab), 0.0f);
      if (llvm::Error e = model.run(**session, slots.data(), positions.data(), ids.data(), positions.data(),
                                    logits.data(), rows, 1))
        return e;
      for (int64_t r = 0; r < rows; ++r) {
        const float *row = logits.data() + r * info.vocab;
        double peak = *std::max_element(row, row + info.vocab), sum = 0;
        for (int64_t v = 0; v < info.vocab; ++v)
          sum += std::exp(double(row[v]) - peak);
        int32_t next = sequences[first + size_t(slots[size_t(r)])][size_t(t + 1)];
        stats.nll += std::log(sum) + peak - double(row[next]);
        stats.tokens += 1;
      }
    }
  }
  stats.ms = msSince(start);
  return llvm::Error::success();
}

} // namespace helm::rt
