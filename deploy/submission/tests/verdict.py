"""The official tests' reading of the checker's output (<work>/logs/check.log): which lines fail the
tree, which of them a short run explains (the test's ALLOWED list), which depend on the host's speed
(its TIMING list: printed, not failed), and what is left (a failure each)."""
import os
import re
import shutil
import subprocess
import time

# What the checker reports of any short run: its duration, the accuracy run's coverage, and the
# summary lines that follow any error.
SHORT_RUN = [
    r"Test duration less than 600s in user config",
    r"accurcy run does not cover all dataset|accuracy run does not cover all dataset",
    r"Some (performance|accuracy|compliance) checks? Checks failed for",
    r"NoResults ",
    r"SUMMARY: submission has errors",
]
# And of a small QSL: the performance sample count and the query and sample counts.
SMALL_QSL = [
    r"performance_sample_count, found \d+, needs to be >= \d+",
    r"Required minimum Query Count not met by user config",
    r"Required minimum samples per query not met by user config",
]


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


def submit_and_judge(py, submit, cfg, tmp, artefacts, allowed, timing, timeout, keep=()):
    """Runs submit.py --submission on |cfg| (work and output under |tmp|), which a short run cannot
    pass (exit 1); keeps the checker's output, and the files |keep| of the work folder, in
    |artefacts|; then judges the checker's output. Returns (submit.py's CompletedProcess, lines of
    the log, failures)."""
    failures = []
    t1 = time.monotonic()
    r = subprocess.run([py, submit, cfg, "--submission"], capture_output=True, text=True,
                       timeout=timeout)
    print(f"submit.py --submission: exit {r.returncode} in {time.monotonic() - t1:.0f} s")
    print(r.stderr[-3000:])
    print(r.stdout[-6000:])
    if r.returncode != 1:  # a short run cannot pass the checker
        failures.append(f"submit.py --submission exited {r.returncode}, expected 1")
    log = os.path.join(tmp, "work", "logs", "check.log")
    os.makedirs(artefacts, exist_ok=True)
    kept = os.path.join(artefacts, "checker-output.txt")
    if os.path.exists(log):
        shutil.copy(log, kept)
        print(f"the checker's output is kept in {kept}")
    for w in keep:
        if os.path.exists(os.path.join(tmp, "work", w)):
            shutil.copy(os.path.join(tmp, "work", w), os.path.join(artefacts, w))
    lines, bad = judge(log, allowed, timing)
    return r, lines, failures + bad
