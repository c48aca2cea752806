#!/usr/bin/python3
"""loadgen-node's endpoint mode over HTTPS on httpc's lean client (openai+https://, issue 39),
against a stdlib engine in this process (raw sockets wrapped by Python's ssl, no third-party
package), with a private CA made here by the openssl command.

- A valid engine (certificate for IP 127.0.0.1 and the name localhost, signed by the private
  CA) with --endpoint-ca: every sample once with exactly the tokens streamed, in Offline and
  Server, over kept-alive TLS connections (fewer connections than requests); by the name
  localhost the engine saw SNI "localhost"; the same with --endpoint-client curl (libcurl).
- Refused at start, loadgen-node exiting nonzero with the exact message naming the endpoint:
  another CA, or none (the system's store: unable to get local issuer certificate), a
  self-signed engine (certificate verify failed (self-signed certificate)), a
  certificate for another name (hostname mismatch), an engine that accepts and never answers the
  handshake (the handshake deadline), a plaintext HTTP server on an https:// URL (its answer
  named as plaintext HTTP).
- A stream cut mid-answer over TLS (a close without close_notify) fails and re-dispatches
  its sample only; the run still completes every sample.
- No run prints a sanitizer report (the ASan build's refused runs included).

    test_endpoint_tls.py LOADGEN_NODE
"""
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import enginetest as et  # noqa: E402

N = 8
TOKENS = [7, 8, 9]


SSE = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
       b"\r\n" + et.chunked(et.vllm_stream(TOKENS)))
MODELS = b'{"object":"list","data":[]}'
MODELS_ANSWER = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                 b"\r\n%s" % (len(MODELS), MODELS))


class Engine:
    """Accepts on 127.0.0.1; with |ctx| each connection is TLS (the handshake in its thread).
    mode: "valid" (keep-alive answers), "cut" (the first stream cut after its first event, the
    rest valid), "stall" (never a byte back), "plain" (an HTTP 400 to whatever comes)."""

    def __init__(self, ctx, mode="valid"):
        self.ctx, self.mode = ctx, mode
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.conns, self.posts, self.snis, self.alpn = 0, 0, [], set()
        self.open, self.stopping = [], False
        if ctx:
            ctx.sni_callback = self.on_sni
        threading.Thread(target=self.accept, daemon=True).start()

    def on_sni(self, sock, name, ctx):
        with self.lock:
            self.snis.append(name)

    def accept(self):
        while not self.stopping:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.conns += 1
                self.open.append(c)
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        try:
            if self.mode == "stall":
                while c.recv(65536):
                    pass
                return
            if self.mode == "plain":
                c.recv(65536)
                c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n"
                          b"Connection: close\r\n\r\n")
                return
            if self.ctx:
                c = self.ctx.wrap_socket(c, server_side=True)
                with self.lock:
                    self.alpn.add(c.selected_alpn_protocol())
            buf = b""
            while True:
                head, _, buf = et.read_http_request(c, buf)
                if head is None:
                    return
                if head.startswith(b"GET "):
                    c.sendall(MODELS_ANSWER)
                    continue
                with self.lock:
                    self.posts += 1
                    cut = self.mode == "cut" and self.posts == 1
                if cut:
                    c.sendall(SSE[:SSE.index(b"\n\n") + 2])
                    return  # closed without close_notify
                c.sendall(SSE)
        except (OSError, ssl.SSLError):
            pass
        finally:
            c.close()

    def close(self):
        self.stopping = True
        self.sock.close()
        with self.lock:
            for c in self.open:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def openssl(*argv):
    subprocess.run(["openssl", *argv], check=True, capture_output=True)


def make_pki(tmp):
    """A private CA, a server certificate it signs (IP 127.0.0.1, DNS localhost), one it signs
    for another name only, and an unrelated self-signed certificate (the wrong CA)."""
    p = {k: os.path.join(tmp, k) for k in ("ca.key", "ca.crt", "srv.key", "srv.csr", "srv.crt",
                                           "other.crt", "other.csr", "wrong.key", "wrong.crt",
                                           "ext", "ext_other")}
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", p["ca.key"], "-out",
            p["ca.crt"], "-days", "1", "-subj", "/CN=test private CA")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", p["srv.key"], "-out",
            p["srv.csr"], "-subj", "/CN=127.0.0.1")
    with open(p["ext"], "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    with open(p["ext_other"], "w") as f:
        f.write("subjectAltName=DNS:engine.example\n")
    for crt, ext in (("srv.crt", "ext"), ("other.crt", "ext_other")):
        openssl("x509", "-req", "-in", p["srv.csr"], "-CA", p["ca.crt"], "-CAkey", p["ca.key"],
                "-CAcreateserial", "-days", "1", "-extfile", p[ext], "-out", p[crt])
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", p["wrong.key"], "-out",
            p["wrong.crt"], "-days", "1", "-subj", "/CN=127.0.0.1", "-addext",
            "subjectAltName=IP:127.0.0.1")
    return p


def server_ctx(cert, key):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def run(lg, tmp, tag, url, extra=(), scenario="Offline"):
    out = os.path.join(tmp, tag.replace(" ", "-"))
    argv = [lg, "--scenario", scenario, "--mode", "AccuracyOnly", "--nodes", url,
            "--output-dir", out, "--quiet", "--progress", "off", "--log-level", "warn",
            "--drain-timeout-ms", "30000", "--qsl-synthetic", str(N), "--sample-size", "16",
            "--model", "llama2-70b", "--endpoint-max-tokens", str(len(TOKENS))] + list(extra)
    if scenario == "Server":
        argv += ["--set", "server_target_qps=50"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if re.search(r"Sanitizer|runtime error:", r.stdout + r.stderr):
        sys.exit(f"FAIL {tag}: a sanitizer report:\n{(r.stdout + r.stderr)[-3000:]}")
    return r.returncode, r.stdout + r.stderr, out


def check_valid(lg, tmp, tag, eng, url, extra, scenario="Offline"):
    before = eng.posts
    rc, text, out = run(lg, tmp, tag, url, extra, scenario)
    if rc != 0:
        sys.exit(f"FAIL {tag}: loadgen-node exit {rc}\n{text[-2000:]}")
    got = et.output_tokens(out, tag)
    if sorted(got) != list(range(N)) or any(v != TOKENS for v in got.values()):
        sys.exit(f"FAIL {tag}: samples {sorted(got)} with {list(got.values())[:3]}, every one "
                 f"of {N} expected once with {TOKENS}")
    print(f"ok {tag}: {N} samples once each with the tokens streamed "
          f"({eng.posts - before} streams)")
    return text, out


def refused(lg, tmp, tag, url, extra, want):
    rc, text, _ = run(lg, tmp, tag, url, extra)
    if rc == 0 or want not in text:
        sys.exit(f"FAIL {tag}: exit {rc}, expected a failure saying\n  {want}\ngot:\n"
                 f"{text[-2000:]}")
    print(f"ok {tag}: refused at start: ...{want[-110:]}")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    lg = sys.argv[1]
    if not shutil.which("openssl"):
        et.skip("no openssl command (Debian's openssl)")
    tmp = tempfile.mkdtemp(prefix="endpoint-tls-")
    engines = []
    try:
        pki = make_pki(tmp)
        ca = ["--endpoint-ca", pki["ca.crt"]]

        # Valid: lean by default (by address and by name), then curl for comparison.
        eng = Engine(server_ctx(pki["srv.crt"], pki["srv.key"]))
        engines.append(eng)
        url = f"openai+https://127.0.0.1:{eng.port}"
        check_valid(lg, tmp, "lean Offline", eng, url, ca)
        check_valid(lg, tmp, "lean Server", eng, url, ca, "Server")
        if eng.conns >= eng.posts + 2:
            sys.exit(f"FAIL lean keep-alive: {eng.conns} TLS connections for {eng.posts} "
                     f"streams and 2 probes")
        if eng.alpn != {"http/1.1"}:
            sys.exit(f"FAIL ALPN: the engine saw {eng.alpn}, expected http/1.1 only")
        print(f"ok lean keep-alive and ALPN: {eng.conns} TLS connections for {eng.posts} "
              f"streams, ALPN {eng.alpn}")
        n = len(eng.snis)
        check_valid(lg, tmp, "lean by name", eng, f"openai+https://localhost:{eng.port}", ca)
        if not eng.snis[n:] or set(eng.snis[n:]) != {"localhost"}:
            sys.exit(f"FAIL SNI: the engine saw {eng.snis[n:]}, expected localhost")
        if any(s is not None for s in eng.snis[:n]):
            sys.exit(f"FAIL SNI: an address was sent as SNI: {eng.snis[:n]}")
        print("ok SNI: localhost sent for the name, nothing for the address")
        check_valid(lg, tmp, "curl Offline", eng, url, ca + ["--endpoint-client", "curl"])

        # Refused at start, each named.
        refused(lg, tmp, "wrong CA", url, ["--endpoint-ca", pki["wrong.crt"]],
                f"endpoint {url} does not answer as an OpenAI-compatible server: "
                f"https://127.0.0.1:{eng.port}: TLS handshake failed: certificate verify failed "
                f"(unable to get local issuer certificate)")
        refused(lg, tmp, "no CA (the system's store)", url, [],
                f"https://127.0.0.1:{eng.port}: TLS handshake failed: certificate verify failed "
                f"(unable to get local issuer certificate)")
        selfs = Engine(server_ctx(pki["wrong.crt"], pki["wrong.key"]))
        engines.append(selfs)
        u = f"openai+https://127.0.0.1:{selfs.port}"
        refused(lg, tmp, "self-signed engine", u, ca,
                f"endpoint {u} does not answer as an OpenAI-compatible server: "
                f"https://127.0.0.1:{selfs.port}: TLS handshake failed: certificate verify "
                f"failed (self-signed certificate)")
        other = Engine(server_ctx(pki["other.crt"], pki["srv.key"]))
        engines.append(other)
        for host, why in (("127.0.0.1", "IP address mismatch"), ("localhost", "hostname mismatch")):
            u = f"openai+https://{host}:{other.port}"
            refused(lg, tmp, f"certificate for another name ({host})", u, ca,
                    f"endpoint {u} does not answer as an OpenAI-compatible server: "
                    f"https://{host}:{other.port}: TLS handshake failed: certificate verify "
                    f"failed ({why})")
        stall = Engine(None, "stall")
        engines.append(stall)
        u = f"openai+https://127.0.0.1:{stall.port}"
        refused(lg, tmp, "handshake stalled", u, ca,
                f"endpoint {u} does not answer as an OpenAI-compatible server: "
                f"https://127.0.0.1:{stall.port}: TLS handshake failed: not done within 5000 ms")
        plain = Engine(None, "plain")
        engines.append(plain)
        u = f"openai+https://127.0.0.1:{plain.port}"
        refused(lg, tmp, "plaintext server", u, ca,
                f"endpoint {u} does not answer as an OpenAI-compatible server: "
                f"https://127.0.0.1:{plain.port}: TLS handshake failed: wrong version number "
                f"(the server answered in plaintext HTTP: an http:// address?)")

        # A stream cut mid-answer over TLS: its sample re-dispatched, every sample once.
        cut = Engine(server_ctx(pki["srv.crt"], pki["srv.key"]), "cut")
        engines.append(cut)
        text, out = check_valid(lg, tmp, "cut mid-stream", cut,
                                f"openai+https://127.0.0.1:{cut.port}", ca + ["--log-level",
                                                                              "warn"])
        if "re-dispatched" not in text or f"https://127.0.0.1:{cut.port}" not in text:
            sys.exit(f"FAIL cut mid-stream: no re-dispatch named in the log:\n{text[-1500:]}")
        print("ok cut mid-stream: its sample re-dispatched, named in the log")
    finally:
        for e in engines:
            e.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print("PASS")


if __name__ == "__main__":
    main()
