"""The results tree as the submission checker reads it (v6.x layout, Network division):

    network/<org>/systems/<system>.json                  (+ <system>_network.dot/.svg diagram)
    network/<org>/src/README.md                          where the harness source is
    network/<org>/results/<system>/<benchmark>/<scenario>/
        performance/run_1/mlperf_log_{summary,detail}.txt
        accuracy/mlperf_log_{summary,detail}.txt, mlperf_log_accuracy.json, accuracy.txt
        TEST01/, TEST04/, TEST06/        (written by the official run_verification.py)
        measurements.json, user.conf, README.md

Every write goes through cfg.fs (confine.py): nothing lands outside the output folder.
"""
import json
import os

from .accuracy import STANDIN_LINE, STANDIN_MARK

NOT_FOR_SUBMISSION = "NOT_FOR_SUBMISSION.txt"


def scenario_dir(cfg, bench, scenario):
    return os.path.join(cfg.root(), "results", cfg.system, bench.tree_name, scenario)


def copy_files(fs, src_dir, dst_dir, names):
    fs.makedirs(dst_dir)
    for n in names:
        fs.copy(os.path.join(src_dir, n), os.path.join(dst_dir, n))


def place_performance(fs, run_dir, sdir):
    dst = os.path.join(sdir, "performance", "run_1")
    fs.rmtree(dst)
    copy_files(fs, run_dir, dst, ["mlperf_log_summary.txt", "mlperf_log_detail.txt"])


def place_accuracy(fs, run_dir, accuracy_txt, sdir):
    dst = os.path.join(sdir, "accuracy")
    fs.rmtree(dst)
    copy_files(fs, run_dir, dst, ["mlperf_log_summary.txt", "mlperf_log_detail.txt",
                                  "mlperf_log_accuracy.json"])
    fs.copy(accuracy_txt, os.path.join(dst, "accuracy.txt"))


def write_measurements(cfg, bench, scenario, sdir, dry_run):
    cfg.fs.makedirs(sdir)
    cfg.fs.copy(bench.user_conf, os.path.join(sdir, "user.conf"))
    with cfg.fs.open(os.path.join(sdir, "measurements.json")) as f:
        json.dump(dict(bench.measurements), f, indent=2)
        f.write("\n")
    write_readme(cfg, bench, scenario, sdir, [], dry_run)


def write_readme(cfg, bench, scenario, sdir, commands, dry_run):
    """commands: [(step, command text)] in the order they ran."""
    lines = [f"# {bench.model} {scenario} on {cfg.system}", "",
             "Run with the Network-division harness (loadgen-node over the QDL to sut-node "
             "daemons), by deploy/submission/submit.py. "
             + ("DRY RUN: loadgen-node's built-in scheduler wrote these logs; they are not "
                "valid for a submission." if dry_run else
                "The unaltered official LoadGen (loadgen-node --loadgen official) wrote the logs."),
             ""]
    if bench.standin:
        lines += [STANDIN_LINE + ": the accuracy in accuracy/accuracy.txt was computed by "
                  f"`{bench.standin}`, not by the benchmark's official accuracy script.", ""]
    lines += ["The commands, step by step:", ""]
    for step, cmd in commands:
        lines += [f"{step}:", "", "```", cmd, "```", ""]
    with cfg.fs.open(os.path.join(sdir, "README.md")) as f:
        f.write("\n".join(lines))


def write_src_readme(cfg, harness_rev):
    d = os.path.join(cfg.root(), "src")
    cfg.fs.makedirs(d)
    with cfg.fs.open(os.path.join(d, "README.md")) as f:
        f.write(f"# {cfg.org}: source of the Network-division harness\n\n"
                "The QDL, loadgen-node and sut-node are the MLPerf Inference Network-division "
                f"harness at revision {harness_rev}. The session-layer API (what is marshalled "
                "per query) is documented in its proto/README.md; the QDL source above the "
                "session layer is qdl/.\n")


def mark_not_for_submission(cfg, on):
    path = os.path.join(cfg.output, NOT_FOR_SUBMISSION)
    if on:
        cfg.fs.makedirs(cfg.output)
        with cfg.fs.open(path) as f:
            f.write("This tree was made with --dry-run: loadgen-node's built-in scheduler wrote "
                    "the logs. The MLPerf rules accept only logs of the unaltered official "
                    "LoadGen; make the submission with submit.py --submission.\n")
    elif os.path.lexists(path):
        cfg.fs.remove(path)


def mark_standin(cfg, on):
    """STAND_IN_ACCURACY.txt at the top of the tree while a benchmark uses accuracy_standin."""
    path = os.path.join(cfg.output, STANDIN_MARK)
    if on:
        cfg.fs.makedirs(cfg.output)
        with cfg.fs.open(path) as f:
            f.write(STANDIN_LINE + ".\nThese benchmarks' accuracy.txt files were written by a "
                    "stand-in command, not by the official accuracy script: "
                    + ", ".join(f"{b.model} ({b.standin})" for b in cfg.benchmarks if b.standin)
                    + "\n")
    elif os.path.lexists(path):
        cfg.fs.remove(path)


def system_json_fields(cfg, base):
    """The fields the runner knows, over the user's base description."""
    d = dict(base)
    d["division"] = cfg.division
    d["submitter"] = cfg.org
    d.setdefault("system_name", cfg.system)
    return d
