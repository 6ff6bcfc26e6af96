//===- PythonText.h - Python's str semantics on UTF-8 text -------------------------===//
//
// Chat templates are Python code in disguise: `len`, slicing, `strip()`, `split()`, `title()` and
// the repr jinja2 prints for a list all count and classify code points, not bytes. The engine keeps
// strings as UTF-8 (validated where they enter: the template source and the variables), and these
// helpers give them Python's meaning. Case mapping covers the scripts with simple one-to-one case
// pairs (ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic, fullwidth Latin) plus ß -> SS; other
// scripts are left as they are (docs/chat-templates.md).
//
//===----------------------------------------------------------------------------===//
#ifndef HELM_RUNTIME_CHAT_PYTHONTEXT_H
#define HELM_RUNTIME_CHAT_PYTHONTEXT_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace helm::chat::py {

/// Whether `text` is well-formed UTF-8 without surrogates (what a Python str can be encoded as).
bool isValidUtf8(llvm::StringRef text);

/// The code point at byte `pos` of valid UTF-8 text; advances `pos` past it.
char32_t decodeAt(llvm::StringRef text, size_t &pos);
void appendUtf8(std::string &out, char32_t c);
std::vector<char32_t> codePoints(llvm::StringRef text);
std::string fromCodePoints(const std::vector<char32_t> &points);
/// len(str): the number of code points.
size_t length(llvm::StringRef text);
bool isAscii(llvm::StringRef text);

/// Substring search in time linear in the text whatever the needle (glibc's two-way memmem for
/// needles longer than LLVM's Boyer-Moore-Horspool table takes; a template may search a long text
/// for a long needle in a loop). npos when absent.
size_t find(llvm::StringRef text, llvm::StringRef needle, size_t from = 0);
size_t rfind(llvm::StringRef text, llvm::StringRef needle);
size_t count(llvm::StringRef text, llvm::StringRef needle);

/// str.isspace() for one code point (also what `\s` matches in Python's re).
bool isSpace(char32_t c);

/// str.strip / lstrip / rstrip: with no `chars`, Unicode whitespace.
std::string strip(llvm::StringRef text, std::optional<llvm::StringRef> chars, bool left, bool right);

/// str.split / str.rsplit (sep nullopt: runs of whitespace; maxSplit < 0: no limit). The caller
/// rejects an empty separator, as Python does.
std::vector<std::string> split(llvm::StringRef text, std::optional<llvm::StringRef> sep, int64_t maxSplit);
std::vector<std::string> rsplit(llvm::StringRef text, std::optional<llvm::StringRef> sep, int64_t maxSplit);

/// str.replace(old, new, count) (count < 0: all; an empty `old` inserts between code points).
std::string replace(llvm::StringRef text, llvm::StringRef old, llvm::StringRef replacement, int64_t count);

/// str.upper / lower / title / capitalize / swapcase.
std::string upper(llvm::StringRef text);
std::string lower(llvm::StringRef text);
std::string title(llvm::StringRef text);
std::string capitalize(llvm::StringRef text);
bool isUpperChar(char32_t c);
bool isLowerChar(char32_t c);

/// repr(str): quotes and escapes as CPython does (non-printable code points escaped; "printable"
/// is approximated for code points outside ASCII, see the .cpp).
std::string repr(llvm::StringRef text);

/// The string literal json.dumps writes (ensure_ascii false: only '"', '\\' and controls escaped).
void appendJsonString(std::string &out, llvm::StringRef text, bool ensureAscii);

/// repr(float) / str(float): the shortest text that reads back, in CPython's layout ("1.0",
/// "1e+16", "1.5e-05", "inf", "nan").
std::string formatFloat(double value);

/// A code-point index range [start, stop) with step, clamped as Python's slice.indices() does.
struct SliceBounds {
  int64_t start, stop, step, count;
  /// The i-th index (i < count), computed without an intermediate that could overflow.
  size_t at(int64_t i) const { return size_t(__int128(start) + __int128(i) * step); }
};
SliceBounds sliceIndices(int64_t length, std::optional<int64_t> start, std::optional<int64_t> stop,
                         int64_t step);

} // namespace helm::chat::py

#endif
