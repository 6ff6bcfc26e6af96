#!/usr/bin/env python3
"""Ctrl-C in the middle of a generation: sends SIGINT to helm-rt once its first text has streamed
and checks that it stopped cleanly.

  interrupt.py HELM_RT PACKAGE STATS_JSON

The run asks for far more tokens than reach stdout before the signal lands (-n 4000, --ignore-eos).
Checked: exit status 130 (128 + SIGINT); stdout holds the streamed text and ends with the newline
helm-rt writes after it; stderr says "interrupted: stopped after N generated tokens" with
0 < N < 4000, then the usual timing line; --stats-json is written with "interrupted": true and the
same N. A run that finished all 4000 tokens before the signal arrived proves nothing and is retried.
Prints "interrupt ok" or exits 1 with the reason.
"""
import json
import re
import signal
import subprocess
import sys

ASKED = 4000


def attempt(helm_rt, package, stats_path):
    proc = subprocess.Popen([helm_rt, package, "-p", "hello", "-n", str(ASKED), "--ignore-eos", "--temperature", "0",
                             "--stats-json", stats_path], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.read(1)  # the first streamed byte: generation has started
    proc.send_signal(signal.SIGINT)
    rest, err = proc.communicate(timeout=120)
    out, err = (first + rest).decode("utf-8", "replace"), err.decode()
    if proc.returncode == 0 and "interrupted" not in err:
        return None  # finished before the signal: try again
    if proc.returncode != 128 + signal.SIGINT:
        sys.exit("exit status %d, expected 130; stderr:\n%s" % (proc.returncode, err))
    lines = err.splitlines()
    match = re.fullmatch(r"helm-rt: interrupted: stopped after (\d+) generated tokens", lines[0] if lines else "")
    if not match:
        sys.exit("first stderr line is not the interruption notice:\n%s" % err)
    tokens = int(match.group(1))
    if not 0 < tokens < ASKED:
        sys.exit("stopped after %d tokens, expected between 1 and %d" % (tokens, ASKED - 1))
    if len(lines) < 2 or not lines[1].startswith("helm-rt: load "):
        sys.exit("no timing line after the notice:\n%s" % err)
    if not out or not out.endswith("\n"):
        sys.exit("stdout does not end with the final newline: %r" % out[-40:])
    stats = json.load(open(stats_path))
    if stats.get("interrupted") is not True or stats.get("generated_tokens") != tokens:
        sys.exit("stats: interrupted=%r generated_tokens=%r, expected true and %d" %
                 (stats.get("interrupted"), stats.get("generated_tokens"), tokens))
    return tokens


def main():
    helm_rt, package, stats_path = sys.argv[1:4]
    for _ in range(3):
        if attempt(helm_rt, package, stats_path) is not None:
            print("interrupt ok")
            return
    sys.exit("helm-rt finished all %d tokens three times before SIGINT arrived" % ASKED)


if __name__ == "__main__":
    main()
