#!/usr/bin/env bash
# A fuzzing campaign: every fuzz target for a while, on a persistent corpus, with the corpus merged
# and minimised back into the repository's seed folder and a summary table at the end.
#
#   scripts/fuzz.sh [--minutes M] [--target NAME]... [--no-merge] [--jobs J]
#
#   --minutes M   time per target and round (default 10)
#   --target NAME importer, package, gguf, tokenizer, profile, cli, helmc-cli, chat-template or
#                 server-request (repeatable; default all)
#   --no-merge    keep the committed seed folders as they are (the importer's always are: its
#                 merged corpus stays in .cache/fuzz/importer)
#   --jobs J      parallel libFuzzer workers per target (default 1)
#
# The persistent corpus lives in .cache/fuzz/<target>/corpus (git-ignored) and grows across runs;
# libFuzzer's own statistics are kept in .cache/fuzz/<target>/runs.tsv, one line per run, so the
# summary's "total execs" is the sum over every run on this machine. A crash, timeout, leak of the
# RSS limit or sanitizer report is a finding: its input is copied to
# test/fuzz/regressions/<target>/ (which ctest runs, fuzz.FuzzSeeds.*) and the script exits 1.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"

minutes=10
merge=1
jobs=1
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes="$2"; shift 2 ;;
    --target) targets+=("$2"); shift 2 ;;
    --no-merge) merge=0; shift ;;
    --jobs) jobs="$2"; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown flag '$1' (try --help)" >&2; exit 1 ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(importer package gguf tokenizer profile cli helmc-cli chat-template server-request)
for t in "${targets[@]}"; do
  case "$t" in
    importer|package|gguf|tokenizer|profile|cli|helmc-cli|chat-template|server-request) ;;
    *) echo "fuzz.sh: unknown target '$t' (importer, package, gguf, tokenizer, profile, cli, helmc-cli, chat-template, server-request)" >&2; exit 1 ;;
  esac
done

# target -> executable and the seed folders (the first is the one merged back into).
seeds_of() {
  case "$1" in
    importer) echo "test/fuzz/corpus test/fuzz/regressions/importer" ;;
    package) echo "test/fuzz/package-corpus test/fuzz/regressions/package" ;;
    gguf) echo "test/fuzz/gguf-corpus test/fuzz/regressions/gguf" ;;
    tokenizer) echo "test/fuzz/tokenizer-corpus test/fuzz/regressions/tokenizer test/unit/runtime/tokenizer/data" ;;
    profile) echo "test/fuzz/profile-corpus test/fuzz/regressions/profile" ;;
    cli) echo "test/fuzz/cli-corpus test/fuzz/regressions/cli" ;;
    helmc-cli) echo "test/fuzz/helmc-cli-corpus test/fuzz/regressions/helmc-cli" ;;
    chat-template) echo "test/fuzz/chat-template-corpus test/fuzz/regressions/chat-template" ;;
    server-request) echo "test/fuzz/server-request-corpus test/fuzz/regressions/server-request" ;;
  esac
}
exe_of() {
  case "$1" in
    importer) echo helm-import-fuzzer ;;
    helmc-cli) echo helmc-cli-fuzzer ;;
    *) echo "helm-$1-fuzzer" ;;
  esac
}

[ -x .venv/bin/python ] || scripts/install-deps.sh
cmake --preset fuzz >/dev/null
for t in "${targets[@]}"; do
  cmake --build build-fuzz -j "${HELM_JOBS:-2}" --target "$(exe_of "$t")"
done

# collect_artifacts TARGET STATE LABEL: moves the target's libFuzzer artifacts into its regression
# folder, one line each on stderr, and prints how many there were.
collect_artifacts() {
  local n=0 f
  for f in "$2"/artifacts/*; do
    [ -f "$f" ] || continue
    mkdir -p "test/fuzz/regressions/$1"
    cp "$f" "test/fuzz/regressions/$1/"
    echo "   $3: $f -> test/fuzz/regressions/$1/$(basename "$f")" >&2
    rm -f "$f"
    n=$((n + 1))
  done
  echo "$n"
}

findings=0
summary=()
for t in "${targets[@]}"; do
  exe="build-fuzz/test/fuzz/$(exe_of "$t")"
  state=".cache/fuzz/$t"
  mkdir -p "$state/corpus" "$state/artifacts"
  read -r -a seed_dirs <<<"$(seeds_of "$t")"
  largest=0
  for d in "${seed_dirs[@]}" "$state/corpus"; do
    [ -d "$d" ] || continue
    s="$(find "$d" -maxdepth 1 -type f -printf '%s\n' | sort -n | tail -n 1)"
    [ -n "$s" ] && [ "$s" -gt "$largest" ] && largest="$s"
  done
  max_len=$(( largest > 65536 ? largest : 65536 ))
  existing=()
  for d in "${seed_dirs[@]}"; do [ -d "$d" ] && existing+=("$d"); done
  log="$state/last-run.log"
  # Artifacts that an interrupted earlier run left behind are reported as that run's, before this
  # one starts (they still make the script fail), so the summary counts only this run's findings.
  left="$(collect_artifacts "$t" "$state" "left by an earlier, interrupted run")"
  findings=$((findings + left))
  echo "== $t: ${minutes} min, max_len ${max_len}, corpus $state/corpus"
  # One process by default; with --jobs J > 1, libFuzzer's parallel mode (its parent copies each
  # worker's log to its own output, so $log has them all once; the fuzz-<n>.log files are removed).
  parallel=()
  [ "$jobs" -gt 1 ] && parallel=(-jobs="$jobs" -workers="$jobs")
  set +e
  ASAN_OPTIONS=detect_leaks=0 "$exe" "$state/corpus" "${existing[@]}" \
    -max_total_time=$(( minutes * 60 )) -max_len="$max_len" -timeout=20 -rss_limit_mb=4096 \
    "${parallel[@]}" -artifact_prefix="$state/artifacts/" -print_final_stats=1 >"$log" 2>&1
  rc=$?
  set -e
  rm -f fuzz-*.log
  # awk alone: a log without the lines (a fuzzer that died at start) gives 0, not a failed pipe.
  execs="$(awk '/^stat::number_of_executed_units/ {s += $2} END {print s + 0}' "$log")"
  cov="$(awk '{for (i = 1; i < NF; ++i) if ($i == "cov:") c = $(i + 1)} END {print c + 0}' "$log")"
  new_findings="$(collect_artifacts "$t" "$state" "finding")"
  if [ "$rc" -ne 0 ] && [ "$new_findings" -eq 0 ]; then
    echo "   $exe exited $rc without an artifact; see $log" >&2
    new_findings=1
  fi
  findings=$((findings + new_findings))
  printf '%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$minutes" "$execs" "$cov" "$new_findings" >>"$state/runs.tsv"
  total="$(awk -F'\t' '{s += $3} END {print s + 0}' "$state/runs.tsv")"
  # The importer's inputs are whole models (up to 127 KB each): its merged corpus stays in
  # .cache/fuzz/importer instead of growing the repository by megabytes per campaign.
  if [ "$merge" = 1 ] && [ "$new_findings" -eq 0 ] && [ "$t" != importer ]; then
    # Merge into the committed seed folder: -merge=1 adds only the inputs of the persistent corpus
    # that reach coverage the committed seeds do not (which stay as they are, by name).
    ASAN_OPTIONS=detect_leaks=0 "$exe" -merge=1 -max_len="$max_len" "${seed_dirs[0]}" \
      "$state/corpus" >"$state/merge.log" 2>&1
  fi
  summary+=("$(printf '%-10s %8s %14s %14s %8s %9s' "$t" "$minutes" "$execs" "$total" "$cov" "$new_findings")")
done

echo
printf '%-10s %8s %14s %14s %8s %9s\n' target minutes execs "total execs" cov findings
for line in "${summary[@]}"; do echo "$line"; done
[ "$findings" -eq 0 ] || { echo "fuzz.sh: $findings finding(s); inputs in test/fuzz/regressions/" >&2; exit 1; }
