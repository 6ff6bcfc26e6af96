//===- QuantOracle.cpp - helm-quant-oracle: kernels/quant on raw files -------------===//
//
//   helm-quant-oracle quantize <format> <in.f32> <out.blocks>
//   helm-quant-oracle dequantize <format> <in.blocks> <out.f32>
//
// Raw files: little-endian f32 values, or the format's blocks back to back. Blocks never span a
// row boundary, so a whole tensor (rows of a multiple of the block size) is one long row here.
// check_block_formats.py compares what this writes with the gguf package. Exit 0 on success;
// 1 with one line on stderr on a failure; 2 on a usage error.
//===------------------------------------------------------------------------------===//
#include "kernels/quant/BlockFormats.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

namespace q = helm::quant;

bool readFile(const std::string &path, std::vector<uint8_t> &bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return false;
  bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

bool writeFile(const std::string &path, const void *data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char *>(data), std::streamsize(size));
  return bool(out);
}

int fail(const std::string &message) {
  std::fprintf(stderr, "helm-quant-oracle: %s\n", message.c_str());
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 5 || (std::string(argv[1]) != "quantize" && std::string(argv[1]) != "dequantize")) {
    std::fprintf(stderr, "usage: helm-quant-oracle quantize|dequantize <format> <input> <output>\n");
    return 2;
  }
  const std::string mode = argv[1], formatName = argv[2], inputPath = argv[3], outputPath = argv[4];
  const std::optional<q::BlockFormat> format = q::parseBlockFormat(formatName);
  if (!format)
    return fail("unknown block format '" + formatName + "'");
  const q::BlockFormatInfo &info = q::blockFormatInfo(*format);

  std::vector<uint8_t> input;
  if (!readFile(inputPath, input))
    return fail("cannot read " + inputPath);

  if (mode == "quantize") {
    if (input.size() % sizeof(float) != 0)
      return fail(inputPath + ": " + std::to_string(input.size()) + " bytes is not a whole number of f32 values");
    const int64_t n = int64_t(input.size() / sizeof(float));
    std::vector<float> values(size_t(n) + 1); // + 1: data() is never null, even for an empty file
    std::memcpy(values.data(), input.data(), input.size());
    const std::optional<int64_t> bytes = q::rowBytes(*format, n);
    if (!bytes)
      return fail(inputPath + ": " + std::to_string(n) + " values is not a multiple of " + std::string(info.name) +
                  "'s block size " + std::to_string(info.weightsPerBlock));
    std::vector<uint8_t> blocks(size_t(*bytes) + 1);
    if (q::QuantStatus status = q::quantizeRow(*format, values.data(), n, blocks.data()); !status.ok())
      return fail(inputPath + ": " + status.error);
    if (!writeFile(outputPath, blocks.data(), size_t(*bytes)))
      return fail("cannot write " + outputPath);
    return 0;
  }

  if (input.size() % size_t(info.bytesPerBlock) != 0)
    return fail(inputPath + ": " + std::to_string(input.size()) + " bytes is not a whole number of " +
                std::string(info.name) + " blocks (" + std::to_string(info.bytesPerBlock) + " bytes each)");
  const int64_t n = int64_t(input.size()) / info.bytesPerBlock * info.weightsPerBlock;
  input.push_back(0); // data() is never null, even for an empty file
  std::vector<float> values(size_t(n) + 1);
  if (q::QuantStatus status = q::dequantizeRow(*format, input.data(), n, values.data()); !status.ok())
    return fail(inputPath + ": " + status.error);
  if (!writeFile(outputPath, values.data(), size_t(n) * sizeof(float)))
    return fail("cannot write " + outputPath);
  return 0;
}
