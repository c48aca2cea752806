"""The official accuracy script of each benchmark and the Python modules it needs, checked before
the first step: a submission without its accuracy is not one, so a missing module stops the runner
(naming the modules and their Debian packages) instead of leaving a tree without accuracy.

accuracy_standin = (a benchmark key) replaces the official script with another command, for tests
and rehearsals only: the tree then holds STAND_IN_ACCURACY.txt at its top, every accuracy.txt
begins with a line saying the score is not the official script's, and the scenario READMEs and
the runner's last lines say the tree is not a valid result.
"""
import os
import shlex
import subprocess
import sys

STANDIN_MARK = "STAND_IN_ACCURACY.txt"
STANDIN_LINE = ("STAND-IN ACCURACY (accuracy_standin =): not the official accuracy script, not a "
                "valid result")

# Module -> its Debian package, or why there is none (Debian 12, bookworm).
DEBIAN = {
    "numpy": "python3-numpy",
    "pandas": "python3-pandas",
    "nltk": "python3-nltk (its punkt and punkt_tab data: the scripts call nltk.download, which "
            "needs the network or NLTK_DATA pointing at a copy)",
    "torch": "python3-torch",
    "sentencepiece": "python3-sentencepiece",
    "absl": "python3-absl",
    "yaml": "python3-yaml",  # the submission checker's
    "nibabel": "python3-nibabel",
    "transformers": "not in Debian 12 (Hugging Face transformers; the tokenizer of the model's "
                    "checkpoint too)",
    "evaluate": "not in Debian 12 (Hugging Face evaluate; its rouge metric is fetched from the "
                "Hugging Face hub unless cached)",
    "datasets": "not in Debian 12 (Hugging Face datasets)",
    "rouge_score": "not in Debian 12 (Google's rouge-score, which evaluate's rouge metric uses)",
}

# The checker's benchmark name -> (the official script under the inference checkout, the modules
# it and what it imports need).
OFFICIAL = {
    "resnet": ("vision/classification_and_detection/tools/accuracy-imagenet.py", ["numpy"]),
    "llama2-70b-99": ("language/llama2-70b/evaluate-accuracy.py",
                      ["numpy", "pandas", "nltk", "transformers", "sentencepiece", "evaluate",
                       "rouge_score", "absl"]),
    "llama2-70b-99.9": ("language/llama2-70b/evaluate-accuracy.py",
                        ["numpy", "pandas", "nltk", "transformers", "sentencepiece", "evaluate",
                         "rouge_score", "absl"]),
    "llama3.1-8b": ("language/llama3.1-8b/evaluation.py",
                    ["numpy", "pandas", "nltk", "torch", "transformers", "datasets", "evaluate",
                     "rouge_score", "absl"]),
    "3d-unet-99": ("vision/medical_imaging/3d-unet-kits19/accuracy_kits.py",
                   ["numpy", "pandas", "nibabel"]),
    "3d-unet-99.9": ("vision/medical_imaging/3d-unet-kits19/accuracy_kits.py",
                     ["numpy", "pandas", "nibabel"]),
}

# The benchmarks whose official script scores only a log that holds every sample of the data set
# once (accuracy_kits.py asserts it), so not TEST01's sampled log (runner.test01_whole_set).
WHOLE_SET = ("3d-unet-99", "3d-unet-99.9")


def interpreter(cmd):
    """The Python that runs |cmd|: its first word when that is a python, else this one."""
    try:
        words = shlex.split(cmd)
    except ValueError:
        return sys.executable
    return words[0] if words and os.path.basename(words[0]).startswith("python") else \
        sys.executable


def missing_modules(python, modules):
    """The modules |python| cannot find (found without importing them), or None when it cannot
    be run."""
    code = ("import importlib.util, sys\n"
            "print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))")
    try:
        r = subprocess.run([python, "-c", code, *modules], capture_output=True, text=True,
                           timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.split() if r.returncode == 0 else None


def problem(bench, inference):
    """Why |bench|'s official accuracy script cannot run here (one line), or None: its command
    names the checker benchmark's official script and the interpreter lacks modules it needs."""
    if bench.standin or bench.tree_name not in OFFICIAL:
        return None
    script, modules = OFFICIAL[bench.tree_name]
    if script not in bench.accuracy.replace("{inference}/", ""):
        return None
    python = interpreter(bench.accuracy.format(inference=inference or "", accuracy_log="x",
                                               scenario="x"))
    gone = missing_modules(python, modules)
    if gone is None:
        return (f"[benchmark.{bench.model}] accuracy: {python} could not be run to check the "
                f"modules of {script}")
    if not gone:
        return None
    return (f"[benchmark.{bench.model}] accuracy: the official {script} needs Python modules "
            f"that {python} lacks: " + "; ".join(f"{m} ({DEBIAN.get(m, 'see its imports')})"
                                                 for m in gone)
            + ". Install them (deploy/submission/README.md, 'Accuracy scripts'); the runner "
            "stops rather than write a tree without accuracy (accuracy_standin = is for tests "
            "only and marks the tree as not a valid result)")
