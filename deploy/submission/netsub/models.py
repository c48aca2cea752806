"""What the official submission checker accepts for a round: the benchmarks of the Datacenter suite
(the Network division is Datacenter-only), the scenarios each requires or allows, the compliance
tests each needs and the checker's own benchmark names, read from the checker itself.

The source is MODEL_CONFIG[version] in <inference>/tools/submission/submission_checker/
constants.py (a plain module without imports; it is read, not imported, so nothing is written into
the checkout). Only when the config names no checkout, or one without the checker, does the runner
use TABLE below (a copy of the v6.1 entries it needs) and say so: the checker of the round is what
decides, and a tree made from the table is checked against it only when the checker runs.
"""
import os

CHECKER_CONSTANTS = ("tools", "submission", "submission_checker", "constants.py")

# The v6.1 entries of the checker's MODEL_CONFIG this runner uses (mlcommons/inference at
# b66003e1), for when no checker is present.
TABLE = {
    "v6.1": {
        "models": ["resnet", "bert-99", "bert-99.9", "3d-unet-99", "3d-unet-99.9", "llama3.1-8b",
                   "llama3.1-8b-edge", "llama2-70b-99.9", "stable-diffusion-xl", "rgat",
                   "deepseek-r1", "whisper", "gpt-oss-120b", "wan-2.2-t2v-a14b",
                   "qwen3-vl-235b-a22b", "qwen3.6-27b", "dlrm-v3", "yolo-95", "yolo-99",
                   "e2e-rag-qna", "e2e-rag-db"],
        "required-scenarios-datacenter": {
            "dlrm-v3": ["Server", "Offline"], "3d-unet-99": ["Offline"],
            "3d-unet-99.9": ["Offline"], "llama3.1-8b": ["Offline"],
            "llama2-70b-99.9": ["Offline"], "rgat": ["Offline"], "whisper": ["Offline"],
            "deepseek-r1": ["Offline"], "gpt-oss-120b": ["Offline"],
            "qwen3-vl-235b-a22b": ["Offline"], "wan-2.2-t2v-a14b": ["Offline", "SingleStream"],
            "e2e-rag-qna": ["Offline"], "e2e-rag-db": ["Offline"]},
        "optional-scenarios-datacenter": {
            "llama2-70b-99.9": ["Interactive", "Server"], "llama3.1-8b": ["Interactive", "Server"],
            "deepseek-r1": ["Interactive", "Server"], "gpt-oss-120b": ["Interactive", "Server"],
            "qwen3-vl-235b-a22b": ["Interactive", "Server"]},
        "model_mapping": {"ssd-resnet34": "retinanet", "mobilenet": "resnet",
                          "resnet50": "resnet", "llama3_1-405b": "llama3.1-405b",
                          "llama3_1-8b": "llama3.1-8b", "llama3_1-8b-edge": "llama3.1-8b-edge"},
        "models_TEST01": ["resnet", "bert-99", "bert-99.9", "3d-unet-99", "3d-unet-99.9",
                          "stable-diffusion-xl", "rgat", "whisper", "yolo-99", "yolo-95"],
        "models_TEST04": ["resnet", "stable-diffusion-xl", "wan-2.2-t2v-a14b"],
        "models_TEST06": ["llama2-70b-99.9", "llama2-70b-interactive-99",
                          "llama2-70b-interactive-99.9", "llama3.1-8b", "llama3.1-8b-interactive",
                          "deepseek-r1"],
        "models_TEST07": ["gpt-oss-120b"],
        "models_TEST08": ["dlrm-v3"],
        "models_TEST09": ["gpt-oss-120b", "e2e-rag-qna"],
    },
}

# The compliance tests this runner runs and verifies (compliance/TESTnn/ of the checkout).
RUNS_TESTS = ("TEST01", "TEST04", "TEST06")


class RulesError(Exception):
    pass


class Rules:
    """The checker's rules for one round. |source| says where they were read from."""

    def __init__(self, inference, version):
        path = os.path.join(inference, *CHECKER_CONSTANTS) if inference else None
        if path and os.path.isfile(path):
            ns = {}
            try:
                with open(path) as f:
                    exec(compile(f.read(), path, "exec"), ns)  # a plain module, no imports
                table = ns["MODEL_CONFIG"]
            except Exception as e:  # a checkout the runner cannot read is reported, not fatal
                raise RulesError(f"{path}: cannot read the checker's MODEL_CONFIG: {e!r}") from None
            self.source = f"the official checker ({path})"
            self.from_checker = True
        else:
            table = TABLE
            self.source = ("netsub/models.py's copy of the v6.1 checker's table; no checker: "
                           + (f"{path} is missing" if path else "no inference = checkout"))
            self.from_checker = False
        if version not in table:
            raise RulesError(f"{version} is not a round of {self.source} (it knows "
                             f"{', '.join(sorted(table))})")
        self.version = version
        self.base = table[version]

    def datacenter(self):
        """The Datacenter suite: every benchmark with Datacenter scenarios, sorted."""
        return sorted(set(self.base.get("required-scenarios-datacenter", {}))
                      | set(self.base.get("optional-scenarios-datacenter", {})))

    def tree_name(self, model):
        """The checker's name for |model| (mlperf.conf's spelling or the checker's own): the
        name itself when the checker knows it, its model_mapping, else the -99.9 or -99 variant
        the round has (llama2-70b -> llama2-70b-99.9: the stricter target when it has both)."""
        models = self.base.get("models", [])
        if model in models:
            return model
        mapped = self.base.get("model_mapping", {}).get(model)
        if mapped:
            return mapped
        for suffix in ("-99.9", "-99"):
            if model + suffix in models:
                return model + suffix
        return model

    def required(self, tree):
        return list(self.base.get("required-scenarios-datacenter", {}).get(tree, []))

    def optional(self, tree):
        return list(self.base.get("optional-scenarios-datacenter", {}).get(tree, []))

    def compliance(self, tree):
        """The compliance tests the checker requires of |tree| (TEST01...TEST09)."""
        return sorted(k[len("models_"):] for k, v in self.base.items()
                      if k.startswith("models_TEST") and tree in v)

    def scenario_problem(self, tree, scenarios):
        """Why |scenarios| are not a set the checker accepts for |tree| in the Datacenter suite,
        or None."""
        req, opt = self.required(tree), self.optional(tree)
        missing = [s for s in req if s not in scenarios]
        if missing:
            return (f"{tree} requires {', '.join(req)} ({self.source}); missing "
                    f"{', '.join(missing)}")
        unknown = [s for s in scenarios if s not in req + opt]
        if unknown:
            return (f"{', '.join(unknown)} is not a Datacenter scenario of {tree} (it takes "
                    f"{', '.join(req + opt)}; {self.source})")
        pair = [s for s in ("Server", "Interactive") if s in opt]
        if pair and not any(s in scenarios for s in pair):
            return (f"{tree} requires one of {' or '.join(pair)} beside "
                    f"{', '.join(req)} ({self.source})")
        return None
