#!/usr/bin/python3
"""loadgen-node straight to serving endpoints (issue 39): the QDL streams each sample to an
OpenAI-compatible engine itself (--nodes openai+http://...), no sut-node in between.

Against the real test engine (tests/engines/llm_engine.py), every sample is answered exactly once
with token IDs equal to the engine's own greedy output, in Offline and Server, in the vllm and
sglang dialects (--endpoint-dialect and the ?dialect= suffix), with the API-key and session
headers sent; one failed stream re-dispatches only its sample and leaves the endpoint up (no
loss, no reconnect); the start-up probe fails a dead or non-HTTP address at start, naming it; least-tokens and round-robin balance over two endpoints; a mixed fabric (a sut-node
with the openai backend beside an endpoint) gets the same tokens and uses both; Name() names
every endpoint and says "Endpoint SUT". Against hostile endpoints in this process (stdlib only),
each beside the real engine: one that streams a first token and dies mid-stream, one answering
500, one sending JSON that does not parse, one sending an engine error, one that never answers
(the progress deadline, with --endpoint-max-inflight holding): every sample still once with the
right tokens, the hostile endpoint's failure named in loadgen-node's log, its samples
re-dispatched (nodes.json). HTTPS (the lean client's TLS; once with --endpoint-client curl): a TLS front relaying the
engine, verified with --tls-ca, and with --endpoint-ca beside a plaintext sut-node (every sample
once, tokens equal; both nodes complete samples) and refused without a CA, naming the endpoint
and the certificate's defect (tests/engines/test_endpoint_tls.py has the other TLS failures).

With FRONT_END official (the official LoadGen behind loadgen-node, --loadgen official; exit 77
when this build has none), the official LoadGen drives the same QDL: Offline and Server against
an endpoint, the mixed fabric, and an endpoint dying mid-stream beside the engine, each with
every sample once and the engine's tokens, and Name() in the official detail log.

    test_endpoint.py SUT_NODE LOADGEN_NODE OPENAI_PLUGIN SOURCE_DIR [builtin|official]

Exits 77 when the Python packages are missing (python3-torch, -fastapi, -uvicorn, -numpy).
"""
import http.server
import json
import os
import shutil
import socketserver
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import enginetest as et  # noqa: E402

MAX_TOKENS = 16
EOS = 2
N_PROMPTS = 24


class Hostile(http.server.BaseHTTPRequestHandler):
    """POST /v1/completions answered as self.server.mode says; every request recorded."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        self.body = self.rfile.read(n)
        srv = self.server
        with srv.lock:
            srv.requests += 1
            srv.headers.append(dict(self.headers))
            srv.now += 1
            srv.most = max(srv.most, srv.now)
        try:
            self.answer(srv)
        finally:
            with srv.lock:
                srv.now -= 1

    def answer(self, srv):
        mode = srv.mode
        if mode == "relay":  # the real engine's stream, byte for byte (a TLS front for it)
            import http.client
            c = http.client.HTTPConnection("127.0.0.1", srv.upstream, timeout=30)
            c.request("POST", self.path, self.body, {"Content-Type": "application/json"})
            r = c.getresponse()
            self.send_response(r.status)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            while True:
                chunk = r.read1(65536)
                if not chunk:
                    break
                self.wfile.write(chunk)
                self.wfile.flush()
            c.close()
            self.close_connection = True
            return
        if mode == "flaky":  # the first stream dies after its first token, the rest relay
            with srv.lock:
                first = srv.requests == 1
            if first:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                ev = {"choices": [{"index": 0, "text": "x", "token_ids": [7]}]}
                self.wfile.write(b"data: " + json.dumps(ev).encode() + b"\n\n")
                self.wfile.flush()
                self.close_connection = True
                return
            srv.mode = "relay"
            try:
                return self.answer(srv)
            finally:
                srv.mode = "flaky"
        if mode == "status500":
            body = b'{"error": "boom: the hostile engine fails"}'
            self.send_response(500)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        if mode == "die":
            ev = {"choices": [{"index": 0, "text": "x", "token_ids": [7]}]}
            self.wfile.write(b"data: " + json.dumps(ev).encode() + b"\n\n")
            self.wfile.flush()
            time.sleep(0.05)
        elif mode == "garbage":
            self.wfile.write(b"data: {\"choices\": [{\"token_ids\": [1,2,}\n\n")
            self.wfile.flush()
        elif mode == "error":
            self.wfile.write(b'data: {"error": {"message": "hostile engine overloaded"}}\n\n')
            self.wfile.flush()
        elif mode == "stall":
            srv.release.wait(60)
        self.close_connection = True


class HostileServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def __init__(self, mode, upstream=0, tls=None):
        super().__init__(("127.0.0.1", 0), Hostile)
        self.upstream = upstream
        if tls:  # (cert, key): HTTPS
            import ssl
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls)
            self.socket = ctx.wrap_socket(self.socket, server_side=True)
        self.mode, self.requests, self.headers = mode, 0, []
        self.now = self.most = 0  # streams open at once: now, and the most seen
        self.lock, self.release = threading.Lock(), threading.Event()
        threading.Thread(target=self.serve_forever, daemon=True).start()


def nodes_json(out):
    for f in os.listdir(out):
        if f.endswith("nodes.json"):
            return json.load(open(os.path.join(out, f)))["nodes"]
    sys.exit(f"FAIL: no nodes.json in {out}")


def loadgen(lg, out, nodes, qsl, scenario, sets, extra, official):
    """An accuracy run (et.loadgen's, without --drain-timeout-ms for the official LoadGen, which
    has none)."""
    if not official:
        return et.loadgen(lg, out, nodes, qsl, scenario, "AccuracyOnly", sets, extra)
    argv = [lg, "--scenario", scenario, "--mode", "AccuracyOnly", "--qsl-npy", qsl, "--nodes",
            nodes, "--output-dir", out, "--quiet", "--progress", "off", "--log-level", "warn"]
    for x in sets:
        argv += ["--set", x]
    r = subprocess.run(argv + list(extra), capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout + r.stderr


def sut_name(out):
    """The sut_name the run logged (Name())."""
    for f in os.listdir(out):
        if f.endswith("detail.txt"):
            for line in open(os.path.join(out, f)):
                if '"key": "sut_name"' in line:
                    return json.loads(line.split(":::MLLOG ", 1)[1])["value"]
    sys.exit(f"FAIL: no sut_name in the detail log of {out}")


def run_official(run, sut_name, procs, sut, plugin, tmp, engines, ep):
    """The official LoadGen in front: Server, a mixed fabric, an endpoint dying mid-stream."""
    run("official vllm Server", ep[0], "Server")
    node, addr, _ = et.start_node(procs, sut, tmp, "mixed-node", plugin,
                                  {"url": f"http://127.0.0.1:{engines[1]}",
                                   "max_tokens": MAX_TOKENS}, ["--max-batch", "4"])
    out, _ = run("official mixed fabric", f"{addr},{ep[0]}", "Server",
                 ["--policy", "round-robin"])
    want = f"Endpoint SUT (2 nodes: mixed-node, endpoint vllm http://127.0.0.1:{engines[0]})"
    if sut_name(out) != want:
        sys.exit(f"FAIL official mixed Name(): '{sut_name(out)}', expected '{want}'")
    procs.stop(node)
    hs = HostileServer("die")
    run("official endpoint death", f"openai+http://127.0.0.1:{hs.server_address[1]},{ep[0]}",
        "Server", ["--policy", "round-robin"])
    hs.shutdown()
    if hs.requests == 0:
        sys.exit("FAIL official endpoint death: the dying endpoint got no request")
    print("ok official: Offline, Server, mixed fabric, endpoint death; Name() " + want)


def main():
    if len(sys.argv) not in (5, 6) or sys.argv[5:] not in ([], ["builtin"], ["official"]):
        sys.exit(__doc__)
    sut, lg, plugin, src = sys.argv[1:5]
    official = sys.argv[5:] == ["official"]
    if official:
        probe_dir = tempfile.mkdtemp(prefix="endpoint-probe-")
        probe = subprocess.run([lg, "--loadgen", "official", "--scenario", "Offline", "--sut",
                                "null", "--qsl-synthetic", "1", "--sample-size", "1",
                                "--output-dir", probe_dir], capture_output=True, text=True,
                               timeout=30)
        shutil.rmtree(probe_dir, ignore_errors=True)
        if "this build has no official LoadGen" in probe.stderr + probe.stdout:
            et.skip("loadgen-node was built without an official LoadGen (-DMLPERF_LOADGEN_ROOT)")
    et.need_modules("torch", "fastapi", "uvicorn", "pandas", "numpy")
    with et.scratch("endpoint-") as (procs, tmp):
        qsl, prompts = et.llm_qsl(src, tmp, N_PROMPTS, EOS)
        engines = [et.start_llm_engine(procs, src, tmp, f"engine{k}", EOS, timeout=60)
                   for k in range(2)]
        ref = [et.greedy(engines[0], p, MAX_TOKENS) for p in prompts]
        ep = [f"openai+http://127.0.0.1:{port}" for port in engines]
        keyf = os.path.join(tmp, "key")
        with open(keyf, "w") as f:
            f.write("sekrit-key\n")
        common = ["--model", "llama2-70b", "--endpoint-max-tokens", str(MAX_TOKENS)]
        if official:
            common += ["--loadgen", "official"]
        server_sets = ["server_target_qps=40", "use_token_latencies=1"]

        def run(tag, nodes, scenario, extra=(), sets=None, want_rc=0):
            out = os.path.join(tmp, tag.replace(" ", "_"))
            if sets is None:
                sets = server_sets if scenario == "Server" else []
            rc, text = loadgen(lg, out, nodes, qsl, scenario, sets, common + list(extra),
                               official)
            if rc != want_rc:
                sys.exit(f"FAIL {tag}: loadgen-node exit {rc}, expected {want_rc}\n"
                         f"{text[-3000:]}")
            et.check_tokens(tag, out, ref)
            return out, text

        # Exactly once, tokens equal: Offline and Server, two dialects, two endpoints, each
        # policy; the API key and session header on a third run through a recording proxy is
        # not needed: the hostile server below records the headers it got.
        out, _ = run("vllm Offline", ep[0], "Offline")
        want = f"Endpoint SUT (1 node: endpoint vllm http://127.0.0.1:{engines[0]})"
        if sut_name(out) != want:
            sys.exit(f"FAIL Name(): '{sut_name(out)}', expected '{want}'")
        print(f"ok Name(): {want}")
        if official:
            run_official(run, sut_name, procs, sut, plugin, tmp, engines, ep)
            print("PASS")
            return
        run("vllm Server", ep[0], "Server")
        run("sglang Offline (suffix)", ep[0] + "?dialect=sglang", "Offline")
        run("llamacpp Server (option)", ep[0], "Server", ["--endpoint-dialect", "llamacpp"])
        for pol in ("least-tokens", "round-robin", "least-outstanding"):
            out, _ = run(f"two endpoints {pol}", ",".join(ep), "Offline", ["--policy", pol])
            nj = nodes_json(out)
            if pol == "round-robin" and any(n["samples_completed"] == 0 for n in nj):
                sys.exit(f"FAIL {pol}: an endpoint got nothing: {nj}")
        print("ok balancing over two endpoints: least-tokens, round-robin, least-outstanding")

        # Mixed fabric: a sut-node (openai backend, same engine) beside an endpoint.
        node, addr, nlog = et.start_node(procs, sut, tmp, "mixed-node", plugin,
                                         {"url": f"http://127.0.0.1:{engines[1]}",
                                          "max_tokens": MAX_TOKENS}, ["--max-batch", "4"])
        out, _ = run("mixed fabric", f"{addr},{ep[0]}", "Server", ["--policy", "round-robin"])
        nj = nodes_json(out)
        if len(nj) != 2 or any(n["samples_completed"] == 0 for n in nj):
            sys.exit(f"FAIL mixed fabric: both nodes must complete samples: {nj}")
        want = (f"Endpoint SUT (2 nodes: mixed-node, endpoint vllm "
                f"http://127.0.0.1:{engines[0]})")
        if sut_name(out) != want:
            sys.exit(f"FAIL mixed Name(): '{sut_name(out)}', expected '{want}'")
        procs.stop(node)
        print(f"ok mixed fabric: {[(n['name'], n['samples_completed']) for n in nj]}")

        # Hostile endpoints beside the real engine.
        expect = {"die": "without its end mark", "status500": "500",
                  "garbage": "", "error": "hostile engine overloaded",
                  "stall": "progress deadline"}
        for mode, words in expect.items():
            hs = HostileServer(mode)
            hurl = f"openai+http://127.0.0.1:{hs.server_address[1]}"
            extra = ["--endpoint-api-key-file", keyf, "--endpoint-session-header", "X-Session-ID",
                     "--policy", "round-robin", "--log-level", "warn"]
            if mode == "stall":
                extra += ["--progress-timeout-ms", "3000", "--endpoint-max-inflight", "3"]
            out, text = run(f"hostile {mode}", f"{hurl},{ep[0]}", "Server", extra)
            hs.release.set()
            hs.shutdown()
            nj = nodes_json(out)
            bad = next(n for n in nj if str(hs.server_address[1]) in n["address"])
            if hs.requests == 0 or bad["redispatched"] == 0:
                sys.exit(f"FAIL hostile {mode}: requests {hs.requests}, node {bad}")
            if words and words not in text:
                sys.exit(f"FAIL hostile {mode}: '{words}' not in loadgen-node's log:\n"
                         f"{text[-2000:]}")
            if mode == "stall" and hs.most > 3:
                sys.exit(f"FAIL hostile stall: {hs.most} streams open at once on an endpoint "
                         f"limited to 3 (--endpoint-max-inflight)")
            h = hs.headers[0]
            if h.get("Authorization") != "Bearer sekrit-key" or not h.get("X-Session-ID"):
                sys.exit(f"FAIL hostile {mode}: headers sent {h}")
            print(f"ok hostile {mode}: {hs.requests} requests, {bad['redispatched']} samples "
                  f"re-dispatched, every sample once with the engine's tokens")
        print("ok API key and session headers sent")

        # One failed stream re-dispatches its own sample and does not bench the endpoint: an
        # endpoint whose first stream dies (then relays the engine) is never closed (0 losses,
        # 0 reconnects), completes samples, and re-dispatched exactly one.
        hs = HostileServer("flaky", engines[0])
        hurl = f"openai+http://127.0.0.1:{hs.server_address[1]}"
        out, text = run("flaky endpoint", hurl, "Offline", ["--endpoint-max-inflight", "4",
                                                             "--log-level", "warn"])
        hs.shutdown()
        nj = nodes_json(out)[0]
        if (nj["losses"] != 0 or nj["reconnects"] != 0 or nj["redispatched"] != 1 or
                nj["samples_completed"] != N_PROMPTS or "without its end mark" not in text):
            sys.exit(f"FAIL flaky endpoint: one failed stream must re-dispatch one sample and "
                     f"leave the endpoint up: {nj}\n{text[-1500:]}")
        print(f"ok one failed stream: its sample re-dispatched, the endpoint kept ({nj})")

        # The start-up probe: an address with nothing listening, and one that does not speak
        # HTTP, fail at start naming the address and why.
        import socket
        dead = socket.socket()
        dead.bind(("127.0.0.1", 0))
        dead_port = dead.getsockname()[1]
        dead.close()
        junk = socket.socket()
        junk.bind(("127.0.0.1", 0))
        junk.listen(8)

        def junk_server():
            while True:
                try:
                    c, _ = junk.accept()
                except OSError:
                    return
                c.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")
                c.close()
        threading.Thread(target=junk_server, daemon=True).start()
        for port, words in ((dead_port, "onnect"), (junk.getsockname()[1], "")):
            addr = f"openai+http://127.0.0.1:{port}"
            rc, text = et.loadgen(lg, os.path.join(tmp, f"probe{port}"), addr, qsl, "Offline",
                                  "AccuracyOnly", [], common)
            want = f"endpoint {addr} does not answer as an OpenAI-compatible server"
            if rc == 0 or want not in text or words not in text:
                sys.exit(f"FAIL probe {addr}: exit {rc}, expected '{want}' and '{words}'\n"
                         f"{text[-1000:]}")
        junk.close()
        print("ok start-up probe: a dead address and a non-HTTP one fail at start, named")

        # HTTPS: a TLS front (stdlib ssl, a certificate made here) relaying the engine's stream;
        # the endpoint's certificate verified against --tls-ca.
        cert, key = et.self_signed(tmp, "ep")
        hs = HostileServer("relay", engines[0], (cert, key))
        hurl = f"openai+https://127.0.0.1:{hs.server_address[1]}"
        run("https", hurl, "Offline", ["--tls-ca", cert])  # the lean client's TLS
        run("https curl", hurl, "Offline", ["--tls-ca", cert, "--endpoint-client", "curl"])
        # --endpoint-ca: the endpoint's own CA, beside a plaintext sut-node (--tls-ca would
        # turn on TLS to the sut-node too); both complete samples.
        node, addr, _ = et.start_node(procs, sut, tmp, "https-mixed-node", plugin,
                                      {"url": f"http://127.0.0.1:{engines[1]}",
                                       "max_tokens": MAX_TOKENS}, ["--max-batch", "4"])
        out, _ = run("https --endpoint-ca mixed", f"{addr},{hurl}", "Server",
                     ["--endpoint-ca", cert, "--policy", "round-robin"])
        nj = nodes_json(out)
        procs.stop(node)
        if len(nj) != 2 or any(n["samples_completed"] == 0 for n in nj):
            sys.exit(f"FAIL https --endpoint-ca beside a plaintext sut-node: both nodes must "
                     f"complete samples: {nj}")
        rc, text = loadgen(lg, os.path.join(tmp, "https-noca"), hurl, qsl, "Offline", [],
                           common + ["--max-dispatches", "1"], official)
        hs.shutdown()
        want = (f"https://127.0.0.1:{hs.server_address[1]}: TLS handshake failed: certificate "
                f"verify failed (self-signed certificate)")
        if rc == 0 or want not in text:
            sys.exit(f"FAIL https without the CA: exit {rc}, expected '{want}'\n"
                     f"{text[-1000:]}")
        print("ok https: every sample once through a TLS endpoint verified with --tls-ca (the "
              "lean client, and curl), and with --endpoint-ca beside a plaintext sut-node; "
              "refused without a CA")

        # A bad --nodes entry and a dialect that does not exist are usage errors naming them.
        for nodes, words in ((ep[0] + "?dialect=nope", "dialect 'nope'"),
                             ("openai+http://:80", "HOST:PORT")):
            rc, text = et.loadgen(lg, os.path.join(tmp, "bad"), nodes, qsl, "Offline",
                                  "AccuracyOnly", [], common)
            if rc == 0 or words not in text:
                sys.exit(f"FAIL bad node {nodes}: exit {rc}\n{text[-1000:]}")
        print("ok a bad endpoint address is refused, naming it")
    print("PASS")


if __name__ == "__main__":
    main()
