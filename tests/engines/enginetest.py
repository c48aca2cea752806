"""Shared plumbing of the engine integration tests: start and stop processes, wait for a port
file, run loadgen-node, read its accuracy log. Every wait has a deadline."""
import contextlib
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

PY = "/usr/bin/python3"  # Debian's, with the packages of deploy/install-deps.sh


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(77)


class Procs:
    """Processes started by a test; stop_all() ends them (SIGTERM, then SIGKILL)."""

    def __init__(self):
        self.procs = []

    def start(self, argv, log):
        f = open(log, "w")
        p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT)
        self.procs.append((p, f))
        return p

    def stop(self, p, timeout=10):
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        return p.returncode

    def stop_all(self):
        for p, f in reversed(self.procs):
            self.stop(p)
            f.close()


@contextlib.contextmanager
def scratch(prefix, *closers):
    """A test's scratch folder (|prefix| in its name) and its Procs, as (procs, tmp): when the
    block ends, however it ends, each of |closers| is called (the test's own servers), then every
    process is stopped and the folder removed."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    procs = Procs()
    try:
        yield procs, tmp
    finally:
        for close in closers:
            close()
        procs.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)


def wait_port(path, proc, log, timeout=30.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if os.path.exists(path) and os.path.getsize(path) > 0:
            return int(open(path).read())
        if proc.poll() is not None:
            sys.exit(f"FAIL: {proc.args[0]} exited with {proc.returncode} before listening; "
                     f"log:\n{open(log).read()[-2000:]}")
        time.sleep(0.05)
    sys.exit(f"FAIL: no port in {path} after {timeout} s; log:\n{open(log).read()[-2000:]}")


def need_modules(*modules):
    """Skips the test (77) unless Debian's Python imports every one of |modules|."""
    r = subprocess.run([PY, "-c", "import " + ", ".join(modules)], capture_output=True, text=True)
    if r.returncode != 0:
        skip(f"Python packages missing: {r.stderr.strip().splitlines()[-1]}")


def llm_qsl(src, tmp, count, eos, extra=()):
    """|count| prompts of token IDs without |eos| in the official pickle form (|extra|: more
    make_llm_tokens.py options), converted by llm_pickle_to_qsl.py as a real data set would be:
    (the QSL folder, the prompts as lists)."""
    import numpy as np
    tools = os.path.join(src, "loadgen-node", "tools")
    pkl, qsl = os.path.join(tmp, "tokens.pkl"), os.path.join(tmp, "qsl")
    for argv in ([PY, os.path.join(tools, "make_llm_tokens.py"), "--out", pkl, "--count",
                  str(count), "--avoid", str(eos), *extra],
                 [PY, os.path.join(tools, "llm_pickle_to_qsl.py"), "--pickle", pkl, "--out-dir",
                  qsl]):
        r = subprocess.run(argv, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"FAIL: {os.path.basename(argv[1])} exit {r.returncode}:\n"
                     f"{r.stderr[-2000:]}")
    return qsl, [np.load(os.path.join(qsl, f)).tolist() for f in sorted(os.listdir(qsl))]


def start_llm_engine(procs, src, tmp, name, eos, timeout):
    """tests/engines/llm_engine.py (end of sequence |eos|) under |procs|, logging to
    <tmp>/<name>.log: its port, once it listens."""
    log, port_file = os.path.join(tmp, f"{name}.log"), os.path.join(tmp, f"{name}.port")
    p = procs.start([PY, os.path.join(src, "tests", "engines", "llm_engine.py"), "--port-file",
                     port_file, "--eos", str(eos)], log)
    return wait_port(port_file, p, log, timeout=timeout)


def start_node(procs, sut, tmp, name, backend, opts, extra=()):
    port_file = os.path.join(tmp, f"{name}.port")
    log = os.path.join(tmp, f"{name}.log")
    argv = [sut, "--listen", "127.0.0.1:0", "--port-file", port_file, "--name", name,
            "--backend", backend, "--log-level", "info"] + list(extra)
    for k, v in opts.items():
        argv += ["--backend-opt", f"{k}={v}"]
    p = procs.start(argv, log)
    return p, f"127.0.0.1:{wait_port(port_file, p, log)}", log


def loadgen(lg, out, node, qsl, scenario, mode, sets, extra=(), timeout=120):
    argv = [lg, "--scenario", scenario, "--mode", mode, "--qsl-npy", qsl, "--nodes", node,
            "--output-dir", out, "--quiet", "--progress", "off", "--log-level", "warn",
            "--drain-timeout-ms", "30000"] + list(extra)
    for s in sets:
        argv += ["--set", s]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


def greedy(port, prompt, max_tokens, timeout=30):
    """The engine's own greedy output for |prompt| (token IDs), asked directly (not streamed)."""
    import urllib.request
    body = json.dumps({"model": "model", "prompt": prompt, "max_tokens": max_tokens,
                       "temperature": 0, "return_token_ids": True}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body,
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.load(r)["choices"][0]["token_ids"]


def accuracy_log(out):
    with open(os.path.join(out, "mlperf_log_accuracy.json")) as f:
        return json.load(f)


def output_tokens(out, tag):
    """{qsl_idx: [token IDs]} from an LLM run's accuracy log (int32 little endian); fails on a
    sample answered twice or a token_count other than its number of tokens."""
    got = {}
    for r in accuracy_log(out):
        i = int(r["qsl_idx"])
        if i in got:
            sys.exit(f"FAIL {tag}: sample {i} answered twice")
        data = bytes.fromhex(r["data"])
        got[i] = [int.from_bytes(data[k:k + 4], "little") for k in range(0, len(data), 4)]
        if "token_count" in r and int(r["token_count"]) != len(got[i]):
            sys.exit(f"FAIL {tag}: sample {i}: token_count {r['token_count']} for "
                     f"{len(got[i])} tokens")
    return got


def check_tokens(tag, out, ref):
    """Every sample of the run's accuracy log answered once, its token IDs equal to ref[i] (the
    engine's own output, asked directly)."""
    seen = output_tokens(out, tag)
    missing = sorted(set(range(len(ref))) - set(seen))
    if missing:
        sys.exit(f"FAIL {tag}: samples {missing[:10]} never answered")
    bad = [i for i in range(len(ref)) if seen[i] != ref[i]]
    if bad:
        i = bad[0]
        sys.exit(f"FAIL {tag}: {len(bad)} samples differ from the engine's own output; sample "
                 f"{i}: got {seen[i]}, engine {ref[i]}")
    print(f"ok {tag}: {len(ref)} samples, each once, every token equal to the engine's "
          f"greedy output ({sum(len(t) for t in ref)} tokens)")


def summary_lines(out, pattern):
    with open(os.path.join(out, "mlperf_log_summary.txt")) as f:
        return [l.rstrip() for l in f if re.search(pattern, l)]


def http_engine(on_post):
    """A threaded HTTP/1.1 server on 127.0.0.1 that calls on_post(handler, body) for each POST;
    its port is server_address[1]; shutdown() and server_close() end it."""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            on_post(self, self.rfile.read(int(self.headers.get("Content-Length", "0"))))

    return serve(Handler)


def serve(handler):
    """A threaded HTTP server of |handler| on 127.0.0.1, serving from a thread of its own; its
    port is server_address[1]; shutdown() and server_close() end it."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def serve_asgi(app, host, port, port_file=None):
    """Runs the ASGI |app| (the FastAPI engines) under uvicorn on host:port (0: a free one) until
    it stops; once it serves, writes the port to |port_file|, when given, through a temporary
    file and a rename (wait_port reads it)."""
    import asyncio
    import socket

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))

    async def announce():
        while not server.started:
            await asyncio.sleep(0.01)
        if port_file:
            tmp = port_file + ".tmp"
            with open(tmp, "w") as f:
                f.write(str(sock.getsockname()[1]))
            os.replace(tmp, port_file)

    async def run():
        await asyncio.gather(server.serve(sockets=[sock]), announce())
    asyncio.run(run())


def sse_event(obj):
    """One SSE event of |obj| as compact JSON, as bytes."""
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def vllm_stream(tokens):
    """A vLLM completion stream of |tokens|, one event each (return_token_ids), the usage event
    and the end mark, as bytes."""
    evs = [sse_event({"choices": [{"index": 0, "text": "", "token_ids": [t],
                                   "finish_reason": "length" if k == len(tokens) - 1 else None}]})
           for k, t in enumerate(tokens)]
    evs.append(sse_event({"choices": [], "usage": {"completion_tokens": len(tokens)}}))
    return b"".join(evs) + b"data: [DONE]\n\n"


def chunked(body):
    """|body| as one HTTP/1.1 chunk and the last chunk."""
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)


def self_signed(tmp, name):
    """A self-signed certificate for IP 127.0.0.1 made with the openssl command in |tmp|, as
    (certificate path, key path)."""
    cert, key = os.path.join(tmp, name + ".crt"), os.path.join(tmp, name + ".key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1", "-addext",
                    "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    return cert, key


def read_http_request(c, buf):
    """One HTTP/1.1 request from socket |c| after the bytes |buf| already read: (head, body,
    the bytes after it), the body as long as its Content-Length (none: empty); (None, None, b"")
    when the peer closes first."""
    while b"\r\n\r\n" not in buf:
        d = c.recv(65536)
        if not d:
            return None, None, b""
        buf += d
    head, rest = buf.split(b"\r\n\r\n", 1)
    m = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head)
    n = int(m.group(1)) if m else 0
    while len(rest) < n:
        d = c.recv(65536)
        if not d:
            return None, None, b""
        rest += d
    return head, rest[:n], rest[n:]
