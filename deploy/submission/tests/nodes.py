"""Start and stop sut-node daemons on loopback for the tests (ephemeral ports, bounded waits)."""
import os
import re
import signal
import subprocess
import time


class Node:
    def __init__(self, exe, name, backend="digest", extra=(), logdir="."):
        self.log_path = os.path.join(logdir, f"sut-{name}.log")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [exe, "--listen", "127.0.0.1:0", "--backend", backend, "--name", name, *extra],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.address = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with open(self.log_path, "rb") as f:
                m = re.search(rb"listening on (127\.0\.0\.1:\d+)", f.read())
            if m:
                self.address = m.group(1).decode()
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"sut-node {name} did not start: see {self.log_path}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def official_missing(loadgen_node):
    """The SKIP line when |loadgen_node| was built without an official LoadGen, else None."""
    probe = subprocess.run([loadgen_node, "--loadgen", "official", "--scenario", "Offline", "--sut",
                            "null", "--qsl-synthetic", "1", "--sample-size", "1"],
                           capture_output=True, text=True, timeout=30)
    if "this build has no official LoadGen" in probe.stderr:
        return "SKIP: loadgen-node was built without an official LoadGen (-DMLPERF_LOADGEN_ROOT)"
    return None


def official_skip(loadgen_node):
    """The SKIP line when MLPERF_INFERENCE_DIR names no inference checkout or |loadgen_node| has no
    official LoadGen, else None."""
    inference = os.environ.get("MLPERF_INFERENCE_DIR")
    if not inference or not os.path.isdir(os.path.join(inference, "tools", "submission")):
        return ("SKIP: set MLPERF_INFERENCE_DIR (or the CMake cache path) to a checkout of "
                "mlcommons/inference")
    return official_missing(loadgen_node)


def detail_entries(path, keys):
    """{key: value-as-JSON-text} of the first entry of each key in an MLPerf detail log."""
    import json
    out = {}
    with open(path) as f:
        for line in f:
            if not line.startswith(":::MLLOG "):
                continue
            try:
                e = json.loads(line[len(":::MLLOG "):])
            except ValueError:
                continue  # the official LoadGen writes a few non-JSON lines (inf, nan)
            if e.get("key") in keys and e["key"] not in out:
                out[e["key"]] = e["value"]
    return out
