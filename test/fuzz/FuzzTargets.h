// The bodies of the libFuzzer targets, as plain functions, so that the same code runs under
// libFuzzer (helm-*-fuzzer) and over every committed corpus and regression input in ctest
// (helm-fuzz-seed-tests, also built under ASan+UBSan). Each returns normally for any input; a
// broken invariant traps, which libFuzzer reports as a crash and ctest as a failed test.
#pragma once

#include <cstddef>
#include <cstdint>

namespace helm::fuzz {

/// Arbitrary bytes through the ONNX importer and the raise pipeline: a module or a one-line error.
void importerInput(const uint8_t *data, size_t size);

/// Arbitrary bytes through the .helmpkg reader: a package whose views stay in bounds, or a one-line
/// error naming the file. Each input also runs with its checksums recomputed.
void packageInput(const uint8_t *data, size_t size);

/// Arbitrary bytes as a GGUF file: a view whose every value, array element and tensor lies inside
/// the input (each is read), or a one-line error "fuzz.gguf: ...".
void ggufInput(const uint8_t *data, size_t size);

/// Arbitrary bytes as a Hugging Face tokenizer.json: a tokenizer or an error; a tokenizer encodes
/// and decodes a fixed text of mixed scripts without crashing.
void tokenizerInput(const uint8_t *data, size_t size);

/// Arbitrary bytes as a target-profile JSON document (helmc --target=file.json): a profile or an
/// error naming the field; a profile written back as JSON parses to the same document.
void targetProfileInput(const uint8_t *data, size_t size);

/// Arbitrary bytes as helm-rt's command line (arguments separated by NUL bytes), through the parser
/// helm-rt runs: "" (then every number is in its flag's range), "help", or a one-line error.
void helmRtArgsInput(const uint8_t *data, size_t size);

/// Arbitrary bytes as helmc's command line (arguments separated by NUL bytes; flags that are not
/// helmc's own and response files dropped), through the parser helmc runs: options whose checks
/// hold, or an error.
void helmcArgsInput(const uint8_t *data, size_t size);

/// Arbitrary bytes as a chat template (runtime/chat): parsed, then rendered twice with a small fixed
/// conversation under tight limits. A refusal or render error is one line; a rendering is valid
/// UTF-8, within the output limit, and the same both times.
void chatTemplateInput(const uint8_t *data, size_t size);

/// A request to helm-rt serve (runtime/server/OpenAiApi): the first byte picks the endpoint
/// (odd: chat), the rest is the body. A refusal is one line in OpenAI's error JSON; an accepted
/// body's values are in range, and a chat body's messages render through a chat template.
void serverRequestInput(const uint8_t *data, size_t size);

} // namespace helm::fuzz
