//===- Flags.h - the command-line syntax helmc and helm-rt share ------------------===//
//
// Both tools declare their flags in one table each (names, value, help line, what a value does)
// and parse argv with the same rules:
//   --name value, --name=value   a long flag's value (one or two dashes for a long name)
//   -x value                     a short flag's value (-x=value too)
//   --switch                     a flag without a value; --switch=anything is an error
//   --                           what follows is positional, dashes and all
// An argument that is none of the table's flags and starts with '-' (but is not "-") is an unknown
// flag; the others go to the tool's positional handler. Errors are one line. Values are checked by
// the setter the table gives, typically through number() with the flag's range.
//
// A tool's own parser lives with the tool (tools/helmc/Options.cpp, runtime/cli/Options.cpp); this
// is the syntax under both. LLVM's command-line registry is not used: libLLVM, which helm-rt
// links, registers its own flags there (some with names helm-rt needs, such as --stats-json).
//
//===----------------------------------------------------------------------===//
#ifndef HELM_CONTRACT_FORMAT_FLAGS_H
#define HELM_CONTRACT_FORMAT_FLAGS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace helm::cli {

/// Stores a flag's value, or returns why it cannot (one line naming the flag); `flag` is the
/// spelling the user gave. A switch's setter gets an empty value.
using FlagSetter = std::function<std::string(llvm::StringRef flag, llvm::StringRef value)>;

struct Flag {
  std::vector<std::string> names; // "-p", "--prompt": the first is what help shows first
  std::string valueName;          // "TEXT", "N"; empty: a switch
  FlagSetter set;
  bool endsParsing = false;       // --help, --version: what follows is not read
};

class FlagTable {
public:
  /// A flag that takes a value.
  FlagTable &value(std::vector<std::string> names, std::string valueName, FlagSetter set);
  /// A switch: `set` is called with an empty value.
  FlagTable &option(std::vector<std::string> names, FlagSetter set);
  /// A switch that sets `on`.
  FlagTable &option(std::vector<std::string> names, bool &on);
  /// A switch that sets `on` and ends the parse (--help, --version): arguments before it are
  /// parsed (an error among them is still the error), those after it are not read.
  FlagTable &request(std::vector<std::string> names, bool &on);

  /// Parses argv[first, argc). Each argument that is not a flag goes to `positional` (which
  /// returns "" or its error); `seen`, when given, hears each flag as the user spelled it (without
  /// a value) before its setter runs. Returns "" or the first error, one line.
  std::string parse(int argc, const char *const *argv, int first,
                    const std::function<std::string(llvm::StringRef)> &positional,
                    const std::function<void(llvm::StringRef)> &seen = nullptr) const;

  /// The flag one of whose names is `arg`'s name (the part before '='), or null.
  const Flag *find(llvm::StringRef arg) const;

private:
  std::vector<Flag> flags_;
};

/// `value` as a number of `out`'s type, stored in `out`: an integer for integral types (base
/// 10), a finite number for floating types; the error names `flag` ("-n expects an integer, got
/// 'x'", "--top-p expects a finite number, got 'inf'", "-t is out of range, got '99999999999'").
template <typename T> std::string number(llvm::StringRef flag, llvm::StringRef value, T &out) {
  if constexpr (std::is_floating_point_v<T>) {
    double d;
    if (value.getAsDouble(d))
      return (llvm::Twine(flag) + " expects a number, got '" + value + "'").str();
    if (!std::isfinite(d) || std::fabs(d) > double(std::numeric_limits<T>::max()))
      return (llvm::Twine(flag) + " expects a finite number, got '" + value + "'").str();
    out = T(d);
  } else {
    long long i;
    if (value.getAsInteger(10, i))
      return (llvm::Twine(flag) + " expects an integer, got '" + value + "'").str();
    if (i < (long long)std::numeric_limits<T>::min() || i > (long long)std::numeric_limits<T>::max())
      return (llvm::Twine(flag) + " is out of range, got '" + value + "'").str();
    out = T(i);
  }
  return "";
}

/// A setter that parses a number into `out` (number()) and then checks it with `check`, which
/// returns "" or the flag's own range message.
template <typename T>
FlagSetter numberInto(T &out, std::function<std::string(llvm::StringRef flag, llvm::StringRef value)> check = nullptr) {
  return [&out, check](llvm::StringRef flag, llvm::StringRef value) {
    std::string error = number(flag, value, out);
    if (error.empty() && check)
      error = check(flag, value);
    return error;
  };
}

/// A setter that stores the value as it is.
FlagSetter textInto(std::string &out);
/// A setter that appends the value (a repeatable flag).
FlagSetter appendTo(std::vector<std::string> &out);

} // namespace helm::cli

#endif
