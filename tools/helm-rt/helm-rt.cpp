//===- helm-rt.cpp - run a compiled .helmpkg ---------------------------------------===//
//
// The command line is runtime/cli (Run.h): parsing, generation, --info, --check, --perplexity
// and, in the full build, serve.
//
//===----------------------------------------------------------------------===//
#include "runtime/cli/Run.h"
#ifdef HELM_HAVE_SERVER
#include "runtime/cli/Serve.h"
#endif

int main(int argc, char **argv) {
#ifdef HELM_HAVE_SERVER
  return helm::rt::cli::run(argc, argv, &helm::rt::cli::runServe);
#else
  return helm::rt::cli::run(argc, argv, nullptr);
#endif
}
