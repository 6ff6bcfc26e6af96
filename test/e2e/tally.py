"""The end-to-end scripts' report: one line per case, then "N passed, M failed" (what ctest logs show)."""


class Tally:
    def __init__(self) -> None:
        self.passed = self.failed = 0

    def report(self, ok: bool, line: str, problems=()) -> None:
        """Prints `ok  LINE` or `FAIL LINE -- PROBLEM; ...` and counts it."""
        suffix = " -- " + "; ".join(problems) if problems else ""
        print(f"{'ok  ' if ok else 'FAIL'} {line}{suffix}", flush=True)
        self.passed += bool(ok)
        self.failed += not ok

    def finish(self) -> int:
        """Prints the summary; the exit status: 1 on any failure."""
        print(f"{self.passed} passed, {self.failed} failed")
        return 1 if self.failed else 0
