#!/usr/bin/env python3
"""Debian's real Prometheus server scrapes sut-node or loadgen-node, and a query returns the
series with the value the run's own records give.

  prometheus_scrape.py --mode sut     --sut-node BIN --loadgen BIN
  prometheus_scrape.py --mode loadgen --sut-node BIN --loadgen BIN

sut: a sut-node with --metrics-listen 127.0.0.1:0 is scraped while loadgen-node sends it a short
Server run; sut_node_samples_total and the node's latency histogram count must equal the samples
the QDL sent (nodes.json), and the batch-size histogram must count every batch; `sut-node --stats`
must print the same sample count.

loadgen: loadgen-node with --metrics-listen on a free loopback port (Prometheus applies a new
file_sd target only every 5 s, longer than the run, so the port is chosen first) is scraped during
the run and the linger after it;
loadgen_samples_completed_total and the per-node completed counter must equal nodes.json.

Everything on loopback with ports the system picks; Prometheus on a free loopback port with a
temporary storage folder; every wait polls a condition under a deadline. Exit 77 (skip) only when
the prometheus program is missing or cannot start here."""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

DEADLINE_S = 60
SCRAPE = "200ms"


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, cond, timeout=DEADLINE_S, procs=()):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        for p, name in procs:
            if p.poll() is not None:
                raise SystemExit(f"FAIL: {name} exited ({p.returncode}) while waiting for {what}")
        time.sleep(0.1)
    raise SystemExit(f"FAIL: no {what} within {timeout} s")


def log_match(path, pattern):
    try:
        with open(path, errors="replace") as f:
            m = re.search(pattern, f.read())
        return m.group(1) if m else None
    except FileNotFoundError:
        return None


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


class Prometheus:
    def __init__(self, tmp):
        self.tmp = tmp
        self.targets = os.path.join(tmp, "targets.json")
        self.write_targets([])
        cfg = os.path.join(tmp, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write(f"""global:
  scrape_interval: {SCRAPE}
  scrape_timeout: {SCRAPE}
scrape_configs:
  - job_name: harness
    file_sd_configs:
      - files: ['{self.targets}']
""")
        self.port = free_port()
        self.log = os.path.join(tmp, "prometheus.log")
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={tmp}/data",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=open(self.log, "w"), stderr=subprocess.STDOUT)
        self.base = f"http://127.0.0.1:{self.port}"

    def ready(self):
        def ok():
            try:
                http_get(self.base + "/-/ready", timeout=1)
                return True
            except OSError:
                return False
        end = time.monotonic() + 30
        while time.monotonic() < end:
            if ok():
                return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.1)
        return False

    def ready_or_say(self):
        """ready(), or False after printing why the test skips."""
        if self.ready():
            return True
        print("SKIP: prometheus cannot start here:")
        print(open(self.log, errors="replace").read()[-2000:])
        return False

    def write_targets(self, targets):
        # Atomic replace: Prometheus watches the file and must never read half of it.
        tmp = self.targets + ".tmp"
        with open(tmp, "w") as f:
            json.dump([{"targets": targets}], f)
        os.replace(tmp, self.targets)

    def query(self, expr):
        url = self.base + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        try:
            r = json.loads(http_get(url))
        except OSError:
            return None
        if r.get("status") != "success":
            raise SystemExit(f"FAIL: query {expr}: {r}")
        return r["data"]["result"]

    def value(self, expr):
        res = self.query(expr)
        if not res:
            return None
        return float(res[0]["value"][1])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_sut(a, tmp, metrics):
    log = os.path.join(tmp, "sut.log")
    portfile = os.path.join(tmp, "sut.port")
    cmd = [a.sut_node, "--listen", "127.0.0.1:0", "--port-file", portfile, "--backend", "sim",
           "--backend-opt", "a_us=50", "--backend-opt", "b_us=5", "--max-wait-us", "200"]
    if metrics:
        cmd += ["--metrics-listen", "127.0.0.1:0"]
    p = subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT)
    wait_for("sut-node port file", lambda: os.path.exists(portfile), procs=[(p, "sut-node")])
    with open(portfile) as f:
        port = int(f.read())
    mport = None
    if metrics:
        mport = wait_for("sut-node metrics address in its log",
                         lambda: log_match(log, r"metrics on http://127\.0\.0\.1:(\d+)/metrics"),
                         procs=[(p, "sut-node")])
    return p, port, mport


def loadgen_cmd(a, tmp, node_port, extra=()):
    return [a.loadgen, "--scenario", "Server", "--model", "resnet50", "--qsl-synthetic", "64",
            "--sample-size", "2048", "--nodes", f"127.0.0.1:{node_port}", "--output-dir",
            os.path.join(tmp, "out"), "--quiet", "--progress", "off", "--set",
            "min_duration_ms=1500", "--set", "min_query_count=200", "--set",
            "server_target_qps=400", *extra]


def nodes_json(tmp):
    with open(os.path.join(tmp, "out", "mlperf_log_nodes.json")) as f:
        return json.load(f)["nodes"]  # qdl_stats_write_json: {"nodes": [...]}


def check_run(rc, tmp):
    """Exit 1 is an INVALID verdict (timing on a busy machine): not what this test checks. Sample
    failures are, through nodes.json."""
    if rc not in (0, 1):
        raise SystemExit(f"FAIL: loadgen-node exited {rc}")
    node = nodes_json(tmp)[0]
    if node["samples_failed"] or node["samples_completed"] != node["samples_sent"]:
        raise SystemExit(f"FAIL: the run lost or failed samples: {node}")


def expect_eq(prom, expr, want):
    last = []

    def cond():
        last[:] = [prom.value(expr)]
        return last[0] == want

    end = time.monotonic() + 30
    while not cond():
        if time.monotonic() > end:
            targets = http_get(prom.base + "/api/v1/targets")
            raise SystemExit(f"FAIL: {expr} is {last[0]}, not {want}, after 30 s; targets: {targets}")
        time.sleep(0.1)
    print(f"ok: {expr} = {int(want)}")


def run_sut(a, tmp, prom, procs):
    sut, port, mport = start_sut(a, tmp, metrics=True)
    procs.append(sut)
    prom.write_targets([f"127.0.0.1:{mport}"])
    wait_for("a successful scrape of sut-node", lambda: prom.value('up{job="harness"}') == 1,
             procs=[(sut, "sut-node"), (prom.proc, "prometheus")])
    rc = subprocess.run(loadgen_cmd(a, tmp, port), stdout=open(os.path.join(tmp, "lg.log"), "w"),
                        stderr=subprocess.STDOUT, timeout=DEADLINE_S).returncode
    check_run(rc, tmp)
    sent = nodes_json(tmp)[0]["samples_sent"]
    if sent <= 0:
        raise SystemExit("FAIL: the run sent no sample")
    expect_eq(prom, "sut_node_samples_total", sent)
    expect_eq(prom, "sut_node_sample_latency_seconds_count", sent)
    batches = wait_for("sut_node_batches_total", lambda: prom.value("sut_node_batches_total"))
    expect_eq(prom, "sut_node_batch_size_count", batches)
    # The batch-size histogram's sum is every sample once; the +Inf bucket counts every batch.
    expect_eq(prom, "sut_node_batch_size_sum", sent)
    expect_eq(prom, 'sut_node_batch_size_bucket{le="+Inf"}', batches)
    expect_eq(prom, "sut_node_connections", 0)
    expect_eq(prom, "sut_node_inflight_samples", 0)
    # sut-node --stats asks the same node over the protocol (StatsRequest): the same count.
    out = subprocess.run([a.sut_node, "--stats", f"127.0.0.1:{port}"], capture_output=True,
                         text=True, timeout=30)
    stats = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    if out.returncode != 0 or int(stats.get("samples", -1)) != sent:
        raise SystemExit(f"FAIL: sut-node --stats: rc {out.returncode}, {out.stdout} {out.stderr}")
    print(f"ok: sut-node --stats samples = {sent}")
    info = prom.query("sut_node_info")
    if not info or info[0]["metric"].get("backend") != "sim":
        raise SystemExit(f"FAIL: sut_node_info: {info}")
    print("ok: sut_node_info backend=sim")


def run_loadgen(a, tmp, prom, procs):
    sut, port, _ = start_sut(a, tmp, metrics=False)
    procs.append(sut)
    lglog = os.path.join(tmp, "lg.log")
    # A port chosen here, in the target file before the run: Prometheus applies new targets only
    # every 5 s, longer than the run. The linger keeps the endpoint up for scrapes after the run.
    lport = free_port()
    prom.write_targets([f"127.0.0.1:{lport}"])
    wait_for("Prometheus to know the loadgen-node target",
             lambda: f"127.0.0.1:{lport}" in http_get(prom.base + "/api/v1/targets"),
             procs=[(prom.proc, "prometheus")])
    lg = subprocess.Popen(loadgen_cmd(a, tmp, port, ("--metrics-listen", f"127.0.0.1:{lport}",
                                                     "--metrics-linger-ms", "2000")),
                          stdout=open(lglog, "w"), stderr=subprocess.STDOUT)
    procs.append(lg)
    wait_for("loadgen-node metrics address in its log",
             lambda: log_match(lglog, rf"metrics on http://127\.0\.0\.1:({lport})/metrics"),
             procs=[(lg, "loadgen-node")])
    try:
        rc = lg.wait(DEADLINE_S)
    except subprocess.TimeoutExpired:
        raise SystemExit("FAIL: loadgen-node did not finish in time")
    check_run(rc, tmp)
    node = nodes_json(tmp)[0]
    done = node["samples_completed"]
    if done <= 0:
        raise SystemExit("FAIL: the run completed no sample")
    # The target is gone now: its last values are read back over a range (a scrape that fails
    # marks the series stale for instant queries).
    expect_eq(prom, "max_over_time(loadgen_samples_completed_total[5m])", done)
    expect_eq(prom, "max_over_time(loadgen_samples_issued_total[5m])", done)
    expect_eq(prom, f'max_over_time(loadgen_node_samples_completed_total{{node="127.0.0.1:{port}"}}[5m])',
              done)
    expect_eq(prom, f'max_over_time(loadgen_node_up{{node="127.0.0.1:{port}"}}[5m])', 1)
    rtt = prom.value(f'max_over_time(loadgen_node_rtt_min_seconds{{node="127.0.0.1:{port}"}}[5m])')
    if rtt is None or not 0 < rtt < 10:
        raise SystemExit(f"FAIL: loadgen_node_rtt_min_seconds is {rtt}")
    print(f"ok: loadgen_node_rtt_min_seconds = {rtt}")


def dump_logs(tmp, names):
    """The last lines of each log that exists, for a failed test's output."""
    for name in names:
        path = os.path.join(tmp, name)
        if os.path.exists(path):
            print(f"---- {name} (last lines)")
            print(open(path, errors="replace").read()[-3000:])


def stop_all(procs):
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("sut", "loadgen"), required=True)
    ap.add_argument("--sut-node", required=True)
    ap.add_argument("--loadgen", required=True)
    a = ap.parse_args()

    if not shutil.which("prometheus"):
        print("SKIP: no prometheus program (Debian package prometheus)")
        return 77
    tmp = tempfile.mkdtemp(prefix="prom-scrape-")
    procs = []
    prom = Prometheus(tmp)
    ok = False
    try:
        if not prom.ready_or_say():
            return 77
        (run_sut if a.mode == "sut" else run_loadgen)(a, tmp, prom, procs)
        stop_all(procs)
        for p in procs:
            if p.returncode not in (0, 1):
                raise SystemExit(f"FAIL: {p.args[0]} ended with {p.returncode}")
        for name in ("sut.log", "lg.log"):
            text = open(os.path.join(tmp, name), errors="replace").read()
            if "Sanitizer" in text or "runtime error:" in text:
                raise SystemExit(f"FAIL: a sanitizer report in {name}")
        if procs[0].returncode != 0:
            raise SystemExit(f"FAIL: sut-node exited {procs[0].returncode} on SIGTERM")
        ok = True
        return 0
    finally:
        stop_all(procs)
        prom.stop()
        if ok:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            dump_logs(tmp, ("sut.log", "lg.log", "prometheus.log"))
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
