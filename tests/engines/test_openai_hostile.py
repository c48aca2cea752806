#!/usr/bin/python3
"""The openai backend against a hostile OpenAI-compatible engine (a raw-socket stdlib server in
this process), for client=lean (httpc's hand-written HTTP/1.1 client) and client=curl: sut-node
must fail each hostile answer's sample once, with a message naming the engine's address and the
defect, stay up, keep serving, and keep its memory bounded.

Attacks, one per loadgen-node run (every request of the run gets it): an endless header line,
101 headers, a 64 KiB+ head, a 300-byte chunk-size line, a 17-hex-digit chunk size, both
Content-Length and chunked, a Content-Length of 2^63, an SSE event dripped one byte per 100 ms
past stream_idle_ms, a close mid-chunk, a 101 Switching Protocols, an SSE event over max_event,
invalid UTF-8 and NUL bytes in the JSON; then a run whose first requests get bad answers and the
rest valid streams, then a valid run. Checks after each run: sut-node alive; each sample's
request sent at most once; the completed samples in the accuracy log once each with exactly the
tokens sent; every other sample failed, counted by loadgen-node, its reason (there and in one
line of the node's log) naming the engine's address, printable ASCII only; for client=lean
every hostile answer fails its sample, with the parser's words for that defect (libcurl takes
some of them: Content-Length beside chunked, 2^63). The lean client once more against the same
engine over TLS (https://, a certificate made here given as ca_file): the same attacks inside a
TLS stream, the same words. At the end of each: VmHWM under RSS_MB, exit 0 on SIGTERM, no
sanitizer report in the node's output.

    test_openai_hostile.py SUT_NODE LOADGEN_NODE OPENAI_PLUGIN
"""
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import enginetest as et  # noqa: E402

N = 4  # samples per run
TOKENS = [7, 8, 9]  # what a valid stream carries
IDLE_MS = 1500  # the node's stream_idle_ms
RSS_MB = 200  # sut-node's VmHWM ceiling (ASan's shadow and quarantine: ASAN_RSS_MB)
ASAN_RSS_MB = 600


SSE_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n")

# mode: (the answer's bytes, None for the dripped one; the words in the node's log for it with
#        client=lean). The connection closes after each.
ATTACKS = {
    "long_line": (b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * 20000 + b"\r\n\r\n",
                  "a header line over 8192 bytes"),
    "many_headers": (b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(101))
                     + b"\r\n", "over 100 header lines"),
    "big_head": (b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-B%d: %s\r\n" % (i, b"b" * 1000)
                                                  for i in range(70)) + b"\r\n",
                 "the head over 65536 bytes"),
    "chunk_line_300": (SSE_HEAD + b"\r\n1;" + b"x" * 298 + b"\r\n",
                       "a chunk-size line over 256 bytes"),
    "chunk_hex_17": (SSE_HEAD + b"\r\n" + b"0" * 16 + b"1\r\n",
                     "a chunk size of over 15 hex digits"),
    "length_and_chunked": (SSE_HEAD + b"Content-Length: 10\r\n\r\n" + et.chunked(et.vllm_stream(TOKENS)),
                           "both Transfer-Encoding: chunked and Content-Length"),
    "length_2p63": (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: "
                    b"9223372036854775808\r\n\r\n" + et.vllm_stream(TOKENS),
                    "Content-Length '9223372036854775808' is not a number of at most 18 digits"),
    "drip": (None, f"over the idle deadline of {IDLE_MS} ms (stream_idle_ms)"),
    "close_mid_chunk": (SSE_HEAD + b"\r\n400\r\n" + et.vllm_stream(TOKENS)[:100],
                        "closed mid-way through the chunked body"),
    "switch_101": (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                   b"Connection: Upgrade\r\n\r\n" + b"\x81\x05hello",
                   "HTTP 101 (a protocol switch nobody asked for)"),
    "event_over_limit": (SSE_HEAD + b"\r\n" +
                         et.chunked(b'data: {"x":"' + b"e" * 70000 + b'"}\n\n'),
                         "an SSE event over max_event=65536 bytes"),
    "bad_utf8_nul": (SSE_HEAD + b"\r\n" + et.chunked(
        b'data: {"choices":[{"index":0,"text":"\xff\xfe\xc3","token_ids":[7\x00,8],'
        b'"finish_reason":null}]}\n\n' + et.vllm_stream(TOKENS)), "event is not a JSON object"),
}


class Engine:
    """A raw-socket HTTP/1.1 server: reads each request (head and Content-Length body) and
    answers by the mode of the run; keep-alive for valid answers, a close after hostile ones.
    With |ctx| (an ssl server context) every connection is TLS."""

    def __init__(self, ctx=None):
        self.ctx = ctx
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.mode, self.bad_first = "valid", 0
        self.lock = threading.Lock()
        self.requests, self.answers = 0, []  # answers: the mode each request got
        self.stopping = False
        self.conns = []
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while not self.stopping:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.conns.append(c)
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        buf = b""
        try:
            if self.ctx:
                c = self.ctx.wrap_socket(c, server_side=True)
            while not self.stopping:
                _, body, buf = et.read_http_request(c, buf)
                if body is None:
                    return
                json.loads(body)  # sut-node's request is JSON
                with self.lock:
                    self.requests += 1
                    mode = self.mode
                    if self.bad_first:  # the mixed run: the first ones get attacks
                        names = list(ATTACKS)
                        mode = names[(self.requests * 5) % len(names)] \
                            if self.requests <= self.bad_first else "valid"
                        if mode == "drip":
                            mode = "switch_101"
                    self.answers.append(mode)
                if mode == "valid":
                    c.sendall(SSE_HEAD + b"\r\n" + et.chunked(et.vllm_stream(TOKENS)))
                    continue
                if mode == "drip":
                    c.sendall(SSE_HEAD + b"\r\n400\r\n")
                    for b in et.vllm_stream(TOKENS):
                        if self.stopping:
                            return
                        c.sendall(bytes([b]))
                        time.sleep(0.1)
                    return
                c.sendall(ATTACKS[mode][0])
                return
        except OSError:
            pass
        finally:
            c.close()

    def set(self, mode, bad_first=0):
        with self.lock:
            self.mode, self.bad_first, self.requests, self.answers = mode, bad_first, 0, []

    def close(self):
        self.stopping = True
        self.sock.close()
        with self.lock:
            for c in self.conns:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def read(path):
    """The node's log; a byte that is not UTF-8 shows as U+FFFD (a failure line must have none)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def vm_hwm_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def failure_lines(log, start):
    return [l for l in log[start:].splitlines() if "openai backend: sample" in l and "failed:" in l]


def one_run(lg, tmp, tag, eng, addr, node, nlog, client, mode, bad_first=0):
    eng.set(mode, bad_first)
    start = len(read(nlog))
    out = os.path.join(tmp, tag.replace(" ", "-"))
    argv = ["--qsl-synthetic", str(N), "--sample-size", "16", "--model", "llama2-70b"]
    rc, text = run_lg(lg, out, addr, argv)
    log = read(nlog)
    if node.poll() is not None:
        sys.exit(f"FAIL {tag}: sut-node died (exit {node.returncode})\n{log[-3000:]}")
    with eng.lock:
        answers = list(eng.answers)
    bad = sum(1 for a in answers if a != "valid")
    # Each sample's request at most once, and with client=lean exactly once: the idle deadline
    # counts from the send, so those queued behind the two dripping streams are sent when they
    # fail (and are dripped in turn). (libcurl may fail a request on a connection the engine
    # closed after an answer it took as whole, without sending it again: that sample must then
    # be among the failed ones.)
    unsent = N - len(answers)
    if unsent < 0 or (unsent and client == "lean"):
        sys.exit(f"FAIL {tag}: the engine got {len(answers)} requests for {N} samples: "
                 f"{answers}\n{log[-2000:]}")
    # What each answer does to its sample: the lean client refuses every attack; libcurl takes
    # some (a header line or chunk extension it allows, the Content-Length beside chunked), so
    # for curl the run must only be consistent: each sample failed or with exactly our tokens.
    # The accuracy log holds the completed samples, each once (output_tokens fails on a second),
    # with exactly the tokens sent; loadgen-node names each failed one with the node's reason.
    got = et.output_tokens(out, tag) if os.path.exists(
        os.path.join(out, "mlperf_log_accuracy.json")) else {}
    wrong = [i for i in got if got[i] != TOKENS or not 0 <= i < N]
    if wrong:
        sys.exit(f"FAIL {tag}: samples {wrong} completed with {got[wrong[0]]}, {TOKENS} sent")
    failed = N - len(got)
    if failed < unsent:
        sys.exit(f"FAIL {tag}: {unsent} requests never reached the engine, {failed} failed")
    reasons = re.findall(r"failed id (\d+) .*?: STATUS_BACKEND_ERROR: (.*)", text)
    if len(reasons) != failed or len({r[0] for r in reasons}) != failed:
        sys.exit(f"FAIL {tag}: {len(got)} of {N} samples completed, {len(reasons)} failures "
                 f"reported by loadgen-node:\n{text[-2000:]}")
    lines = failure_lines(log, start)
    if len(lines) != failed:
        sys.exit(f"FAIL {tag}: {failed} failed samples, {len(lines)} failure lines in the "
                 f"node's log:\n" + "\n".join(lines[:10]))
    if failed and (rc != 1 or f"{failed} samples failed" not in text):
        sys.exit(f"FAIL {tag}: loadgen-node exit {rc} ({failed} failed samples)\n"
                 f"{text[-2000:]}")
    if not failed and rc != 0:
        sys.exit(f"FAIL {tag}: loadgen-node exit {rc}\n{text[-2000:]}")
    raw = [l for l in lines if "\ufffd" in l or re.search(r"[\x00-\x08\x0b-\x1f\x7f]", l)]
    if raw:
        sys.exit(f"FAIL {tag}: the engine's raw bytes in the node's log: {raw[0]!r}")
    where = f"127.0.0.1:{eng.port}"
    nameless = [l for l in lines + [r[1] for r in reasons] if where not in l]
    if nameless:
        sys.exit(f"FAIL {tag}: failures without the engine's address {where}:\n" +
                 "\n".join(nameless[:5]))
    if client == "lean":
        if failed != bad + unsent:
            sys.exit(f"FAIL {tag}: {bad} hostile answers but {failed} failed samples\n" +
                     "\n".join(lines))
        for a in set(answers) - {"valid"}:
            words = ATTACKS[a][1]
            k = sum(1 for l in lines if words in l)
            if k != answers.count(a) + unsent:
                sys.exit(f"FAIL {tag}: {answers.count(a) + unsent} '{a}' answers, {k} failures "
                         f"saying '{words}':\n" + "\n".join(lines))
    print(f"ok {tag}: {failed} of {N} failed, {N - failed} completed with the tokens "
          f"sent" + (f"; e.g. {lines[0].split('failed: ', 1)[1][:110]}" if lines else ""))


def run_lg(lg, out, addr, argv):
    full = [lg, "--scenario", "Offline", "--mode", "AccuracyOnly", "--nodes", addr,
            "--output-dir", out, "--quiet", "--progress", "off", "--log-level", "warn",
            "--drain-timeout-ms", "30000"] + argv
    r = subprocess.run(full, capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout + r.stderr


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    sut, lg, plugin = sys.argv[1:]
    with open(sut, "rb") as f:
        ceiling = ASAN_RSS_MB if b"__asan_init" in f.read() else RSS_MB
    plain = Engine()
    engs = [plain]

    def close_engines():
        for eng in engs:
            eng.close()

    with et.scratch("openai-hostile-", close_engines) as (procs, tmp):
        # The lean client over TLS too: the same attacks inside a TLS stream (a certificate made
        # here, passed as ca_file), the same words for each.
        cert, key = et.self_signed(tmp, "eng")
        import ssl
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        tls = Engine(ctx)
        engs.append(tls)
        for client, eng in (("lean", plain), ("curl", plain), ("lean", tls)):
            scheme = "https" if eng.ctx else "http"
            opts = {"url": f"{scheme}://127.0.0.1:{eng.port}", "client": client,
                    "stream_idle_ms": IDLE_MS, "timeout_ms": 30000, "health_path": ""}
            if eng.ctx:
                opts["ca_file"] = cert
                client = "lean"  # the attack words below are the lean parser's
            tag = client + (" https" if eng.ctx else "")
            node, addr, nlog = et.start_node(procs, sut, tmp, f"{tag.replace(' ', '-')}-node",
                                             plugin, opts, ["--max-batch", "2"])
            for mode in ATTACKS:
                one_run(lg, tmp, f"{tag} {mode}", eng, addr, node, nlog, client, mode)
            one_run(lg, tmp, f"{tag} mixed", eng, addr, node, nlog, client, "valid",
                    bad_first=3)
            one_run(lg, tmp, f"{tag} valid", eng, addr, node, nlog, client, "valid")
            hwm = vm_hwm_mb(node.pid)
            if hwm > ceiling:
                sys.exit(f"FAIL {tag}: sut-node's VmHWM {hwm:.0f} MB, over {ceiling} MB")
            rc = procs.stop(node, timeout=30)
            log = read(nlog)
            if rc != 0 or re.search(r"Sanitizer|runtime error:", log):
                sys.exit(f"FAIL {tag}: sut-node exit {rc} on SIGTERM, log:\n{log[-3000:]}")
            print(f"ok {tag}: sut-node up through every attack, VmHWM {hwm:.1f} MB, "
                  f"exit 0 on SIGTERM, no sanitizer report")
    print("PASS")


if __name__ == "__main__":
    main()
