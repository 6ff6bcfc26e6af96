#!/usr/bin/env python3
"""check_stats.py STATS.json PROMPT_TOKENS GENERATED_TOKENS SEED: helm-rt --stats-json output has the
documented keys with sensible values; prints "stats ok" or the problem (exit 1)."""
import json
import math
import sys


def main() -> int:
    path, prompt, generated, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    with open(path) as f:
        s = json.load(f)
    problems = []
    if not isinstance(s, dict):
        problems.append("not a JSON object")
        s = {}
    for key in ("ttft_ms", "decode_tok_s", "prefill_tok_s", "peak_rss_bytes"):
        v = s.get(key)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
            problems.append(f"{key}: {v!r} is not a finite number")
    if not problems:
        if s["ttft_ms"] <= 0:
            problems.append(f"ttft_ms {s['ttft_ms']} <= 0")
        if s["prefill_tok_s"] <= 0 or s["decode_tok_s"] <= 0:
            problems.append("token rates must be positive")
        # The process maps the model and its own code: well above 1 MiB, far below 1 TiB.
        if not (1 << 20) < s["peak_rss_bytes"] < (1 << 40):
            problems.append(f"peak_rss_bytes {s['peak_rss_bytes']} implausible")
    if s.get("prompt_tokens") != prompt:
        problems.append(f"prompt_tokens {s.get('prompt_tokens')!r} != {prompt}")
    if s.get("generated_tokens") != generated:
        problems.append(f"generated_tokens {s.get('generated_tokens')!r} != {generated}")
    # The stats file itself is open when the count is taken.
    if not isinstance(s.get("open_fds"), int) or isinstance(s.get("open_fds"), bool) or s["open_fds"] < 1:
        problems.append(f"open_fds {s.get('open_fds')!r} is not a positive count")
    # Bytes of the package on 2 MiB pages: a count, at most the package (the lit packages are small).
    huge = s.get("package_huge_page_bytes")
    if not isinstance(huge, int) or isinstance(huge, bool) or not 0 <= huge < (1 << 40):
        problems.append(f"package_huge_page_bytes {huge!r} is not a byte count")
    if s.get("interrupted") is not False:
        problems.append(f"interrupted {s.get('interrupted')!r} != false (no Ctrl-C was sent)")
    if s.get("seed") != seed:
        problems.append(f"seed {s.get('seed')!r} != {seed} (given with --seed)")
    if problems:
        print("stats bad: " + "; ".join(problems))
        return 1
    print("stats ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
