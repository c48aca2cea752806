"""Which LoadGen wrote a detail log. Official results must come from the unaltered official
LoadGen; the submission checker does not look, so the runner does before it places a log.

The official LoadGen writes `loadgen_version` as "<major.minor.patch> @ <git commit or NA>" and
logs the SHA-1 of its own sources (`loadgen_file_sha1`) and its logger counters (`logger_*`).
loadgen-node writes `loadgen_version` as "loadgen-node X (LoadGen 6.0.17 compatible)" and none of
the other two (loadgen-node/README.md, "Deviations").
"""
import json
import re

OFFICIAL_VERSION = re.compile(r"^\d+\.\d+\.\d+ @ \S+")


def read_markers(detail_path):
    """{key: value} of the version keys of a detail log (first occurrence of each)."""
    found = {}
    with open(detail_path, errors="replace") as f:
        for line in f:
            if not line.startswith(":::MLLOG "):
                continue
            m = re.search(r'"key": "(loadgen_version|loadgen_file_sha1|logger_[a-z_]+)"', line)
            if not m or m.group(1) in found:
                continue
            try:
                found[m.group(1)] = json.loads(line[len(":::MLLOG "):]).get("value")
            except ValueError:
                found[m.group(1)] = None
    return found


def official_problem(detail_path):
    """None when the log was written by the official LoadGen, else why it was not."""
    try:
        m = read_markers(detail_path)
    except OSError as e:
        return f"cannot read {detail_path}: {e.strerror}"
    version = m.get("loadgen_version")
    if version is None:
        return f"{detail_path} has no loadgen_version entry: not an MLPerf LoadGen detail log"
    if not isinstance(version, str) or "loadgen-node" in version or \
            not OFFICIAL_VERSION.match(version):
        return (f"{detail_path} was written by '{version}', not by the official LoadGen "
                f"(its loadgen_version reads '<x.y.z> @ <commit>')")
    if "loadgen_file_sha1" not in m:
        return (f"{detail_path} lacks loadgen_file_sha1, which the official LoadGen always "
                "logs: not written by the unaltered official LoadGen")
    if not any(k.startswith("logger_") for k in m):
        return (f"{detail_path} lacks the official LoadGen's logger_* counters: not written by "
                "the unaltered official LoadGen")
    return None
