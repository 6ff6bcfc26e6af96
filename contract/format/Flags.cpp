//===- Flags.cpp - the command-line syntax helmc and helm-rt share ----------------===//
#include "contract/format/Flags.h"

#include "llvm/ADT/STLExtras.h"

namespace helm::cli {

FlagTable &FlagTable::value(std::vector<std::string> names, std::string valueName, FlagSetter set) {
  flags_.push_back({std::move(names), std::move(valueName), std::move(set)});
  return *this;
}

FlagTable &FlagTable::option(std::vector<std::string> names, FlagSetter set) {
  flags_.push_back({std::move(names), std::string(), std::move(set)});
  return *this;
}

FlagTable &FlagTable::option(std::vector<std::string> names, bool &on) {
  return option(std::move(names), [&on](llvm::StringRef, llvm::StringRef) {
    on = true;
    return std::string();
  });
}

FlagTable &FlagTable::request(std::vector<std::string> names, bool &on) {
  option(std::move(names), on);
  flags_.back().endsParsing = true;
  return *this;
}

namespace {
/// A long name given with one dash ("-emit") is the same flag as with two.
bool sameName(llvm::StringRef given, llvm::StringRef name) {
  if (given == name)
    return true;
  return name.starts_with("--") && given.size() > 2 && given[0] == '-' && given[1] != '-' &&
         given.drop_front() == name.drop_front(2);
}
} // namespace

const Flag *FlagTable::find(llvm::StringRef arg) const {
  llvm::StringRef name = arg.split('=').first;
  for (const Flag &flag : flags_)
    if (llvm::any_of(flag.names, [&](const std::string &n) { return sameName(name, n); }))
      return &flag;
  return nullptr;
}

std::string FlagTable::parse(int argc, const char *const *argv, int first,
                             const std::function<std::string(llvm::StringRef)> &positional,
                             const std::function<void(llvm::StringRef)> &seen) const {
  bool flagsEnded = false;
  for (int i = first; i < argc; ++i) {
    llvm::StringRef arg = argv[i];
    if (flagsEnded || arg == "-" || !arg.starts_with("-")) {
      if (std::string error = positional(arg); !error.empty())
        return error;
      continue;
    }
    if (arg == "--") {
      flagsEnded = true;
      continue;
    }
    const Flag *flag = find(arg);
    auto [name, inlineValue] = arg.split('=');
    bool hasInline = arg.contains('=');
    if (!flag)
      return ("unknown option '" + llvm::Twine(name) + "' (see --help)").str();
    if (seen)
      seen(name);
    if (flag->valueName.empty()) {
      if (hasInline)
        return (llvm::Twine(name) + " takes no value").str();
      if (std::string error = flag->set(name, ""); !error.empty())
        return error;
      if (flag->endsParsing)
        return "";
      continue;
    }
    llvm::StringRef value;
    if (hasInline)
      value = inlineValue;
    else if (i + 1 < argc)
      value = argv[++i];
    else
      return (llvm::Twine(name) + " needs a value").str();
    if (std::string error = flag->set(name, value); !error.empty())
      return error;
  }
  return "";
}

FlagSetter textInto(std::string &out) {
  return [&out](llvm::StringRef, llvm::StringRef value) {
    out = value.str();
    return std::string();
  };
}

FlagSetter appendTo(std::vector<std::string> &out) {
  return [&out](llvm::StringRef, llvm::StringRef value) {
    out.push_back(value.str());
    return std::string();
  };
}

} // namespace helm::cli
