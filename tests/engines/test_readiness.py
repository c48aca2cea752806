#!/usr/bin/python3
"""Readiness, engine errors and the port file, through sut-node --backend openai in front of a
fake OpenAI-compatible engine (vLLM dialect, Python standard library only) whose /health answers
503 "Loading model" until it is told to be ready, and whose /v1/completions answers 400 with its
own error text for a prompt holding token 9999:

  - an engine that is down: sut-node serves (its port file appears) and says in its handshake
    that it is not ready; loadgen-node starts no run: exit 4, naming the node's address and the
    engine's reason; with --loadgen official too, where this loadgen-node has it (CI's official
    step runs this test in its build);
  - --wait-for-nodes: loadgen-node waits while the engine loads and runs once it is ready; it
    also waits for a node not yet listening (connection refused); and gives up at its deadline
    with exit 4 and the engine's reason;
  - a request the engine refuses: loadgen-node's log names the node, the sample (wire id and
    LoadGen response id; the detail log its qsl_idx) and the engine's own text;
  - the port file: removed at start (a stale one), written only while the node listens, gone
    after SIGTERM and after a fatal start; a port conflict is found before the backend loads.

    test_readiness.py SUT_NODE LOADGEN_NODE OPENAI_PLUGIN"""
import http.server
import json
import os
import re
import socket
import subprocess
import sys
import threading
import urllib.request
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import enginetest as et  # noqa: E402

BAD_TOKEN = 9999
ENGINE_ERROR = f"token id {BAD_TOKEN} is outside the vocabulary (0..511)"


class Engine:
    def __init__(self):
        self.ready = threading.Event()
        eng = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def reply(self, code, obj):
                body = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if self.path != "/health":
                    self.reply(404, {"error": "no such path"})
                elif eng.ready.is_set():
                    self.reply(200, {"status": "ok"})
                else:
                    self.reply(503, {"error": {"message": "Loading model", "code": 503}})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                if BAD_TOKEN in body.get("prompt", []):
                    self.reply(400, {"object": "error", "message": ENGINE_ERROR, "code": 400})
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                out = b""
                for k in range(3):
                    ch = {"index": 0, "text": f"<{k}>", "token_ids": [k + 10],
                          "finish_reason": "length" if k == 2 else None}
                    out += b"data: " + json.dumps({"choices": [ch]}).encode() + b"\n\n"
                out += b"data: [DONE]\n\n"
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.srv = et.serve(Handler)
        self.port = self.srv.server_address[1]

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def fail(tag, why, *logs):
    text = "".join(f"\n--- {p}:\n{open(p).read()[-2500:]}" for p in logs if os.path.exists(p))
    sys.exit(f"FAIL {tag}: {why}{text}")


def loadgen(lg, tmp, tag, addr, extra=(), n=4, qsl=None, timeout=120):
    out = os.path.join(tmp, tag)
    argv = [lg, "--scenario", "Offline", "--mode", "AccuracyOnly", "--model", "llama2-70b",
            "--nodes", addr, "--output-dir", out, "--quiet", "--progress", "off",
            "--log-level", "warn"] + list(extra)
    if "official" not in extra:  # the official LoadGen has no drain deadline
        argv += ["--drain-timeout-ms", "30000"]
    argv += ["--qsl-npy", qsl] if qsl else ["--qsl-synthetic", str(n), "--sample-size", "16"]
    t0 = time.monotonic()
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout + r.stderr, time.monotonic() - t0, out


def node(procs, sut, plugin, tmp, name, engine_port, extra=()):
    return et.start_node(procs, sut, tmp, name, plugin,
                         {"url": f"http://127.0.0.1:{engine_port}", "max_tokens": 3}, extra)


def engine_ready_metric(port, nlog):
    """sut_node_engine_ready from the node's metrics endpoint."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    for ln in text.splitlines():
        if ln.startswith("sut_node_engine_ready "):
            return int(float(ln.split()[1]))
    fail("metrics", "no sut_node_engine_ready in the node's metrics", nlog)


def unready(procs, sut, lg, plugin, tmp):
    down = free_port()  # nothing listens there: the engine is down
    mport = free_port()
    p, addr, nlog = node(procs, sut, plugin, tmp, "down", down,
                         ["--metrics-listen", f"127.0.0.1:{mport}"])
    if engine_ready_metric(mport, nlog) != 0:
        fail("unready node", "sut_node_engine_ready is not 0 while the engine is down", nlog)
    print("ok sut_node_engine_ready 0 while the engine is down")
    rc, out, _, _ = loadgen(lg, tmp, "down", addr)
    want = f"sut-node {addr} (node 'down') is not ready: GET http://127.0.0.1:{down}/health"
    if rc != 4 or want not in out or "no run started" not in out or "--wait-for-nodes" not in out:
        fail("unready node", f"loadgen-node exit {rc} (want 4) without '{want}':\n{out}", nlog)
    if "engine not ready" not in open(nlog).read():
        fail("unready node", "the node's log does not say its engine is not ready", nlog)
    print(f"ok an unready node: exit 4, {out.strip().splitlines()[-1][:300]}")
    # The official front end shares the QDL: the same refusal, exit status and message.
    rc, out, _, _ = loadgen(lg, tmp, "down-official", addr, ["--loadgen", "official"])
    if "this build has no official LoadGen" in out:
        print("note: this loadgen-node has no official LoadGen; --loadgen official not tried")
    elif rc != 4 or want not in out or "no run started" not in out:
        fail("unready node, --loadgen official",
             f"loadgen-node exit {rc} (want 4) without '{want}':\n{out}", nlog)
    else:
        print(f"ok an unready node, --loadgen official: exit 4, "
              f"{out.strip().splitlines()[-1][:200]}")
    procs.stop(p)


def wait_for_engine(procs, sut, lg, plugin, tmp):
    eng = Engine()
    mport = free_port()
    try:
        p, addr, nlog = node(procs, sut, plugin, tmp, "loading", eng.port,
                             ["--metrics-listen", f"127.0.0.1:{mport}"])
        # The engine never gets ready: the wait ends at its deadline, with the engine's words.
        rc, out, took, _ = loadgen(lg, tmp, "deadline", addr, ["--wait-for-nodes", "2"])
        want = (f"sut-node not ready within 2000 ms: {addr} (not ready: GET "
                f"http://127.0.0.1:{eng.port}/health: HTTP 503: Loading model)")
        if rc != 4 or want not in out or not 1.5 < took < 60:
            fail("--wait-for-nodes deadline", f"exit {rc} after {took:.1f} s without '{want}':"
                 f"\n{out}", nlog)
        print(f"ok --wait-for-nodes 2 against a loading engine: exit 4 after {took:.1f} s: "
              + next(ln for ln in out.splitlines() if want in ln))
        rc, out, took, _ = loadgen(lg, tmp, "deadline-official", addr,
                                   ["--wait-for-nodes", "2", "--loadgen", "official"])
        if "this build has no official LoadGen" not in out:
            if rc != 4 or want not in out:
                fail("--wait-for-nodes deadline, --loadgen official",
                     f"exit {rc} after {took:.1f} s:\n{out}", nlog)
            print(f"ok --wait-for-nodes 2, --loadgen official: exit 4 after {took:.1f} s")
        # Ready after a delay: the run starts then and completes.
        threading.Timer(3.0, eng.ready.set).start()
        rc, out, took, _ = loadgen(lg, tmp, "waited", addr, ["--wait-for-nodes", "60"])
        if rc != 0 or took < 2.0:
            fail("--wait-for-nodes", f"exit {rc} after {took:.1f} s (engine ready after 3 s):\n"
                 f"{out}", nlog)
        if "engine ready" not in open(nlog).read():
            fail("--wait-for-nodes", "the node's log does not say the engine became ready", nlog)
        print(f"ok --wait-for-nodes 60, engine ready after 3 s: exit 0 after {took:.1f} s")
        if engine_ready_metric(mport, nlog) != 1:
            fail("--wait-for-nodes", "sut_node_engine_ready is not 1 once the engine is ready",
                 nlog)
        print("ok sut_node_engine_ready 1 once the engine is ready")
        engine_error(lg, tmp, addr, nlog)
        procs.stop(p)
        # A node not yet listening (connection refused) within the wait.
        port = free_port()
        lgp = subprocess.Popen([lg, "--scenario", "Offline", "--mode", "AccuracyOnly", "--model",
                                "llama2-70b", "--nodes", f"127.0.0.1:{port}", "--output-dir",
                                os.path.join(tmp, "late"), "--quiet", "--progress", "off",
                                "--log-level", "warn", "--qsl-synthetic", "4", "--sample-size",
                                "16", "--wait-for-nodes", "60"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(2.0)
        if lgp.poll() is not None:
            fail("late node", f"loadgen-node exited {lgp.returncode} before the node started:\n"
                 f"{lgp.stdout.read()}")
        late, _, llog = node(procs, sut, plugin, tmp, "late", eng.port,
                             ["--listen", f"127.0.0.1:{port}"])
        try:
            out, _ = lgp.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            lgp.kill()
            fail("late node", "loadgen-node did not finish after the node came up", llog)
        if lgp.returncode != 0:
            fail("late node", f"exit {lgp.returncode}:\n{out}", llog)
        print("ok --wait-for-nodes 60 with a node that starts 2 s later: exit 0")
        procs.stop(late)
    finally:
        eng.close()


def engine_error(lg, tmp, addr, nlog):
    qsl = os.path.join(tmp, "qsl")
    os.makedirs(qsl, exist_ok=True)
    write_npy(os.path.join(qsl, "0.npy"), [5, 6, 7])
    write_npy(os.path.join(qsl, "1.npy"), [5, BAD_TOKEN, 7])
    rc, out, _, outdir = loadgen(lg, tmp, "engine-error", addr, qsl=qsl)
    line = [ln for ln in out.splitlines() if ENGINE_ERROR in ln]
    m = re.search(r"qdl: node loading failed id \d+ \(LoadGen response id 1\): "
                  r"STATUS_BACKEND_ERROR: HTTP 400: " + re.escape(ENGINE_ERROR) + "$", out, re.M)
    detail = open(os.path.join(outdir, "mlperf_log_detail.txt")).read()
    d = re.search(r"Sample \d+ \(qsl_idx 1\) failed in the SUT at node loading: "
                  r"inference backend failed \(CMN_EBACKEND\): HTTP 400: " +
                  re.escape(ENGINE_ERROR), detail)
    if rc != 1 or not line or not m or not d or "1 samples failed" not in out:
        fail("engine error", f"exit {rc}; loadgen-node's log line {bool(m)}, detail line "
             f"{bool(d)}:\n{out}\n--- detail:\n{detail[-2000:]}", nlog)
    print(f"ok the engine's error in loadgen-node's log: {line[0][:300]}")


def write_npy(path, toks):
    """A 1-D int32 .npy (version 1.0) without numpy."""
    import struct
    hdr = "{'descr': '<i4', 'fortran_order': False, 'shape': (%d,), }" % len(toks)
    hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
        f.write(struct.pack(f"<{len(toks)}i", *toks))


def port_file(procs, sut, plugin, tmp):
    pf = os.path.join(tmp, "pf.port")
    log = os.path.join(tmp, "pf.log")
    with open(pf, "w") as f:
        f.write("12345\n")  # stale, from a run that died
    p = procs.start([sut, "--listen", "127.0.0.1:0", "--port-file", pf, "--backend", "sim",
                     "--log-level", "info"], log)
    end, port = time.monotonic() + 30, 12345
    # 0 while the node has removed the stale file and not yet written its own (a slow start).
    while port in (0, 12345) and time.monotonic() < end and p.poll() is None:
        time.sleep(0.05)
        port = int(open(pf).read()) if os.path.exists(pf) and os.path.getsize(pf) else 0
    if port in (0, 12345):
        fail("port file", f"port {port}: the stale port file was not replaced", log)
    socket.create_connection(("127.0.0.1", port), timeout=5).close()  # it listens
    # Another node on the same port: the conflict is found before the backend loads, the fatal
    # start leaves no port file of its own, and the first node's is removed at its start.
    pf2, log2 = os.path.join(tmp, "pf2.port"), os.path.join(tmp, "pf2.log")
    with open(pf2, "w") as f:
        f.write("12345\n")
    r = subprocess.run([sut, "--listen", f"127.0.0.1:{port}", "--port-file", pf2,
                        "--backend", plugin, "--backend-opt", "url=http://127.0.0.1:1"],
                       capture_output=True, text=True, timeout=30)
    if r.returncode == 0 or f"cannot listen on 127.0.0.1:{port}" not in r.stderr or \
            "loading backend" in r.stderr or "openai backend" in r.stderr or os.path.exists(pf2):
        fail("port conflict", f"exit {r.returncode}, port file left: {os.path.exists(pf2)}:\n"
             f"{r.stderr}")
    print(f"ok a port conflict fails before the backend loads: "
          f"{r.stderr.strip().splitlines()[-1][:200]}")
    if "loading backend sim" not in open(log).read():
        fail("port file", "no line saying what loads", log)
    rc = procs.stop(p)
    if rc != 0 or os.path.exists(pf) or os.path.exists(pf + ".tmp"):
        fail("port file", f"exit {rc} after SIGTERM; port file left: {os.path.exists(pf)}", log)
    print("ok the port file: stale one replaced, present while listening, gone after SIGTERM")


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    sut, lg, plugin = sys.argv[1:]
    with et.scratch("readiness-") as (procs, tmp):
        port_file(procs, sut, plugin, tmp)
        unready(procs, sut, lg, plugin, tmp)
        wait_for_engine(procs, sut, lg, plugin, tmp)
    print("PASS")


if __name__ == "__main__":
    main()
