"""A null sut-node on an ephemeral loopback port, for the loadgen-node CLI tests."""
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
