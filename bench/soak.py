#!/usr/bin/env python3
"""Soak test of helm-rt (a benchmark run by hand, not a CI test): long generation, many runs, Ctrl-C.

  bench/soak.py PACKAGE [--helm-rt build/bin/helm-rt] [--tokens 2500] [--batch 4] [--runs 100]

1. One long run: --batch B sequences of --tokens tokens each (2500 x 4 = 10,000 generated tokens by
   default), --ignore-eos, sampled at temperature 0.8. The process's resident set (VmRSS) and open
   file descriptors (/proc/PID/fd) are sampled every 0.25 s. Reported: RSS once the decode loop runs
   (the first sample after 10% of the run), at the end, and the largest rise in between; fds min/max.
   The KV cache is reserved for the whole session before the first token, and its pages are backed
   as positions are written: RSS may grow by the KV bytes written, and by no more than 2% besides.
2. --runs successive runs of 32 tokens each, a fresh process per run: peak RSS and the open fds each
   run reports in --stats-json ("peak_rss_bytes", "open_fds"); first, median, last, max - min.
3. Ctrl-C: a run of 2000 tokens gets SIGINT after 3 s; reported: exit status (130 expected), the
   notice line, how long it took to exit after the signal, and whether stdout holds the text.

Prints a table; exits 1 if RSS rose by more than 2% during the long run, if fds changed across runs
or during the run, or if the interrupted run did not exit with 130 and its text.
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

PROMPT = "Once upon a time, in a quiet village by the sea,"


def read_rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def count_fds(pid):
    try:
        return len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return None


def kv_bytes_per_token(args):
    """KV-cache bytes one position of one sequence takes: 2 (K and V) x layers x KV heads x head dim x
    the model's element size, from `helm-rt --info`."""
    info = subprocess.run([args.helm_rt, args.package, "--info"], capture_output=True, text=True, check=True).stdout
    layers, heads, head_dim = map(int, re.search(r"layers:\s+(\d+) \(KV heads (\d+), head dim (\d+)\)", info).groups())
    dtype = re.search(r"model:\s+\w+, (\w+)", info).group(1)
    return 2 * layers * heads * head_dim * (4 if dtype == "float32" else 2)


def long_run(args):
    cmd = [args.helm_rt, args.package, "-p", PROMPT, "--batch", str(args.batch), "-n", str(args.tokens),
           "--ignore-eos", "--temperature", "0.8", "--seed", "7", "-q"]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    samples = []  # (seconds, rss KiB, fds)
    while proc.poll() is None:
        rss, fds = read_rss_kib(proc.pid), count_fds(proc.pid)
        if rss is not None and fds is not None:
            samples.append((time.monotonic() - start, rss, fds))
        time.sleep(0.25)
    err = proc.stderr.read().decode()
    if proc.returncode != 0 or not samples:
        sys.exit("long run failed (exit %d):\n%s" % (proc.returncode, err))
    total = samples[-1][0]
    steady = [s for s in samples if s[0] >= 0.1 * total]
    base = steady[0][1]
    rise = max(s[1] for s in steady) - base
    # The KV cache is reserved for the whole session up front, but the OS backs its pages only as
    # positions are written: the KV written between the first steady sample and the end is expected
    # growth (decode runs at a steady rate, so that is the share of the run's tokens written since).
    kv_kib = kv_bytes_per_token(args) * args.batch * args.tokens / 1024
    expected = kv_kib * (samples[-1][0] - steady[0][0]) / total
    return {"seconds": total, "rss_start_mib": base / 1024, "rss_end_mib": steady[-1][1] / 1024,
            "rss_rise_mib": rise / 1024, "kv_written_mib": expected / 1024,
            "rss_rise_pct": 100.0 * max(0.0, rise - expected) / base,
            "fds_min": min(s[2] for s in steady), "fds_max": max(s[2] for s in steady),
            "timing": err.strip().splitlines()[-1] if err.strip() else ""}


def many_runs(args, tmp):
    rss, fds = [], []
    stats_path = os.path.join(tmp, "stats.json")
    for i in range(args.runs):
        subprocess.run([args.helm_rt, args.package, "-p", PROMPT, "-n", "32", "--temperature", "0",
                        "--stats-json", stats_path, "-q"], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        with open(stats_path) as f:
            stats = json.load(f)
        rss.append(stats["peak_rss_bytes"] / 2**20)
        fds.append(stats["open_fds"])
        if (i + 1) % 10 == 0:
            print("  run %d/%d: peak RSS %.1f MiB, %d open fds" % (i + 1, args.runs, rss[-1], fds[-1]), flush=True)
    return rss, fds


def interrupted_run(args):
    cmd = [args.helm_rt, args.package, "-p", PROMPT, "-n", "2000", "--ignore-eos", "--temperature", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    chunks = []
    reader = threading.Thread(target=lambda: chunks.append(proc.stdout.read()))
    reader.start()
    time.sleep(3)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    err = proc.stderr.read().decode()
    proc.wait()
    exit_s = time.monotonic() - sent
    reader.join()
    text = b"".join(chunks).decode("utf-8", "replace")
    notice = next((l for l in err.splitlines() if "interrupted" in l), "")
    return proc.returncode, notice, exit_s, text


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("package")
    ap.add_argument("--helm-rt", default=os.path.join(os.path.dirname(__file__), "..", "build", "bin", "helm-rt"))
    ap.add_argument("--tokens", type=int, default=2500)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--runs", type=int, default=100)
    args = ap.parse_args()
    failures = []

    print("1. long run: batch %d x %d tokens" % (args.batch, args.tokens), flush=True)
    r = long_run(args)
    print("  %.0f s; RSS %.1f MiB in the decode loop -> %.1f MiB at the end, largest rise %.1f MiB, of which "
          "%.1f MiB is KV cache written since; the rest %.2f%% of the start; open fds %d..%d" % (
              r["seconds"], r["rss_start_mib"], r["rss_end_mib"], r["rss_rise_mib"], r["kv_written_mib"],
              r["rss_rise_pct"], r["fds_min"], r["fds_max"]))
    print("  " + r["timing"])
    if r["rss_rise_pct"] > 2:
        failures.append("RSS rose %.2f%% beyond the KV cache written during the long run" % r["rss_rise_pct"])
    if r["fds_min"] != r["fds_max"]:
        failures.append("open fds changed during the long run (%d..%d)" % (r["fds_min"], r["fds_max"]))

    print("2. %d successive runs of 32 tokens" % args.runs, flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        rss, fds = many_runs(args, tmp)
    print("  peak RSS MiB: first %.1f, median %.1f, last %.1f, max - min %.2f; open fds: first %d, last %d, "
          "distinct %s" % (rss[0], statistics.median(rss), rss[-1], max(rss) - min(rss), fds[0], fds[-1],
                           sorted(set(fds))))
    if len(set(fds)) != 1:
        failures.append("open fds differ across runs: %s" % sorted(set(fds)))

    print("3. SIGINT after 3 s of a 2000-token run", flush=True)
    code, notice, exit_s, text = interrupted_run(args)
    print("  exit %d after %.3f s; %r; %d characters of text on stdout" % (code, exit_s, notice, len(text)))
    if code != 130 or not notice or not text.strip():
        failures.append("interrupted run: exit %d, notice %r, %d characters" % (code, notice, len(text)))

    for f in failures:
        print("FAIL: " + f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
