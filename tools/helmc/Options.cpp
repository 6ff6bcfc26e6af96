//===- Options.cpp - helmc's command line -------------------------------------===//
#include "tools/helmc/Options.h"

#include "contract/format/ByteSize.h"
#include "contract/format/Flags.h"
#include "contract/format/OneLine.h"
#include "passes/plan/Passes.h"

#include "llvm/ADT/STLExtras.h"

using namespace llvm;

namespace helm::helmc {

const char *const kUsage = R"(helmc: ahead-of-time compiler for decoder-only LLMs in ONNX or GGUF

usage: helmc model.onnx|model.gguf [options]
       helmc --list-targets

  -o FILE                 output file (default: standard output); a .helmpkg name implies
                          --emit=package. Written only on success (no partial files)
  --emit WHAT             what to produce, the phase the compilation stops after:
                            onnx-mlir  the imported ONNX graph: one generic helm.onnx op per node
                            helm       HELM dialect: block-level ops grouped into partition units
                                       (default)
                            config     JSON model configuration recovered from the graph
                            plan       table of every CPU/GPU split (needs --target)
                            plan-json  the partition plan as JSON (needs --target)
                            package    a runnable .helmpkg (default when -o ends in .helmpkg)
  --target NAME           machine to plan for: a catalogue name (--list-targets), emu:<name> (plan
                          for <name>, run on the emulated GPU), host (measured now) or a profile
                          .json (docs/target-profile.md)
  --list-targets          print the built-in target catalogue and exit
  --plan-svg FILE         with --emit=plan or plan-json: also write the T_plan-vs-k chart as SVG
  --objective decode|prefill  plan for decode (default) or prefill
  --batch N               sequences decoded together (default 1)
  --context N             KV-cache length the decode step is costed at (default 4096)
  --prompt-len N          prompt length for the prefill objective (default 128)
  --kv-offload on|off     on: KV pages may spill to host RAM (default); off: the GPU must hold its
                          blocks' KV for --context x --batch
  --vram-reserve SIZE     VRAM kept free (bytes, 512M, 1.5GiB, 2GB = 2e9; default: the
                          target's)
  --force-split K         put units [0, K) on the CPU instead of the cheapest split
  --stream-prefill on|off on: plan prompts at or past the crossover with the CPU units' weights
                          streamed to the GPU (two staging slots kept there; docs/cost-model.md
                          §10). Planning only (--emit=plan, plan-json): helm-rt does not run
                          streamed prefill yet. Default off
  --cpu-attention on|off  on: let decode run the attention of GPU blocks on the CPU beside their KV
                          in host RAM, as many blocks as is fastest (docs/cost-model.md §11).
                          Planning only, like --stream-prefill. Default off
  --quantize FORMAT       store the linear, LM-head and embedding weights quantized: none (default),
                          one GGUF block format (q8_0, q4_0, q4_1, q5_0, q5_1, q3_k, q4_k, q5_k,
                          q6_k) or a mixed recipe, q2_k, q3_k_m, q4_k_m or q5_k_m (llama.cpp's
                          mixes of those names, docs/quantization.md)
  --tokenizer FILE        Hugging Face tokenizer.json to bundle into the package
  --no-chat-template      package without the model's chat template (GGUF tokenizer.chat_template;
                          for ONNX, chat_template.jinja or tokenizer_config.json next to
                          --tokenizer or the model). A template outside the supported Jinja subset
                          is refused otherwise (docs/chat-templates.md)
  --max-context N         longest sequence (prompt + generated) the package accepts (default 4096)
  --gpu-code auto|host|kernels  form of the GPU stage's code: auto (default: kernels for a CUDA
                          GPU, host for emu), host (compiled to run on the host: emu only) or
                          kernels (host code launching the device's kernels, what a CUDA GPU runs;
                          emu runs it with host kernels)
  -q                      no progress messages
  --version               print the version and exit
  -h, --help              this help

An interrupted helmc (Ctrl-C, SIGTERM) removes what it was writing and exits with status 130.
)";

namespace {
/// An on|off plan form that helm-rt does not run yet: refused with a package output.
Expected<bool> planningOnlySwitch(StringRef flag, StringRef value, bool packaging, StringRef runs) {
  if (value != "on" && value != "off")
    return createStringError(flag + " must be on or off, got '" + value + "'");
  if (value == "on" && packaging)
    return createStringError(flag + "=on is planning only (--emit=plan or plan-json): helm-rt does not run " +
                             runs + " yet");
  return value == "on";
}

using helm::cli::FlagTable;
using helm::cli::numberInto;
using helm::cli::textInto;

/// The flags as given, before the checks that relate them.
struct Given {
  Options options;
  std::optional<std::string> emit; // --emit, if given
  std::string objective = "decode", kvOffload = "on", vramReserve, gpuCode = "auto", quantize = "none";
  std::string streamPrefill = "off", cpuAttention = "off";
  bool noChatTemplate = false;
  int64_t batch = 1, context = 4096, promptLen = 128, forceSplit = -1;
};

FlagTable flagTable(Given &g) {
  Options &o = g.options;
  FlagTable t;
  t.value({"-o"}, "FILE", textInto(o.compile.outputPath));
  t.value({"--emit"}, "WHAT", [&g](StringRef, StringRef value) {
    g.emit = value.str();
    return std::string();
  });
  t.value({"--target"}, "NAME", textInto(o.targetSpec));
  t.option({"--list-targets"}, o.listTargets);
  t.value({"--plan-svg"}, "FILE", textInto(o.planSvgPath));
  t.value({"--objective"}, "decode|prefill", textInto(g.objective));
  t.value({"--batch"}, "N", numberInto(g.batch));
  t.value({"--context"}, "N", numberInto(g.context));
  t.value({"--prompt-len"}, "N", numberInto(g.promptLen));
  t.value({"--kv-offload"}, "on|off", textInto(g.kvOffload));
  t.value({"--vram-reserve"}, "SIZE", textInto(g.vramReserve));
  t.value({"--force-split"}, "K", numberInto(g.forceSplit));
  t.value({"--stream-prefill"}, "on|off", textInto(g.streamPrefill));
  t.value({"--cpu-attention"}, "on|off", textInto(g.cpuAttention));
  t.value({"--quantize"}, "FORMAT", textInto(g.quantize));
  t.value({"--tokenizer"}, "FILE", textInto(o.compile.tokenizerPath));
  t.option({"--no-chat-template"}, g.noChatTemplate);
  t.value({"--max-context"}, "N", numberInto(o.compile.maxContext));
  t.value({"--gpu-code"}, "auto|host|kernels", textInto(g.gpuCode));
  t.option({"-q"}, o.quiet);
  return t;
}

/// The names --emit takes, in Emit's order.
constexpr StringLiteral kEmitNames[] = {"onnx-mlir", "helm", "config", "plan", "plan-json", "package"};

Expected<Options> parse(int argc, const char *const *argv) {
  Given g;
  Options &o = g.options;
  CompileOptions &c = o.compile;
  c.outputPath = "-";
  auto input = [&c](StringRef arg) {
    if (!c.inputPath.empty())
      return ("unexpected argument '" + arg + "' (one model per run)").str();
    c.inputPath = arg.str();
    return std::string();
  };
  bool help = false, version = false;
  FlagTable table = flagTable(g);
  table.request({"-h", "--help"}, help).request({"--version"}, version);
  if (std::string error = table.parse(argc, argv, 1, input); !error.empty())
    return createStringError(error);
  if (help || version) {
    o.request = help ? Request::Help : Request::Version;
    return o;
  }
  if (o.listTargets)
    return o;
  if (c.inputPath.empty())
    return createStringError("no input model (usage: helmc model.onnx|model.gguf [options]; see --help)");
  if (g.emit) {
    const StringLiteral *name = llvm::find(kEmitNames, *g.emit);
    if (name == std::end(kEmitNames))
      return createStringError("--emit must be onnx-mlir, helm, config, plan, plan-json or package, got '" +
                               *g.emit + "'");
    o.emit = Emit(name - std::begin(kEmitNames));
  } else if (StringRef(c.outputPath).ends_with(".helmpkg")) {
    o.emit = Emit::Package;
  }
  c.chatTemplate = !g.noChatTemplate;
  auto form = parseGpuCodeForm(g.gpuCode);
  if (!form)
    return createStringError("--gpu-code must be auto, host or kernels, not '" + g.gpuCode + "'");
  c.gpuCode = *form;
  if (g.quantize != "none" && !llvm::is_contained(quantizationSchemes(), StringRef(g.quantize))) {
    std::string known = "none";
    ArrayRef<StringLiteral> schemes = quantizationSchemes();
    for (size_t i = 0; i < schemes.size(); ++i)
      known += (i + 1 == schemes.size() ? " or " : ", ") + schemes[i].str();
    return createStringError("--quantize must be " + known + ", got '" + g.quantize + "'");
  }
  c.quantize = g.quantize == "none" ? std::string() : g.quantize;
  if (!c.quantize.empty() && o.emit != Emit::Helm && o.emit != Emit::Plan && o.emit != Emit::PlanJson &&
      !o.packaging())
    return createStringError("--quantize goes with a package, --emit=helm or a plan");
  if (o.packaging() && (c.outputPath.empty() || c.outputPath == "-"))
    return createStringError("--emit=package needs an output file (-o model.helmpkg)");
  if (!o.packaging() && !c.tokenizerPath.empty())
    return createStringError("--tokenizer goes with a package output (-o model.helmpkg)");
  if (!o.packaging() && !c.chatTemplate)
    return createStringError("--no-chat-template goes with a package output (-o model.helmpkg)");
  if (o.planning() && o.targetSpec.empty())
    return createStringError("--emit=plan and --emit=plan-json need --target (see --list-targets)");
  if (!o.planSvgPath.empty() && (!o.planning() || o.packaging()))
    return createStringError("--plan-svg goes with --emit=plan or --emit=plan-json");
  if (o.planning()) {
    PlanOptions &plan = c.plan;
    if (g.objective != "decode" && g.objective != "prefill")
      return createStringError("--objective must be decode or prefill, got '" + g.objective + "'");
    if (g.kvOffload != "on" && g.kvOffload != "off")
      return createStringError("--kv-offload must be on or off, got '" + g.kvOffload + "'");
    auto streamPrefill = planningOnlySwitch("--stream-prefill", g.streamPrefill, o.packaging(),
                                            "streamed prefill");
    if (!streamPrefill)
      return streamPrefill.takeError();
    plan.streamPrefill = *streamPrefill;
    auto cpuAttention = planningOnlySwitch("--cpu-attention", g.cpuAttention, o.packaging(),
                                           "attention apart from its block");
    if (!cpuAttention)
      return cpuAttention.takeError();
    plan.cpuAttention = *cpuAttention;
    if (g.batch < 1 || g.context < 0 || g.promptLen < 1)
      return createStringError("--batch and --prompt-len must be >= 1 and --context >= 0");
    plan.objective = g.objective == "prefill" ? Objective::prefill : Objective::decode;
    plan.batch = g.batch;
    plan.context = g.context;
    plan.promptLen = g.promptLen;
    plan.kvOffload = g.kvOffload == "on";
    if (!g.vramReserve.empty()) {
      auto bytes = parseByteSize(g.vramReserve);
      if (!bytes)
        return createStringError("--vram-reserve '" + g.vramReserve + "' is not a byte count (e.g. 1G, 512MiB)");
      plan.vramReserve = *bytes;
    }
    if (g.forceSplit != -1) {
      if (g.forceSplit < 0)
        return createStringError("--force-split must be >= 0, got " + std::to_string(g.forceSplit));
      plan.forceSplit = g.forceSplit;
    }
  }
  return o;
}

} // namespace

CompilePhase Options::stopAfter() const {
  switch (emit) {
  case Emit::OnnxMlir:
    return CompilePhase::Import;
  case Emit::Helm:
  case Emit::Config:
    return CompilePhase::Raise;
  case Emit::Plan:
  case Emit::PlanJson:
    return CompilePhase::Plan;
  case Emit::Package:
    return CompilePhase::Package;
  }
  return CompilePhase::Package;
}

bool isHelmcFlag(StringRef arg) {
  Given g;
  return flagTable(g).find(arg) != nullptr;
}

Expected<Options> parseCommandLine(int argc, const char *const *argv) {
  // The checks quote the values given; a control character in one must not break the line.
  auto parsed = parse(argc, argv);
  if (!parsed)
    return createStringError(oneLine(toString(parsed.takeError())));
  return parsed;
}

} // namespace helm::helmc
