//===- Options.cpp - helmc's command line -------------------------------------===//
#include "tools/helmc/Options.h"

#include "runtime/support/ByteSize.h"
#include "runtime/support/OneLine.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CommandLine.h"

using namespace llvm;

namespace helm::helmc {

namespace {
cl::OptionCategory &category() {
  static cl::OptionCategory helmcCategory("helmc options");
  return helmcCategory;
}

cl::opt<std::string> inputPath(cl::Positional, cl::desc("<model.onnx or model.gguf>"), cl::cat(category()));
cl::opt<Emit> emit("emit", cl::desc("What to produce"), cl::init(Emit::Helm),
                   cl::values(clEnumValN(Emit::OnnxMlir, "onnx-mlir",
                                         "the imported ONNX graph: one generic helm.onnx op per node"),
                              clEnumValN(Emit::Helm, "helm",
                                         "HELM dialect: block-level ops grouped into partition units"),
                              clEnumValN(Emit::Config, "config",
                                         "JSON model configuration recovered from the graph"),
                              clEnumValN(Emit::Plan, "plan",
                                         "table of every CPU/GPU split (needs --target)"),
                              clEnumValN(Emit::PlanJson, "plan-json",
                                         "the partition plan as JSON (needs --target)"),
                              clEnumValN(Emit::Package, "package",
                                         "a runnable .helmpkg (default when -o ends in .helmpkg)")),
                   cl::cat(category()));
cl::opt<std::string> targetSpec("target",
                                cl::desc("Machine to plan for: a catalogue name (--list-targets), "
                                         "emu:<name>, host (measured now) or a profile .json"),
                                cl::value_desc("name"), cl::cat(category()));
cl::opt<bool> listTargets("list-targets", cl::desc("Print the built-in target catalogue and exit"),
                          cl::cat(category()));
cl::opt<std::string> planSvgPath("plan-svg", cl::desc("Also write the T_plan-vs-k chart as SVG"),
                                 cl::value_desc("file"), cl::cat(category()));
cl::opt<std::string> objective("objective", cl::desc("Plan for decode (default) or prefill"),
                               cl::init("decode"), cl::cat(category()));
cl::opt<int64_t> batch("batch", cl::desc("Sequences decoded together"), cl::init(1),
                       cl::cat(category()));
cl::opt<int64_t> context("context", cl::desc("KV-cache length the decode step is costed at"),
                         cl::init(4096), cl::cat(category()));
cl::opt<int64_t> promptLen("prompt-len", cl::desc("Prompt length for the prefill objective"),
                           cl::init(128), cl::cat(category()));
cl::opt<std::string> kvOffload("kv-offload",
                               cl::desc("on: KV pages may spill to host RAM (default); off: the "
                                        "GPU must hold its blocks' KV for --context x --batch"),
                               cl::init("on"), cl::cat(category()));
cl::opt<std::string> vramReserve("vram-reserve",
                                 cl::desc("VRAM kept free, bytes or with a KiB/MiB/GiB suffix "
                                          "(default: the target's)"),
                                 cl::cat(category()));
cl::opt<int64_t> forceSplit("force-split", cl::desc("Put units [0, k) on the CPU instead of the "
                                                    "cheapest split"),
                            cl::init(-1), cl::cat(category()));
cl::opt<std::string> tokenizerPath("tokenizer",
                                   cl::desc("Hugging Face tokenizer.json to bundle into the package"),
                                   cl::value_desc("file"), cl::cat(category()));
cl::opt<bool> noChatTemplate(
    "no-chat-template",
    cl::desc("Package without the model's chat template (GGUF tokenizer.chat_template; for ONNX, "
             "chat_template.jinja or tokenizer_config.json next to --tokenizer or the model). A "
             "template outside the supported Jinja subset is refused otherwise (docs/chat-templates.md)"),
    cl::cat(category()));
cl::opt<int64_t> maxContext("max-context",
                            cl::desc("Longest sequence (prompt + generated) the package accepts "
                                     "(default 4096)"),
                            cl::init(4096), cl::cat(category()));
cl::opt<std::string> gpuCode(
    "gpu-code",
    cl::desc("Form of the GPU stage's code: auto (default: kernels for a CUDA GPU, host for emu), "
             "host (compiled to run on the host: emu only) or kernels (host code launching the "
             "device's kernels, what a CUDA GPU runs; emu runs it with host kernels)"),
    cl::init("auto"), cl::cat(category()));
cl::opt<std::string> quantize(
    "quantize",
    cl::desc("Store the linear, LM-head and embedding weights quantized: none (default), one GGUF "
             "block format (q8_0, q4_0, q4_1, q4_k, q5_k, q6_k) or the mixed recipe q4_k_m "
             "(see docs/quantization.md)"),
    cl::value_desc("format"), cl::init("none"), cl::cat(category()));
cl::opt<bool> quietProgress("q", cl::desc("No progress messages"), cl::cat(category()));
cl::opt<std::string> outputPath("o", cl::desc("Output file (default: standard output)"),
                                cl::value_desc("file"), cl::init("-"), cl::cat(category()));

} // namespace

void hideUnrelatedOptions() { cl::HideUnrelatedOptions(category()); }

bool isHelmcFlag(StringRef arg) {
  if (!arg.consume_front("-"))
    return false;
  arg.consume_front("-");
  // helmc's flags are the ones in its category; LLVM's own share the registry.
  auto &registered = cl::getRegisteredOptions();
  auto it = registered.find(arg.split('=').first);
  return it != registered.end() && llvm::is_contained(it->second->Categories, &category());
}

namespace {
Expected<Options> parse(int argc, const char *const *argv, raw_ostream &parseErrors) {
  cl::ResetAllOptionOccurrences();
  if (!cl::ParseCommandLineOptions(argc, argv,
                                   "helmc: ahead-of-time compiler for decoder-only LLMs in ONNX or GGUF\n",
                                   &parseErrors))
    return createStringError(inconvertibleErrorCode(), "");
  Options o;
  o.listTargets = listTargets;
  if (o.listTargets)
    return o;
  if (inputPath.empty())
    return createStringError("no input model (usage: helmc model.onnx|model.gguf [options]; see --help)");
  o.inputPath = inputPath;
  o.outputPath = outputPath;
  o.emit = emit;
  if (emit.getNumOccurrences() == 0 && StringRef(o.outputPath).ends_with(".helmpkg"))
    o.emit = Emit::Package;
  o.packaging = o.emit == Emit::Package;
  o.targetSpec = targetSpec;
  o.tokenizerPath = tokenizerPath;
  o.noChatTemplate = noChatTemplate;
  o.planSvgPath = planSvgPath;
  o.maxContext = maxContext;
  o.gpuCode = gpuCode;
  o.quiet = quietProgress;
  static constexpr llvm::StringLiteral kSchemes[] = {"none", "q8_0", "q4_0", "q4_1", "q4_k", "q5_k", "q6_k", "q4_k_m"};
  if (!llvm::is_contained(kSchemes, quantize))
    return createStringError("--quantize must be none, q8_0, q4_0, q4_1, q4_k, q5_k, q6_k or q4_k_m, got '" + quantize +
                             "'");
  o.quantize = quantize == "none" ? std::string() : std::string(quantize);
  if (!o.quantize.empty() && o.emit != Emit::Helm && o.emit != Emit::Plan && o.emit != Emit::PlanJson &&
      !o.packaging)
    return createStringError("--quantize goes with a package, --emit=helm or a plan");
  if (o.packaging && (o.outputPath.empty() || o.outputPath == "-"))
    return createStringError("--emit=package needs an output file (-o model.helmpkg)");
  if (!o.packaging && !o.tokenizerPath.empty())
    return createStringError("--tokenizer goes with a package output (-o model.helmpkg)");
  if (!o.packaging && o.noChatTemplate)
    return createStringError("--no-chat-template goes with a package output (-o model.helmpkg)");
  o.planning = o.emit == Emit::Plan || o.emit == Emit::PlanJson ||
               (o.packaging && !o.targetSpec.empty());
  if (o.planning && o.targetSpec.empty())
    return createStringError("--emit=plan and --emit=plan-json need --target (see --list-targets)");
  if (!o.planSvgPath.empty() && (!o.planning || o.packaging))
    return createStringError("--plan-svg goes with --emit=plan or --emit=plan-json");
  if (o.planning) {
    if (objective != "decode" && objective != "prefill")
      return createStringError("--objective must be decode or prefill, got '" + objective + "'");
    if (kvOffload != "on" && kvOffload != "off")
      return createStringError("--kv-offload must be on or off, got '" + kvOffload + "'");
    if (batch < 1 || context < 0 || promptLen < 1)
      return createStringError("--batch and --prompt-len must be >= 1 and --context >= 0");
    o.plan.objective = objective == "prefill" ? Objective::prefill : Objective::decode;
    o.plan.batch = batch;
    o.plan.context = context;
    o.plan.promptLen = promptLen;
    o.plan.kvOffload = kvOffload == "on";
    if (!vramReserve.empty()) {
      auto bytes = parseByteSize(vramReserve);
      if (!bytes)
        return createStringError("--vram-reserve '" + vramReserve +
                                 "' is not a byte count (e.g. 1GiB, 512MiB)");
      o.plan.vramReserve = *bytes;
    }
    if (forceSplit != -1) {
      if (forceSplit < 0)
        return createStringError("--force-split must be >= 0, got " + std::to_string(forceSplit));
      o.plan.forceSplit = forceSplit;
    }
  }
  return o;
}

} // namespace

Expected<Options> parseCommandLine(int argc, const char *const *argv, raw_ostream &parseErrors) {
  // The checks quote the values given; a control character in one must not break the line.
  auto parsed = parse(argc, argv, parseErrors);
  if (!parsed)
    return createStringError(oneLine(toString(parsed.takeError())));
  return parsed;
}

} // namespace helm::helmc
