"""The runner's one config file (INI, read with configparser): what to run and where it goes.

    [submission]
    organization = ExampleOrg           ; submitter name in the tree (network/<org>/...)
    system = net2x_sim                  ; system name (results/<system>/..., systems/<system>.json)
    division = network                  ; the Network division (closed is refused: not this harness);
                                        ;  Datacenter-only: a benchmark outside the round's
                                        ;  Datacenter suite is refused, naming the eligible ones
    version = v6.1                      ; checker version (--version of submission_checker)
    inference = /path/to/inference      ; your checkout of mlcommons/inference (checker, compliance
                                        ;  tests, accuracy scripts, log truncation)
    output = submission                 ; the tree's root (network/ goes inside)
    work = submission-work              ; logs, state and scratch of the runner (default <output>-work)
    loadgen_node = loadgen-node         ; the binary (built with -DMLPERF_LOADGEN_ROOT for --submission)
    mlperf_conf = /path/mlperf.conf     ; given to loadgen-node in both modes: the built-in
                                        ;  scheduler reads it; --loadgen official refuses one that
                                        ;  differs from the copy compiled into the LoadGen
    system_json = system-base.json      ; the rest of the system description (hardware, software)
    deployment = deployment.ini         ; deploy/metadata/netmeta.py config: the 13 network fields
    netmeta_flags = --query-nodes       ; extra netmeta.py flags (e.g. --no-probe)
    demo = no                           ; yes: a CPU demo tree (resnet50), any benchmark and
                                        ;  scenario set, not a Network result

    [nodes]
    addresses = 10.0.0.2:7000,10.0.0.3:7000
    flags = --connections 2 --tls-ca ca.pem   ; any further loadgen-node QDL flags

    [benchmark.llama2-70b]              ; the model name as mlperf.conf spells it
    scenarios = Offline, Server         ; the checker's Datacenter set for it (netsub/models.py):
                                        ;  the LLMs take Offline plus Server and/or Interactive
    user_conf = llama2-70b-user.conf
    qsl = --qsl-npy open_orca_qsl       ; loadgen-node QSL flags
    flags = --set min_duration_ms=600000              ; any further loadgen-node flags
    accuracy = venv/bin/python3 {inference}/language/llama2-70b/evaluate-accuracy.py
               --checkpoint-path Llama-2-70b-chat-hf --dataset-file open_orca.pkl
               --mlperf-accuracy-file {accuracy_log} --dtype int32
    accuracy_standin = python3 my_scorer.py {accuracy_log}   ; TESTS ONLY: replaces accuracy,
                                        ;  the tree is marked not a valid result (accuracy.py)
    compliance = TEST06                 ; default: the checker's models_TEST0x for the model
    tree_name = llama2-70b-99.9         ; default: the checker's name for the model (models.py)
    model = 3d-unet                     ; the name given to loadgen-node --model (mlperf.conf's
                                        ;  and audit.config's); default: the section's MODEL.
                                        ;  [benchmark.3d-unet-99] and [benchmark.3d-unet-99.9]
                                        ;  both with model = 3d-unet make both trees
    verify_flags.TEST06 = --dtype int32 -e 2   ; extra run_verification.py flags, per test
    measurements.input_data_types = int32 ; measurements.json fields (all five are required)
    measurements.retraining = no
    measurements.starting_weights_filename = Llama-2-70b-chat-hf
    measurements.weight_data_types = fp8
    measurements.weight_transformations = quantization

Relative paths are taken from the config file's folder. In `accuracy` (and `accuracy_standin`),
{inference}, {accuracy_log} (the run's mlperf_log_accuracy.json) and {scenario} are replaced.

The format is strict: a section or key not listed above, a missing required key, a name outside
the checker's character set (netsub/names.py), a file that is not there, an unbalanced quote in a
flags key or an unknown {field} in accuracy is a ConfigError whose one line names the file, the
line, the section and the key. Nothing is written before the whole config has passed.
"""
import ast
import configparser
import difflib
import json
import os
import re
import shlex
import shutil
import string

from .confine import Confine
from .models import RUNS_TESTS, Rules, RulesError
from .names import name_problem

COMPLIANCE_TESTS = RUNS_TESTS

MEASUREMENT_FIELDS = ["input_data_types", "retraining", "starting_weights_filename",
                      "weight_data_types", "weight_transformations"]

# Interactive: the LLM scenario (Server scheduling with mlperf.conf's <model>-interactive settings,
# loadgen-node --scenario Interactive), its own folder in the tree.
SCENARIOS = ["SingleStream", "MultiStream", "Server", "Offline", "Interactive"]

# The schema: every key each section may hold (anything else is refused, so that a misspelt key
# is not silently ignored).
SUBMISSION_KEYS = ("organization", "system", "division", "version", "inference", "output", "work",
                   "loadgen_node", "mlperf_conf", "system_json", "deployment", "netmeta_flags",
                   "demo")
NODES_KEYS = ("addresses", "flags")
BENCHMARK_KEYS = (("scenarios", "user_conf", "qsl", "flags", "accuracy", "accuracy_standin",
                   "compliance", "tree_name", "model") + tuple("measurements." + k for k in MEASUREMENT_FIELDS)
                  + tuple("verify_flags." + t for t in COMPLIANCE_TESTS))
ACCURACY_FIELDS = ("inference", "accuracy_log", "scenario")


class ConfigError(Exception):
    pass


def key_lines(text):
    """{(section, key): line number} of the file, as configparser reads it (keys lower case,
    indented lines continue the value above)."""
    lines, section = {}, None
    for n, raw in enumerate(text.splitlines(), 1):
        s = raw.strip()
        if not s or s[0] in "#;" or raw[0] in " \t":
            continue
        m = re.match(r"\[(.+)\]", s)
        if m:
            section = m.group(1)
            lines.setdefault((section, None), n)
            continue
        m = re.match(r"([^=:]+?)\s*[=:]", s)
        if m:
            lines.setdefault((section, m.group(1).strip().lower()), n)
    return lines


def parse_file(path):
    """The file read and parsed, or ConfigError with the file and line of what went wrong."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the config file: {e.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 text (byte 0x{raw[e.start]:02x})") from None
    cp = configparser.ConfigParser(inline_comment_prefixes=(";",), interpolation=None)
    try:
        cp.read_string(text, source=path)
    except configparser.MissingSectionHeaderError as e:
        raise ConfigError(f"{path}:{e.lineno}: {e.line.strip()!r} comes before any [section] "
                          "header (the file begins with [submission])") from None
    except configparser.DuplicateSectionError as e:
        raise ConfigError(f"{path}:{e.lineno}: [{e.section}] appears twice") from None
    except configparser.DuplicateOptionError as e:
        raise ConfigError(f"{path}:{e.lineno}: [{e.section}] {e.option}: set twice in the "
                          "section") from None
    except configparser.ParsingError as e:
        lineno, line = e.errors[0]  # the line as repr() writes it
        try:
            line = repr(ast.literal_eval(line).strip())
        except (ValueError, SyntaxError):
            pass
        raise ConfigError(f"{path}:{lineno}: cannot parse {line} (expected key = value; a value "
                          "continues on indented lines)") from None
    except configparser.Error as e:
        raise ConfigError(f"{path}: {' '.join(str(e).split())}") from None
    return cp, key_lines(text)


class Source:
    """The parsed file and the checks every key goes through; each error names the file, the line,
    the section and the key."""

    def __init__(self, path):
        self.path = os.path.abspath(path)
        self.base = os.path.dirname(self.path)
        self.cp, self.lines = parse_file(path)

    def err(self, section, key, why):
        line = self.lines.get((section, key and key.lower())) or self.lines.get((section, None))
        where = f"{self.path}:{line}" if line else self.path
        return ConfigError(f"{where}: [{section}]" + (f" {key}" if key else "") + f": {why}")

    def show(self, value):
        return repr(value if len(value) <= 80 else value[:77] + "...")

    def check_keys(self, section, allowed):
        allowed = [a.lower() for a in allowed]  # configparser reads keys in lower case
        for k in self.cp[section]:
            if k in allowed:
                continue
            near = difflib.get_close_matches(k, allowed, n=1)
            raise self.err(section, k, f"not a key of [{section.split('.')[0]}"
                           + ("" if "." not in section else ".MODEL") + "]"
                           + (f" (did you mean {near[0]}?)" if near else "")
                           + "; the keys are in deploy/submission/netsub/config.py")

    def get(self, section, key, default=None, required=None):
        """The value, stripped; |required| (why it is needed) makes a missing or empty one an
        error."""
        v = self.cp[section].get(key)
        if v is None or v.strip() == "":
            if required:
                raise self.err(section, key, f"is required ({required})")
            return default
        return v.strip()

    def name(self, section, key, value):
        """A name that becomes a folder or file name (see names.py)."""
        why = name_problem(value)
        if why:
            raise self.err(section, key, f"{self.show(value)} {why}")
        return value

    def words(self, section, key):
        try:
            return shlex.split(self.get(section, key, ""))
        except ValueError as e:
            raise self.err(section, key, f"cannot split into arguments: {e}") from None

    def location(self, section, key, kind, required=None):
        """A path (relative: from the config's folder) that must be a 'file', a 'dir' or 'out' (a
        folder the runner makes); None when not given."""
        v = self.get(section, key, required=required)
        if v is None:
            return None
        if "\n" in v or "\0" in v:
            raise self.err(section, key, f"{self.show(v)} is not one path (one line)")
        p = os.path.normpath(os.path.join(self.base, os.path.expanduser(v)))
        if kind == "file" and not os.path.isfile(p):
            raise self.err(section, key, f"{p}: " + ("is not a file" if os.path.exists(p)
                                                      else "no such file"))
        if kind == "dir" and not os.path.isdir(p):
            raise self.err(section, key, f"{p}: " + ("is not a folder" if os.path.exists(p)
                                                      else "no such folder"))
        if kind == "out" and os.path.exists(p) and not os.path.isdir(p):
            raise self.err(section, key, f"{p} exists and is not a folder")
        if kind == "file" and not os.access(p, os.R_OK):
            raise self.err(section, key, f"{p}: cannot be read")
        return p

    def one_of(self, section, key, value, allowed):
        items = [t.strip() for t in value.split(",") if t.strip()]
        for t in items:
            if t not in allowed:
                raise self.err(section, key, f"{self.show(t)} is not one of {', '.join(allowed)}")
            if items.count(t) > 1:
                raise self.err(section, key, f"{t} is listed twice")
        return items


class Benchmark:
    def __init__(self, src, section, rules, demo):
        sec = src.cp[section]
        src.check_keys(section, BENCHMARK_KEYS)
        self.model = section[len("benchmark."):]
        why = name_problem(self.model)
        if why:  # the section name: its folder in the work tree, the runner's step names
            raise src.err(section, None, f"the model name {src.show(self.model)} {why}")
        # The name loadgen-node reads mlperf.conf and user.conf under (mlperf.conf's 3d-unet
        # serves the checker's 3d-unet-99 and 3d-unet-99.9), and compliance/TEST01/<name>/.
        lm = sec.get("model")
        self.lg_model = src.name(section, "model", lm.strip()) if lm is not None else self.model
        tn = sec.get("tree_name")
        self.tree_name = src.name(section, "tree_name", tn.strip() if tn is not None
                                  else rules.tree_name(self.model))
        eligible = rules.datacenter()
        if not demo and self.tree_name not in eligible:
            raise src.err(section, "tree_name" if tn is not None else None,
                          f"{self.tree_name} is not a benchmark of the {rules.version} "
                          "Datacenter suite, the only one the Network division takes; eligible: "
                          f"{', '.join(eligible)} ({rules.source}); demo = yes in [submission] "
                          "makes a CPU demo tree, not a Network result")
        self.scenarios = src.one_of(section, "scenarios", src.get(
            section, "scenarios", required="e.g. Offline, Server"), SCENARIOS)
        why = None if demo else rules.scenario_problem(self.tree_name, self.scenarios)
        if why:
            raise src.err(section, "scenarios", why)
        self.user_conf = src.location(section, "user_conf", "file", required="it is copied "
                                      "into the tree, and the official LoadGen reads it")
        self.qsl = src.words(section, "qsl")
        if not self.qsl:
            raise src.err(section, "qsl", "is required (loadgen-node QSL flags)")
        self.flags = src.words(section, "flags")
        self.standin = src.get(section, "accuracy_standin")
        self.accuracy = " ".join(src.get(section, "accuracy", required=None if self.standin else
                                         "the command that prints the accuracy line the "
                                         "checker reads", default="").split())
        check_accuracy_fields(src, section, "accuracy", self.accuracy)
        if self.standin:
            self.standin = " ".join(self.standin.split())
            check_accuracy_fields(src, section, "accuracy_standin", self.standin)
        comp = sec.get("compliance")
        if comp is not None:
            self.compliance = src.one_of(section, "compliance", comp, COMPLIANCE_TESTS)
        else:
            self.compliance = rules.compliance(self.tree_name)
            other = [t for t in self.compliance if t not in COMPLIANCE_TESTS]
            if other:
                raise src.err(section, None, f"{self.tree_name} needs {', '.join(other)} "
                              f"({rules.source}), which this runner does not run (it runs "
                              f"{', '.join(COMPLIANCE_TESTS)})")
        self.measurements = {k: src.get(section, "measurements." + k,
                                        required="a measurements.json field the checker requires")
                             for k in MEASUREMENT_FIELDS}
        self.verify_flags = {t: src.words(section, "verify_flags." + t) for t in COMPLIANCE_TESTS}


def check_accuracy_fields(src, section, key, cmd):
    """accuracy = (and accuracy_standin =) may hold {inference}, {accuracy_log} and {scenario}, nothing else in braces
    ({{ and }} for a literal brace)."""
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(cmd) if f is not None]
    except ValueError as e:
        raise src.err(section, key,
                      f"{e} (write {{{{ and }}}} for a literal brace)") from None
    for f in fields:
        if f not in ACCURACY_FIELDS:
            raise src.err(section, key, "{" + f + "} is not one of "
                          + ", ".join("{" + a + "}" for a in ACCURACY_FIELDS)
                          + " (write {{ and }} for a literal brace)")
    try:  # what the runner will do with it (a field nested in a format spec, a bad spec)
        cmd.format(**{a: "x" for a in ACCURACY_FIELDS})
    except (KeyError, IndexError, ValueError, AttributeError) as e:
        raise src.err(section, key, f"cannot fill in the fields: {e!r} (write {{{{ and "
                      f"}}}} for a literal brace)") from None


def check_addresses(src, value):
    """host:port,... with a port 1-65535 each ([v6 address]:port for IPv6)."""
    out = []
    for a in value.replace(" ", "").split(","):
        host, sep, port = a.rpartition(":")
        if not a or not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise src.err("nodes", "addresses", f"{src.show(a)} is not host:port (a port "
                          "1-65535)")
        out.append(a)
    return ",".join(out)


def check_system_json(src, path):
    if path is None:
        return None
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        raise src.err("submission", "system_json", f"{path}: not JSON: {e}") from None
    if not isinstance(d, dict):
        raise src.err("submission", "system_json", f"{path}: not a JSON object")
    return path


class Config:
    def __init__(self, path, inference=None):
        """|inference|: a checkout given on the command line (--inference-dir), over the key."""
        src = Source(path)
        self.path = src.path
        cp = src.cp
        if cp.defaults():
            k = next(iter(cp.defaults()))
            raise src.err("DEFAULT", k, "keys in [DEFAULT] are not used by this config; move it "
                          "into its section")
        for name in cp.sections():
            if name not in ("submission", "nodes") and not name.startswith("benchmark."):
                raise src.err(name, None, "not a section of this config ([submission], [nodes], "
                              "[benchmark.MODEL])")
        if "submission" not in cp:
            raise ConfigError(f"{self.path}: no [submission] section")
        S = "submission"
        src.check_keys(S, SUBMISSION_KEYS)
        self.org = src.name(S, "organization", src.get(S, "organization", required="the "
                                                       "submitter's folder name in the tree"))
        self.system = src.name(S, "system", src.get(S, "system", required="the system's folder "
                                                    "and file name in the tree"))
        self.division = src.get(S, "division", "network")
        if self.division != "network":
            raise src.err(S, "division", f"{src.show(self.division)}: this harness makes "
                          "Network-division submissions only (division = network)")
        self.version = src.get(S, "version", "v6.1")
        if not re.match(r"v[0-9]+\.[0-9]+\Z", self.version):
            raise src.err(S, "version", f"{src.show(self.version)} is not a round such as v6.1 "
                          "(the checker's --version)")
        self.inference = src.location(S, "inference", "dir")
        if inference is not None:
            self.inference = os.path.abspath(inference)
            if not os.path.isdir(self.inference):
                raise ConfigError(f"--inference-dir {self.inference}: no such folder")
        if S in cp and cp[S].get("output") is not None and not cp[S]["output"].strip():
            raise src.err(S, "output", "is empty (leave the line out for the default, "
                          "submission)")
        self.output = src.location(S, "output", "out") or os.path.join(src.base, "submission")
        self.work = src.location(S, "work", "out") or self.output + "-work"
        if self.work == self.output:
            raise src.err(S, "work", "is the output folder; the tree must hold only what the "
                          "checker reads")
        lg = src.get(S, "loadgen_node", "loadgen-node")
        if os.sep in lg:
            self.loadgen_node = src.location(S, "loadgen_node", "file")
        elif shutil.which(lg):
            self.loadgen_node = lg
        else:
            raise src.err(S, "loadgen_node", f"{src.show(lg)} is not on PATH (give its path)")
        if not os.access(self.loadgen_node, os.X_OK) and os.sep in self.loadgen_node:
            raise src.err(S, "loadgen_node", f"{self.loadgen_node} is not executable")
        self.mlperf_conf = src.location(S, "mlperf_conf", "file")
        self.system_json = check_system_json(src, src.location(S, "system_json", "file"))
        self.deployment = src.location(S, "deployment", "file")
        self.netmeta_flags = src.words(S, "netmeta_flags")
        if "nodes" not in cp:
            raise ConfigError(f"{self.path}: no [nodes] section ([nodes] addresses = "
                              "host:port,... is required)")
        src.check_keys("nodes", NODES_KEYS)
        self.nodes = check_addresses(src, src.get("nodes", "addresses",
                                                  required="host:port,... of the sut-nodes"))
        self.node_flags = src.words("nodes", "flags")
        try:
            self.rules = Rules(self.inference, self.version)
        except RulesError as e:
            raise src.err(S, "version", str(e)) from None
        self.demo = src.get(S, "demo", "no")
        if self.demo not in ("yes", "no"):
            raise src.err(S, "demo", f"{src.show(self.demo)} is not yes or no")
        self.demo = self.demo == "yes"
        self.benchmarks = [Benchmark(src, name, self.rules, self.demo) for name in cp.sections()
                           if name.startswith("benchmark.")]
        if not self.benchmarks:
            raise ConfigError(f"{self.path}: no [benchmark.MODEL] section")
        seen = {}
        for b in self.benchmarks:
            other = seen.setdefault(b.tree_name, b.model)
            if other != b.model:
                raise src.err("benchmark." + b.model, "tree_name", f"{b.tree_name!r} is also "
                              f"[benchmark.{other}]'s folder in the tree")
        self.fs = Confine(self.output, self.work)

    def root(self):
        """network/<org>: the submitter's folder in the tree."""
        return os.path.join(self.output, self.division, self.org)
