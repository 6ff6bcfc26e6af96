//===- Options.h - helmc's command line ---------------------------------------===//
//
// helmc's flags, one table in the command-line syntax helm-rt shares (contract/format/Flags.h), and
// the checks that need neither the file system nor the machine, as a library of its own: helmc's
// main and the CLI fuzz target run the same parser. The flags become the compile driver's typed
// options (compiler/Driver.h) here, once.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_TOOLS_HELMC_OPTIONS_H
#define HELM_TOOLS_HELMC_OPTIONS_H

#include "compiler/Driver.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace helm::helmc {

/// What helmc writes: the phase it stops after, and how that phase's result is printed.
enum class Emit { OnnxMlir, Helm, Config, Plan, PlanJson, Package };

/// What the command line asks for besides a compilation.
enum class Request { Compile, Help, Version };

struct Options {
  Request request = Request::Compile;
  bool listTargets = false;
  Emit emit = Emit::Helm;
  /// --target as given; the caller resolves it (resolveTarget may profile this machine) into
  /// compile.target when planning().
  std::string targetSpec;
  std::string planSvgPath;
  bool quiet = false;
  /// The compilation, but for its target. compile.outputPath is -o: the package, or where an
  /// earlier phase's text goes.
  CompileOptions compile;

  /// --emit=package (given, or implied by -o *.helmpkg).
  bool packaging() const { return emit == Emit::Package; }
  /// Whether a plan is made: --emit=plan*, or a package with --target.
  bool planning() const {
    return emit == Emit::Plan || emit == Emit::PlanJson || (packaging() && !targetSpec.empty());
  }
  /// The last phase --emit needs.
  CompilePhase stopAfter() const;
};

/// The --help text.
extern const char *const kUsage;

/// Parses and checks argv (each run from the defaults). Every error is one line.
llvm::Expected<Options> parseCommandLine(int argc, const char *const *argv);

/// Whether `arg` names one of helmc's flags, with or without its value.
bool isHelmcFlag(llvm::StringRef arg);

} // namespace helm::helmc

#endif
