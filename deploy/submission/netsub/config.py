"""The runner's one config file (INI, read with configparser): what to run and where it goes.

    [submission]
    organization = ExampleOrg           ; submitter name in the tree (network/<org>/...)
    system = net2x_sim                  ; system name (results/<system>/..., systems/<system>.json)
    division = network                  ; the Network division (closed is refused: not this harness)
    version = v6.1                      ; checker version (--version of submission_checker)
    inference = /path/to/inference      ; your checkout of mlcommons/inference (checker, compliance
                                        ;  tests, accuracy scripts, log truncation)
    output = submission                 ; the tree's root (network/ goes inside)
    work = submission-work              ; logs, state and scratch of the runner (default <output>-work)
    loadgen_node = loadgen-node         ; the binary (built with -DMLPERF_LOADGEN_ROOT for --submission)
    mlperf_conf = /path/mlperf.conf     ; read by the built-in scheduler (--dry-run); the official
                                        ;  LoadGen uses the one compiled into it
    system_json = system-base.json      ; the rest of the system description (hardware, software)
    deployment = deployment.ini         ; deploy/metadata/netmeta.py config: the 13 network fields
    netmeta_flags = --query-nodes       ; extra netmeta.py flags (e.g. --no-probe)

    [nodes]
    addresses = 10.0.0.2:7000,10.0.0.3:7000
    flags = --connections 2 --tls-ca ca.pem   ; any further loadgen-node QDL flags

    [benchmark.resnet50]                ; the model name as mlperf.conf spells it
    scenarios = Offline, Server
    user_conf = resnet50-user.conf
    qsl = --qsl-npy imagenet_val.npy --compress lz4   ; loadgen-node QSL flags
    flags = --set min_duration_ms=60000               ; any further loadgen-node flags
    accuracy = python3 {inference}/vision/classification_and_detection/tools/accuracy-imagenet.py
               --mlperf-accuracy-file {accuracy_log} --imagenet-val-file val_map.txt --dtype int32
    compliance = TEST01, TEST04          ; default: what the rules require for the model
    tree_name = resnet                   ; default: the checker's name for the model
    verify_flags.TEST06 = --dtype int64 -e 2   ; extra run_verification.py flags, per test
    measurements.input_data_types = int8 ; measurements.json fields (all five are required)
    measurements.retraining = no
    measurements.starting_weights_filename = resnet50_v1.onnx
    measurements.weight_data_types = int8
    measurements.weight_transformations = quantization

Relative paths are taken from the config file's folder. In `accuracy`, {inference},
{accuracy_log} (the run's mlperf_log_accuracy.json) and {scenario} are replaced.
"""
import configparser
import os
import shlex

# The checker's model names (tools/submission/submission_checker/constants.py, model_mapping).
TREE_NAME = {"resnet50": "resnet", "ssd-resnet34": "retinanet", "llama3_1-405b": "llama3.1-405b",
             "llama3_1-8b": "llama3.1-8b"}

# Compliance tests the rules require per model (the checker's models_TEST01/04/06 of v6.x).
TEST01 = {"resnet", "retinanet", "bert-99", "bert-99.9", "dlrm-v2-99", "dlrm-v2-99.9",
          "3d-unet-99", "3d-unet-99.9", "stable-diffusion-xl", "rgat", "pointpainting", "whisper",
          "yolo-99", "yolo-95"}
TEST04 = {"resnet", "stable-diffusion-xl", "pointpainting"}
TEST06 = {"llama2-70b-99", "llama2-70b-99.9", "llama2-70b-interactive-99",
          "llama2-70b-interactive-99.9", "llama3.1-405b", "llama3.1-8b", "mixtral-8x7b",
          "deepseek-r1"}

MEASUREMENT_FIELDS = ["input_data_types", "retraining", "starting_weights_filename",
                      "weight_data_types", "weight_transformations"]

SCENARIOS = ["SingleStream", "MultiStream", "Server", "Offline"]


class ConfigError(Exception):
    pass


def required_compliance(tree_name):
    tests = []
    if tree_name in TEST01:
        tests.append("TEST01")
    if tree_name in TEST04:
        tests.append("TEST04")
    if tree_name in TEST06:
        tests.append("TEST06")
    return tests


class Benchmark:
    def __init__(self, model, sec, path):
        self.model = model
        self.tree_name = sec.get("tree_name", TREE_NAME.get(model, model))
        self.scenarios = [s.strip() for s in sec.get("scenarios", "").split(",") if s.strip()]
        if not self.scenarios:
            raise ConfigError(f"[benchmark.{model}]: scenarios = is required (e.g. Offline, Server)")
        for s in self.scenarios:
            if s not in SCENARIOS:
                raise ConfigError(f"[benchmark.{model}] scenarios: '{s}' is not one of "
                                  f"{', '.join(SCENARIOS)}")
        self.user_conf = path(sec.get("user_conf"))
        if not self.user_conf:
            raise ConfigError(f"[benchmark.{model}]: user_conf = is required (it is copied into "
                              "the tree, and the official LoadGen reads it)")
        self.qsl = shlex.split(sec.get("qsl", ""))
        if not self.qsl:
            raise ConfigError(f"[benchmark.{model}]: qsl = is required (loadgen-node QSL flags)")
        self.flags = shlex.split(sec.get("flags", ""))
        self.accuracy = " ".join(sec.get("accuracy", "").split())
        if not self.accuracy:
            raise ConfigError(f"[benchmark.{model}]: accuracy = is required (the command that "
                              "prints the accuracy line the checker reads)")
        comp = sec.get("compliance")
        self.compliance = ([t.strip() for t in comp.split(",") if t.strip()] if comp is not None
                           else required_compliance(self.tree_name))
        for t in self.compliance:
            if t not in ("TEST01", "TEST04", "TEST06"):
                raise ConfigError(f"[benchmark.{model}] compliance: '{t}' is not TEST01, TEST04 "
                                  "or TEST06")
        self.measurements = {k: sec.get("measurements." + k, "") for k in MEASUREMENT_FIELDS}
        self.verify_flags = {t: shlex.split(sec.get("verify_flags." + t, ""))
                             for t in ("TEST01", "TEST04", "TEST06")}


class Config:
    def __init__(self, path):
        cp = configparser.ConfigParser(inline_comment_prefixes=(";",), interpolation=None)
        if not cp.read(path):
            raise ConfigError(f"{path}: cannot read the config file")
        self.path = os.path.abspath(path)
        base = os.path.dirname(self.path)

        def p(v):
            return os.path.normpath(os.path.join(base, os.path.expanduser(v))) if v else None

        if "submission" not in cp:
            raise ConfigError(f"{path}: no [submission] section")
        s = cp["submission"]
        for k in ("organization", "system"):
            if not s.get(k):
                raise ConfigError(f"{path} [submission]: {k} = is required")
        self.org = s["organization"]
        self.system = s["system"]
        self.division = s.get("division", "network")
        if self.division != "network":
            raise ConfigError(f"{path} [submission] division = {self.division}: this harness makes "
                              "Network-division submissions only (division = network)")
        self.version = s.get("version", "v6.1")
        self.inference = p(s.get("inference"))
        self.output = p(s.get("output", "submission"))
        self.work = p(s.get("work")) or self.output + "-work"
        lg = s.get("loadgen_node", "loadgen-node")
        self.loadgen_node = p(lg) if os.sep in lg else lg
        self.mlperf_conf = p(s.get("mlperf_conf"))
        self.system_json = p(s.get("system_json"))
        self.deployment = p(s.get("deployment"))
        self.netmeta_flags = shlex.split(s.get("netmeta_flags", ""))
        if "nodes" not in cp or not cp["nodes"].get("addresses"):
            raise ConfigError(f"{path}: [nodes] addresses = host:port,... is required")
        self.nodes = cp["nodes"]["addresses"].replace(" ", "")
        self.node_flags = shlex.split(cp["nodes"].get("flags", ""))
        self.benchmarks = [Benchmark(name[len("benchmark."):], cp[name], p)
                           for name in cp.sections() if name.startswith("benchmark.")]
        if not self.benchmarks:
            raise ConfigError(f"{path}: no [benchmark.MODEL] section")

    def root(self):
        """network/<org>: the submitter's folder in the tree."""
        return os.path.join(self.output, self.division, self.org)
