//===- Options.h - helm-rt's command line -------------------------------------===//
//
// helm-rt's flags, one table (Options.cpp) in the command-line syntax helmc shares
// (contract/format/Flags.h). The parser is a library of its own so that the CLI fuzz target runs
// exactly what helm-rt runs.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_RUNTIME_CLI_OPTIONS_H
#define HELM_RUNTIME_CLI_OPTIONS_H

#include <cstdint>
#include <string>
#include <vector>

namespace helm::rt::cli {

struct Options {
  std::string packagePath;
  std::vector<std::string> prompts, promptIds, stops;
  int64_t numTokens = 128;
  int64_t batch = 0;
  float temperature = 0.8f;
  int topK = 40;
  float topP = 0.95f;
  int64_t seed = -1;
  int threads = 0;
  bool ignoreEos = false, emitIds = false, info = false, infoTensors = false, check = false, quiet = false,
       emuThrottle = false, forceThreads = false;
  uint64_t gpuMemory = 0;           // --gpu-memory (or its emu name --emu-vram); 0: default
  std::string gpuMemoryFlag;        // which of the two was given, for messages
  int64_t kvPage = 0; // automatic
  double kvWatermark = 0.8;
  bool kvOffload = true;
  std::string kvType = "auto"; // --kv-type auto|f32|f16: the CPU stage's KV cache rows
  std::string statsJson, logitsOut;
  std::string perplexityPath;     // --perplexity FILE: score the text instead of generating
  int64_t perplexityWindow = 512; // --ppl-window: tokens per scored window

  // helm-rt serve (docs/server.md).
  bool serve = false;
  std::string host = "127.0.0.1";
  int port = 8080;
  int parallel = 4;               // KV slots decoded together
  int64_t ctxPerSlot = 0;         // positions per slot; 0: the package's context limit
  int64_t queueLimit = 64;        // requests waiting for a slot before 503
  int64_t prefillChunk = 256;     // prompt tokens per scheduler step
  double timeoutSeconds = 600;    // per request
  double shutdownSeconds = 10;    // SIGINT/SIGTERM: how long running requests may finish
  uint64_t maxBodyBytes = 1 << 20;
  std::string apiKey, apiKeyFile, modelName;
};

/// The --help text.
extern const char *const kUsage;

/// Parses argv into `o`; returns an error message (one line), "" on success, or "help" for --help.
/// Every number is checked against its field's range before it is stored.
std::string parseArgs(int argc, const char *const *argv, Options &o);

} // namespace helm::rt::cli

#endif
