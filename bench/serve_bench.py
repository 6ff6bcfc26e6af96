#!/usr/bin/env python3
"""helm-rt serve against llama-server on the very same GGUF file, under the same load, same run.

For each file, both servers run with the same slots (--parallel / -np = the largest stream count),
the same positions per slot and the same threads. For each load of S concurrent streams (1, 4, 16)
and each round (--runs; the systems interleave within a round, since memory bandwidth here swings
between minutes), S clients each stream one /v1/completions request at once: its own text prompt,
never seen by the server before (so no prompt cache helps), greedy, `ignore_eos`, exactly --tokens
tokens (checked from the final usage chunk). Measured per system and load:
  aggregate tok/s     all streams' generated tokens / wall time from the first request to the last [DONE]
  TTFT p50            time from a request to its first text chunk
  ITL p50 / p99       time between consecutive text chunks of a stream, over all streams
Prints medians over rounds, ranges, and helm/llama-server ratios. llama-server comes from
bench/build-llama-cpp.sh --server.

  .venv/bin/python bench/serve_bench.py                      # the default model's Q4_1 file, and the
                                                             # Qwen3-0.6B-shaped Q4_K_M file if made
  .venv/bin/python bench/serve_bench.py --files a.gguf --streams 1,4,16 --tokens 64 --runs 3 --json out.json
"""
import argparse
import concurrent.futures
import http.client
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LLAMA = ROOT / "bench" / ".cache" / "llama.cpp"
DEFAULT_FILES = [ROOT / "models" / ".cache" / "gguf" / "SmolLM2-135M-Instruct.Q4_1.gguf",
                 ROOT / "bench" / ".cache" / "qwen3-0.6b-kv-fp16" / "model-q4_k_m.gguf"]
PROMPTS = [f"Story {i}: once upon a time, in a land of {w}, there lived a" for i, w in enumerate(
    ["rivers", "mountains", "glass", "clocks", "whales", "ferns", "copper", "salt", "owls", "lanterns",
     "bridges", "orchards", "comets", "tides", "kites", "bells"])]


def log(msg):
    print(f"[serve-bench] {msg}", file=sys.stderr, flush=True)


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Running:
    def __init__(self, cmd, port, ready_path="/health"):
        self.port = port
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 300
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{cmd[0]} exited: {self.proc.stderr.read()[-2000:]}")
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                c.request("GET", ready_path)
                if c.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{cmd[0]} did not become ready")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def stream_one(port, prompt, tokens):
    """One streamed completion: (start time, the times of its text chunks); fails unless it
    generated exactly `tokens` tokens."""
    body = json.dumps({"prompt": prompt, "max_tokens": tokens, "temperature": 0, "stream": True,
                       "ignore_eos": True, "stream_options": {"include_usage": True}})
    t0 = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"port {port}: status {resp.status}: {resp.read()[:300]!r}")
    times, generated = [], None
    for raw in resp:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        event = json.loads(line[6:])
        choices = event.get("choices") or []
        if choices and choices[0].get("text"):
            times.append(time.monotonic())
        if event.get("usage"):
            generated = event["usage"]["completion_tokens"]
    conn.close()
    # Both systems must generate exactly the tokens asked for, or tok/s would compare different work.
    if generated != tokens:
        raise RuntimeError(f"port {port}: a stream generated {generated} tokens, not {tokens}")
    return t0, times


def run_load(port, streams, tokens, tag):
    """S streams at once. Each prompt starts with `tag` and the stream's number, so no request shares
    more than the first token or two with an earlier one: llama-server's prompt cache (on by default)
    cannot skip a prefill that helm must do, and both systems get the same prompts."""
    with concurrent.futures.ThreadPoolExecutor(streams) as pool:
        start = time.monotonic()
        results = list(pool.map(lambda i: stream_one(port, f"{tag}.{i}. {PROMPTS[i % len(PROMPTS)]}", tokens),
                                range(streams)))
        end = time.monotonic()
    ttft = [times[0] - t0 for t0, times in results if times]
    itl = [b - a for _, times in results for a, b in zip(times, times[1:])]
    itl.sort()
    pct = lambda xs, q: xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")  # noqa: E731
    return {"tok_s": streams * tokens / (end - start), "ttft_ms": 1000 * statistics.median(ttft),
            "itl_p50_ms": 1000 * pct(itl, 0.5), "itl_p99_ms": 1000 * pct(itl, 0.99)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", default=",".join(str(f) for f in DEFAULT_FILES))
    ap.add_argument("--streams", default="1,4,16")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--ctx", type=int, default=512, help="positions per slot")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--helmc", default=str(ROOT / "build" / "bin" / "helmc"))
    ap.add_argument("--helm-rt", default=str(ROOT / "build" / "bin" / "helm-rt"))
    ap.add_argument("--llama-server", default=str(LLAMA / "build" / "bin" / "llama-server"))
    ap.add_argument("--json")
    args = ap.parse_args()
    streams = [int(s) for s in args.streams.split(",")]
    slots = max(streams)
    if not Path(args.llama_server).exists():
        sys.exit(f"serve-bench: {args.llama_server} missing: run bench/build-llama-cpp.sh --server")
    report = []
    with tempfile.TemporaryDirectory(prefix="serve-bench-") as tmp:
        for f in [Path(p) for p in args.files.split(",")]:
            if not f.exists():
                log(f"skipping {f} (missing)")
                continue
            pkg = Path(tmp) / (f.stem + ".helmpkg")
            subprocess.run([args.helmc, str(f), "--target=host", "-q", "-o", str(pkg)], check=True)
            systems = {
                "helm": lambda port: Running([args.helm_rt, "serve", str(pkg), "--port", str(port), "--parallel",
                                              str(slots), "--ctx-per-slot", str(args.ctx), "-t", str(args.threads)],
                                             port),
                "llama-server": lambda port: Running([args.llama_server, "-m", str(f), "--port", str(port), "-np",
                                                      str(slots), "-c", str(slots * args.ctx), "-t",
                                                      str(args.threads), "--no-webui", "-lv", "0"], port),
            }
            measured = {(name, s): [] for name in systems for s in streams}
            for r in range(args.runs):
                for name, start in (systems.items() if r % 2 == 0 else reversed(list(systems.items()))):
                    port = free_port()
                    server = start(port)
                    try:
                        run_load(port, 1, 8, "Warm-up")
                        for s in streams:
                            m = run_load(port, s, args.tokens, f"Request {r}.{s}")
                            measured[(name, s)].append(m)
                            log(f"{f.name} round {r + 1} {name} {s} streams: {m['tok_s']:.1f} tok/s, "
                                f"TTFT {m['ttft_ms']:.0f} ms, ITL p50 {m['itl_p50_ms']:.1f} p99 {m['itl_p99_ms']:.1f} ms")
                    finally:
                        server.stop()
            print(f"\n{f.name}: {args.tokens} tokens per stream, {slots} slots of {args.ctx}, {args.threads} threads, "
                  f"{args.runs} rounds (median [min-max])")
            print(f"{'streams':>7} {'system':>13} {'tok/s':>22} {'TTFT ms':>10} {'ITL p50':>8} {'ITL p99':>8}")
            for s in streams:
                for name in systems:
                    ms = measured[(name, s)]
                    tok = [m["tok_s"] for m in ms]
                    med = lambda k: statistics.median(m[k] for m in ms)  # noqa: E731
                    print(f"{s:>7} {name:>13} {statistics.median(tok):>8.1f} [{min(tok):.1f}-{max(tok):.1f}]"
                          f" {med('ttft_ms'):>10.0f} {med('itl_p50_ms'):>8.1f} {med('itl_p99_ms'):>8.1f}")
                    report.append({"file": f.name, "system": name, "streams": s, "runs": ms})
                h = statistics.median(m["tok_s"] for m in measured[("helm", s)])
                l = statistics.median(m["tok_s"] for m in measured[("llama-server", s)])
                hp = statistics.median(m["itl_p99_ms"] for m in measured[("helm", s)])
                lp = statistics.median(m["itl_p99_ms"] for m in measured[("llama-server", s)])
                print(f"{s:>7} {'helm/llama':>13} {h / l:>8.2f}x tok/s, ITL p99 {hp / lp:.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
