#!/usr/bin/env python3
"""Tests of deploy/plot/latplot.py: per-sample CSV, the official trace format (not strictly JSON),
the detail log alone, run-folder discovery and bad input.

    test_latplot.py [-v]        (CTest: deploy.latplot)
"""
import os
import random
import shutil
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
LATPLOT = os.path.join(HERE, "..", "plot", "latplot.py")
sys.path.insert(0, os.path.join(HERE, "..", "plot"))
from latplot import fmt_ms  # noqa: E402  (the labels' number format)


def mllog(key, value):
    import json
    return (':::MLLOG {"key": "%s", "value": %s, "time_ms": 1.000000, "namespace": "mlperf::logging", '
            '"event_type": "POINT_IN_TIME", "metadata": {"is_error": false, "is_warning": false, '
            '"file": "x.cc", "line_no": 1, "pid": 1, "tid": 1}}\n' % (key, json.dumps(value)))


DETAIL = "".join([
    mllog("sut_name", "Network SUT (2 nodes: sut-1, sut-2)"),
    # The official LoadGen does not escape quotes: such a line is skipped, not fatal.
    ':::MLLOG {"key": "test_datetime", "value": "a "quoted" value", "time_ms": 1.0}\n',
    mllog("effective_scenario", "Server"),
    mllog("effective_target_latency_ns", 15000000),
    mllog("result_validity", "VALID"),
    mllog("result_completed_samples_per_sec", 999.87),
    mllog("result_min_latency_ns", 400000),
    mllog("result_50.00_percentile_latency_ns", 900000),
    mllog("result_90.00_percentile_latency_ns", 2000000),
    mllog("result_99.00_percentile_latency_ns", 7000000),
    mllog("result_max_latency_ns", 40000000),
])


def samples(n=3000, seed=7):
    """(scheduled_ns, latency_ns): a warm-up, a 50 ms stall at 1.5 s, and a tail."""
    rnd = random.Random(seed)
    t, out = 0, []
    for i in range(n):
        t += int(rnd.expovariate(1000.0) * 1e9)
        lat = int(rnd.lognormvariate(13.7, 0.3))            # about 0.9 ms
        if t < 200e6:
            lat += int((200e6 - t) * 0.05)                   # warm-up
        if 1.5e9 <= t < 1.55e9:
            lat += int(1.55e9 - t)                           # everything waits for the stall
        out.append((t, lat))
    return out


class LatplotTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="latplot-test-")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def path(self, name):
        return os.path.join(self.dir, name)

    def write(self, name, text):
        with open(self.path(name), "w") as f:
            f.write(text)
        return self.path(name)

    def run_tool(self, *args):
        r = subprocess.run([sys.executable, LATPLOT] + list(args), capture_output=True, text=True,
                           timeout=60)
        return r.returncode, r.stdout, r.stderr

    def svg_text(self, path):
        root = ET.parse(path).getroot()                     # well-formed XML
        self.assertTrue(root.tag.endswith("svg"))
        return " ".join(t.text or "" for t in root.iter() if t.tag.endswith("text"))

    def test_csv_with_detail(self):
        pts = samples()
        self.write("mlperf_log_detail.txt", DETAIL)
        self.write("lat.csv", "sample_seq,scheduled_ns,latency_ns\n"
                   + "".join(f"{i},{t},{l}\n" for i, (t, l) in enumerate(pts)))
        rc, out, err = self.run_tool("--detail", self.path("mlperf_log_detail.txt"),
                                     "--samples", self.path("lat.csv"), "--out", self.path("p.svg"))
        self.assertEqual(rc, 0, err)
        self.assertIn(f"({len(pts)} samples", out)
        text = self.svg_text(self.path("p.svg"))
        for needle in ("Server", "Network SUT", "result VALID", f"{len(pts)} samples", "target 15 ms",
                       "p99", "Latency histogram", "time since the first sample"):
            self.assertIn(needle, text)

    def test_token_panels(self):
        """loadgen-node's token CSV: TTFT and TPOT panels, each with its bound from the detail log."""
        pts = samples(800)
        detail = DETAIL + mllog("requested_server_ttft_latency", 2000000000) \
            + mllog("requested_server_tpot_latency", 200000000)
        self.write("mlperf_log_detail.txt", detail)
        head = "sample_seq,scheduled_ns,latency_ns,issue_late_ns,issue_call_ns,ttft_ns,n_tokens\n"
        # TTFT a third of the latency, 11 tokens: TPOT = (latency - TTFT) / 10. A failed sample
        # (no first token) is left out of both panels.
        rows = [f"{i},{t},{l},0,1,{l // 3},11\n" for i, (t, l) in enumerate(pts)]
        rows.append(f"{len(pts)},{pts[-1][0] + 1},5000000,0,1,-1,0\n")
        self.write("mlperf_log_sample_latencies.csv", head + "".join(rows))
        rc, out, err = self.run_tool(self.dir)
        self.assertEqual(rc, 0, err)
        text = self.svg_text(self.path("latency.svg"))
        ttft = sorted(l // 3 for _, l in pts)
        tpot = sorted((l - l // 3) // 10 for _, l in pts)
        for needle in ("TTFT (time to first token): p50", "TPOT (time per output token): p50",
                       "target 2000 ms", "target 200 ms", "TTFT (ms)", "TPOT (ms)",
                       "p99 %s ms" % fmt_ms(ttft[int(len(ttft) * 0.99)] / 1e6),
                       "p99 %s ms" % fmt_ms(tpot[int(len(tpot) * 0.99)] / 1e6)):
            self.assertIn(needle, text)
        # Not a token run (ttft_ns -1, n_tokens 0 on every line): no token panels.
        self.write("mlperf_log_sample_latencies.csv",
                   head + "".join(f"{i},{t},{l},0,1,-1,0\n" for i, (t, l) in enumerate(pts)))
        rc, out, err = self.run_tool(self.dir)
        self.assertEqual(rc, 0, err)
        text = self.svg_text(self.path("latency.svg"))
        self.assertNotIn("TTFT", text)
        self.assertNotIn("TPOT", text)

    def test_official_trace(self):
        pts = samples(500)
        lines = ['{"traceEvents":[\n',
                 # LogDetail events carry doubled quotes: not JSON, and must not stop the reader.
                 '{"name":"LogDetail","ph":"X","pid":1,"tid":2,"ts":0.000,"dur":0.000,'
                 '"args":{"key":""sut_name"","value":""x""}},\n']
        for i, (t, l) in enumerate(pts):
            lines.append('{"name":"Sample","cat":"default","ph":"b","pid":1,"id":%d,"ts":%.3f,'
                         '"args":{"sample_seq":%d,"query_seq":%d,"sample_idx":%d,"issue_start_ns":%d,'
                         '"complete_ns":%d}},\n' % (i, t / 1000.0, i, i, i % 64, 1000, l))
            lines.append('{"name":"Sample","cat":"default","ph":"e","pid":1,"id":%d,"ts":%.3f},\n'
                         % (i, (t + l) / 1000.0))
            lines.append('{"name":"Latency","ph":"C","pid":1,"ts":%.3f,"args":{"issue_delay":1000,'
                         '"issue_to_done":%d}},\n' % (t / 1000.0, l))
        lines.append('{"name":"LastTrace"}\n],\n"displayTimeUnit":"ns",\n"otherData":{"ts":1,'
                     '"version":"MLPerf LoadGen v1.0"}}\n')
        os.mkdir(self.path("run"))
        with open(os.path.join(self.dir, "run", "mlperf_log_trace.json"), "w") as f:
            f.writelines(lines)
        with open(os.path.join(self.dir, "run", "mlperf_log_detail.txt"), "w") as f:
            f.write(DETAIL)
        rc, out, err = self.run_tool(self.path("run"))         # discovers both files
        self.assertEqual(rc, 0, err)
        self.assertIn("(500 samples from mlperf_log_trace.json)", out)
        self.svg_text(os.path.join(self.dir, "run", "latency.svg"))

    def test_trace_without_args_pairs_begin_and_end(self):
        text = '{"traceEvents":[\n'
        for i in range(50):
            text += '{"name": "Sample", "cat": "default", "ph": "b", "id": %d, "pid": 1, "tid": 1, "ts": %d, "args": {  }},\n' % (i, i * 1000)
            text += '{ "name": "Sample", "cat": "default", "ph": "e", "id": %d, "pid": 1, "tid": 1, "ts": %d },\n' % (i, i * 1000 + 250 + i)
        text += '{"name":"LastTrace"}\n]}\n'
        self.write("t.json", text)
        rc, out, err = self.run_tool("--trace", self.path("t.json"), "--out", self.path("t.svg"))
        self.assertEqual(rc, 0, err)
        self.assertIn("(50 samples", out)

    def test_detail_only(self):
        self.write("d.txt", DETAIL)
        rc, out, err = self.run_tool("--detail", self.path("d.txt"), "--out", self.path("d.svg"))
        self.assertEqual(rc, 0, err)
        text = self.svg_text(self.path("d.svg"))
        self.assertIn("Per-sample latencies are not in the detail log", text)
        self.assertIn("p99", text)
        self.assertIn("7 ms", text)

    def test_csv_without_time_column(self):
        self.write("l.csv", "latency_ns\n" + "".join(f"{1000000 + i * 10}\n" for i in range(100)))
        rc, out, err = self.run_tool("--samples", self.path("l.csv"), "--out", self.path("l.svg"))
        self.assertEqual(rc, 0, err)
        self.assertIn("sample (in order)", self.svg_text(self.path("l.svg")))

    def test_bad_input(self):
        self.write("bad.csv", "issue_ns,lat\n1,2\n")
        rc, _, err = self.run_tool("--samples", self.path("bad.csv"), "--out", self.path("x.svg"))
        self.assertEqual(rc, 1)
        self.assertIn("no latency_ns column", err)
        self.write("empty.json", '{"traceEvents":[\n{"name":"LastTrace"}\n]}\n')
        rc, _, err = self.run_tool("--trace", self.path("empty.json"), "--out", self.path("x.svg"))
        self.assertEqual(rc, 1)
        self.assertIn("no \"Sample\" events", err)
        rc, _, err = self.run_tool()
        self.assertEqual(rc, 2)
        self.write("nolat.txt", mllog("effective_scenario", "Offline"))
        rc, _, err = self.run_tool("--detail", self.path("nolat.txt"), "--out", self.path("x.svg"))
        self.assertEqual(rc, 1)
        self.assertFalse(os.path.exists(self.path("x.svg")))


if __name__ == "__main__":
    unittest.main()
