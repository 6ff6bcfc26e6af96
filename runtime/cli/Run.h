//===- Run.h - helm-rt as a library: its commands behind one entry -----------------===//
//
// helm-rt's main is one call of run(). The flags (Options.h) are parsed once; then generation,
// --info, --check, --perplexity or serve (Serve.h) runs. Every failure is one line on stderr and
// a non-zero status.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_RUNTIME_CLI_RUN_H
#define HELM_RUNTIME_CLI_RUN_H

#include "runtime/cli/Options.h"
#include "runtime/core/Model.h"

#include "llvm/ADT/Twine.h"

namespace helm::rt::cli {

/// helm-rt serve's entry (Serve.h's runServe), or nullptr for a helm-rt built without the server.
using ServeFn = int (*)(const Options &options, int (*startThreads)(const Options &));

/// Parses argv and runs the command it names; the process's exit status.
int run(int argc, const char *const *argv, ServeFn serve);

/// What the flags say about loading the package (devices, KV cache), for generation and serve alike.
LoadOptions loadOptionsOf(const Options &o);

/// One line on stderr, "helm-rt: <message>"; returns the failure status, 1.
int fail(const llvm::Twine &message);

/// Starts the kernels' thread pool for -t (capped to the cores available unless --force-threads)
/// and returns its size.
int startThreads(const Options &o);

} // namespace helm::rt::cli

#endif
