"""The steps of a submission, in order, each done once (see state.py) unless asked again.

Per benchmark and scenario: accuracy run, accuracy script, performance run, placing the logs,
measurements.json/user.conf/README.md, then per compliance test: the run (audit.config placed in
the run's working folder and removed after) and the official run_verification.py. Then, once:
the system description with the network fields and diagram (deploy/metadata/netmeta.py), the
accuracy-log truncation, and the official submission checker.
"""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

from . import accuracy, provenance, tree
from .confine import Outside, symlinks_under
from .progress import Progress

HERE = os.path.dirname(os.path.abspath(__file__))
NETMETA = os.path.normpath(os.path.join(HERE, "..", "..", "metadata", "netmeta.py"))
REPO = os.path.normpath(os.path.join(HERE, "..", "..", ".."))


GLOBAL_STEPS = ("readme", "system", "truncate", "check")


class StepFailed(Exception):
    pass


class Runner:
    def __init__(self, cfg, state, dry_run, redo=(), checker_flags=(), out=sys.stdout):
        self.cfg = cfg
        self.state = state
        self.dry_run = dry_run
        self.redo = list(redo)
        self.checker_flags = list(checker_flags)
        self.out = out
        self.command = None  # what the running step ran, kept with it in the state
        self.ran_any = False
        self.checker_problems = None  # error + "accuracy not met" lines of the checker's run

    # ---- helpers ----------------------------------------------------------------------------
    def work(self, *p):
        return os.path.join(self.cfg.work, *p)

    def inference(self, *p):
        return os.path.join(self.cfg.inference, *p) if self.cfg.inference else None

    def have_inference(self):
        return bool(self.cfg.inference) and os.path.isdir(self.inference("tools", "submission"))

    def log_path(self, step):
        return self.work("logs", step.replace("/", "_") + ".log")

    def run(self, step, argv, cwd, shell=False, make_cwd=True):
        """Runs |argv| in |cwd| (made, inside the confined folders, unless |make_cwd| is False:
        the checker runs in the user's checkout, which the runner never writes)."""
        fs = self.cfg.fs
        fs.makedirs(os.path.dirname(self.log_path(step)))
        if make_cwd:
            fs.makedirs(cwd)
        with fs.open(self.log_path(step)) as log:
            log.write(("$ " + (argv if shell else shlex.join(argv))) + f"\n(in {cwd})\n")
            log.flush()
            r = subprocess.run(argv, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, shell=shell,
                               stdin=subprocess.DEVNULL)
        return r.returncode

    def tail(self, step, n=15):
        try:
            with open(self.log_path(step), errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def wanted_again(self, step):
        return any(r == "all" or step == r or step.startswith(r.rstrip("/") + "/")
                   for r in self.redo)

    # ---- loadgen-node -----------------------------------------------------------------------
    def loadgen_argv(self, bench, scenario, outdir, mode):
        c = self.cfg
        argv = [c.loadgen_node, "--loadgen", "builtin" if self.dry_run else "official",
                "--scenario", scenario, "--model", bench.lg_model, "--user-conf", bench.user_conf,
                "--nodes", c.nodes, "--output-dir", outdir, "--progress", "off", "--quiet"]
        if c.mlperf_conf:  # --loadgen official checks it equals its compiled-in copy
            argv += ["--mlperf-conf", c.mlperf_conf]
        if mode:
            argv += ["--mode", mode]
        return argv + c.node_flags + bench.qsl + bench.flags

    def loadgen(self, step, bench, scenario, rundir, mode, audit=None):
        fs = self.cfg.fs
        fs.rmtree(rundir)
        fs.makedirs(rundir)
        argv = self.loadgen_argv(bench, scenario, rundir, mode)
        placed = os.path.join(rundir, "audit.config")
        if audit:
            fs.copy(audit, placed)
        try:
            rc = self.run(step, argv, rundir)
        finally:
            if audit and os.path.lexists(placed):
                fs.remove(placed)
        self.command = (f"cd {rundir}\n" + (f"cp {audit} audit.config\n" if audit else "")
                        + shlex.join(argv) + ("\nrm audit.config" if audit else ""))
        if rc not in (0, 1) or not os.path.exists(os.path.join(rundir, "mlperf_log_detail.txt")):
            raise StepFailed(f"loadgen-node exited {rc}; its output (in {self.log_path(step)}):\n"
                             + self.tail(step))
        if not self.dry_run:
            why = provenance.official_problem(os.path.join(rundir, "mlperf_log_detail.txt"))
            if why:
                raise StepFailed(why)
        return "VALID" if rc == 0 else "INVALID (see the summary)"

    # ---- the plan ---------------------------------------------------------------------------
    def plan(self):
        steps = []
        for b in self.cfg.benchmarks:
            for s in b.scenarios:
                k = f"{b.model}/{s}"
                # Accuracy first: it also warms the nodes up (connections, buffers, caches of
                # the engine) before the timed run that TEST01/TEST04 are compared against.
                steps += [(f"{k}/accuracy", self.step_accuracy, b, s),
                          (f"{k}/accuracy-script", self.step_accuracy_script, b, s),
                          (f"{k}/performance", self.step_performance, b, s),
                          (f"{k}/place", self.step_place, b, s)]
                for t in b.compliance:
                    steps += [(f"{k}/{t}/run", self.step_compliance_run, b, s, t),
                              (f"{k}/{t}/verify", self.step_compliance_verify, b, s, t)]
        steps += [("readme", self.step_readme), ("system", self.step_system),
                  ("truncate", self.step_truncate), ("check", self.step_check)]
        return steps

    def unknown_redo(self):
        """The first --redo that names no step, or None."""
        names = [s[0] for s in self.plan()]
        for r in self.redo:
            if r != "all" and not any(n == r or n.startswith(r.rstrip("/") + "/") for n in names):
                return r
        return None

    def execute(self):
        steps = self.plan()
        if self.redo:
            self.state.forget(self.wanted_again)
        self.prune_stale()
        tree.mark_standin(self.cfg, any(b.standin for b in self.cfg.benchmarks))
        prog = Progress(len(steps))
        for st in steps:
            name, fn, args = st[0], st[1], st[2:]
            # The system description and the checker are cheap and read files the user may have
            # fixed (system_json, deployment): always again. Truncation follows any change.
            if name in ("readme", "system", "check") or (name == "truncate" and self.ran_any):
                self.state.forget(lambda s, n=name: s == n)
            if self.state.done(name):
                prog.skip(name, f"done ({self.state.info(name).get('verdict', 'ok')}), kept")
                continue
            prog.begin(name)
            self.command = None
            try:
                verdict = fn(name, *args)
            except (StepFailed, Outside, OSError) as e:  # OSError: a file it could not use
                prog.end("FAILED")
                raise StepFailed(f"step {name}: {e}") from None
            prog.end(verdict)
            self.state.mark(name, verdict=verdict, command=self.command)
            if name not in GLOBAL_STEPS:
                self.ran_any = True
        return self.state.info("check").get("verdict", "")

    # ---- per scenario -----------------------------------------------------------------------
    def step_performance(self, name, b, s):
        return self.loadgen(name, b, s, self.work("runs", b.model, s, "performance"),
                            "PerformanceOnly")

    def step_accuracy(self, name, b, s):
        self.loadgen(name, b, s, self.work("runs", b.model, s, "accuracy"), "AccuracyOnly")
        return "done"

    def step_accuracy_script(self, name, b, s):
        rundir = self.work("runs", b.model, s, "accuracy")
        cmd = (b.standin or b.accuracy).format(inference=self.cfg.inference or "",
                                accuracy_log=os.path.join(rundir, "mlperf_log_accuracy.json"),
                                scenario=s)
        rc = self.run(name, cmd, rundir, shell=True)
        if rc != 0:
            raise StepFailed(f"the accuracy command exited {rc}:\n{self.tail(name)}")
        with open(self.log_path(name)) as f:
            out = f.read().split("\n", 2)[2]  # drop the command and folder lines
        with self.cfg.fs.open(os.path.join(rundir, "accuracy.txt")) as f:
            f.write((accuracy.STANDIN_LINE + "\n" if b.standin else "") + out)
        self.command = f"cd {rundir}\n{cmd} > accuracy.txt"
        last = [ln for ln in out.splitlines() if ln.strip()]
        verdict = last[-1][:80] if last else "no output"
        return verdict if not b.standin or verdict.startswith("STAND-IN") else \
            "STAND-IN: " + verdict

    def step_place(self, name, b, s):
        sdir = tree.scenario_dir(self.cfg, b, s)
        perf = self.work("runs", b.model, s, "performance")
        acc = self.work("runs", b.model, s, "accuracy")
        if not self.dry_run:
            for d in (perf, acc):
                why = provenance.official_problem(os.path.join(d, "mlperf_log_detail.txt"))
                if why:
                    raise StepFailed(why + "; official results must come from the unaltered "
                                     "official LoadGen: redo the runs with --submission "
                                     f"(--redo {b.model}/{s})")
        tree.place_performance(self.cfg.fs, perf, sdir)
        tree.place_accuracy(self.cfg.fs, acc, os.path.join(acc, "accuracy.txt"), sdir)
        tree.write_measurements(self.cfg, b, s, sdir, self.dry_run)
        self.record_placed(sdir, f"{b.model}/{s}")
        return "placed"

    def audit_config(self, b, t):
        if not self.have_inference():
            return None
        if t == "TEST01":  # compliance/TEST01/<model>/: mlperf.conf's name (3d-unet) or the tree's
            for m in (b.lg_model, b.model, b.tree_name):
                p = self.inference("compliance", "TEST01", m, "audit.config")
                if os.path.exists(p):
                    break
        else:
            p = self.inference("compliance", t, "audit.config")
        if not os.path.exists(p):
            raise StepFailed(f"{p} is missing from the inference checkout")
        return p

    def step_compliance_run(self, name, b, s, t):
        audit = self.audit_config(b, t)
        rundir = self.work("runs", b.model, s, t)
        if audit is None:
            # No checkout (dry run only): the audit settings the official TEST01/TEST04 use.
            audit = self.work("audit", t, "audit.config")
            self.cfg.fs.makedirs(os.path.dirname(audit))
            with self.cfg.fs.open(audit) as f:
                f.write(FALLBACK_AUDIT[t])
        return self.loadgen(name, b, s, rundir, None, audit=audit)

    def step_compliance_verify(self, name, b, s, t):
        sdir = tree.scenario_dir(self.cfg, b, s)
        rundir = self.work("runs", b.model, s, t)
        if not self.dry_run:
            why = provenance.official_problem(os.path.join(rundir, "mlperf_log_detail.txt"))
            if why:
                raise StepFailed(why)
        if not self.have_inference():
            if not self.dry_run:
                raise StepFailed("inference = (a checkout of mlcommons/inference) is required "
                                 "for the official compliance verification")
            return self.place_unverified(rundir, sdir, t)
        script = self.inference("compliance", t, "run_verification.py")
        argv = [sys.executable, script, "-c", rundir, "-o", sdir]
        self.command = None  # set below, once the flags are known
        argv += (["-s", s] if t == "TEST06" else ["-r", sdir]) + b.verify_flags.get(t, [])
        self.cfg.fs.rmtree(os.path.join(sdir, t))
        self.cfg.fs.target(sdir)  # run_verification.py writes <sdir>/<t>/
        self.command = f"cd {self.work('verify', b.model, s, t)}\n{shlex.join(argv)}"
        rc = self.run(name, argv, self.work("verify", b.model, s, t))
        out = self.tail(name, 200)
        if rc != 0 or not os.path.isdir(os.path.join(sdir, t)):
            raise StepFailed(f"{script} exited {rc}:\n{self.tail(name)}")
        passes = [ln.strip() for ln in out.splitlines() if "pass" in ln.lower()]
        failed = [ln for ln in passes if ln.lower().endswith("false") or "FAIL" in ln]
        if t == "TEST01":
            self.test01_accuracy(name, b, s, sdir,
                                 any("accuracy check pass: false" in ln.lower() for ln in failed))
        return ("FAILED: " + "; ".join(failed)) if failed else ("; ".join(passes[-3:]) or "done")

    def accuracy_of(self, name, b, s, log, cwd, out):
        """Runs the benchmark's accuracy command on |log|; its output goes to |out|."""
        cmd = (b.standin or b.accuracy).format(inference=self.cfg.inference or "",
                                               accuracy_log=log, scenario=s)
        with self.cfg.fs.open(out) as f:
            if b.standin:
                f.write(accuracy.STANDIN_LINE + "\n")
                f.flush()
            r = subprocess.run(cmd, shell=True, cwd=cwd, stdout=f, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            raise StepFailed(f"the accuracy command exited {r.returncode} on {log} (see {out})")

    def test01_accuracy(self, name, b, s, sdir, mismatch):
        """TEST01/accuracy/accuracy.txt: the score of the compliance run's sampled responses
        (truncate_accuracy_log.py appends its hash there). When the accuracy log of the
        compliance run differs from the accuracy run's (a non-deterministic SUT), the README's
        part III: baseline_accuracy.txt from create_accuracy_baseline.sh's subset of the accuracy
        run, and compliance_accuracy.txt, for the checker to compare."""
        acc = os.path.join(sdir, "TEST01", "accuracy")
        log = os.path.join(acc, "mlperf_log_accuracy.json")
        cwd = self.work("verify", b.model, s, "TEST01")
        if not b.standin and b.tree_name in accuracy.WHOLE_SET:
            return self.test01_whole_set(b, sdir, acc, mismatch)
        self.accuracy_of(name, b, s, log, cwd, os.path.join(acc, "accuracy.txt"))
        if not mismatch:
            return
        script = self.inference("compliance", "TEST01", "create_accuracy_baseline.sh")
        full = os.path.join(self.work("runs", b.model, s, "accuracy"), "mlperf_log_accuracy.json")
        r = subprocess.run(["bash", script, full, log], cwd=cwd, capture_output=True, text=True)
        base = os.path.join(cwd, "mlperf_log_accuracy_baseline.json")
        if r.returncode != 0 or not os.path.exists(base):
            raise StepFailed(f"{script} failed: {r.stdout}{r.stderr}")
        self.accuracy_of(name, b, s, base, cwd, os.path.join(acc, "baseline_accuracy.txt"))
        self.cfg.fs.copy(os.path.join(acc, "accuracy.txt"),
                         os.path.join(acc, "compliance_accuracy.txt"))

    def test01_whole_set(self, b, sdir, acc, mismatch):
        """TEST01 of a benchmark whose official script scores only a log holding every sample of
        the data set once (3D-UNet's accuracy_kits.py asserts it): the compliance run's sampled
        log cannot be scored. The checker reads TEST01's verify_accuracy.txt; when it says TEST
        PASS (the sampled responses equal the accuracy run's), accuracy.txt records that and the
        accuracy run's score (truncate_accuracy_log.py appends its hash there). A SUT whose
        responses differ (TEST01 part III) needs a subset score the script cannot give: refused."""
        script = accuracy.OFFICIAL[b.tree_name][0]
        if mismatch:
            raise StepFailed(f"TEST01: the compliance run's responses differ from the accuracy "
                             f"run's ({os.path.join(sdir, 'TEST01', 'verify_accuracy.txt')}); "
                             f"TEST01 part III would score the sampled subset, which {script} "
                             "cannot (it asserts that the log holds every case once): make the "
                             "SUT deterministic (the same patches, batches and reduction order)")
        with open(os.path.join(sdir, "accuracy", "accuracy.txt"), errors="replace") as f:
            score = [ln for ln in f.read().splitlines() if ln.startswith("Accuracy:")]
        with self.cfg.fs.open(os.path.join(acc, "accuracy.txt")) as f:
            f.write(f"TEST01 (deterministic mode): verify_accuracy.txt says TEST PASS: the "
                    f"compliance run's sampled responses are byte for byte the accuracy run's.\n"
                    f"{script} scores only a log holding every case once, so the accuracy "
                    f"run's score stands:\n" + "\n".join(score) + "\n")
        return None

    def place_unverified(self, rundir, sdir, t):
        """Dry run without an inference checkout: the compliance folder with the run's logs, and
        a verify file that says it was not verified (the checker would reject it, rightly)."""
        d = os.path.join(sdir, t)
        fs = self.cfg.fs
        fs.rmtree(d)
        tree.copy_files(fs, rundir, os.path.join(d, "performance", "run_1"),
                        ["mlperf_log_summary.txt", "mlperf_log_detail.txt"])
        if t in ("TEST01", "TEST06"):
            tree.copy_files(fs, rundir, os.path.join(d, "accuracy"), ["mlperf_log_accuracy.json"])
        names = ["verify_accuracy.txt"] if t == "TEST06" else (
            ["verify_accuracy.txt", "verify_performance.txt"] if t == "TEST01"
            else ["verify_performance.txt"])
        for n in names:
            with fs.open(os.path.join(d, n)) as f:
                f.write("NOT VERIFIED: dry run without an mlcommons/inference checkout "
                        f"(compliance/{t}/run_verification.py was not run)\n")
        return "placed, not verified (no inference checkout)"

    # ---- once -------------------------------------------------------------------------------
    def step_readme(self, name):
        """Each scenario's README.md: how its logs were made, the commands as they ran."""
        n = 0
        for b in self.cfg.benchmarks:
            for s in b.scenarios:
                sdir = tree.scenario_dir(self.cfg, b, s)
                if not os.path.isdir(sdir):
                    continue
                prefix = f"{b.model}/{s}/"
                cmds = [(k, v["command"]) for k, v in self.state.data["done"].items()
                        if k.startswith(prefix) and v.get("command")]
                order = [st[0] for st in self.plan()]
                cmds.sort(key=lambda kv: order.index(kv[0]) if kv[0] in order else 0)
                tree.write_readme(self.cfg, b, s, sdir, cmds, self.dry_run)
                n += 1
        return f"{n} written"

    def step_system(self, name):
        c = self.cfg
        sysdir = os.path.join(c.root(), "systems")
        c.fs.makedirs(sysdir)
        base = {}
        if c.system_json:
            try:
                with open(c.system_json) as f:
                    base = json.load(f)
            except (OSError, ValueError) as e:
                raise StepFailed(f"system_json = {c.system_json}: {e}") from None
            if not isinstance(base, dict):
                raise StepFailed(f"system_json = {c.system_json}: not a JSON object")
        merged = self.work("system-base.json")
        with c.fs.open(merged) as f:
            json.dump(tree.system_json_fields(c, base), f, indent=4)
        out = os.path.join(sysdir, c.system + ".json")
        if not c.deployment:
            raise StepFailed("deployment = (a deploy/metadata/netmeta.py config) is required for "
                             "the 13 network fields and the system diagram")
        argv = [sys.executable, NETMETA, "--config", c.deployment, "--system-json", merged,
                "--out", out, "--dot", os.path.join(sysdir, c.system + "_network.dot")]
        if shutil.which("dot"):
            argv += ["--svg", os.path.join(sysdir, c.system + "_network.svg")]
        for flag, a in zip(argv, argv[1:]):  # netmeta.py writes these
            if flag in ("--out", "--dot", "--svg"):
                c.fs.target(a)
        rc = self.run(name, argv + c.netmeta_flags, self.work())
        if rc not in (0, 1):
            raise StepFailed(f"netmeta.py exited {rc}:\n{self.tail(name)}")
        tree.write_src_readme(c, harness_revision())
        for p in (out, os.path.join(sysdir, c.system + "_network.dot"),
                  os.path.join(sysdir, c.system + "_network.svg"),
                  os.path.join(c.root(), "src", "README.md")):
            if os.path.exists(p):
                self.record_placed(p, "system")
        todo = [ln for ln in self.tail(name, 100).splitlines() if "TODO" in ln]
        return f"{len(todo)} TODO field warnings (see {self.log_path(name)})" if todo else "written"

    def step_truncate(self, name):
        if not self.have_inference():
            if not self.dry_run:
                raise StepFailed("inference = is required for the accuracy-log truncation")
            return "skipped (no inference checkout; dry run)"
        backup = self.work("accuracy-log-backup")
        self.cfg.fs.rmtree(backup)
        self.refuse_symlinks()  # the official script rewrites the logs it finds in place
        script = self.inference("tools", "submission", "truncate_accuracy_log.py")
        rc = self.run(name, [sys.executable, script, "--input", self.cfg.output, "--submitter",
                             self.cfg.org, "--backup", backup], self.work())
        if rc != 0:
            raise StepFailed(f"{script} exited {rc}:\n{self.tail(name)}")
        return f"done (full logs in {backup})"

    def refuse_symlinks(self):
        links = symlinks_under(self.cfg.output)
        if links:
            raise StepFailed(f"{links[0]} is a symbolic link (to {os.readlink(links[0])}); the "
                             "tree must hold none (the submission repository refuses them, and "
                             "the runner writes only inside the output folder)")

    def step_check(self, name):
        if not self.have_inference():
            if not self.dry_run:
                raise StepFailed("inference = is required for the submission checker")
            return "skipped (no inference checkout; dry run)"
        self.cfg.fs.target(self.work("summary.csv"))  # the checker writes it
        argv = [sys.executable, "-m", "submission_checker.main", "--input", self.cfg.output,
                "--version", self.cfg.version, "--submitter", self.cfg.org,
                "--csv", self.work("summary.csv")] + self.checker_flags
        rc = self.run(name, argv, self.inference("tools", "submission"), make_cwd=False)
        with open(self.log_path(name), errors="replace") as f:
            lines = f.read().splitlines()
        errors, unmet = checker_problems(lines)
        if any(ln.startswith("Traceback") for ln in lines):
            gone = re.search(r"No module named '([^'.]+)", lines[-1])
            hint = (f"; its Debian package: {accuracy.DEBIAN.get(gone.group(1), 'see its imports')}"
                    if gone else "")
            errors.append(f"the checker stopped with a Python error: {lines[-1].strip()}{hint} "
                          f"(see {self.log_path(name)})")
        print(f"\nThe official submission checker (exit {rc}); its full output is in "
              f"{self.log_path(name)}:", file=self.out)
        for ln in errors + unmet:
            print("  " + ln, file=self.out)
        for ln in lines[-12:]:
            if ln not in errors and ln not in unmet:
                print("  " + ln, file=self.out)
        self.checker_problems = len(errors) + len(unmet) + (rc != 0)
        print(f"The checker's verdict: {len(errors)} error lines, {len(unmet)} 'accuracy not "
              f"met' lines (exit {rc})", file=self.out)
        if any(b.standin for b in self.cfg.benchmarks):
            print(f"NOT A VALID RESULT: stand-in accuracy (accuracy_standin =) for "
                  + ", ".join(b.model for b in self.cfg.benchmarks if b.standin), file=self.out)
        return f"exit {rc}, {len(errors)} error lines, {len(unmet)} accuracy not met"


    # ---- the tree's own folders --------------------------------------------------------------
    def record_placed(self, path, step_prefix):
        """Remembers that the runner wrote |path| in the tree for the steps under |step_prefix|
        (so that a folder a renamed benchmark, system or organisation left behind is removed)."""
        rel = os.path.relpath(path, self.cfg.output)
        placed = self.state.data.setdefault("placed", {})
        if placed.get(rel) != step_prefix:
            placed[rel] = step_prefix
            self.state.save()

    def current_paths(self):
        c = self.cfg
        out = {os.path.relpath(tree.scenario_dir(c, b, s), c.output)
               for b in c.benchmarks for s in b.scenarios}
        sysdir = os.path.join(c.root(), "systems")
        out |= {os.path.relpath(p, c.output) for p in (
            os.path.join(sysdir, c.system + ".json"),
            os.path.join(sysdir, c.system + "_network.dot"),
            os.path.join(sysdir, c.system + "_network.svg"),
            os.path.join(c.root(), "src", "README.md"))}
        return out

    def prune_stale(self):
        """Removes what an earlier run placed under names the config no longer gives (a changed
        tree_name, system, organisation, a dropped scenario), and forgets the steps that placed
        it, so that they place their logs under the new name."""
        placed = self.state.data.get("placed", {})
        current = self.current_paths()
        stale = [rel for rel in placed if rel not in current]
        for rel in stale:
            p = os.path.join(self.cfg.output, rel)
            if os.path.isdir(p) and not os.path.islink(p):
                self.cfg.fs.rmtree(p)
            elif os.path.lexists(p):
                self.cfg.fs.remove(p)
            print(f"removed {p}: an earlier run placed it, and the config no longer names it",
                  file=self.out)
            prefix = placed.pop(rel)
            if prefix != "system":
                self.state.forget(lambda st, k=prefix: st.startswith(k + "/") and (
                    st.endswith("/place") or st.endswith("/verify")))
            d = os.path.dirname(p)  # and the folders it leaves empty
            while d.startswith(self.cfg.output + os.sep) and os.path.isdir(d) and \
                    not os.listdir(d):
                self.cfg.fs.rmtree(d)
                d = os.path.dirname(d)
        if stale:
            self.state.save()


def checker_problems(lines):
    """The checker's lines that say the tree fails: every ERROR line, and its "accuracy not met"
    lines (logged as WARNING, yet a result whose accuracy is not met is no result)."""
    errors = [ln for ln in lines if re.search(r"\bERROR\b", ln)]
    unmet = [ln for ln in lines if "accuracy not met" in ln and ln not in errors]
    return errors, unmet


# What compliance/TEST01/<model>/audit.config and compliance/TEST04/audit.config set, for dry runs
# without a checkout only (a submission always uses the checkout's own files).
FALLBACK_AUDIT = {
    "TEST01": "*.*.mode = 2\n*.*.accuracy_log_rng_seed = 720381539243781796\n"
              "*.*.accuracy_log_sampling_target = 4096\n",
    "TEST04": "".join(f"*.{s}.mode = 2\n*.{s}.performance_issue_unique = 0\n"
                      f"*.{s}.performance_issue_same = 1\n*.{s}.performance_issue_same_index = 3\n"
                      for s in ("SingleStream", "MultiStream", "Server", "Offline")),
    "TEST06": "*.*.mode = 2\n*.*.accuracy_log_rng_seed = 720381539243781796\n"
              "*.*.accuracy_log_sampling_target = 100\n*.*.min_query_count = 100\n"
              "*.*.min_duration = 0\n*.*.sample_concatenate_permutation = 0\n",
}


def harness_revision():
    try:
        r = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                           capture_output=True, text=True, timeout=10)
        return r.stdout.strip() or "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
