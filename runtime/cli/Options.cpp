//===- Options.cpp - helm-rt's command line ----------------------------------===//
#include "runtime/cli/Options.h"

#include "contract/format/ByteSize.h"
#include "contract/format/Flags.h"
#include "contract/format/OneLine.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"

#include <climits>
#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>

using namespace llvm;

namespace helm::rt::cli {

const char *const kUsage = R"(helm-rt: run a model compiled by helmc

usage: helm-rt model.helmpkg (-p TEXT | --prompt-ids 1,2,3)... [options]
       helm-rt model.helmpkg --info
       helm-rt model.helmpkg --check
       helm-rt serve model.helmpkg [--host H] [--port P] [--parallel N] [serve options]

  -p, --prompt TEXT       prompt text (repeat for a batch of prompts; needs a bundled tokenizer)
  --prompt-ids IDS        prompt as comma-separated token ids (repeat for a batch)
  -n N                    tokens to generate per sequence (default 128)
  --batch N               sequences run together; a single prompt is repeated N times. A batch
                          whose KV cache (prompt + -n tokens each, up to the context limit) and
                          logits do not fit the host RAM available (MemAvailable) is refused
                          before any work
  --temperature T         sampling temperature, 0 = greedy (default 0.8)
  --top-k K               keep the K most likely tokens, 0 = all (default 40)
  --top-p P               nucleus threshold, 1 = off (default 0.95)
  --seed S                random seed (default: random, reported in the stats)
  -t, --threads N         threads, at most 1024 (default: the cores available to the process);
                          more than the cores available: a warning, and the cores are used
  --force-threads         run the -t threads even when they are more than the cores available
  --stop TEXT             stop a sequence when its text ends with TEXT (repeatable)
  --ignore-eos            do not stop at end-of-sequence tokens
  --emit-ids              print the generated ids, comma-separated, as the last stdout line(s)
  --info                  print the package's manifest summary and exit (reads and verifies the
                          package only: no device is created and no code loaded, so it works
                          for a package built for another machine or GPU)
  --tensors               with --info: also list every weight tensor (stage, dtype or block
                          format, shape, bytes, bits per weight, source name)
  --check                 could this machine run the package? Verifies every section checksum,
                          the stage code's entry points and ABI records (read from the code, not
                          run), the CPU features, the GPU device, and host RAM for one sequence
                          at the context limit; prints each reason it could not (one line each,
                          exit 1), or "OK: this machine can run FILE" (exit 0)
  --emu-throttle          emulated GPU (packages compiled for --target=emu:...): delay every
                          transfer to the target's link bandwidth and latency
  --gpu-memory SIZE       memory the GPU stage may use (8G, 8GiB, 8192M, 8GB = 8e9): on a CUDA GPU
                          instead of its free memory minus the target's reserve (to share the
                          GPU, or to try a plan on less memory); on the emulated GPU instead of
                          the target's VRAM minus reserve
  --emu-vram SIZE         the same as --gpu-memory (its name for the emulated GPU)
  --kv-page N             positions per page of the GPU stage's KV cache (default 512, halved
                          down to 16 until the device holds two pages)
  --kv-watermark F        share of the device memory left after the weights that KV pages may
                          take before the oldest full page is evicted to host RAM (default 0.8)
  --kv-offload on|off     evict KV pages to host RAM when the device is full (default on);
                          off: a context that outgrows the device is an error
  --kv-type auto|f32|f16  rows of the CPU stage's KV cache; f16 halves the bytes attention
                          reads (auto: the package's choice, f16 for GGUF files and float16
                          models, f32 otherwise; docs/kv-cache.md)
  --stats-json FILE       write ttft_ms, prefill_tok_s, decode_tok_s, peak_rss_bytes,
                          package_huge_page_bytes, link_bytes_per_step, ... as JSON
  --logits-out FILE       write each step's logits (f32 rows, active sequences in order)
  --perplexity FILE       instead of generating: the perplexity of the model on FILE's text
                          (tokenized without special tokens, windows scored from their start)
  --ppl-window N          tokens per window for --perplexity (default 512, at most the context)
  -q, --quiet             do not print generated text
  -h, --help              this help

helm-rt serve: an OpenAI-compatible HTTP server (docs/server.md) with continuous batching
  --host H                address to listen on (default 127.0.0.1: this machine only)
  --port P                TCP port, 0 = any free one (default 8080)
  --parallel N            sequences decoded together, each with its own KV slot (default 4)
  --ctx-per-slot N        positions per slot, prompt and completion (default: the package's
                          context limit)
  --queue N               requests that may wait for a slot; more get 503 (default 64)
  --prefill-chunk N       prompt tokens prefilled per step, so a long prompt delays the
                          running sequences by one chunk per step (default 256)
  --timeout S             seconds a request may take (default 600)
  --max-body BYTES        largest request body, e.g. 1MiB (default); larger: 413
  --api-key KEY           require 'Authorization: Bearer KEY' (all endpoints but /health)
  --api-key-file FILE     the key from a file (first line), so it is not on the command line
  --model-name NAME       the model id /v1/models lists (default: the package's file name)
  --shutdown-timeout S    on SIGINT/SIGTERM, seconds running requests may take to finish
                          before they are cut (default 10)
  -t, --threads, --gpu-memory, --kv-page, --kv-watermark, --kv-offload, --kv-type,
  --emu-throttle as above

Ctrl-C during generation stops every sequence at its next token: the text so far and the
statistics are printed and helm-rt exits with status 130. A second Ctrl-C ends it at once.
)";

namespace {
using helm::cli::FlagTable;
using helm::cli::numberInto;

/// Flags that go only with generation (and --info, --check), and only with serve: the other
/// command refuses them by name.
constexpr llvm::StringLiteral kGenerateOnly[] = {"-p", "--prompt", "--prompt-ids", "--stop", "-n", "--batch",
                                                 "--temperature", "--top-k", "--top-p", "--seed", "--stats-json",
                                                 "--logits-out", "--perplexity", "--ppl-window", "--ignore-eos",
                                                 "--emit-ids", "--info", "--tensors", "--check", "-q", "--quiet"};
constexpr llvm::StringLiteral kServeOnly[] = {"--host", "--port", "--parallel", "--ctx-per-slot", "--queue",
                                              "--prefill-chunk", "--timeout", "--max-body", "--api-key",
                                              "--api-key-file", "--model-name", "--shutdown-timeout"};

/// A range check's message when `ok` is false.
std::string unless(bool ok, const std::string &message) { return ok ? std::string() : message; }

/// helm-rt's flags, each storing into `o`.
FlagTable flagTable(Options &o) {
  FlagTable t;
  auto nonEmpty = [](std::string &out, const char *message) {
    return [&out, message](StringRef flag, StringRef value) {
      out = value.str();
      return unless(!out.empty(), message ? std::string(message) : (flag + " needs a value").str());
    };
  };
  // serve.
  t.value({"--host"}, "H", nonEmpty(o.host, "--host needs an address"));
  t.value({"--port"}, "P", numberInto(o.port, [&o](StringRef, StringRef) {
            return unless(o.port >= 0 && o.port <= 65535, "--port must be 0 .. 65535, got " + std::to_string(o.port));
          }));
  t.value({"--parallel"}, "N", numberInto(o.parallel, [&o](StringRef, StringRef) {
            return unless(o.parallel >= 1 && o.parallel <= 1024,
                          "--parallel must be 1 .. 1024, got " + std::to_string(o.parallel));
          }));
  t.value({"--ctx-per-slot"}, "N", numberInto(o.ctxPerSlot, [&o](StringRef, StringRef) {
            return unless(o.ctxPerSlot >= 2, "--ctx-per-slot must be at least 2, got " + std::to_string(o.ctxPerSlot));
          }));
  t.value({"--queue"}, "N", numberInto(o.queueLimit, [&o](StringRef, StringRef) {
            return unless(o.queueLimit >= 0 && o.queueLimit <= 4096,
                          "--queue must be 0 .. 4096, got " + std::to_string(o.queueLimit));
          }));
  t.value({"--prefill-chunk"}, "N", numberInto(o.prefillChunk, [&o](StringRef, StringRef) {
            return unless(o.prefillChunk >= 1 && o.prefillChunk <= (1 << 20),
                          "--prefill-chunk must be 1 .. 1048576, got " + std::to_string(o.prefillChunk));
          }));
  auto seconds = [](double &out) {
    return numberInto(out, [&out](StringRef flag, StringRef value) {
      return unless(out > 0 && out <= 86400 * 7, (flag + " must be in (0, 604800] seconds, got '" + value + "'").str());
    });
  };
  t.value({"--timeout"}, "S", seconds(o.timeoutSeconds));
  t.value({"--shutdown-timeout"}, "S", seconds(o.shutdownSeconds));
  t.value({"--max-body"}, "BYTES", [&o](StringRef, StringRef value) {
    std::optional<uint64_t> bytes = helm::parseByteSize(value);
    if (!bytes || *bytes < 1024 || *bytes > (uint64_t(1) << 30))
      return "--max-body expects a size from 1KiB to 1GiB such as 1MiB, got '" + value.str() + "'";
    o.maxBodyBytes = *bytes;
    return std::string();
  });
  t.value({"--api-key"}, "KEY", nonEmpty(o.apiKey, nullptr));
  t.value({"--api-key-file"}, "FILE", nonEmpty(o.apiKeyFile, nullptr));
  t.value({"--model-name"}, "NAME", nonEmpty(o.modelName, nullptr));
  // Generation.
  t.value({"-p", "--prompt"}, "TEXT", helm::cli::appendTo(o.prompts));
  t.value({"--prompt-ids"}, "IDS", helm::cli::appendTo(o.promptIds));
  t.value({"--stop"}, "TEXT", helm::cli::appendTo(o.stops));
  t.value({"-n"}, "N", numberInto(o.numTokens));
  t.value({"--batch"}, "N", numberInto(o.batch, [&o](StringRef, StringRef) {
            if (o.batch < 1)
              return std::string("--batch must be >= 1");
            return unless(o.batch <= INT32_MAX, "--batch " + std::to_string(o.batch) + " is more than " +
                                                    std::to_string(INT32_MAX) + " sequences");
          }));
  t.value({"--temperature"}, "T", numberInto(o.temperature));
  t.value({"--top-k"}, "K", numberInto(o.topK));
  t.value({"--top-p"}, "P", numberInto(o.topP));
  t.value({"--seed"}, "S", numberInto(o.seed, [&o](StringRef, StringRef) {
            return unless(o.seed >= 0, "--seed must be >= 0");
          }));
  t.value({"-t", "--threads"}, "N", numberInto(o.threads, [&o](StringRef, StringRef) {
            if (o.threads < 1)
              return std::string("-t must be >= 1");
            return unless(o.threads <= 1024,
                          "-t " + std::to_string(o.threads) + " is more than the 1024 threads helm-rt runs");
          }));
  t.value({"--stats-json"}, "FILE", helm::cli::textInto(o.statsJson));
  t.value({"--logits-out"}, "FILE", helm::cli::textInto(o.logitsOut));
  t.value({"--perplexity"}, "FILE", nonEmpty(o.perplexityPath, "--perplexity needs a text file"));
  t.value({"--ppl-window"}, "N", numberInto(o.perplexityWindow, [&o](StringRef, StringRef) {
            return unless(o.perplexityWindow >= 2, "--ppl-window must be >= 2");
          }));
  t.option({"--ignore-eos"}, o.ignoreEos);
  t.option({"--emit-ids"}, o.emitIds);
  t.option({"--info"}, o.info);
  t.option({"--tensors"}, o.infoTensors);
  t.option({"--check"}, o.check);
  t.option({"-q", "--quiet"}, o.quiet);
  // Devices and the KV cache (both commands).
  t.option({"--force-threads"}, o.forceThreads);
  t.option({"--emu-throttle"}, o.emuThrottle);
  t.value({"--gpu-memory", "--emu-vram"}, "SIZE", [&o](StringRef flag, StringRef value) {
    std::optional<uint64_t> bytes = helm::parseByteSize(value);
    if (!bytes || *bytes == 0)
      return flag.str() + " expects a positive size such as 8G or 512MiB, got '" + value.str() + "'";
    o.gpuMemory = *bytes;
    o.gpuMemoryFlag = flag.str();
    return std::string();
  });
  t.value({"--kv-page"}, "N", numberInto(o.kvPage, [&o](StringRef, StringRef) {
            return unless(o.kvPage >= 1 && o.kvPage <= (1 << 20),
                          "--kv-page must be 1 .. 1048576 tokens, got " + std::to_string(o.kvPage));
          }));
  t.value({"--kv-watermark"}, "F", numberInto(o.kvWatermark, [&o](StringRef, StringRef value) {
            return unless(o.kvWatermark > 0 && o.kvWatermark <= 1,
                          "--kv-watermark must be in (0, 1], got '" + value.str() + "'");
          }));
  t.value({"--kv-offload"}, "on|off", [&o](StringRef, StringRef value) {
    if (value != "on" && value != "off")
      return "--kv-offload must be on or off, got '" + value.str() + "'";
    o.kvOffload = value == "on";
    return std::string();
  });
  t.value({"--kv-type"}, "auto|f32|f16", [&o](StringRef, StringRef value) {
    if (value != "auto" && value != "f32" && value != "f16")
      return "--kv-type must be auto, f32 or f16, got '" + value.str() + "'";
    o.kvType = value.str();
    return std::string();
  });
  return t;
}

std::string parseArgsUnescaped(int argc, const char *const *argv, Options &o) {
  int first = 1;
  if (argc > 1 && StringRef(argv[1]) == "serve") {
    o.serve = true;
    first = 2;
  }
  // The first flag given that goes only with generation, and the first that goes only with serve.
  std::string generateOnlyGiven, serveOnlyGiven;
  auto seen = [&](StringRef flag) {
    if (generateOnlyGiven.empty() && llvm::is_contained(kGenerateOnly, flag))
      generateOnlyGiven = flag.str();
    if (serveOnlyGiven.empty() && llvm::is_contained(kServeOnly, flag))
      serveOnlyGiven = flag.str();
  };
  auto package = [&o](StringRef arg) {
    if (!o.packagePath.empty())
      return ("unexpected argument '" + arg + "' (one package per run)").str();
    o.packagePath = arg.str();
    return std::string();
  };
  bool help = false;
  FlagTable table = flagTable(o);
  table.request({"-h", "--help"}, help);
  if (std::string error = table.parse(argc, argv, first, package, seen); !error.empty())
    return error;
  if (help)
    return "help";
  if (o.infoTensors && !o.info)
    return "--tensors goes with --info";
  if (o.serve && !generateOnlyGiven.empty())
    return generateOnlyGiven +
           " does not apply to helm-rt serve (clients send prompts and sampling per request)";
  if (!o.serve && !serveOnlyGiven.empty())
    return serveOnlyGiven + " goes with helm-rt serve (helm-rt serve model.helmpkg " +
           serveOnlyGiven + " ...)";
  if (!o.apiKey.empty() && !o.apiKeyFile.empty())
    return "give either --api-key or --api-key-file, not both";
  return "";
}

} // namespace

std::string parseArgs(int argc, const char *const *argv, Options &o) {
  // Messages quote the flags and values the user gave; a control character in one (a newline in a
  // -t value, say) must not break the message's single line.
  return oneLine(parseArgsUnescaped(argc, argv, o));
}

} // namespace helm::rt::cli
