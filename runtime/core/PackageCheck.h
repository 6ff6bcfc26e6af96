//===- PackageCheck.h - could this machine run a package? (helm-rt --check) ----------===//
//
// checkPackage reads a package without running any of it: no device is created, no code is loaded
// or executed. The stage code's ABI records are read from the shared objects' dynamic symbol
// tables (ELF), not through dlopen, so a package compiled for CPU features this machine lacks,
// or for a GPU it does not have, can still be checked.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_RUNTIME_CORE_PACKAGECHECK_H
#define HELM_RUNTIME_CORE_PACKAGECHECK_H

#include "contract/helm_contract.h"
#include "runtime/core/Model.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <array>
#include <optional>
#include <string>
#include <vector>

namespace helm::rt {

/// What a stage's shared object exports, read from its ELF dynamic symbol table.
struct StageSymbols {
  bool hasEntry = false; // `entry` is defined
  std::optional<std::array<int64_t, HELM_STAGE_ABI_FIELDS>> abi; // `<entry>_abi`, when defined
};

/// Reads `entry` and `<entry>_abi` from a stage's shared object without loading it. Errors: not
/// an ELF shared object, or one for another architecture than this machine's.
llvm::Expected<StageSymbols> readStageSymbols(llvm::ArrayRef<char> code, llvm::StringRef entry);

/// Every reason this machine cannot run the package at `path`, one line each (the file's name
/// first), in this order: the package cannot be opened or its manifest read (then nothing
/// else is checked); each section whose checksum does not match; CPU features the code needs and
/// this CPU lacks; each stage whose code has no entry point or an ABI record that disagrees with
/// the manifest; a GPU stage's device that is not here (cuda without a GPU); host RAM short of
/// what one sequence at the package's context limit needs, its CPU stage's KV in `kvType`'s rows
/// (what helm-rt --kv-type would run with). Empty: it can run here.
std::vector<std::string> checkPackage(llvm::StringRef path,
                                      KvRowType kvType = KvRowType::automatic);

} // namespace helm::rt

#endif
