#!/usr/bin/python3
"""The kserve backend against a KServe v2 server (stdlib only, in this process) that answers every
request with a body far past max_response_mb and then stalls: sut-node must charge each running
request's response against --memory-budget before it holds it (its RSS stays within the budget
and its reported use accounts for the growth within 1.5x + 16 MiB), fail every sample with a
message naming the URL and the limit, count them, and stay up.

    test_kserve_bigresp.py SUT_NODE LOADGEN_NODE KSERVE_PLUGIN
"""
import http.server
import json
import os
import re
import signal
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import enginetest as et  # noqa: E402

N = 16                 # samples, one request each (max_batch 1)
ENGINES = 8            # requests in flight at once: 8 x the cap is twice the budget
CAP_MB = 32            # max_response_mb
BUDGET = 256 << 20     # --memory-budget
SENT = 100 << 20       # what the server sends of each response before it stalls
MIB = 1 << 20


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    requests = 0


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.server.requests += 1
        total = 250 << 20
        js = json.dumps({"model_name": "m", "outputs": [{
            "name": "output", "datatype": "UINT8", "shape": [1, total],
            "parameters": {"binary_data_size": total}}]}).encode()
        try:
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                             b"Inference-Header-Content-Length: %d\r\nContent-Length: %d\r\n\r\n"
                             % (len(js), len(js) + total) + js)
            chunk = b"\x11" * MIB
            for _ in range(SENT // MIB):
                self.wfile.write(chunk)
            time.sleep(5)  # stalls before the rest
        except OSError:
            pass  # the node gave up on it
        self.close_connection = True


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def sanitized(binary):
    with open(binary, "rb") as f:
        data = f.read()
    return b"__asan_init" in data or b"__tsan_init" in data


def write_npy(path):
    hdr = "{'descr': '|u1', 'fortran_order': False, 'shape': (%d, 4), }" % N
    hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
        for i in range(N):
            f.write(bytes([i, 1, 2, 3]))


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    sut, lg, plugin = sys.argv[1:]
    srv = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    with et.scratch("kserve-bigresp-", srv.shutdown) as (procs, tmp):
        qsl = os.path.join(tmp, "samples.npy")
        write_npy(qsl)
        url = f"http://127.0.0.1:{srv.server_address[1]}"
        opts = {"url": url, "model": "m", "datatype": "UINT8", "shape": "1,4", "max_batch": 1,
                "engines": ENGINES, "timeout_ms": 30000, "max_response_mb": CAP_MB}
        node, addr, nlog = et.start_node(procs, sut, tmp, "bigresp-node", plugin, opts,
                                         ["--max-batch", "1", "--memory-budget", str(BUDGET)])
        idle = rss_kb(node.pid)
        peak = [idle]
        stop = threading.Event()

        def sample_rss():
            while not stop.is_set():
                try:
                    peak[0] = max(peak[0], rss_kb(node.pid))
                except (OSError, AttributeError):
                    return
                time.sleep(0.02)
        t = threading.Thread(target=sample_rss, daemon=True)
        t.start()
        out = os.path.join(tmp, "run")
        rc, text = et.loadgen(lg, out, addr, qsl, "Offline", "AccuracyOnly", [], timeout=150)
        stop.set()
        t.join()
        if node.poll() is not None:
            sys.exit(f"FAIL: sut-node died (exit {node.returncode})\n{open(nlog).read()[-3000:]}")
        os.kill(node.pid, signal.SIGHUP)  # its stats line, with the budget's peak
        time.sleep(1.0)
        log = open(nlog).read()
        if rc != 1 or f"{N} samples failed" not in text:
            sys.exit(f"FAIL: loadgen-node exit {rc} (1 and {N} failed samples expected)\n"
                     f"{text[-2000:]}\nnode log:\n{log[-2000:]}")
        want = (f"failed: the response from {url}/v2/models/m/infer is over {CAP_MB << 20} bytes "
                f"(max_response_mb={CAP_MB} for a batch of 1, this batch 1)")
        if log.count(want) != srv.requests or srv.requests != N:
            sys.exit(f"FAIL: {srv.requests} requests, {log.count(want)} with the message "
                     f"{want!r}\n{log[-3000:]}")
        m = re.findall(r"memory (\d+) of (\d+) bytes \(peak (\d+)\)", log)
        if not m:
            sys.exit(f"FAIL: no memory line after SIGHUP\n{log[-2000:]}")
        used, limit, rpeak = (int(x) for x in m[-1])
        growth = (peak[0] - idle) << 10
        print(f"requests {srv.requests}; RSS idle {idle >> 10} MiB, peak {peak[0] >> 10} MiB "
              f"(growth {growth >> 20} MiB); budget reported peak {rpeak >> 20} MiB of "
              f"{limit >> 20} MiB, now {used >> 20} MiB; --memory-budget {BUDGET >> 20} MiB")
        if rpeak > limit:
            sys.exit(f"FAIL: the budget's peak {rpeak} is over its limit {limit}")
        if rpeak < CAP_MB << 20:
            sys.exit(f"FAIL: the responses were not charged (peak {rpeak} bytes)")
        if sanitized(sut):
            print("sanitizer build: RSS bounds not checked (its allocator keeps freed memory)")
        elif growth > BUDGET or growth > 1.5 * rpeak + 16 * MIB:
            sys.exit(f"FAIL: RSS grew {growth >> 20} MiB against a budget of {BUDGET >> 20} MiB "
                     f"and a reported peak of {rpeak >> 20} MiB (at most 1.5x + 16 MiB)")
        if procs.stop(node) not in (0, None):
            sys.exit(f"FAIL: sut-node exit {node.returncode} on SIGTERM")
    print("PASS")


if __name__ == "__main__":
    main()
