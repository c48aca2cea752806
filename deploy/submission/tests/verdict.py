"""The official tests' reading of the checker's output (<work>/logs/check.log): which lines fail the
tree, which of them a short run explains (the test's ALLOWED list), which depend on the host's speed
(its TIMING list: printed, not failed), and what is left (a failure each)."""
import os
import re


def problem_lines(lines):
    """Every line the checker marks ERROR, and its "accuracy not met" lines (logged as WARNING)."""
    return [ln for ln in lines if re.search(r"\bERROR\b", ln) or "accuracy not met" in ln]


def judge(log, allowed, timing):
    """(lines of the log, failures) for the checker's output in |log|."""
    lines = open(log, errors="replace").read().splitlines() if os.path.exists(log) else []
    errors = problem_lines(lines)
    failures = [] if errors else ["the checker printed no error at all (a short run cannot "
                                  "pass)"]
    slow = [ln for ln in errors if any(re.search(t, ln) for t in timing)]
    for ln in errors:
        if ln not in slow and not any(re.search(a, ln) for a in allowed):
            failures.append("checker error beyond what a short run explains: " + ln)
    print(f"{len(errors)} checker error and 'accuracy not met' lines; {len(slow)} of them on "
          "the timing of short runs on this host:")
    for ln in slow:
        print("  timing: " + ln[ln.find("ERROR]") + 7:][:200])
    return lines, failures
