#!/usr/bin/env python3
"""HELM's chat-template engine (runtime/chat) against Python's jinja2 on real chat templates.

The templates are llama.cpp's collection of model owners' templates
(bench/.cache/llama.cpp/src/vendor/llama.cpp/models/templates/*.jinja, which bench/build-llama-cpp.sh
unpacks; scripts/test.sh runs it first) and the default model's (SmolLM2's, kept in
test/fuzz/chat-template-corpus/smollm2-default.jinja). For each template, seeded random
conversations are rendered twice:

- by jinja2 exactly as transformers renders chat templates: ImmutableSandboxedEnvironment with
  trim_blocks, lstrip_blocks, the loopcontrols extension and transformers' {% generation %} tag;
  globals raise_exception, strftime_now (fixed here to FIXED_NOW, so that the date is the same for
  both), namespace (refusing underscore names) and dict; transformers' tojson
  (json.dumps(ensure_ascii=False, indent, separators, sort_keys));
- by helm-render-template (test/unit/runtime/chat), given the same JSON context.

Every case must give byte-identical text, or both must raise. REQUIRED templates must parse in HELM
and render at least MIN_RENDERED of their cases without an error (a template that always raises
would compare vacuously). Every other template of the folder is tried too: HELM either refuses it
at parse time in one line (reported, with the reason), or it is held to the same byte-for-byte rule.

Two synthetic sets follow, held to the same rule (--synthetic cases each): random templates of text,
whitespace (Unicode spaces, \r\n) and nested if/for/raw/comment/set tags with random `-`/`+`
whitespace control, for the lexer's trim and lstrip rules; and random expressions over variables
(operators, filters, tests, str/dict methods, slices, inline ifs), for Python's semantics. They
leave out what this engine does differently on purpose (docs/chat-templates.md): `**` (Python's big
integers and complex numbers) and constant expressions (jinja2 folds those at compile time with
slightly different rules).

  check_chat_templates.py --render build/test/unit/runtime/chat/helm-render-template [--cases 120]

Exit 1 on any mismatch, a required template refused, or the templates folder missing.
"""
import argparse
import datetime
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import jinja2
import jinja2.ext
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "bench/.cache/llama.cpp/src/vendor/llama.cpp/models/templates"
DEFAULT_TEMPLATE = ROOT / "test/fuzz/chat-template-corpus/smollm2-default.jinja"
REQUIRED = [
    "HuggingFaceTB-SmolLM3-3B", "Qwen-Qwen2.5-7B-Instruct", "Qwen-Qwen3-0.6B", "Qwen-QwQ-32B",
    "meta-llama-Llama-3.1-8B-Instruct", "meta-llama-Llama-3.2-3B-Instruct", "meta-llama-Llama-3.3-70B-Instruct",
    "microsoft-Phi-3.5-mini-instruct", "mistralai-Mistral-Nemo-Instruct-2407",
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "google-gemma-2-2b-it",
    "google-gemma-4-31B-it", "ibm-granite-granite-3.3-2B-Instruct", "smollm2-default",
]
MIN_RENDERED = 0.2
FIXED_NOW = datetime.datetime(2025, 7, 14, 9, 5, 3)

# ---------------------------------------------------------------------------------------------
# jinja2 as transformers sets it up (transformers/utils/chat_template_utils.py,
# _cached_compile_jinja_template), with strftime_now's clock fixed.


class GenerationTag(jinja2.ext.Extension):
    """transformers' AssistantTracker without the tracking: {% generation %} renders its body."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    def _generation_support(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return FIXED_NOW.strftime(format)


class TemplateDict:
    def __call__(self, *args, **kwargs):
        return dict(*args, **kwargs)

    def fromkeys(self, *args, **kwargs):
        return dict.fromkeys(*args, **kwargs)


class TemplateNamespace(jinja2.utils.Namespace):
    def __init__(*args, **kwargs):
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name, value):
        TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check_name(name):
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(f"underscore-prefixed namespace attribute {name!r}")


def jinja_environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    env.globals["dict"] = TemplateDict()
    env.globals["namespace"] = TemplateNamespace
    return env


# ---------------------------------------------------------------------------------------------
# Contexts: seeded random conversations.

PIECES = [
    "Hello", "world", "How are you?", "¿Qué tal?", "你好，世界", "こんにちは", "안녕하세요", "🙂🚀👍🏽", "naïve café",
    "Ünïcödé", "quote ' and \"", "{{ not a tag }}", "{% raw %}", "{# not a comment #}", "braces {} [] ()",
    "back\\slash", "tab\tand\nnewline", "  leading and trailing  ", "\n\nblank lines\n\n", "</think>",
    "<think>\nsome reasoning\n</think>\n\n", "/think", "/no_think", "<|im_end|>", "<s>", "line1\n\nline3",
    "Σίσυφος ΣΑΣ", "straße", "émoji 🤖 end", "a" * 200, "50% off & <b>bold</b>", "null", "true", "",
]
NAMES = ["get_weather", "search", "calculator"]
TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the current weather in a city, \"now\".",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "The city, e.g. Zürich"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "Search {the web} for a query.",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string"}, "limit": {"type": "integer", "default": 5, "minimum": 1.5}},
            "required": ["query"]},
        "return": {"type": "string"}}},
]


def text(rng, allow_empty=True):
    if allow_empty and rng.random() < 0.08:
        return ""
    parts = [rng.choice(PIECES) for _ in range(rng.randint(1, 4))]
    return rng.choice([" ", "", "\n", " - "]).join(parts)


def tool_call(rng, index):
    name = rng.choice(NAMES)
    arguments = {"city": rng.choice(["Paris", "東京", "São Paulo"]), "n": rng.randint(0, 9), "ok": rng.random() < 0.5}
    if rng.random() < 0.3:
        arguments = json.dumps(arguments, ensure_ascii=False)
    call = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if rng.random() < 0.8:
        call["id"] = f"call{index:05d}"[:9].ljust(9, "x")
    return call


def conversation(rng, kind):
    messages = []
    if rng.random() < 0.5:
        messages.append({"role": "system", "content": text(rng)})
    length = 50 if kind == "long" else rng.randint(1, 7)
    role = "user"
    for i in range(length):
        if kind == "random":
            role = rng.choice(["system", "user", "assistant", "tool"])
        if role == "user":
            messages.append({"role": "user", "content": text(rng)})
            role = "assistant"
        elif role == "assistant":
            message = {"role": "assistant", "content": text(rng)}
            if kind == "tools" and rng.random() < 0.5:
                message["tool_calls"] = [tool_call(rng, i * 10 + k) for k in range(rng.randint(1, 2))]
                if rng.random() < 0.3:
                    message["content"] = None
                messages.append(message)
                for call in message["tool_calls"]:
                    response = {"role": "tool", "content": text(rng)}
                    if "id" in call:
                        response["tool_call_id"] = call["id"]
                    messages.append(response)
                role = "assistant" if rng.random() < 0.5 else "user"
                continue
            if rng.random() < 0.15:
                message["reasoning_content"] = text(rng)
            messages.append(message)
            role = "user"
        else:
            messages.append({"role": role, "content": text(rng)})
            role = "user"
    return messages


def context(rng):
    kind = rng.choice(["plain", "plain", "tools", "random", "long"])
    ctx = {"messages": conversation(rng, kind)}
    if rng.random() < 0.9:
        ctx["add_generation_prompt"] = rng.random() < 0.5
    if rng.random() < 0.8:
        ctx["bos_token"] = rng.choice(["<s>", "<|begin_of_text|>", "<bos>", ""])
        ctx["eos_token"] = rng.choice(["</s>", "<|eot_id|>", "<|im_end|>", ""])
    if rng.random() < 0.3:
        ctx["enable_thinking"] = rng.random() < 0.5
    if kind == "tools" or rng.random() < 0.1:
        ctx["tools"] = TOOLS[: rng.randint(1, 2)]
    if rng.random() < 0.1:
        ctx["documents"] = [{"doc_id": i, "title": f"Doc {i}", "text": text(rng, False)} for i in range(rng.randint(1, 2))]
    if rng.random() < 0.05:
        ctx["date_string"] = "14 Jul 2025"
    return ctx


# ---------------------------------------------------------------------------------------------
# Synthetic templates.

SPACES = [" ", "  ", "\t", "\n", "\n\n", " \n", "\n  ", "\r\n", "\u3000", "\u00a0", "", "", ""]


def whitespace_template(rng):
    def text():
        return "".join(rng.choice(SPACES + ["a", "b c", "x"]) for _ in range(rng.randint(0, 4)))

    def sign():
        return rng.choice(["", "", "-", "+"])

    def piece(depth):
        r = rng.random()
        if r < 0.25:
            return text()
        if r < 0.4:
            return "{{" + rng.choice(["", "-"]) + " 'v' " + rng.choice(["", "-"]) + "}}"
        if r < 0.5:
            return "{#" + sign() + " c " + sign() + "#}"
        if r < 0.55:
            return ("{%" + sign() + " raw " + rng.choice(["", "-"]) + "%}" + text() + "{{ y }}" + text() + "{%" + sign() +
                    " endraw " + sign() + "%}")
        if r < 0.6:
            return "{%" + sign() + " set q = 1 " + sign() + "%}"
        if depth < 3:
            body = "".join(piece(depth + 1) for _ in range(rng.randint(0, 3)))
            if rng.random() < 0.5:
                return "{%" + sign() + " if true " + sign() + "%}" + body + "{%" + sign() + " endif " + sign() + "%}"
            return "{%" + sign() + " for i in [1, 2] " + sign() + "%}" + body + "{%" + sign() + " endfor " + sign() + "%}"
        return text()

    return "".join(piece(0) for _ in range(rng.randint(1, 6)))


EXPRESSION_VALUES = {
    "i0": 0, "i1": 1, "im3": -3, "i7": 7, "f25": 2.5, "f01": 0.1, "f1e16": 1e16, "fm0": -0.0, "f3": 3.0,
    "sa": "a", "shello": "h\u00e9llo", "sempty": "", "sx": " x ", "sAb": "A b-c", "scjk": "\u4f60\u597d", "scsv": "1,2,,3",
    "spad": "  Ab  ", "l12": [1, 2], "lba": ["b", "a"], "lempty": [], "d": {"a": 1, "b": 2}, "dempty": {},
    "n": None, "t": True, "f": False, "dn": {"b": 1, "a": [2]},
}
OPERATORS = ["+", "-", "*", "/", "//", "%", "~", "==", "!=", "<", "<=", ">", ">=", "and", "or", "in", "not in"]
FILTERS = ["trim", "upper", "lower", "title", "capitalize", "length", "first", "last", "list", "join", "join(',')", "string",
           "int", "float", "abs", "round", "round(1)", "tojson", "default(7)", "reverse|list", "sort", "unique|list",
           "dictsort", "sum", "min", "max", "replace('a', 'Z')", "center(7)", "indent(2)", "items|list", "safe", "e", "count",
           "map('string')|list", "select('odd')|list", "tojson(indent=1)", "tojson(sort_keys=true)"]
TESTS = ["defined", "undefined", "none", "string", "number", "integer", "float", "boolean", "mapping", "iterable",
         "sequence", "odd", "even", "true", "false", "lower", "upper", "divisibleby 2", "eq 1", "in [1, 2]", "gt 0"]
METHODS = [".split()", ".split(',')", ".strip()", ".startswith('a')", ".upper()", ".replace('a', 'b')", ".find('l')",
           ".count('l')", ".lstrip()", ".title()", ".capitalize()", ".endswith('o')", ".get('a')", ".keys()|list",
           ".items()|list", ".rsplit(',', 1)", ".join(['x', 'y'])"]


def expression_template(rng):
    atoms = list(EXPRESSION_VALUES) + ["undefined_name"]

    def expr(depth):
        r = rng.random()
        if depth > 2 or r < 0.3:
            return rng.choice(atoms)
        if r < 0.55:
            return "(" + expr(depth + 1) + " " + rng.choice(OPERATORS) + " " + expr(depth + 1) + ")"
        if r < 0.7:
            return "(" + expr(depth + 1) + " | " + rng.choice(FILTERS) + ")"
        if r < 0.8:
            return "(" + expr(depth + 1) + " is " + rng.choice(["", "not "]) + rng.choice(TESTS) + ")"
        if r < 0.88:
            return "(" + expr(depth + 1) + ")" + rng.choice(METHODS)
        if r < 0.94:
            return "(" + expr(depth + 1) + ")[" + rng.choice(["0", "-1", "1:", "::-1", ":1", "'a'"]) + "]"
        return "(" + expr(depth + 1) + " if " + expr(depth + 1) + " else " + expr(depth + 1) + ")"

    return "{{ " + expr(0) + " }}"


def render_helm_cases(render, cases):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8", delete=False) as f:
        for template, ctx in cases:
            f.write(json.dumps({"template": template, "context": ctx}, ensure_ascii=False) + "\n")
        path = f.name
    try:
        r = subprocess.run([render, "--cases", path, "--now", FIXED_NOW.strftime("%Y-%m-%d %H:%M:%S")],
                           capture_output=True, timeout=600)
    finally:
        Path(path).unlink()
    if r.returncode != 0:
        raise RuntimeError(f"helm-render-template --cases failed: {r.stderr.decode('utf-8', 'replace').strip()}")
    return [json.loads(line) for line in r.stdout.decode("utf-8").splitlines()]


# ---------------------------------------------------------------------------------------------


def render_jinja(template, ctx):
    try:
        # A fresh copy each time: a template can change what it is given (jinja2's indent filter
        # appends to a list it is handed), which must not leak into the next case.
        return True, template.render(**json.loads(json.dumps(ctx)))
    except Exception as e:  # noqa: BLE001 - any exception is "jinja2 raised"
        return False, f"{type(e).__name__}: {e}"


def render_helm(render, template_path, contexts):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8", delete=False) as f:
        for ctx in contexts:
            f.write(json.dumps(ctx, ensure_ascii=False) + "\n")
        path = f.name
    try:
        r = subprocess.run([render, str(template_path), path, "--jsonl", "--now", FIXED_NOW.strftime("%Y-%m-%d %H:%M:%S")],
                           capture_output=True, timeout=600)
    finally:
        Path(path).unlink()
    if r.returncode != 0:
        message = r.stderr.decode("utf-8", "replace").strip()
        if r.returncode != 1 or not message:
            # A refusal is exit 1 with one line; a signal or any other status is a crash, which
            # must not pass as "refused".
            raise RuntimeError(f"helm-render-template crashed on {template_path} (exit {r.returncode}): {message[-500:]!r}")
        if "\n" in message:
            raise RuntimeError(f"helm-render-template's error is not one line: {message!r}")
        return message, None
    results = [json.loads(line) for line in r.stdout.decode("utf-8").splitlines()]
    if len(results) != len(contexts):
        raise RuntimeError(f"helm-render-template returned {len(results)} results for {len(contexts)} contexts")
    return None, results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--render", required=True, help="helm-render-template")
    ap.add_argument("--templates", type=Path, default=TEMPLATES)
    ap.add_argument("--cases", type=int, default=120, help="contexts per template")
    ap.add_argument("--seed", type=int, default=20250714)
    ap.add_argument("--synthetic", type=int, default=400, help="random templates in each synthetic set")
    ap.add_argument("--only", action="append", help="just these templates (by name without .jinja)")
    ap.add_argument("-v", "--verbose", action="store_true", help="show the first difference of each mismatch")
    a = ap.parse_args()

    if not a.templates.is_dir():
        print(f"check_chat_templates: {a.templates} is missing: run bench/build-llama-cpp.sh "
              "(scripts/test.sh does) to unpack llama.cpp's chat templates", file=sys.stderr)
        return 1
    paths = {p.stem: p for p in sorted(a.templates.glob("*.jinja"))}
    paths["smollm2-default"] = DEFAULT_TEMPLATE
    missing = [name for name in REQUIRED if name not in paths or not paths[name].exists()]
    if missing:
        print(f"check_chat_templates: required templates missing: {', '.join(missing)}", file=sys.stderr)
        return 1
    names = a.only or (REQUIRED + sorted(n for n in paths if n not in REQUIRED))

    env = jinja_environment()
    failures = []
    rows = []
    for name in names:
        path = paths[name]
        source = path.read_text(encoding="utf-8")
        required = name in REQUIRED
        rng = random.Random(f"{a.seed}-{name}")
        contexts = [context(rng) for _ in range(a.cases)]
        refusal, results = render_helm(a.render, path, contexts)
        try:
            template = env.from_string(source)
            jinja_error = None
        except Exception as e:  # noqa: BLE001
            template, jinja_error = None, f"{type(e).__name__}: {e}"
        if refusal is not None:
            status = "refused by both" if jinja_error else "refused"
            rows.append((name, len(contexts), 0, 0, 0, status, refusal.split(": ", 2)[-1]))
            if required:
                failures.append(f"{name}: required template refused: {refusal}")
            continue
        if jinja_error:
            rows.append((name, len(contexts), 0, 0, 0, "HELM parses, jinja2 refuses", jinja_error))
            failures.append(f"{name}: HELM parses a template jinja2 refuses ({jinja_error})")
            continue
        identical = both_raised = rendered = 0
        mismatches = []
        for i, (ctx, helm) in enumerate(zip(contexts, results)):
            ok, expected = render_jinja(template, ctx)
            if ok and "text" in helm and helm["text"] == expected:
                identical += 1
                rendered += 1
            elif not ok and "error" in helm:
                both_raised += 1
            else:
                mismatches.append((i, ok, expected, helm))
        status = "ok" if not mismatches else f"{len(mismatches)} MISMATCH"
        if required and rendered < MIN_RENDERED * len(contexts):
            status = f"only {rendered} rendered"
            failures.append(f"{name}: only {rendered} of {len(contexts)} contexts rendered without an error")
        rows.append((name, len(contexts), identical, both_raised, len(mismatches), status, ""))
        for i, ok, expected, helm in mismatches[:3 if a.verbose else 1]:
            got = helm.get("text", "ERROR " + helm.get("error", ""))
            want = expected if ok else "ERROR " + expected
            at = next((k for k in range(min(len(got), len(want))) if got[k] != want[k]), min(len(got), len(want)))
            failures.append(f"{name} case {i}: HELM {got[max(0, at - 40):at + 60]!r} vs jinja2 "
                            f"{want[max(0, at - 40):at + 60]!r} (at character {at})")
            if a.verbose:
                print(f"--- {name} case {i} context: {json.dumps(contexts[i], ensure_ascii=False)[:2000]}")

    synthetic = [("synthetic: whitespace", whitespace_template, {}),
                 ("synthetic: expressions", expression_template, EXPRESSION_VALUES)]
    for name, make, ctx in synthetic if not a.only else []:
        rng = random.Random(f"{a.seed}-{name}")
        cases = [(make(rng), ctx) for _ in range(a.synthetic)]
        results = render_helm_cases(a.render, cases)
        identical = both_raised = 0
        mismatches = []
        for (source, case_ctx), helm in zip(cases, results):
            try:
                ok, expected = render_jinja(env.from_string(source), case_ctx)
            except Exception as e:  # noqa: BLE001 - a template jinja2 refuses
                ok, expected = False, f"{type(e).__name__}: {e}"
            if ok and helm.get("text") == expected:
                identical += 1
            elif not ok and "error" in helm:
                both_raised += 1
            else:
                mismatches.append((source, ok, expected, helm))
        rows.append((name, len(cases), identical, both_raised, len(mismatches),
                     "ok" if not mismatches else f"{len(mismatches)} MISMATCH", ""))
        for source, ok, expected, helm in mismatches[:3]:
            failures.append(f"{name}: {source!r}: HELM {helm!r} vs jinja2 {'' if ok else 'ERROR '}{expected!r}")

    width = max(len(r[0]) for r in rows)
    print(f"{'template':<{width}}  {'cases':>5}  {'identical':>9}  {'both-raised':>11}  {'mismatch':>8}  status")
    for name, cases, identical, both, mismatch, status, note in rows:
        line = f"{name:<{width}}  {cases:>5}  {identical:>9}  {both:>11}  {mismatch:>8}  {status}"
        print(line + (f": {note}" if note else ""))
    real = [r for r in rows if not r[0].startswith("synthetic")]
    accepted = sum(1 for r in real if not r[5].startswith("refused"))
    print(f"\n{accepted} of {len(real)} templates parse in HELM; "
          f"{sum(1 for r in real if r[5] == 'ok')} render identically to jinja2 on every case")
    for f in failures:
        print("FAIL " + f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
