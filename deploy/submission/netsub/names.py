"""The names from the config that become folder or file names (organization, system, the model of
a [benchmark.MODEL] section, tree_name): checked against the character set the official checker
and the submission repository accept, before anything is written.

The checker takes every folder it finds as a name (tools/submission/submission_checker/utils.py,
list_dir; loader.py walks <division>/<submitter>/results/<system>/<benchmark>/<scenario>), makes
GitHub links of them (generate_final_report.py: <base_url>/<division>/<submitter>/results/<system>)
and tools/submission/repository_checks.sh refuses a submission holding names that begin with '.'
or hold a space, and symbolic links. The names the checker itself uses (constants.py: resnet,
3d-unet-99.9, llama3.1-8b, ...; mlperf.conf's llama3_1-405b) are letters, digits, '.', '-' and
'_'. So a name is 1-100 of [A-Za-z0-9._-], not beginning with '.' or '-': that excludes '/', '..',
absolute paths, spaces and anything not ASCII.
"""
import re

NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*\Z")
NAME_MAX = 100
CHARSET = "1-100 of A-Z a-z 0-9 . _ - (ASCII), not beginning with '.' or '-'"


def name_problem(value):
    """Why |value| cannot be a folder or file name in the tree, or None when it can."""
    if value == "":
        return "is empty"
    if "/" in value or "\\" in value:
        return "holds a path separator (a name, not a path)"
    if value in (".", "..") or value.startswith("."):
        return ("begins with '.' (the submission repository refuses hidden names; '..' leaves "
                "the folder)")
    if len(value) > NAME_MAX:
        return f"is {len(value)} characters long (at most {NAME_MAX})"
    bad = sorted({c for c in value if not re.match(r"[A-Za-z0-9._-]", c)})
    if bad:
        return (f"holds {' '.join(ascii(c) for c in bad)}, outside the checker's character set "
                f"({CHARSET})")
    if not NAME_RE.match(value):
        return f"begins with '-' ({CHARSET})"
    return None
