#!/usr/bin/python3
"""Cancel in the backend ABI, against a fake engine that never answers (a stream that sends its
headers and then no token; a KServe request that gets no response) and counts the requests it
receives and the connections it holds open:

  openai disconnect: loadgen-node is killed while 2 streams are open and 22 samples wait in the
      backend's queue: the engine sees both connections closed within a few seconds, and no
      request arrives after the kill; with the HTTP client on the node's loop (loop=node, the
      default) and on a thread of its own (loop=own).
  openai sigterm: SIGTERM to sut-node (--drain-timeout-ms 4000) with 2 silent streams open: the
      node cancels them before its drain deadline, exits 0 within the deadline plus a margin, and
      the engine's connections are closed.
  openai idle: stream_idle_ms=1000: a silent stream fails its sample with a message naming the
      engine's URL and the deadline, long before timeout_ms.
  openai queued (client=lean on the node's loop and on its own, then curl): 6 samples, 2 connections (--max-batch 2), a silent
      engine, timeout_ms=1500, stream_idle_ms=1000: the first 2 streams fail at the idle
      deadline (under 1500 ms), a queued sample's idle deadline counts only from when it was
      sent (never while it waits: those sent late fail at timeout_ms), and each sample still
      queued at timeout_ms fails with exactly "URL: not sent: waited N ms for a free connection
      to the engine (2 connections, all busy), over timeout_ms=1500" (N >= 1499); every failure
      line is one of those, and exactly the samples that never reached the engine, at least
      one, say "not sent".
  kserve disconnect: the same as openai disconnect for the kserve backend (1 engine: 1 request
      open, the rest queued in the node's batcher).

    test_cancel.py SUT_NODE LOADGEN_NODE OPENAI_PLUGIN KSERVE_PLUGIN

Bounds are wide (the machine is shared): they tell cancel (seconds) from no cancel (the 600 s
timeout_ms, or never)."""
import http.server
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import enginetest as et  # noqa: E402

CLOSE_WITHIN_S = 10.0  # the engine sees a cancelled connection closed within this
QUIET_S = 3.0  # after which no new request may arrive for this long
SAMPLES = 24


class Engine:
    """A silent engine: records each request's arrival and each connection's close."""

    def __init__(self, kind):
        self.kind = kind  # "openai": SSE headers, then nothing; "kserve": no response at all
        self.mu = threading.Lock()
        self.arrivals = []
        self.open = 0
        self.stopping = False
        eng = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                self.rfile.read(n)
                with eng.mu:
                    eng.arrivals.append(time.monotonic())
                    eng.open += 1
                try:
                    if eng.kind == "openai":
                        self.send_response(200)
                        self.send_header("Content-Type", "text/event-stream")
                        self.send_header("Transfer-Encoding", "chunked")
                        self.end_headers()
                        self.wfile.flush()
                    # Hold the connection until the client closes it.
                    while not eng.stopping:
                        r, _, _ = select.select([self.connection], [], [], 0.1)
                        if r and not self.connection.recv(4096):
                            break
                except OSError:
                    pass
                finally:
                    with eng.mu:
                        eng.open -= 1
                self.close_connection = True

        self.srv = et.serve(Handler)
        self.port = self.srv.server_address[1]

    def counts(self):
        with self.mu:
            return len(self.arrivals), self.open

    def arrived_after(self, t):
        with self.mu:
            return sum(1 for a in self.arrivals if a > t)

    def wait(self, what, cond, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if cond():
                return time.monotonic()
            time.sleep(0.02)
        sys.exit(f"FAIL: {what} within {timeout} s (engine: {self.counts()[0]} requests, "
                 f"{self.counts()[1]} open)")

    def close(self):
        self.stopping = True
        self.srv.shutdown()
        self.srv.server_close()


def start_loadgen(procs, lg, tmp, tag, addr, samples):
    out = os.path.join(tmp, tag)
    argv = [lg, "--scenario", "Offline", "--mode", "AccuracyOnly", "--qsl-synthetic",
            str(samples), "--sample-size", "16", "--nodes", addr, "--output-dir", out, "--quiet",
            "--progress", "off", "--log-level", "warn", "--model", "llama2-70b"]
    return procs.start(argv, os.path.join(tmp, f"{tag}.lg.log"))


def stopped(procs, node, nlog, tag):
    """SIGTERM with nothing left in flight: exit 0 (a sanitizer's report would make it fail)."""
    rc = procs.stop(node, timeout=30)
    if rc != 0:
        sys.exit(f"FAIL {tag}: sut-node exit {rc} on SIGTERM; log:\n{open(nlog).read()[-3000:]}")


def disconnect(procs, sut, lg, tmp, tag, backend, opts, extra, want_open):
    """Kills loadgen-node while |want_open| requests are open; checks the engine's side."""
    eng = Engine(tag.split()[0])
    opts = dict(opts, url=f"http://127.0.0.1:{eng.port}")
    node, addr, nlog = et.start_node(procs, sut, tmp, tag.replace(" ", "-"), backend, opts,
                                     extra)
    client = start_loadgen(procs, lg, tmp, tag.replace(" ", "-"), addr, SAMPLES)
    eng.wait(f"{tag}: {want_open} requests open", lambda: eng.counts()[1] >= want_open, 60)
    time.sleep(0.5)  # the rest of the samples reach the node's queue
    client.kill()
    client.wait()
    t_kill = time.monotonic()
    t_closed = eng.wait(f"{tag}: the engine's connections closed after loadgen-node left",
                        lambda: eng.counts()[1] == 0, CLOSE_WITHIN_S)
    time.sleep(QUIET_S)
    late = eng.arrived_after(t_kill)
    if late:
        sys.exit(f"FAIL {tag}: {late} requests reached the engine after loadgen-node left")
    if node.poll() is not None:
        sys.exit(f"FAIL {tag}: sut-node exited ({node.returncode})")
    nl = open(nlog).read()
    if "its samples in flight are cancelled" not in nl:
        sys.exit(f"FAIL {tag}: no cancel in the node's log:\n{nl[-2000:]}")
    stopped(procs, node, nlog, tag)
    eng.close()
    print(f"ok {tag}: {eng.counts()[0]} requests reached the engine, all before the client left; "
          f"their connections closed {t_closed - t_kill:.3f} s after it left, none sent in the "
          f"{QUIET_S:.0f} s after")


def sigterm(procs, sut, lg, tmp, plugin):
    tag = "openai sigterm"
    drain_ms = 4000
    eng = Engine("openai")
    node, addr, nlog = et.start_node(procs, sut, tmp, "openai-sigterm", plugin,
                                     {"url": f"http://127.0.0.1:{eng.port}"},
                                     ["--max-batch", "2", "--drain-timeout-ms", str(drain_ms)])
    client = start_loadgen(procs, lg, tmp, "openai-sigterm", addr, SAMPLES)
    eng.wait(f"{tag}: 2 streams open", lambda: eng.counts()[1] >= 2, 60)
    t0 = time.monotonic()
    node.send_signal(signal.SIGTERM)
    limit = drain_ms / 1000 + 6
    try:
        rc = node.wait(limit)
    except subprocess.TimeoutExpired:
        sys.exit(f"FAIL {tag}: sut-node still running {limit} s after SIGTERM "
                 f"(drain deadline {drain_ms} ms)")
    took = time.monotonic() - t0
    nl = open(nlog).read()
    if rc != 0 or "cancelled their" not in nl:
        sys.exit(f"FAIL {tag}: exit {rc} after {took:.2f} s, log:\n{nl[-2000:]}")
    eng.wait(f"{tag}: the engine's connections closed", lambda: eng.counts()[1] == 0, 5)
    procs.stop(client)
    eng.close()
    print(f"ok {tag}: exited 0 {took:.2f} s after SIGTERM (drain deadline {drain_ms / 1000:.0f} "
          f"s), streams cancelled: "
          + next(l for l in nl.splitlines() if "cancelled their" in l)[-120:])


def idle(procs, sut, lg, tmp, plugin):
    tag = "openai idle"
    eng = Engine("openai")
    url = f"http://127.0.0.1:{eng.port}"
    node, addr, nlog = et.start_node(procs, sut, tmp, "openai-idle", plugin,
                                     {"url": url, "stream_idle_ms": 1000}, ["--max-batch", "2"])
    client = start_loadgen(procs, lg, tmp, "openai-idle", addr, 2)
    want = f"{url}/v1/completions: nothing new for"
    t0 = time.monotonic()
    end = t0 + 30
    while time.monotonic() < end and want not in open(nlog).read():
        time.sleep(0.05)
    took = time.monotonic() - t0
    line = next((l for l in open(nlog).read().splitlines() if want in l), None)
    if not line or "over the idle deadline of 1000 ms (stream_idle_ms)" not in line:
        sys.exit(f"FAIL {tag}: no idle-deadline failure within 30 s; log:\n"
                 f"{open(nlog).read()[-2000:]}")
    eng.wait(f"{tag}: the engine's connections closed", lambda: eng.counts()[1] == 0, 5)
    procs.stop(client)
    stopped(procs, node, nlog, tag)
    eng.close()
    print(f"ok {tag}: failed {took:.2f} s after the run started: {line[-150:]}")


def queued(procs, sut, lg, tmp, plugin, client, loop=None):
    tag = f"openai queued {client}" + (f" loop={loop}" if loop else "")
    name = tag.replace(" ", "-").replace("=", "-")
    eng = Engine("openai")
    url = f"http://127.0.0.1:{eng.port}"
    opts = {"url": url, "client": client, "timeout_ms": 1500, "stream_idle_ms": 1000,
            "health_path": ""}
    if loop:
        opts["loop"] = loop
    node, addr, nlog = et.start_node(procs, sut, tmp, name, plugin, opts, ["--max-batch", "2"])
    # Where the client runs, as the node says (ABI 1.3's attach): the node's loop unless loop=own.
    on_loop = "the HTTP client runs on the node's I/O loop" in open(nlog).read()
    if on_loop != (client == "lean" and loop != "own"):
        sys.exit(f"FAIL {tag}: the node's log says the client is "
                 f"{'' if on_loop else 'not '}on its loop:\n{open(nlog).read()[-1500:]}")
    samples = 6
    client_p = start_loadgen(procs, lg, tmp, name, addr, samples)
    want = re.compile(r"openai backend: sample \d+ failed: (.*)$")
    end = time.monotonic() + 30
    lines = []
    while time.monotonic() < end:
        lines = [m.group(1) for m in map(want.search, open(nlog).read().splitlines()) if m]
        if len(lines) >= samples:
            break
        time.sleep(0.05)
    sent = eng.counts()[0]
    not_sent = re.compile(re.escape(f"{url}/v1/completions: not sent: waited ") +
                          r"(\d+)" + re.escape(" ms for a free connection to the engine (2 "
                                                "connections, all busy), over timeout_ms=1500") + "$")
    idle_re = re.compile(re.escape(f"{url}/v1/completions: nothing new for ") + r"(\d+)" +
                         re.escape(" ms, over the idle deadline of 1000 ms (stream_idle_ms)") + "$")
    # A sent one fails at its idle deadline (from its send) or, sent late, at timeout_ms:
    # the lean client's words, or libcurl's ("Operation timed out after N milliseconds ...").
    late = [l for l in lines if l == f"{url}/v1/completions: no whole answer within 1500 ms "
            "(timeout_ms)" or (client == "curl" and l.startswith(f"{url}/v1/completions: "
                                                                 "Operation timed out after "))]
    unsent = [int(m.group(1)) for m in map(not_sent.match, lines) if m]
    idle_ms = [int(m.group(1)) for m in map(idle_re.match, lines) if m]
    if (len(lines) != samples or len(unsent) + len(idle_ms) + len(late) != samples or
            not unsent or len(unsent) != samples - sent or min(unsent) < 1499 or
            len(idle_ms) < 2 or max(idle_ms) >= 1500):
        sys.exit(f"FAIL {tag}: {sent} of {samples} requests reached the engine; failures:\n" +
                 "\n".join(lines) + f"\nlog:\n{open(nlog).read()[-2000:]}")
    procs.stop(client_p)
    stopped(procs, node, nlog, tag)
    eng.close()
    print(f"ok {tag}: {sent} sent, each failed at its idle deadline from its send "
          f"({min(idle_ms)}..{max(idle_ms)} ms); {len(unsent)} never sent: {lines[-1][-120:]}")


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    sut, lg, openai, kserve = sys.argv[1:]
    with et.scratch("cancel-") as (procs, tmp):
        disconnect(procs, sut, lg, tmp, "openai disconnect", openai, {"stream_idle_ms": 0},
                   ["--max-batch", "2"], 2)
        disconnect(procs, sut, lg, tmp, "openai disconnect loop=own", openai,
                   {"stream_idle_ms": 0, "loop": "own"}, ["--max-batch", "2"], 2)
        disconnect(procs, sut, lg, tmp, "kserve disconnect", kserve,
                   {"model": "m", "shape": "4", "max_batch": 1, "engines": 1,
                    "timeout_ms": 600000}, [], 1)
        sigterm(procs, sut, lg, tmp, openai)
        idle(procs, sut, lg, tmp, openai)
        queued(procs, sut, lg, tmp, openai, "lean", "node")
        queued(procs, sut, lg, tmp, openai, "lean", "own")
        queued(procs, sut, lg, tmp, openai, "curl")
    print("PASS")


if __name__ == "__main__":
    main()
