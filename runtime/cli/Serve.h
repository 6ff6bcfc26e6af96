//===- Serve.h - helm-rt serve ------------------------------------------------===//
#ifndef HELM_RUNTIME_CLI_SERVE_H
#define HELM_RUNTIME_CLI_SERVE_H

#include "runtime/cli/Options.h"

namespace helm::rt::cli {

/// Loads the package and serves it until SIGINT/SIGTERM (docs/server.md); the exit status.
/// `startThreads` is helm-rt's (-t, capped to the cores available).
int runServe(const Options &options, int (*startThreads)(const Options &));

} // namespace helm::rt::cli

#endif
