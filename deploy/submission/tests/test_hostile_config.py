#!/usr/bin/env python3
"""The runner against hostile and malformed configs; no nodes, no binaries of this project.

1. Every name that becomes a folder or file name (organization, system, tree_name, the model of
   [benchmark.MODEL] and its model = key) set to '../x', a deeper climb, an absolute path,
   'a/b', '..', '' and non-ASCII: submit.py --dry-run exits 2 with one line naming the key, and
   nothing at all is written (the temp parent's listing is the same before and after).
2. A symbolic link in the output tree pointing outside: submit.py refuses it (exit 3) and writes
   nothing outside; the write guard (netsub/confine.py) refuses a write, a folder, a copy and a
   removal through such a link or through '..', and the tree's writers (netsub/tree.py) go
   through it.
3. A table of malformed configs (missing keys, bad values, unparseable files, unknown keys and
   sections, a corrupt state file): each exits 2, with no Traceback, one line naming the key.
A valid config is run first with --list (exit 0), so each case fails for its own edit.

    test_hostile_config.py
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SUBMIT = os.path.join(HERE, "..", "submit.py")
sys.path.insert(0, os.path.join(HERE, ".."))
from netsub import tree  # noqa: E402
from netsub.config import Config  # noqa: E402
from netsub.confine import Outside  # noqa: E402

failures = []


def check(cond, what):
    print(("ok: " if cond else "FAILED: ") + what)
    if not cond:
        failures.append(what)


def listing(top):
    """Every path under |top| with its size (links: their target), sorted."""
    out = []
    for d, dirs, files in os.walk(top):
        for n in dirs + files:
            p = os.path.join(d, n)
            out.append((os.path.relpath(p, top),
                        "-> " + os.readlink(p) if os.path.islink(p) else
                        ("dir" if os.path.isdir(p) else os.path.getsize(p))))
    return sorted(out)


class Box:
    """base/ (the temp parent) holds box/ (the config, its files, out/ and work/) and outside/."""

    def __init__(self, base):
        self.base = base
        self.box = os.path.join(base, "box")
        self.outside = os.path.join(base, "outside")
        os.makedirs(self.box)
        os.makedirs(self.outside)
        self.out = os.path.join(self.box, "out")
        self.work = os.path.join(self.box, "work")
        with open(os.path.join(self.box, "user.conf"), "w") as f:
            f.write("resnet50.Offline.target_qps = 1000\n")
        with open(os.path.join(self.box, "system-base.json"), "w") as f:
            f.write('{"status": "available"}\n')
        with open(os.path.join(self.box, "deployment.ini"), "w") as f:
            f.write("[deployment]\nnetwork_type = Ethernet\n")
        self.cfg = os.path.join(self.box, "submission.ini")

    def sections(self):
        """The valid config: [(section, [[key, value], ...]), ...]."""
        return [
            ("submission", [["organization", "TestOrg"], ["system", "sys1"],
                            ["division", "network"], ["version", "v6.1"],
                            ["output", self.out], ["work", self.work],
                            ["loadgen_node", sys.executable],
                            ["system_json", "system-base.json"],
                            ["deployment", "deployment.ini"],
                            ["netmeta_flags", "--no-probe"], ["demo", "yes"]]),
            ("nodes", [["addresses", "127.0.0.1:7000,[::1]:7001"], ["flags", "--connections 1"]]),
            ("benchmark.resnet50", [["scenarios", "Offline, Server"], ["user_conf", "user.conf"],
                                    ["qsl", "--qsl-synthetic 64"], ["flags", ""],
                                    ["accuracy", "python3 acc.py --log {accuracy_log} "
                                                 "--s {scenario} --i {inference}"],
                                    ["tree_name", "resnet"],
                                    ["measurements.input_data_types", "int8"],
                                    ["measurements.retraining", "no"],
                                    ["measurements.starting_weights_filename", "r.onnx"],
                                    ["measurements.weight_data_types", "int8"],
                                    ["measurements.weight_transformations", "none"]]),
        ]

    def write(self, sections=None, edit=None, raw=None):
        """Writes the config: |edit| (section, key, value) sets a key (None: removes it; a new
        key is added), |raw| replaces the whole text."""
        if raw is None:
            secs = sections or self.sections()
            if edit:
                sec, key, value = edit
                for name, kvs in secs:
                    if name == sec:
                        if value is None:
                            kvs[:] = [kv for kv in kvs if kv[0] != key]
                        elif any(kv[0] == key for kv in kvs):
                            for kv in kvs:
                                if kv[0] == key:
                                    kv[1] = value
                        else:
                            kvs.append([key, value])
            raw = "".join(f"[{name}]\n" + "".join(f"{k} = {v}\n" for k, v in kvs) + "\n"
                          for name, kvs in secs)
        with open(self.cfg, "wb") as f:
            f.write(raw if isinstance(raw, bytes) else raw.encode("utf-8"))

    def run(self, *args, cfg=None):
        return subprocess.run([sys.executable, SUBMIT, cfg or self.cfg, *args],
                              capture_output=True, text=True, timeout=60)


def refused(box, what, key, r, before, exit_code=2):
    """exit_code, one line naming |key|, no traceback, and the temp parent as it was."""
    err = r.stderr.strip()
    check(r.returncode == exit_code and "Traceback" not in r.stderr
          and key.lower() in err.lower() and "\n" not in err,
          f"{what}: exit {exit_code}, one line naming {key!r} (got {r.returncode}: {err[:300]!r})")
    after = listing(box.base)
    check(after == before, f"{what}: nothing written ("
          + ", ".join(f"{p}" for p, _ in sorted(set(after) ^ set(before)))[:300] + ")")


def name_cases(box):
    # The sections with one name replaced; the model is the section's name.
    values = ["../x", "../../../../../escaped", os.path.join(box.outside, "abs"), "a/b", "..", "",
              "résumé", "naïve/../x"]
    for v in values:
        for key in ("organization", "system"):
            box.write(edit=("submission", key, v))
            before = listing(box.base)
            refused(box, f"{key} = {v!r}", key, box.run("--dry-run"), before)
        for key in ("tree_name", "model"):  # model =: mlperf.conf's and compliance/TEST01/'s
            box.write(edit=("benchmark.resnet50", key, v))
            before = listing(box.base)
            refused(box, f"{key} = {v!r}", key, box.run("--dry-run"), before)
        secs = box.sections()
        secs[2] = ("benchmark." + v, secs[2][1])
        box.write(sections=secs)
        before = listing(box.base)
        refused(box, f"[benchmark.{v}]", "model name", box.run("--dry-run"), before)


def malformed_cases(box):
    """(what, edit or raw text, the key the message must name)."""
    S, N, B = "submission", "nodes", "benchmark.resnet50"
    valid = "".join(f"[{n}]\n" + "".join(f"{k} = {v}\n" for k, v in kvs) + "\n"
                    for n, kvs in box.sections())
    llm = valid.replace("demo = yes\n", "").replace("[benchmark.resnet50]",
                                                    "[benchmark.llama2-70b]").replace(
        "tree_name = resnet\n", "")
    cases = [
        ("organization missing", (S, "organization", None), "organization"),
        ("system missing", (S, "system", None), "system"),
        ("system empty", (S, "system", ""), "system"),
        ("division closed", (S, "division", "closed"), "division"),
        ("version not a round", (S, "version", "6.1; rm -rf"), "version"),
        ("inference not a folder", (S, "inference", "/nonexistent/inference"), "inference"),
        ("output empty", (S, "output", ""), "output"),
        ("output is a file", (S, "output", "user.conf"), "output"),
        ("work is the output", (S, "work", box.out), "work"),
        ("loadgen_node no such file", (S, "loadgen_node", "/nonexistent/loadgen-node"),
         "loadgen_node"),
        ("loadgen_node not on PATH", (S, "loadgen_node", "no-such-loadgen-node-xyz"),
         "loadgen_node"),
        ("loadgen_node not executable", (S, "loadgen_node", os.path.join(box.box, "user.conf")),
         "loadgen_node"),
        ("mlperf_conf missing", (S, "mlperf_conf", "missing.conf"), "mlperf_conf"),
        ("system_json missing", (S, "system_json", "missing.json"), "system_json"),
        ("system_json not JSON", (S, "system_json", "user.conf"), "system_json"),
        ("system_json a folder", (S, "system_json", box.box), "system_json"),
        ("deployment missing", (S, "deployment", "missing.ini"), "deployment"),
        ("netmeta_flags unbalanced quote", (S, "netmeta_flags", "--x 'open"), "netmeta_flags"),
        ("unknown key (misspelt)", (S, "sytem", "x"), "sytem"),
        ("addresses missing", (N, "addresses", None), "addresses"),
        ("addresses no port", (N, "addresses", "10.0.0.2"), "addresses"),
        ("addresses port 70000", (N, "addresses", "10.0.0.2:70000"), "addresses"),
        ("addresses empty entry", (N, "addresses", "10.0.0.2:7000,,"), "addresses"),
        ("nodes flags unbalanced quote", (N, "flags", '--tls-ca "ca.pem'), "flags"),
        ("unknown key in [nodes]", (N, "adresses", "x:1"), "adresses"),
        ("scenarios missing", (B, "scenarios", None), "scenarios"),
        ("scenarios unknown", (B, "scenarios", "Offline, Bogus"), "scenarios"),
        ("scenarios twice", (B, "scenarios", "Offline, Offline"), "scenarios"),
        ("user_conf missing", (B, "user_conf", None), "user_conf"),
        ("user_conf no such file", (B, "user_conf", "nope.conf"), "user_conf"),
        ("user_conf a folder", (B, "user_conf", box.box), "user_conf"),
        ("qsl missing", (B, "qsl", None), "qsl"),
        ("qsl unbalanced quote", (B, "qsl", "--qsl-npy 'x.npy"), "qsl"),
        ("flags unbalanced quote", (B, "flags", "--set 'a=1"), "flags"),
        ("accuracy missing", (B, "accuracy", None), "accuracy"),
        ("accuracy unknown field", (B, "accuracy", "python3 a.py {bogus}"), "accuracy"),
        ("accuracy unbalanced brace", (B, "accuracy", "python3 a.py {accuracy_log"), "accuracy"),
        ("accuracy attribute field", (B, "accuracy", "{scenario.__class__}"), "accuracy"),
        ("accuracy field in a spec", (B, "accuracy", "a {scenario:{bogus}}"), "accuracy"),
        ("accuracy bad spec", (B, "accuracy", "a {scenario:Z}"), "accuracy"),
        ("accuracy positional field", (B, "accuracy", "a {} {0}"), "accuracy"),
        ("compliance unknown", (B, "compliance", "TEST99"), "compliance"),
        ("compliance twice", (B, "compliance", "TEST01, TEST01"), "compliance"),
        ("verify_flags unbalanced", (B, "verify_flags.TEST01", "-x 'y"), "verify_flags.test01"),
        ("verify_flags unknown test", (B, "verify_flags.TEST99", "-x"), "verify_flags.test99"),
        ("measurement missing", (B, "measurements.retraining", None), "measurements.retraining"),
        ("measurement empty", (B, "measurements.weight_data_types", ""),
         "measurements.weight_data_types"),
        ("measurement unknown", (B, "measurements.power", "1"), "measurements.power"),
        ("no [submission]", valid.replace("[submission]", "[submision]"), "submision"),
        ("no [nodes]", valid.replace("[nodes]", "[benchmark.other]").replace(
            "addresses = ", "tree_name = other\nqsl = x\n;"), "nodes"),
        ("no [benchmark.MODEL]", valid.split("[benchmark.")[0], "benchmark"),
        ("unknown section", valid + "[extras]\nx = 1\n", "extras"),
        ("key in [DEFAULT]", "[DEFAULT]\nsystem = x\n" + valid, "DEFAULT"),
        ("two benchmarks, one tree_name", valid + valid.split("[nodes]")[1].split("\n\n", 1)[1]
         .replace("[benchmark.resnet50]", "[benchmark.resnet50-copy]"), "tree_name"),
        ("no section header", "organization = x\n" + valid, "section"),
        ("unparseable line", valid.replace("[nodes]\n", "[nodes]\nthis is not a key\n"),
         "this is not a key"),
        ("key set twice", valid.replace("system = sys1\n", "system = sys1\nsystem = sys2\n"),
         "system"),
        ("section twice", valid + "[nodes]\naddresses = a:1\n", "nodes"),
        ("not UTF-8", valid.encode() + b"[x]\nk = \xff\xfe\n", "UTF-8"),
        ("empty file", "", "submission"),
        # The Network division takes the Datacenter suite only (the checker's MODEL_CONFIG).
        ("resnet50 without demo = yes", (S, "demo", None), "not a benchmark of the v6.1 "
         "Datacenter suite, the only one the Network division takes; eligible: 3d-unet-99, "),
        ("demo neither yes nor no", (S, "demo", "maybe"), "demo"),
        ("llama2-70b Offline only", llm.replace("Offline, Server", "Offline"),
         "requires one of Server or Interactive beside Offline"),
        ("llama2-70b without Offline", llm.replace("Offline, Server", "Server"),
         "llama2-70b-99.9 requires Offline"),
        ("llama2-70b SingleStream", llm.replace("Offline, Server", "Offline, SingleStream"),
         "SingleStream is not a Datacenter scenario of llama2-70b-99.9"),
        ("llama2-70b-99, a name the v6.1 checker does not know", llm.replace(
            "[benchmark.llama2-70b]", "[benchmark.llama2-70b]\ntree_name = llama2-70b-99"),
         "llama2-70b-99 is not a benchmark of the v6.1 Datacenter suite"),
        ("interactive not a scenario", llm.replace("Offline, Server", "Offline, interactive"),
         "scenarios"),
    ]
    for what, change, key in cases:
        if isinstance(change, tuple):
            box.write(edit=change)
        else:
            box.write(raw=change)
        before = listing(box.base)
        refused(box, what, key, box.run("--dry-run"), before)
    before = listing(box.base)
    refused(box, "no such config file", "cannot read",
            box.run("--dry-run", cfg=os.path.join(box.box, "nope.ini")), before)
    refused(box, "config is a folder", "cannot read", box.run("--dry-run", cfg=box.box), before)
    # A corrupt state file in the work folder.
    box.write()
    os.makedirs(box.work, exist_ok=True)
    for text, what in (("{not json", "state.json not JSON"), ("[1, 2]", "state.json a list")):
        with open(os.path.join(box.work, "state.json"), "w") as f:
            f.write(text)
        before = listing(box.base)
        refused(box, what, "state.json", box.run("--dry-run"), before)
    os.remove(os.path.join(box.work, "state.json"))


def symlink_cases(box):
    box.write()
    # submit.py on a tree holding a link that leads outside.
    os.makedirs(box.out, exist_ok=True)
    link = os.path.join(box.out, "network")
    os.symlink(box.outside, link)
    before_out = listing(box.outside)
    r = box.run("--dry-run")
    check(r.returncode == 3 and "symbolic link" in r.stderr and "Traceback" not in r.stderr
          and link in r.stderr,
          f"a link out of the tree: refused, exit 3, named (got {r.returncode}: "
          f"{r.stderr.strip()[:300]!r})")
    check(listing(box.outside) == before_out, "a link out of the tree: nothing written through it")
    os.remove(link)

    # The guard itself: a link planted while running (after submit.py's scan).
    cfg = Config(box.cfg)
    fs = cfg.fs
    org = os.path.join(box.out, "network", "TestOrg")
    os.makedirs(org, exist_ok=True)
    os.symlink(box.outside, os.path.join(org, "src"))
    with open(os.path.join(box.outside, "keep.txt"), "w") as f:
        f.write("outside\n")
    os.symlink(os.path.join(box.outside, "keep.txt"), os.path.join(org, "file-link"))
    before_out = listing(box.outside)
    attempts = [
        ("tree.write_src_readme through a linked src/", lambda: tree.write_src_readme(cfg, "x")),
        ("open through a linked folder", lambda: fs.open(os.path.join(org, "src", "f.txt"))),
        ("open through a linked file", lambda: fs.open(os.path.join(org, "file-link"))),
        ("makedirs through a link", lambda: fs.makedirs(os.path.join(org, "src", "d"))),
        ("copy onto a linked file", lambda: fs.copy(box.cfg, os.path.join(org, "file-link"))),
        ("rmtree of a link leading out", lambda: fs.rmtree(os.path.join(org, "src"))),
        ("remove through a link", lambda: fs.remove(os.path.join(org, "src", "keep.txt"))),
        ("open of out/../..", lambda: fs.open(os.path.join(box.out, "..", "..", "esc.txt"))),
        ("open of an absolute path", lambda: fs.open(os.path.join(box.outside, "abs.txt"))),
    ]
    for what, fn in attempts:
        try:
            fn()
            got = "no error"
        except Outside as e:
            got = str(e)
        check(got.startswith("refusing to write"), f"guard: {what} refused ({got[:160]})")
    check(listing(box.outside) == before_out, "guard: nothing written or removed outside")
    # Inside stays writable, through a link that stays inside too.
    os.makedirs(os.path.join(box.out, "real"))
    os.symlink(os.path.join(box.out, "real"), os.path.join(box.out, "inner"))
    with fs.open(os.path.join(box.out, "inner", "ok.txt")) as f:
        f.write("ok\n")
    check(os.path.exists(os.path.join(box.out, "real", "ok.txt")),
          "guard: a write inside the output folder goes through")
    fs.rmtree(os.path.join(box.out, "inner"))
    check(os.path.isdir(os.path.join(box.out, "real")) and
          not os.path.lexists(os.path.join(box.out, "inner")),
          "guard: rmtree of a link inside removes the link only")


def rules_cases(box):
    """The eligible benchmarks and scenario sets come from the checker the config points at (here
    --inference-dir, a checkout whose checker knows only resnet), not from the runner's table."""
    fake = os.path.join(box.base, "inference")
    d = os.path.join(fake, "tools", "submission", "submission_checker")
    os.makedirs(d)
    with open(os.path.join(d, "constants.py"), "w") as f:
        f.write('MODEL_CONFIG = {"v6.1": {"models": ["resnet"], "model_mapping": {"resnet50": '
                '"resnet"}, "required-scenarios-datacenter": {"resnet": ["Offline"]}, '
                '"optional-scenarios-datacenter": {"resnet": ["Server"]}, '
                '"models_TEST01": ["resnet"]}}\n')
    secs = [(n, [kv for kv in kvs if kv[0] != "demo"]) for n, kvs in box.sections()]
    box.write(sections=secs)
    r = box.run("--list", "--inference-dir", fake)
    check(r.returncode == 0 and "resnet50/Offline/TEST01/run" in r.stdout,
          "a checker whose Datacenter suite holds resnet: resnet50 Offline + Server accepted "
          f"without demo, TEST01 from its models_TEST01 (got {r.returncode}: "
          f"{r.stderr.strip()[:300]!r})")
    llm = [(n.replace("resnet50", "llama2-70b"), [kv for kv in kvs if kv[0] != "tree_name"])
           for n, kvs in secs]
    box.write(sections=llm)
    before = listing(box.base)
    refused(box, "llama2-70b against that checker", "is not a benchmark of the v6.1 Datacenter "
            f"suite, the only one the Network division takes; eligible: resnet (the official "
            f"checker ({os.path.join(d, 'constants.py')}))",
            box.run("--dry-run", "--inference-dir", fake), before)
    box.write(sections=secs, edit=("submission", "version", "v5.0"))
    before = listing(box.base)
    refused(box, "a round the checker does not know", "version: v5.0 is not a round of the "
            "official checker", box.run("--dry-run", "--inference-dir", fake), before)
    box.write()
    before = listing(box.base)
    refused(box, "--inference-dir not a folder", "--inference-dir",
            box.run("--dry-run", "--inference-dir", os.path.join(box.base, "nope")), before)


def main():
    with tempfile.TemporaryDirectory(prefix="submit_hostile_") as base:
        box = Box(base)
        box.write()
        r = box.run("--list")
        check(r.returncode == 0 and "resnet50/Offline/accuracy" in r.stdout,
              f"the valid config: --list exits 0 (got {r.returncode}: {r.stderr.strip()[:300]!r})")
        name_cases(box)
        malformed_cases(box)
        symlink_cases(box)
        rules_cases(box)
    print(f"{len(failures)} failed" if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
