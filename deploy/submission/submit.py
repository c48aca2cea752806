#!/usr/bin/env python3
"""submit.py: a Network-division submission in one command, from running nodes to a checked tree.

    submit.py CONFIG --submission [--redo STEP ...] [--inference-dir DIR] [--checker-flag FLAG ...]
    submit.py CONFIG --dry-run    [--redo STEP ...] [--inference-dir DIR]
    submit.py CONFIG --list       (the steps and which are done)

--submission runs every test with the unaltered official LoadGen (loadgen-node --loadgen
official, a build configured with -DMLPERF_LOADGEN_ROOT) and refuses any log that the official
LoadGen did not write. --dry-run runs the same steps with loadgen-node's built-in scheduler and
marks the tree NOT FOR SUBMISSION (for rehearsals and CI; the official scripts are used when the
config names an inference checkout, and skipped otherwise).

Finished steps are kept: run it again after an interruption and it goes on where it stopped;
--redo STEP (a step name or a prefix such as resnet50/Server, or 'all') does steps again.
Exit status: 0 when every step ran and the checker (when it ran) found no error, 1 when it found
errors or "accuracy not met" (printed), 2 for a bad config (one line naming the file, line,
section and key) or arguments, 3 when a step failed, a log was refused, a write would land
outside the output and work folders (a symbolic link in the tree), or a benchmark's official
accuracy script lacks Python modules (named, before any step). The config format is in netsub/config.py and
README.md beside this file.
"""
import argparse
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netsub import accuracy, provenance, tree  # noqa: E402
from netsub.config import Config, ConfigError  # noqa: E402
from netsub.confine import Outside, symlinks_under  # noqa: E402
from netsub.runner import Runner, StepFailed  # noqa: E402
from netsub.state import State, StateError  # noqa: E402

PROG = "submit.py"


def refuse_unofficial(cfg, state):
    """--submission: every detail log already in the work folder or the tree must be the official
    LoadGen's. Returns the list of problems."""
    logs = glob.glob(os.path.join(cfg.work, "runs", "**", "mlperf_log_detail.txt"),
                     recursive=True)
    logs += glob.glob(os.path.join(cfg.root(), "results", "**", "mlperf_log_detail.txt"),
                      recursive=True)
    return [p for p in (provenance.official_problem(x) for x in sorted(logs)) if p]


def main():
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0],
                                 epilog="See deploy/submission/README.md.")
    ap.add_argument("config")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--submission", action="store_true",
                      help="the official LoadGen; refuse any other log")
    mode.add_argument("--dry-run", action="store_true",
                      help="the built-in scheduler; the tree is marked not for submission")
    mode.add_argument("--list", action="store_true", help="list the steps and exit")
    ap.add_argument("--redo", action="append", default=[], metavar="STEP",
                    help="do this step (or every step under this prefix, or 'all') again")
    ap.add_argument("--inference-dir", metavar="DIR",
                    help="the mlcommons/inference checkout (checker, compliance, accuracy "
                         "scripts), over the config's inference =")
    ap.add_argument("--checker-flag", action="append", default=[], metavar="FLAG",
                    help="pass FLAG to the submission checker (e.g. --skip-dataset-size-check "
                         "for a rehearsal; never for the real submission)")
    a = ap.parse_args()
    # The official scripts and the checker run from the user's inference checkout: their
    # imports must not leave __pycache__ folders in it.
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    try:
        cfg = Config(a.config, inference=a.inference_dir)
    except ConfigError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    want = "submission" if a.submission else "dry-run"
    try:
        state = State(cfg.work, want, cfg.fs)
    except (StateError, Outside, OSError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    runner = Runner(cfg, state, dry_run=not a.submission, redo=a.redo,
                    checker_flags=a.checker_flag)
    bad = runner.unknown_redo()
    if bad:
        print(f"{PROG}: --redo {bad}: no such step or prefix (see --list)", file=sys.stderr)
        return 2
    if a.list:
        for st in runner.plan():
            print(f"{'done ' if state.done(st[0]) else '     '} {st[0]}")
        return 0
    missing = [p for p in (accuracy.problem(b, cfg.inference) for b in cfg.benchmarks) if p]
    if missing:
        for p in missing:
            print(f"{PROG}: {p}", file=sys.stderr)
        return 3
    if not cfg.rules.from_checker:
        print(f"{PROG}: note: the eligible benchmarks and their scenarios come from "
              f"{cfg.rules.source}")
    links = symlinks_under(cfg.output)
    if links:
        print(f"{PROG}: {links[0]} is a symbolic link (to {os.readlink(links[0])}): refusing to "
              "write into a tree that holds one (the runner writes only inside the output "
              "folder; the submission repository refuses links); remove it", file=sys.stderr)
        return 3
    if a.submission and "all" not in a.redo:
        problems = refuse_unofficial(cfg, state)
        if problems:
            print(f"{PROG}: refusing to make a submission from logs the official LoadGen did not "
                  "write (MLPerf results must come from the unaltered official LoadGen):",
                  file=sys.stderr)
            for p in problems:
                print(f"  {p}", file=sys.stderr)
            print(f"{PROG}: these are loadgen-node's own logs (a --dry-run?). Run again with "
                  f"--submission --redo all, or give the config a fresh output/work folder.",
                  file=sys.stderr)
            return 3
    if state.mode != want and any(True for _ in state.data["done"]):
        if "all" not in a.redo:
            print(f"{PROG}: {cfg.work} holds a {state.mode} run; add --redo all to start this "
                  f"{want} over", file=sys.stderr)
            return 2
    try:
        state.set_mode(want)
        tree.mark_not_for_submission(cfg, not a.submission)
        verdict = runner.execute()
    except (StepFailed, Outside, OSError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        print(f"{PROG}: finished steps are kept; fix the cause and run the same command again",
              file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print(f"\n{PROG}: interrupted; finished steps are kept, the same command resumes",
              file=sys.stderr)
        return 130
    if a.submission:
        problems = refuse_unofficial(cfg, state)
        if problems:
            print(f"{PROG}: the tree holds logs not written by the official LoadGen:",
                  file=sys.stderr)
            for p in problems:
                print(f"  {p}", file=sys.stderr)
            return 3
    print(f"\n{PROG}: the tree is in {cfg.output}"
          + ("" if a.submission else " (DRY RUN: not for submission)"))
    if cfg.demo:
        print(f"{PROG}: demo = yes: a CPU demo tree, not a Network-division result")
    if runner.checker_problems:
        print(f"{PROG}: the submission checker found errors or accuracy not met (listed above)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
