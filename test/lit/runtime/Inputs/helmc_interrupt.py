#!/usr/bin/env python3
"""helmc interrupted: SIGINT or SIGTERM while it writes a package, and before it starts writing.

  helmc_interrupt.py HELMC MODEL OUTDIR

For each signal: one run is stopped (SIGSTOP) the moment its temporary package file appears in
OUTDIR, sent the signal and continued; another gets the signal once it says it is planning. Each must
exit with 130, print exactly one line on stderr ("helmc: error: interrupted; no output written")
and leave OUTDIR empty: no package, no temporary file. A run that finished writing before the file
was seen proves nothing and is tried again (at most 20 times). Prints "interrupt ok" or exits 1.
"""
import os
import signal
import subprocess
import sys
import time

MESSAGE = "helmc: error: interrupted; no output written"


def check(proc, outdir, what):
    _, err = proc.communicate(timeout=120)
    err = err.decode("utf-8", "replace")
    if proc.returncode != 130:
        sys.exit("%s: exit status %d, expected 130; stderr:\n%s" % (what, proc.returncode, err))
    lines = [line for line in err.splitlines() if line]
    if lines != [MESSAGE]:
        sys.exit("%s: stderr is not the one interruption line:\n%s" % (what, err))
    left = os.listdir(outdir)
    if left:
        sys.exit("%s: left behind: %s" % (what, ", ".join(sorted(left))))


def while_writing(helmc, model, outdir, sig):
    for _ in range(20):
        out = os.path.join(outdir, "m.helmpkg")
        proc = subprocess.Popen([helmc, model, "-q", "-o", out], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        seen = False
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if any(".tmp-" in name for name in os.listdir(outdir)):
                proc.send_signal(signal.SIGSTOP)
                # Still there once stopped: the signal lands while the file is being written.
                seen = any(".tmp-" in name for name in os.listdir(outdir))
                if seen:
                    proc.send_signal(sig)
                proc.send_signal(signal.SIGCONT)
                break
            time.sleep(0.0005)
        if seen:
            check(proc, outdir, "%s while writing" % signal.Signals(sig).name)
            return
        proc.communicate(timeout=120)
        for name in os.listdir(outdir):
            os.remove(os.path.join(outdir, name))
    sys.exit("never caught helmc while its temporary file existed")


def while_planning(helmc, model, outdir, sig):
    # The first progress line ("helmc: planning for ...") comes before code generation and the
    # package file: the signal lands in the compilation itself. A run that finished before the
    # signal arrived proves nothing and is tried again.
    for _ in range(5):
        proc = subprocess.Popen([helmc, model, "--target=emu:rtx4060", "-o", os.path.join(outdir, "m.helmpkg")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        first = proc.stderr.readline().decode("utf-8", "replace")
        if not first.startswith("helmc: planning for"):
            sys.exit("the first progress line is not the planning one: %r" % first)
        proc.send_signal(sig)
        proc.wait(timeout=120)
        if proc.returncode == 0:
            proc.communicate(timeout=120)
            for name in os.listdir(outdir):
                os.remove(os.path.join(outdir, name))
            continue
        check(proc, outdir, "%s while planning" % signal.Signals(sig).name)
        return
    sys.exit("helmc always finished before the signal arrived")


def main():
    helmc, model, outdir = sys.argv[1:4]
    os.makedirs(outdir, exist_ok=True)
    for sig in (signal.SIGINT, signal.SIGTERM):
        while_writing(helmc, model, outdir, sig)
        while_planning(helmc, model, outdir, sig)
    print("interrupt ok")


main()
