//===- Options.h - helmc's command line ---------------------------------------===//
//
// helmc's flags (llvm::cl) and the checks that need neither the file system nor the machine, as a
// library of its own: helmc's main and the CLI fuzz target run the same parser.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_TOOLS_HELMC_OPTIONS_H
#define HELM_TOOLS_HELMC_OPTIONS_H

#include "passes/plan/CostModel.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>

namespace helm::helmc {

enum class Emit { OnnxMlir, Helm, Config, Plan, PlanJson, Package };

struct Options {
  std::string inputPath;
  Emit emit = Emit::Helm;
  bool listTargets = false;
  /// --emit=package (given, or implied by -o *.helmpkg) and whether a plan is made (--emit=plan*, or
  /// a package with --target).
  bool packaging = false, planning = false;
  std::string targetSpec;      // --target, resolved by the caller (resolveTarget)
  PlanOptions plan;            // checked; meaningful when planning
  std::string planSvgPath;
  std::string tokenizerPath;
  /// --no-chat-template: package without the model's chat template (instead of refusing one
  /// outside the Jinja subset runtime/chat renders).
  bool noChatTemplate = false;
  int64_t maxContext = 4096;
  std::string gpuCode = "auto"; // auto, host or kernels
  std::string quantize;         // empty, or --quantize: a block format or the recipe q4_k_m
  bool quiet = false;
  std::string outputPath = "-";
};

/// Hides every option but helmc's from --help (LLVM's own live in the same registry).
void hideUnrelatedOptions();

/// Parses and checks argv. Every flag starts from its default (so the parser can run again in one
/// process). A syntax error llvm::cl reports (unknown flag, bad value) is printed to
/// `parseErrors` and returned as an error with an empty message; a check that fails is one line.
llvm::Expected<Options> parseCommandLine(int argc, const char *const *argv,
                                         llvm::raw_ostream &parseErrors);

/// Whether `arg` names one of helmc's own flags (not LLVM's), with or without its value.
bool isHelmcFlag(llvm::StringRef arg);

} // namespace helm::helmc

#endif
