"""For the loadgen-node CLI tests: a null sut-node on an ephemeral loopback port, and the values
of a run's detail log."""
import json
import os
import subprocess
import time


def start_null_node(sut, out, timeout_s=20):
    """Starts SUT with the null backend, its port file in OUT. Returns (process, "127.0.0.1:PORT"),
    or (process, None) when it did not start within TIMEOUT_S; the caller stops the process."""
    port = os.path.join(out, "port")
    node = subprocess.Popen([sut, "--listen", "127.0.0.1:0", "--port-file", port, "--backend",
                             "null", "--log-level", "warn"], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout_s
    while not (os.path.exists(port) and open(port).read().strip()):
        if time.monotonic() > deadline or node.poll() is not None:
            return node, None
        time.sleep(0.05)
    return node, "127.0.0.1:" + open(port).read().strip()


def detail_values(path):
    """The keys of the detail log at PATH (its :::MLLOG records) with each key's first value."""
    out = {}
    for line in open(path):
        if line.startswith(":::MLLOG"):
            rec = json.loads(line[len(":::MLLOG"):])
            out.setdefault(rec.get("key"), rec.get("value"))
    return out
