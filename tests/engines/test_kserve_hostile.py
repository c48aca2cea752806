#!/usr/bin/python3
"""The kserve backend against a hostile KServe v2 server (stdlib only, in this process): each
attack's responses must fail every sample with the parser's message in the node's log, and the
node must stay up and answer the next run correctly.

Attacks: ~18k outputs whose binary_data_size values sum past 2^64 so an unchecked offset points
4 KiB, or 64 MiB, before the body (before the fix: SIGSEGV in memcpy, or the node's heap sent
back as results in a VALID run); an output whose shape's product wraps 64 bits; an
Inference-Header-Content-Length past the body. Then valid responses: every sample's result must
be the bytes the server sent for it.

    test_kserve_hostile.py SUT_NODE LOADGEN_NODE KSERVE_PLUGIN SOURCE_DIR
"""
import http.server
import json
import os
import struct
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import enginetest as et  # noqa: E402

N = 16                  # samples in the data set
OUT = 10 * 4            # result bytes per sample: 10 FP32 logits
BIG = 18446             # outputs of 10^15 bytes: 1.8446e19, just under 2^64


def wrap_header(back, n):
    """The wrap attack's JSON header: "logits" lands |back| bytes before the body."""
    length = 0
    for _ in range(2):  # the second pass with the first's length (its digits do not change)
        js = ('{"outputs":[' + '{"parameters":{"binary_data_size":1e15}},' * BIG +
              '{"name":"p","parameters":{"binary_data_size":%d}},'
              '{"name":"logits","parameters":{"binary_data_size":%d}}]}'
              % ((1 << 64) - BIG * 10**15 - back - length, back + OUT * n)).encode()
        done, length = len(js) == length, len(js)
    assert done
    return js


def result(i):
    """What the server answers for sample |i| (its first pixel's value) when it behaves."""
    return bytes((i * 7 + k) & 0xFF for k in range(OUT))


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    mode = "valid"
    expect = []  # the node's exact message for each hostile response sent


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        hl = int(self.headers["Inference-Header-Content-Length"])
        head = json.loads(body[:hl])
        n = head["inputs"][0]["shape"][0]
        raw = body[hl:]
        per = len(raw) // n
        mode = self.server.mode
        binary = b"".join(result(raw[i * per]) for i in range(n))
        hlen = None
        if mode.startswith("wrap"):
            js = wrap_header(4096 if mode == "wrap_4k" else 64 << 20, n)
            binary = bytes(OUT * n)
            self.server.expect.append("output 0 (''): binary_data_size 1000000000000000 at "
                                      f"offset 0 runs past the {OUT * n}-byte binary part")
        elif mode == "shape":
            js = json.dumps({"outputs": [{
                "name": "logits", "datatype": "FP32",
                "shape": [2147483648, 2147483648, 2147483648, n],
                "parameters": {"binary_data_size": len(binary)}}]}).encode()
            self.server.expect.append("output 'logits': datatype FP32 and its shape make more "
                                      f"than 2^64 bytes, binary_data_size says {len(binary)}")
        else:
            js = json.dumps({"model_name": "m", "outputs": [{
                "name": "logits", "datatype": "FP32", "shape": [n, 10],
                "parameters": {"binary_data_size": len(binary)}}]}).encode()
            if mode == "hlen":
                hlen = len(js) + len(binary) + 1
                self.server.expect.append(f"Inference-Header-Content-Length {hlen} is past the "
                                          f"{len(js) + len(binary)}-byte body")
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Inference-Header-Content-Length", str(hlen or len(js)))
        self.send_header("Content-Length", str(len(js) + len(binary)))
        self.end_headers()
        self.wfile.write(js + binary)


def write_npy(path):
    """N images of 1x28x28 uint8 whose first pixel is the sample's index."""
    hdr = "{'descr': '|u1', 'fortran_order': False, 'shape': (%d, 1, 28, 28), }" % N
    hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
        for i in range(N):
            f.write(bytes([i]) + bytes(28 * 28 - 1))


ATTACKS = ["wrap_4k", "wrap_64m", "shape", "hlen"]


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    sut, lg, plugin, _src = sys.argv[1:]
    srv = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    with et.scratch("kserve-hostile-", srv.shutdown) as (procs, tmp):
        qsl = os.path.join(tmp, "images.npy")
        write_npy(qsl)
        # max_batch = N: one request per run carries every sample.
        opts = {"url": f"http://127.0.0.1:{srv.server_address[1]}", "model": "m",
                "input": "input", "output": "logits", "datatype": "UINT8", "shape": "1,28,28",
                "max_batch": N, "engines": 1, "timeout_ms": 15000}
        node, addr, nlog = et.start_node(procs, sut, tmp, "kserve-node", plugin, opts,
                                         ["--max-batch", str(N)])
        for mode in ATTACKS:
            srv.mode = mode
            srv.expect = []
            out = os.path.join(tmp, mode)
            rc, text = et.loadgen(lg, out, addr, qsl, "Offline", "AccuracyOnly", [],
                                  timeout=120)
            log = open(nlog).read()
            if node.poll() is not None:
                sys.exit(f"FAIL {mode}: sut-node died (exit {node.returncode})\n{log[-3000:]}")
            if rc != 1 or f"{N} samples failed" not in text:
                sys.exit(f"FAIL {mode}: loadgen-node exit {rc} (1 and {N} failed samples "
                         f"expected)\n{text[-2000:]}\nnode log:\n{log[-2000:]}")
            # The node's message, word for word, for each response this attack sent.
            missing = [m for m in srv.expect if f"failed: {m}" not in log]
            if not srv.expect or missing:
                sys.exit(f"FAIL {mode}: {len(srv.expect)} responses, not in the node's log: "
                         f"{missing}\n{log[-3000:]}")
            got = et.accuracy_log(out)
            if any(r.get("data") for r in got):
                sys.exit(f"FAIL {mode}: failed samples have result bytes: {got[:2]}")
            print(f"ok {mode}: {N} samples failed cleanly, sut-node up")

        srv.mode = "valid"
        out = os.path.join(tmp, "valid")
        rc, text = et.loadgen(lg, out, addr, qsl, "Offline", "AccuracyOnly", [], timeout=120)
        if rc != 0:
            sys.exit(f"FAIL valid: loadgen-node exit {rc}\n{text[-2000:]}\nnode log:\n"
                     f"{open(nlog).read()[-2000:]}")
        got = {r["qsl_idx"]: bytes.fromhex(r["data"]) for r in et.accuracy_log(out)}
        if sorted(got) != list(range(N)) or any(got[i] != result(i) for i in range(N)):
            sys.exit(f"FAIL valid: results differ from what the server sent: {got}")
        print(f"ok valid: all {N} results are the server's bytes")
        if procs.stop(node) not in (0, None):
            sys.exit(f"FAIL: sut-node exit {node.returncode} on SIGTERM")
    print("PASS")


if __name__ == "__main__":
    main()
