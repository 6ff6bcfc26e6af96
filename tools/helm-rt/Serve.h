//===- Serve.h - helm-rt serve ------------------------------------------------===//
#ifndef HELM_TOOLS_HELM_RT_SERVE_H
#define HELM_TOOLS_HELM_RT_SERVE_H

#include "tools/helm-rt/Options.h"

namespace helm::rt::cli {

/// Loads the package and serves it until SIGINT/SIGTERM (docs/server.md); the exit status.
/// `startThreads` is helm-rt's (-t, capped to the cores available).
int runServe(const Options &options, int (*startThreads)(const Options &));

} // namespace helm::rt::cli

#endif
