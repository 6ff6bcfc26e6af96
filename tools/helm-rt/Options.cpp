//===- Options.cpp - helm-rt's command line ----------------------------------===//
#include "tools/helm-rt/Options.h"

#include "runtime/support/ByteSize.h"
#include "runtime/support/OneLine.h"

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
  --gpu-memory SIZE       memory the GPU stage may use (bytes, or with KiB/MiB/GiB): on a CUDA GPU
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
std::string parseArgsUnescaped(int argc, const char *const *argv, Options &o) {
  // A number must fit the field it goes to: converting an out-of-range double to a float is
  // undefined behaviour, and an integer wider than its field would wrap to another value.
  auto number = [](StringRef flag, StringRef v, auto &out) -> std::string {
    using T = std::decay_t<decltype(out)>;
    if constexpr (std::is_floating_point_v<T>) {
      double d;
      if (v.getAsDouble(d))
        return (flag + " expects a number, got '" + v + "'").str();
      if (!std::isfinite(d) || std::fabs(d) > double(std::numeric_limits<T>::max()))
        return (flag + " expects a finite number, got '" + v + "'").str();
      out = T(d);
    } else {
      long long i;
      if (v.getAsInteger(10, i))
        return (flag + " expects an integer, got '" + v + "'").str();
      if (i < (long long)std::numeric_limits<T>::min() || i > (long long)std::numeric_limits<T>::max())
        return (flag + " is out of range, got '" + v + "'").str();
      out = T(i);
    }
    return "";
  };
  // The first flag given that goes only with serve, and the first that never does.
  std::string generateOnlyGiven, serveOnlyGiven;
  for (int i = 1; i < argc; ++i) {
    StringRef a = argv[i];
    std::string inlineValue;
    bool hasInline = false;
    if (a.starts_with("--") && a.contains('=')) {
      auto [flag, value] = a.split('=');
      a = flag;
      inlineValue = value.str();
      hasInline = true;
    }
    auto value = [&](std::string &out) -> std::string {
      if (hasInline) {
        out = inlineValue;
        return "";
      }
      if (i + 1 >= argc)
        return (a + " needs a value").str();
      out = argv[++i];
      return "";
    };
    std::string v, err;
    if (a == "-h" || a == "--help")
      return "help";
    if (i == 1 && a == "serve") {
      o.serve = true;
      continue;
    }
    static const char *const generateOnly[] = {"-p", "--prompt", "--prompt-ids", "--stop", "-n", "--batch",
                                               "--temperature", "--top-k", "--top-p", "--seed",
                                               "--stats-json", "--logits-out", "--perplexity",
                                               "--ppl-window", "--ignore-eos", "--emit-ids", "--info",
                                               "--tensors", "--check", "-q", "--quiet"};
    static const char *const serveOnly[] = {"--host", "--port", "--parallel", "--ctx-per-slot", "--queue",
                                            "--prefill-chunk", "--timeout", "--max-body", "--api-key",
                                            "--api-key-file", "--model-name", "--shutdown-timeout"};
    for (const char *flag : generateOnly)
      if (a == flag && generateOnlyGiven.empty())
        generateOnlyGiven = a.str();
    for (const char *flag : serveOnly)
      if (a == flag && serveOnlyGiven.empty())
        serveOnlyGiven = a.str();
    if (a == "--host") {
      if (!(err = value(o.host)).empty()) return err;
      if (o.host.empty()) return "--host needs an address";
      continue;
    }
    if (a == "--port") {
      if (!(err = value(v)).empty() || !(err = number(a, v, o.port)).empty()) return err;
      if (o.port < 0 || o.port > 65535) return "--port must be 0 .. 65535, got " + std::to_string(o.port);
      continue;
    }
    if (a == "--parallel") {
      if (!(err = value(v)).empty() || !(err = number(a, v, o.parallel)).empty()) return err;
      if (o.parallel < 1 || o.parallel > 1024) return "--parallel must be 1 .. 1024, got " + std::to_string(o.parallel);
      continue;
    }
    if (a == "--ctx-per-slot") {
      if (!(err = value(v)).empty() || !(err = number(a, v, o.ctxPerSlot)).empty()) return err;
      if (o.ctxPerSlot < 2) return "--ctx-per-slot must be at least 2, got " + std::to_string(o.ctxPerSlot);
      continue;
    }
    if (a == "--queue") {
      if (!(err = value(v)).empty() || !(err = number(a, v, o.queueLimit)).empty()) return err;
      if (o.queueLimit < 0 || o.queueLimit > 4096) return "--queue must be 0 .. 4096, got " + std::to_string(o.queueLimit);
      continue;
    }
    if (a == "--prefill-chunk") {
      if (!(err = value(v)).empty() || !(err = number(a, v, o.prefillChunk)).empty()) return err;
      if (o.prefillChunk < 1 || o.prefillChunk > (1 << 20))
        return "--prefill-chunk must be 1 .. 1048576, got " + std::to_string(o.prefillChunk);
      continue;
    }
    if (a == "--timeout" || a == "--shutdown-timeout") {
      double &out = a == "--timeout" ? o.timeoutSeconds : o.shutdownSeconds;
      if (!(err = value(v)).empty() || !(err = number(a, v, out)).empty()) return err;
      if (!(out > 0 && out <= 86400 * 7)) return (a + " must be in (0, 604800] seconds, got '" + v + "'").str();
      continue;
    }
    if (a == "--max-body") {
      if (!(err = value(v)).empty()) return err;
      std::optional<uint64_t> bytes = helm::parseByteSize(v);
      if (!bytes || *bytes < 1024 || *bytes > (uint64_t(1) << 30))
        return "--max-body expects a size from 1KiB to 1GiB such as 1MiB, got '" + v + "'";
      o.maxBodyBytes = *bytes;
      continue;
    }
    if (a == "--api-key" || a == "--api-key-file" || a == "--model-name") {
      std::string &out = a == "--api-key" ? o.apiKey : a == "--api-key-file" ? o.apiKeyFile : o.modelName;
      if (!(err = value(out)).empty()) return err;
      if (out.empty()) return (a + " needs a value").str();
      continue;
    }
    if (a == "-p" || a == "--prompt") {
      if (!(err = value(v)).empty()) return err;
      o.prompts.push_back(v);
    } else if (a == "--prompt-ids") {
      if (!(err = value(v)).empty()) return err;
      o.promptIds.push_back(v);
    } else if (a == "--stop") {
      if (!(err = value(v)).empty()) return err;
      o.stops.push_back(v);
    } else if (a == "-n") {
      if (!(err = value(v)).empty() || !(err = number(a, v, o.numTokens)).empty()) return err;
    } else if (a == "--batch") {
      if (!(err = value(v)).empty() || !(err = number(a, v, o.batch)).empty()) return err;
      if (o.batch < 1) return "--batch must be >= 1";
      if (o.batch > INT32_MAX) return "--batch " + std::to_string(o.batch) + " is more than " +
                                      std::to_string(INT32_MAX) + " sequences";
    } else if (a == "--temperature") {
      if (!(err = value(v)).empty() || !(err = number(a, v, o.temperature)).empty()) return err;
    } else if (a == "--top-k") {
      if (!(err = value(v)).empty() || !(err = number(a, v, o.topK)).empty()) return err;
    } else if (a == "--top-p") {
      if (!(err = value(v)).empty() || !(err = number(a, v, o.topP)).empty()) return err;
    } else if (a == "--seed") {
      if (!(err = value(v)).empty() || !(err = number(a, v, o.seed)).empty()) return err;
      if (o.seed < 0) return "--seed must be >= 0";
    } else if (a == "-t" || a == "--threads") {
      if (!(err = value(v)).empty() || !(err = number(a, v, o.threads)).empty()) return err;
      if (o.threads < 1) return "-t must be >= 1";
      if (o.threads > 1024) return "-t " + std::to_string(o.threads) + " is more than the 1024 threads helm-rt runs";
    } else if (a == "--stats-json") {
      if (!(err = value(o.statsJson)).empty()) return err;
    } else if (a == "--logits-out") {
      if (!(err = value(o.logitsOut)).empty()) return err;
    } else if (a == "--perplexity") {
      if (!(err = value(o.perplexityPath)).empty()) return err;
      if (o.perplexityPath.empty()) return "--perplexity needs a text file";
    } else if (a == "--ppl-window") {
      if (!(err = value(v)).empty() || !(err = number(a, v, o.perplexityWindow)).empty()) return err;
      if (o.perplexityWindow < 2) return "--ppl-window must be >= 2";
    } else if (a == "--ignore-eos") {
      o.ignoreEos = true;
    } else if (a == "--emit-ids") {
      o.emitIds = true;
    } else if (a == "--info") {
      o.info = true;
    } else if (a == "--tensors") {
      o.infoTensors = true;
    } else if (a == "--check") {
      o.check = true;
    } else if (a == "--force-threads") {
      o.forceThreads = true;
    } else if (a == "--emu-throttle") {
      o.emuThrottle = true;
    } else if (a == "--gpu-memory" || a == "--emu-vram") {
      if (!(err = value(v)).empty()) return err;
      std::optional<uint64_t> bytes = helm::parseByteSize(v);
      if (!bytes || *bytes == 0)
        return a.str() + " expects a positive size such as 512MiB, got '" + v + "'";
      o.gpuMemory = *bytes;
      o.gpuMemoryFlag = a.str();
    } else if (a == "--kv-page") {
      if (!(err = value(v)).empty() || !(err = number(a, v, o.kvPage)).empty()) return err;
      if (o.kvPage < 1 || o.kvPage > (1 << 20))
        return "--kv-page must be 1 .. 1048576 tokens, got " + std::to_string(o.kvPage);
    } else if (a == "--kv-watermark") {
      if (!(err = value(v)).empty() || !(err = number(a, v, o.kvWatermark)).empty()) return err;
      if (!(o.kvWatermark > 0 && o.kvWatermark <= 1))
        return "--kv-watermark must be in (0, 1], got '" + v + "'";
    } else if (a == "--kv-offload") {
      if (!(err = value(v)).empty()) return err;
      if (v != "on" && v != "off")
        return "--kv-offload must be on or off, got '" + v + "'";
      o.kvOffload = v == "on";
    } else if (a == "--kv-type") {
      if (!(err = value(v)).empty()) return err;
      if (v != "auto" && v != "f32" && v != "f16")
        return "--kv-type must be auto, f32 or f16, got '" + v + "'";
      o.kvType = v;
    } else if (a == "-q" || a == "--quiet") {
      o.quiet = true;
    } else if (a.starts_with("-") && a != "-") {
      return ("unknown option '" + a + "' (see --help)").str();
    } else if (o.packagePath.empty()) {
      o.packagePath = a.str();
    } else {
      return ("unexpected argument '" + a + "' (one package per run)").str();
    }
  }
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
