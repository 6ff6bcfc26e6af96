//===- Run.cpp - helm-rt's commands: generate, --info, --check, --perplexity, serve ---===//
//
//   helm-rt model.helmpkg -p "Once upon a time" -n 64
//   helm-rt model.helmpkg --prompt-ids 1,2,3 -n 32 --temperature 0 --emit-ids
//   helm-rt model.helmpkg --info
//   helm-rt model.helmpkg --check
//
// Text streams to stdout as tokens come; timings go to stderr (and --stats-json).
//
//===----------------------------------------------------------------------===//
#include "runtime/cli/Run.h"
#include "contract/manifest_schema.h"
#include "kernels/common/ThreadPool.h"
#include "runtime/core/Generator.h"
#include "runtime/core/Model.h"
#include "runtime/core/PackageCheck.h"
#include "contract/format/ByteSize.h"
#include "runtime/tokenizer/Tokenizer.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <climits>
#include <random>
#include <sys/resource.h>
#include <thread>
#include <type_traits>

using namespace llvm;

namespace helm::rt::cli {

LoadOptions loadOptionsOf(const Options &o) {
  LoadOptions load;
  load.emuThrottle = o.emuThrottle;
  load.gpuMemoryBytes = o.gpuMemory;
  load.kvPageTokens = o.kvPage;
  load.kvWatermark = o.kvWatermark;
  load.kvOffload = o.kvOffload;
  load.kvType = kvRowTypeNamed(o.kvType);
  return load;
}

int fail(const Twine &message) {
  errs() << "helm-rt: " << message << "\n";
  return 1;
}

namespace {

Expected<std::vector<int32_t>> parseIds(StringRef text) {
  std::vector<int32_t> ids;
  if (text.trim().empty())
    return createStringError(inconvertibleErrorCode(), "--prompt-ids: empty prompt (no token ids)");
  SmallVector<StringRef> parts;
  text.split(parts, ',', -1, true);
  for (StringRef part : parts) {
    part = part.trim();
    int64_t v;
    if (part.empty() || part.getAsInteger(10, v) || v < INT32_MIN || v > INT32_MAX)
      return createStringError(inconvertibleErrorCode(),
                               "--prompt-ids: '" + part.str() + "' is not a token id");
    ids.push_back(int32_t(v));
  }
  return ids;
}

uint64_t peakRssBytes() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return uint64_t(usage.ru_maxrss) * 1024;
}

void printInfo(const LoadedModel &model, StringRef packagePath, bool listTensors) {
  const ModelInfo &i = model.info();
  outs() << "package:       " << packagePath << " (" << model.package().fileSize() << " bytes, "
         << model.package().sections().size() << " sections)\n";
  outs() << "model:         " << i.architecture << ", " << i.dtype << ", from " << i.source << "\n";
  outs() << "layers:        " << i.kvLayers << " (KV heads " << i.kvHeads << ", head dim "
         << i.headDim << ")\n";
  outs() << "vocabulary:    " << i.vocab << "\n";
  outs() << "context limit: " << i.maxContext << "\n";
  outs() << "KV cache:      "
         << (hostKvType(KvRowType::automatic, i) == helm::kernels::DType::f16
                 ? "f16"
                 : "f32")
         << " rows on the CPU by default (--kv-type)\n";
  outs() << "weights:       " << i.numTensors << " tensors, " << i.weightBytes << " bytes, "
         << formatv("{0:f2}", i.bitsPerWeight()) << " bits per weight\n";
  for (const auto &[dtype, count] : i.weightsByDtype)
    outs() << formatv("  {0,-12} {1} tensors, {2} bytes\n", dtype + ":", count.tensors, count.bytes);
  // Read and verified, every byte of the package is mapped by now: this says whether the kernel
  // gave it 2 MiB pages (docs/package-format.md, "Mapping").
  outs() << formatv("mapping:       {0} of {1} bytes on 2 MiB pages\n", model.package().hugePageBytes(),
                    model.package().fileSize());
  if (listTensors) {
    outs() << formatv("  {0,-5} {1,-6} {2,-16} {3,12} {4,6}  {5}\n", "stage", "dtype", "shape", "bytes", "bits",
                      "tensor (source name)");
    for (const WeightTensorInfo &t : i.tensors) {
      std::string shape;
      for (size_t d = 0; d < t.shape.size(); ++d)
        shape += (d ? "x" : "") + std::to_string(t.shape[d]);
      double bits = t.elements ? 8.0 * double(t.bytes) / double(t.elements) : 0.0;
      outs() << formatv("  {0,-5} {1,-6} {2,-16} {3,12} {4,6:f2}  {5}", t.stage, t.dtype, shape, t.bytes, bits, t.name);
      if (!t.onnxName.empty() && t.onnxName != t.name)
        outs() << " (" << t.onnxName << ")";
      outs() << "\n";
    }
  }
  outs() << "target:        " << i.targetName << " (CPU " << i.targetCpu << ")\n";
  for (const StageInfo &s : model.stages())
    outs() << formatv("stage:         {0} (units {1}..{2}, {3} KV layers, {4} tensors, {5} bytes)\n",
                      helm_stage_side_name(s.onGpu ? HELM_STAGE_GPU : HELM_STAGE_CPU), s.firstUnit, s.lastUnit, s.kvLayers, s.numTensors, s.weightBytes);
  if (model.device())
    outs() << "device:        " << model.device()->describe() << "\n";
  else if (i.gpuDevice != HELM_DEVICE_CPU)
    outs() << formatv("device:        {0} for '{1}': {2} VRAM, {3} reserved, link {4:f1} GB/s + "
                      "{5:f1} us\n",
                      deviceKindName(i.gpuDevice), i.targetName, formatBytes(uint64_t(i.gpuVramBytes)),
                      formatBytes(uint64_t(i.gpuReservedBytes)), i.linkGbs,
                      i.linkLatencyUs);
  if (!i.boundaryDtype.empty())
    outs() << "boundary:      [B, S, " << i.boundaryWidth << "] " << i.boundaryDtype << "\n";
  outs() << "tokenizer:     " << (i.hasTokenizer ? "yes" : "no");
  if (i.hasTokenizer) {
    outs() << " (eos";
    for (int32_t e : i.eosIds)
      outs() << " " << e;
    outs() << ")";
    if (!i.chatTemplate.empty())
      outs() << ", chat template (" << i.chatTemplate.size() << " bytes)";
  }
  outs() << "\n";
  for (const auto &s : model.package().sections())
    outs() << formatv("section        {0,-14} {1,12} bytes at {2}\n", s.name, s.size, s.offset);
}
} // namespace

namespace {
/// Set by SIGINT during generation: every sequence stops at its next token, and helm-rt prints the
/// text so far, the statistics, and exits with 130. The handler resets itself (SA_RESETHAND), so a
/// second Ctrl-C ends the process at once, as it would without one.
volatile std::sig_atomic_t interruptRequested = 0;

extern "C" void requestInterrupt(int) { interruptRequested = 1; }

void installInterruptHandler() {
  struct sigaction action = {};
  action.sa_handler = requestInterrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &action, nullptr);
}

/// Open file descriptors of this process (entries of /proc/self/fd, less the one listing it), for
/// the stats: a count that grows with the tokens generated, or across runs, is a leak.
int64_t openFileDescriptors() {
  std::error_code ec;
  int64_t count = 0;
  for (sys::fs::directory_iterator it("/proc/self/fd", ec), end; it != end && !ec; it.increment(ec))
    ++count;
  return ec ? -1 : count - 1;
}
} // namespace

/// More threads than cores only slows the kernels down (they wait on each other's time slices):
/// warned and capped unless forced.
int startThreads(const Options &o) {
  int cores = helm::kernels::availableCores();
  int nThreads = o.threads > 0 ? o.threads : cores;
  if (o.threads > cores && !o.forceThreads) {
    errs() << "helm-rt: warning: -t " << o.threads << " is more than the " << cores
           << " cores available; running " << cores << " threads (--force-threads runs "
           << o.threads << ")\n";
    nThreads = cores;
  }
  helm::kernels::setThreads(nThreads);
  return helm::kernels::pool().threads();
}

namespace {
/// --perplexity FILE: the text tokenized without special tokens, cut into windows of --ppl-window
/// tokens (the last may be shorter), each scored from its own start, 8 windows per batch.
int runPerplexity(const Options &o, const LoadedModel &model,
                  const helm::tok::Tokenizer *tokenizer, const MemoryBuffer &text) {
  if (!tokenizer)
    return fail("--perplexity reads text, and the package has no tokenizer (recompile with helmc "
                "--tokenizer tokenizer.json)");
  std::vector<int32_t> ids = tokenizer->encode(text.getBuffer(), /*addSpecialTokens=*/false);
  int64_t window = std::min<int64_t>(o.perplexityWindow, model.info().maxContext);
  if (int64_t(ids.size()) < 2)
    return fail(o.perplexityPath + ": " + Twine(ids.size()) + " tokens; perplexity needs at least 2");
  std::vector<std::vector<int32_t>> windows;
  for (size_t at = 0; at + 1 < ids.size(); at += size_t(window))
    windows.emplace_back(ids.begin() + at, ids.begin() + std::min(ids.size(), at + size_t(window)));
  if (windows.size() > 1 && windows.back().size() < 2)
    windows.pop_back();
  // The stats file is opened before the (long) scoring, so a bad path fails at once; a failed
  // scoring leaves no file behind.
  std::unique_ptr<raw_fd_ostream> statsFile;
  if (!o.statsJson.empty()) {
    std::error_code ec;
    statsFile = std::make_unique<raw_fd_ostream>(o.statsJson, ec);
    if (ec)
      return fail(o.statsJson + ": cannot write: " + ec.message());
  }
  int nThreads = startThreads(o);
  ScoreStats stats;
  if (Error e = score(model, windows, /*batch=*/8, stats)) {
    if (statsFile) {
      statsFile.reset();
      sys::fs::remove(o.statsJson);
    }
    return fail(toString(std::move(e)));
  }
  outs() << formatv("perplexity {0:f4} over {1} tokens ({2} windows of up to {3}; mean NLL {4:f6})\n",
                    stats.perplexity(), stats.tokens, windows.size(), window, stats.nll / double(stats.tokens));
  errs() << formatv("helm-rt: load {0:f1} ms | scored {1} tokens in {2:f1} s ({3:f1} tok/s) | {4} threads | "
                    "peak RSS {5:f1} MiB\n",
                    model.loadSeconds() * 1000, stats.tokens, stats.ms / 1000,
                    stats.ms > 0 ? double(stats.tokens) / (stats.ms / 1000) : 0.0, nThreads,
                    double(peakRssBytes()) / (1 << 20));
  if (statsFile) {
    *statsFile << formatv("{0:2}", json::Value(json::Object{{"perplexity", stats.perplexity()},
                                                     {"scored_tokens", stats.tokens},
                                                     {"mean_nll", stats.nll / double(stats.tokens)},
                                                     {"windows", int64_t(windows.size())},
                                                     {"window", window},
                                                     {"threads", nThreads}}))
        << "\n";
  }
  return 0;
}

/// --check: could this machine run the package? Nothing is run, no device created.
int runCheck(const Options &o) {
  std::vector<std::string> reasons = checkPackage(o.packagePath, kvRowTypeNamed(o.kvType));
  for (const std::string &reason : reasons)
    errs() << "helm-rt: " << reason << "\n";
  if (!reasons.empty())
    return 1;
  outs() << "OK: this machine can run " << o.packagePath << "\n";
  return 0;
}

/// A device flag given for a package whose stages all run on the CPU.
int deviceFlagWithoutDevice(const Options &o) {
  return fail((o.emuThrottle ? std::string("--emu-throttle") : o.gpuMemoryFlag) +
              ": the package runs on the CPU only (compile with --target=<gpu> or "
              "--target=emu:<name> for a GPU stage)");
}

/// --info: the package read and verified, its summary printed; no device, no code loaded.
int runInfo(const Options &o) {
  auto inspected = LoadedModel::inspect(o.packagePath);
  if (!inspected)
    return fail(toString(inspected.takeError()));
  if ((o.emuThrottle || o.gpuMemory) && (*inspected)->info().gpuDevice == HELM_DEVICE_CPU)
    return deviceFlagWithoutDevice(o);
  printInfo(**inspected, o.packagePath, o.infoTensors);
  return 0;
}

/// Generation (or --perplexity): the flags checked, the package loaded, the prompts run.
int runGenerate(const Options &o) {
  const std::string &packagePath = o.packagePath;
  auto &prompts = o.prompts;
  auto &promptIds = o.promptIds;
  auto &stops = o.stops;
  int64_t numTokens = o.numTokens;
  int64_t batch = o.batch;
  float temperature = o.temperature, topP = o.topP;
  int topK = o.topK;
  int64_t seed = o.seed;
  bool ignoreEos = o.ignoreEos, emitIds = o.emitIds, quiet = o.quiet;
  const std::string &statsJson = o.statsJson, &logitsOut = o.logitsOut;

  // Flags are checked before the package is mapped and verified (which reads every byte of it).
  {
    if (numTokens < 1)
      return fail("-n must be at least 1 (got " + Twine(numTokens) + ")");
    if (!(temperature >= 0) || topK < 0 || !(topP > 0 && topP <= 1))
      return fail(
          "sampling options out of range: --temperature >= 0, --top-k >= 0, 0 < --top-p <= 1");
  }
  // --perplexity's text is read now too: a missing file is not found after a long load.
  std::unique_ptr<MemoryBuffer> perplexityText;
  if (!o.perplexityPath.empty()) {
    if (!prompts.empty() || !promptIds.empty())
      return fail("--perplexity scores the file's text; give it without -p or --prompt-ids");
    auto text = MemoryBuffer::getFile(o.perplexityPath, /*IsText=*/false, /*RequiresNullTerminator=*/false);
    if (!text)
      return fail(o.perplexityPath + ": cannot read: " + text.getError().message());
    perplexityText = std::move(*text);
  }

  auto loaded = LoadedModel::load(packagePath, loadOptionsOf(o));
  if (loaded && (o.emuThrottle || o.gpuMemory) && !(*loaded)->device())
    return deviceFlagWithoutDevice(o);
  if (!loaded)
    return fail(toString(loaded.takeError()));
  LoadedModel &model = **loaded;

  std::unique_ptr<helm::tok::Tokenizer> tokenizer;
  if (model.info().hasTokenizer) {
    auto t = helm::tok::Tokenizer::fromJson(model.tokenizerJson(), packagePath + ": tokenizer");
    if (!t)
      return fail(toString(t.takeError()));
    tokenizer = std::move(*t);
  }
  if (!o.perplexityPath.empty())
    return runPerplexity(o, model, tokenizer.get(), *perplexityText);
  if (!stops.empty() && !tokenizer)
    return fail("--stop matches text, and the package has no tokenizer to decode it "
                "(recompile with helmc --tokenizer tokenizer.json)");

  GenerateRequest request;
  if (!prompts.empty() && !promptIds.empty())
    return fail("give either -p or --prompt-ids, not both");
  if (!prompts.empty()) {
    if (!tokenizer)
      return fail("the package has no tokenizer, so -p cannot be used; give --prompt-ids or "
                  "recompile with helmc --tokenizer tokenizer.json");
    for (const std::string &p : prompts) {
      if (p.empty())
        return fail("empty prompt");
      std::vector<int32_t> ids = tokenizer->encode(p, /*addSpecialTokens=*/true);
      if (ids.empty())
        return fail("the prompt encodes to no tokens");
      request.prompts.push_back(std::move(ids));
    }
  } else if (!promptIds.empty()) {
    for (const std::string &p : promptIds) {
      auto ids = parseIds(p);
      if (!ids)
        return fail(toString(ids.takeError()));
      request.prompts.push_back(std::move(*ids));
    }
  } else {
    return fail("no prompt: give -p \"text\" or --prompt-ids 1,2,3");
  }
  if (batch > 0 && request.prompts.size() != 1 && size_t(batch) != request.prompts.size())
    return fail("--batch " + Twine(batch) + " but " + Twine(request.prompts.size()) +
                " prompts were given");
  request.maxNewTokens = numTokens;
  // The request is checked, and the batch's KV cache and logits sized against the host RAM,
  // before anything is built per sequence (a --batch of 100000 is refused at once, not after
  // its prefills or when the OOM killer ends it).
  if (Error e = validateRequest(model.info(), request))
    return fail(toString(std::move(e)));
  size_t sequences = batch > 0 ? size_t(batch) : request.prompts.size();
  if (sequences > size_t(INT32_MAX))
    return fail(Twine(sequences) + " prompts are more than " + Twine(INT32_MAX) + " sequences");
  if (Error e = model.checkSessionFits(int32_t(sequences),
                                       sessionTokens(model.info(), request)))
    return fail(toString(std::move(e)));
  if (batch > 0 && request.prompts.size() == 1)
    request.prompts.assign(size_t(batch), request.prompts.front());

  int nThreads = startThreads(o);
  uint64_t usedSeed = seed >= 0 ? uint64_t(seed) : std::random_device{}();
  request.sampling = {temperature, topK, topP, usedSeed};
  if (!ignoreEos)
    request.stopIds = model.info().eosIds;

  size_t n = request.prompts.size();
  std::vector<std::vector<int32_t>> generated(n);
  std::vector<std::string> texts(n);
  std::vector<std::unique_ptr<helm::tok::StreamDecoder>> decoders(n);
  if (tokenizer)
    for (auto &d : decoders)
      d = std::make_unique<helm::tok::StreamDecoder>(*tokenizer, /*skipSpecial=*/true);
  bool stream = tokenizer && n == 1 && !quiet;
  std::string decodeError;
  auto onToken = [&](int seq, int32_t token) {
    generated[size_t(seq)].push_back(token);
    if (!tokenizer)
      return !interruptRequested;
    auto piece = decoders[size_t(seq)]->push(token);
    if (!piece) {
      decodeError = toString(piece.takeError());
      return false;
    }
    texts[size_t(seq)] += *piece;
    if (stream) {
      outs() << *piece;
      outs().flush();
    }
    for (const std::string &s : stops)
      if (!s.empty() && StringRef(texts[size_t(seq)]).ends_with(s))
        return false;
    return !interruptRequested;
  };

  std::unique_ptr<raw_fd_ostream> logitsFile;
  if (!logitsOut.empty()) {
    std::error_code ec;
    logitsFile = std::make_unique<raw_fd_ostream>(logitsOut, ec);
    if (ec)
      return fail(logitsOut + ": cannot write: " + ec.message());
  }
  int64_t vocab = model.info().vocab;
  auto onLogits = [&](const float *logits, int64_t rows, const int *) {
    if (logitsFile)
      logitsFile->write(reinterpret_cast<const char *>(logits), size_t(rows * vocab) * 4);
  };

  std::unique_ptr<raw_fd_ostream> statsFile;
  if (!statsJson.empty()) {
    std::error_code ec;
    statsFile = std::make_unique<raw_fd_ostream>(statsJson, ec);
    if (ec)
      return fail(statsJson + ": cannot write: " + ec.message());
  }

  GenerateStats stats;
  installInterruptHandler();
  if (Error e = generate(model, request, onToken, onLogits, stats)) {
    if (statsFile) {
      statsFile.reset();
      sys::fs::remove(statsJson);
    }
    return fail(toString(std::move(e)));
  }
  if (!decodeError.empty())
    return fail(decodeError);
  if (tokenizer && !quiet) {
    if (stream) {
      outs() << decoders[0]->flush() << "\n";
    } else {
      for (size_t i = 0; i < n; ++i)
        outs() << "[" << i << "] " << texts[i] << decoders[i]->flush() << "\n";
    }
  }
  if (emitIds)
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < generated[i].size(); ++j)
        outs() << (j ? "," : "") << generated[i][j];
      outs() << "\n";
    }
  outs().flush();

  // Sequences cut short by the package's context limit, in one line.
  if (!stats.contextLimited.empty()) {
    const std::vector<int> &cut = stats.contextLimited;
    std::string list;
    for (size_t k = 0; k < cut.size() && k < 8; ++k)
      list += (k ? ", " : "") + std::to_string(cut[k]);
    if (cut.size() > 8)
      list += ", ... (" + std::to_string(cut.size()) + " in all)";
    if (cut.size() == 1)
      errs() << formatv("helm-rt: sequence {0} stopped at the context limit of {1} tokens after "
                        "{2} of the {3} tokens asked for (compile with a larger --max-context)\n",
                        list, model.info().maxContext, generated[size_t(cut[0])].size(),
                        numTokens);
    else
      errs() << formatv("helm-rt: sequences {0} stopped at the context limit of {1} tokens "
                        "before the {2} tokens asked for (compile with a larger --max-context)\n",
                        list, model.info().maxContext, numTokens);
  }

  bool interrupted = interruptRequested;
  if (interrupted)
    errs() << formatv("helm-rt: interrupted: stopped after {0} generated tokens\n", stats.generatedTokens);

  uint64_t rss = peakRssBytes();
  errs() << formatv("helm-rt: load {0:f1} ms | prompt {1} tokens, TTFT {2:f1} ms, prefill {3:f1} "
                    "tok/s | {4} tokens, decode {5:f1} tok/s | {6} threads | peak RSS {7:f1} MiB\n",
                    model.loadSeconds() * 1000, stats.promptTokens, stats.ttftMs,
                    stats.prefillTokS(), stats.generatedTokens, stats.decodeTokS(), nThreads,
                    double(rss) / (1 << 20));
  if (Device *device = model.device())
    errs() << formatv("helm-rt: {0} | load moved {1} bytes | per decode step {2:f0} bytes in {3:f1} "
                      "transfers, {4:f1} allocations, {5:f1} host waits | device peak {6:f1} MiB\n",
                      device->describe(), model.loadTraffic().bytes(), stats.linkBytesPerStep(),
                      stats.linkTransfersPerStep(), stats.allocationsPerStep(),
                      stats.hostSynchronizationsPerStep(), double(device->peakBytesInUse()) / (1 << 20));
  if (stats.kvPageTokens && (stats.kvPaging.evicted || stats.kvPaging.prefetched))
    errs() << formatv("helm-rt: KV pages of {0} tokens: {1} evicted to host, {2} page-layers "
                      "prefetched, at most {3} on the device\n",
                      stats.kvPageTokens, stats.kvPaging.evicted, stats.kvPaging.prefetched,
                      stats.kvPaging.devicePagesPeak);
  if (!statsJson.empty()) {
    json::Object o{{"load_ms", model.loadSeconds() * 1000},
                   {"ttft_ms", stats.ttftMs},
                   {"prefill_tok_s", stats.prefillTokS()},
                   {"decode_tok_s", stats.decodeTokS()},
                   {"prompt_tokens", stats.promptTokens},
                   {"generated_tokens", stats.generatedTokens},
                   {"batch", int64_t(n)},
                   {"threads", nThreads},
                   {"seed", int64_t(usedSeed)},
                   {"peak_rss_bytes", int64_t(rss)},
                   {"package_huge_page_bytes", int64_t(model.package().hugePageBytes())},
                   {"decode_steps", stats.decodeSteps},
                   {"context_limited", json::Array(stats.contextLimited)},
                   {"interrupted", interrupted},
                   {"open_fds", openFileDescriptors()},
                   {"link_bytes_per_step", stats.linkBytesPerStep()},
                   {"link_transfers_per_step", stats.linkTransfersPerStep()}};
    if (Device *device = model.device()) {
      const DeviceCounters &d = stats.decodeDevice;
      o["device"] = device->describe();
      o["device_capacity_bytes"] = int64_t(device->capacity());
      o["device_peak_bytes"] = int64_t(device->peakBytesInUse());
      o["link_load_bytes"] = int64_t(model.loadTraffic().bytes());
      o["link_prefill_bytes"] = int64_t(stats.prefillDevice.bytes());
      o["link_decode_h2d_bytes"] = int64_t(d.hostToDeviceBytes);
      o["link_decode_d2h_bytes"] = int64_t(d.deviceToHostBytes);
      o["link_decode_h2d_transfers"] = int64_t(d.hostToDeviceTransfers);
      o["link_decode_d2h_transfers"] = int64_t(d.deviceToHostTransfers);
      o["link_step_bytes_min"] = int64_t(stats.minStepLinkBytes);
      o["link_step_bytes_max"] = int64_t(stats.maxStepLinkBytes);
      o["device_allocations_first_step"] = int64_t(stats.firstStepAllocations);
      o["device_allocations_per_step"] = stats.allocationsPerStep();
      o["host_syncs_per_step"] = stats.hostSynchronizationsPerStep();
    }
    if (stats.kvPageTokens) {
      o["kv_page_tokens"] = stats.kvPageTokens;
      o["kv_pages_evicted"] = int64_t(stats.kvPaging.evicted);
      o["kv_pages_prefetched"] = int64_t(stats.kvPaging.prefetched);
      o["kv_device_pages_peak"] = stats.kvPaging.devicePagesPeak;
      o["kv_host_pages"] = stats.kvPaging.hostPages;
    }
    *statsFile << formatv("{0:2}", json::Value(std::move(o))) << "\n";
  }
  // 128 + SIGINT, as a shell reports a process ended by Ctrl-C; the output above is complete.
  return interrupted ? 128 + SIGINT : 0;
}
} // namespace

int run(int argc, const char *const *argv, ServeFn serve) {
  Options o;
  std::string argError = parseArgs(argc, argv, o);
  if (argError == "help") {
    outs() << kUsage;
    return 0;
  }
  if (!argError.empty())
    return fail(argError);
  if (o.packagePath.empty())
    return fail(o.serve ? "no package given (usage: helm-rt serve model.helmpkg [--port P]; see --help)"
                        : "no package given (usage: helm-rt model.helmpkg -p \"text\" [-n N]; see --help)");
  if (o.serve) {
    if (!serve)
      return fail("this helm-rt was built without the server (use the helm-rt of a full build)");
    return serve(o, startThreads);
  }
  if (o.info && o.check)
    return fail("give either --info or --check, not both");
  if (o.check)
    return runCheck(o);
  if (o.info)
    return runInfo(o);
  return runGenerate(o);
}

} // namespace helm::rt::cli
