#!/usr/bin/env python3
"""helm-rt against llama.cpp on the very same GGUF files, in the same run.

helm-profile measures this machine once (host.json); for each file: helmc model.gguf
--target=host.json (wall time and peak RSS of the compiler alone: `--target=host` would add the
profiler's second and its 1 GiB bandwidth buffer to every compile), then, for
each thread count, --runs rounds that interleave the two systems (memory bandwidth here swings
between minutes, so neither gets the quiet minutes alone):
  helm-rt      helm-rt model.helmpkg --prompt-ids <P ids> -n N --temperature 0 --ignore-eos -t T
               --stats-json (a fresh process per run; prefill = P / TTFT, decode tok/s)
  llama.cpp    llama-bench -m model.gguf -t T -p P -n 0, then -p 0 -n N -d P (decode after a P-token
               context, as helm-rt's), one repetition per round
Prints the medians, the ranges and helm/llama.cpp ratios. llama.cpp comes from
bench/build-llama-cpp.sh.

  .venv/bin/python bench/gguf_bench.py                       # the default model's Q4_1 file, Gemma 3
                                                             # 270M's Q4_K_M (scripts/fetch-gguf.py), and
                                                             # the Qwen3-0.6B-shaped Q4_K_M and F16
                                                             # files where the compare bench made them,
                                                             # and the Llama-3.2-1B-shaped Q4_K_M, Q3_K_M
                                                             # and IQ4_XS files bench/make_shaped_gguf.py
                                                             # writes
  .venv/bin/python bench/gguf_bench.py --files a.gguf,b.gguf --threads 1,2 --runs 5 --json out.json
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from make_shaped_gguf import OUT as SHAPES, TYPES as SHAPE_TYPES  # noqa: E402
LLAMA = ROOT / "bench" / ".cache" / "llama.cpp"
DEFAULT_FILES = [ROOT / "models" / ".cache" / "gguf" / "SmolLM2-135M-Instruct.Q4_1.gguf",
                 ROOT / "models" / ".cache" / "gguf" / "gemma-3-270m-q4_k_m.gguf",
                 ROOT / "bench" / ".cache" / "qwen3-0.6b-kv-fp16" / "model-q4_k_m.gguf",
                 ROOT / "bench" / ".cache" / "qwen3-0.6b-kv-fp16" / "model.gguf",
                 *[SHAPES / f"llama32-1b-{t}.gguf" for t in SHAPE_TYPES]]


def log(msg):
    print(f"[gguf-bench] {msg}", file=sys.stderr, flush=True)


def largest_tensor_mib(gguf):
    """The largest tensor of the file (helm-gguf-dump --json), MiB: the compiler's RSS goal is 300 MB
    plus one tensor."""
    r = subprocess.run([str(ROOT / "build" / "bin" / "helm-gguf-dump"), "--json", str(gguf)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None
    return max(t["bytes"] for t in json.loads(r.stdout)["tensors"]) / 2**20


def compile_package(helmc, gguf, pkg, target):
    """helmc's wall time and the peak RSS of the helmc process (os.wait4's rusage of that child)."""
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen([str(helmc), str(gguf), f"--target={target}", "-q", "-o", str(pkg)],
                             stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - t0
        if p.returncode != 0:
            err.seek(0)
            return None, err.read().decode(errors="replace").strip()
    return {"seconds": wall, "peak_rss_mib": usage.ru_maxrss / 1024.0}, None


def helm_run(helm_rt, pkg, t, prompt, n_new, workdir):
    stats = Path(workdir) / "stats.json"
    cmd = [str(helm_rt), str(pkg), "--prompt-ids", ",".join(map(str, prompt)), "-n", str(n_new), "--temperature", "0",
           "--ignore-eos", "-q", "-t", str(t), "--stats-json", str(stats)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"helm-rt failed: {r.stderr.strip()[-300:]}")
    s = json.loads(stats.read_text())
    return {"prefill": s["prefill_tok_s"], "decode": s["decode_tok_s"]}


def llama_run(gguf, t, p, n):
    env = dict(os.environ, LD_LIBRARY_PATH=str(LLAMA / "build" / "bin"))
    out = {}
    for key, args in (("prefill", ["-p", str(p), "-n", "0"]), ("decode", ["-p", "0", "-n", str(n), "-d", str(p)])):
        r = subprocess.run([str(LLAMA / "build" / "bin" / "llama-bench"), "-m", str(gguf), "-t", str(t), "-r", "1",
                            "-o", "json", *args], capture_output=True, text=True, env=env)
        if r.returncode != 0:
            raise RuntimeError(f"llama-bench failed: {r.stderr.strip()[-300:]}")
        out[key] = json.loads(r.stdout)[0]["avg_ts"]
    return out


def summary(xs):
    return statistics.median(xs), min(xs), max(xs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", help="comma-separated GGUF files (default: the ones listed above that exist)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--json")
    a = ap.parse_args()
    helmc, helm_rt = ROOT / "build" / "bin" / "helmc", ROOT / "build" / "bin" / "helm-rt"
    files = [Path(f) for f in a.files.split(",")] if a.files else [f for f in DEFAULT_FILES if f.exists()]
    threads = [int(t) for t in a.threads.split(",")]
    prompt = [(17 * i + 100) % 5000 + 100 for i in range(a.prompt)]
    results = []
    with tempfile.TemporaryDirectory() as work:
        target = Path(work) / "host.json"
        subprocess.run([str(ROOT / "build" / "bin" / "helm-profile"), "-o", str(target)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for gguf in files:
            pkg = Path(work) / (gguf.stem + ".helmpkg")
            log(f"helmc {gguf.name} ({gguf.stat().st_size / 2**20:.0f} MiB)")
            compiled, err = compile_package(helmc, gguf, pkg, target)
            if err:
                log(f"  refused: {err}")
                results.append({"file": gguf.name, "helmc_error": err})
                continue
            log(f"  {compiled['seconds']:.1f} s, peak RSS {compiled['peak_rss_mib']:.0f} MiB")
            compiled["largest_tensor_mib"] = largest_tensor_mib(gguf)
            row = {"file": gguf.name, "bytes": gguf.stat().st_size, "helmc": compiled, "threads": {}}
            for t in threads:
                helm, llama = {"prefill": [], "decode": []}, {"prefill": [], "decode": []}
                for i in range(a.runs):
                    h = helm_run(helm_rt, pkg, t, prompt, a.tokens, work)
                    l = llama_run(gguf, t, a.prompt, a.tokens)
                    for k in ("prefill", "decode"):
                        helm[k].append(h[k])
                        llama[k].append(l[k])
                    log(f"  -t {t} round {i + 1}/{a.runs}: helm prefill {h['prefill']:.1f} decode {h['decode']:.1f}; "
                        f"llama.cpp prefill {l['prefill']:.1f} decode {l['decode']:.1f} tok/s")
                row["threads"][t] = {"helm": helm, "llama.cpp": llama}
            results.append(row)
            pkg.unlink(missing_ok=True)

    print(f"\nhelm-rt vs llama.cpp on the same GGUF files: prompt {a.prompt} tokens, {a.tokens} generated, "
          f"median (min-max) of {a.runs} interleaved rounds, tok/s")
    print(f"{'file':44} {'t':>2} {'helm decode':>20} {'llama decode':>20} {'ratio':>6} {'helm prefill':>20} "
          f"{'llama prefill':>20} {'ratio':>6}")
    for row in results:
        if "helmc_error" in row:
            print(f"{row['file']:44}  helmc refuses it: {row['helmc_error'][:100]}")
            continue
        for t, r in row["threads"].items():
            cells = []
            for k in ("decode", "prefill"):
                hm, hlo, hhi = summary(r["helm"][k])
                lm, llo, lhi = summary(r["llama.cpp"][k])
                cells += [f"{hm:7.1f} ({hlo:.0f}-{hhi:.0f})", f"{lm:7.1f} ({llo:.0f}-{lhi:.0f})", f"{hm / lm:5.2f}x"]
            print(f"{row['file']:44} {t:>2} {cells[0]:>20} {cells[1]:>20} {cells[2]:>6} {cells[3]:>20} {cells[4]:>20} "
                  f"{cells[5]:>6}")
    print("\nhelmc on each file (--target=host.json from helm-profile; wall time, peak RSS of the process; "
          "goals: 5 s per GB, 300 MB plus the largest tensor):")
    for row in results:
        if "helmc" in row:
            c = row["helmc"]
            gb = row["bytes"] / 1e9
            largest = c.get("largest_tensor_mib")
            budget = f"{300e6 / 2**20 + largest:7.0f} MiB" if largest is not None else "      ?"
            print(f"  {row['file']:44} {row['bytes'] / 2**30:5.2f} GiB  {c['seconds']:6.1f} s "
                  f"({c['seconds'] / gb:4.1f} s/GB)  {c['peak_rss_mib']:7.0f} MiB (budget {budget})")
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
