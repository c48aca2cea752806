"""B9: 3D-UNet (KiTS19) Offline through the emulated fabric (deploy/netns/fabric.sh) at 10 and
25 Gbit/s per link, with and without LZ4 both ways (the rules approve it for 3D-UNet).

Synthetic cases in the reference pre-processing's format (loadgen-node/tools/kits_synth.py,
converted by kits_pickle_to_qsl.py) go from loadgen-node --qsl-kits in the fabric's LoadGen
namespace to one sut-node in a SUT namespace running the sliding window over the unet-sim backend
(answers the ground truth, at the cost of a real argmax and Gaussian accumulation, not of a
network). Per rate and codec, three Offline performance runs alternate none/lz4 in one fabric so
both see the same machine. Each row gives the samples/s against the link-limited rate of that
run's bytes (link rate / bytes the LoadGen host sends per case: the samples go one way, the
uint8 labels back the other, each direction with its own rate), plus sub-rows with the bytes on
the wire per case and the compression ratio. The same fabric without a rate limit gives the rows
B9n0/B9z0: what the node's CPU (the sliding window) allows on this host. Needs root, iproute2
and tc (skipped otherwise).

Apart from the node's compute: B9hn10/B9hz10 run the same cases at 10 Gbit/s to a node with the
cost-free null backend answering as many zero bytes per case as the labels have (no window), so
they measure the harness and the fabric alone; B9w runs the window's arithmetic alone, in process
(bench/slidebench: over a cost-free backend, then over unet-sim), in MB/s of float32 against the
10 Gbit/s link's 1250 MB/s. Each fabric row also gives sut-node's peak RSS (VmHWM) over its runs,
its RSS before the first, and the difference per in-flight case (the node lets each client keep
MAX_INFLIGHT cases in flight).
"""
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
FABRIC = os.path.join(SRC, "deploy", "netns", "fabric.sh")
TOOLS = os.path.join(SRC, "loadgen-node", "tools")
PY = "/usr/bin/python3"  # Debian's, with python3-numpy (deploy/install-deps.sh)
# (fabric.sh --rate, bits/s, row tag); "none": the same namespaces and bridge without a rate
# limit, the ceiling of the node's CPU (the sliding window) on this host.
# The last two, "h": the harness alone (null backend, no window), without a limit and at 10 Gbit/s.
RATES = (("none", None, "0"), ("10gbit", 10e9, "10"), ("25gbit", 25e9, "25"),
         ("none", None, "h0"), ("10gbit", 10e9, "h10"))
PATCH = 32
MAX_INFLIGHT = 8
LINK_MBS = 10e9 / 8 / 1e6


def make_cases(tmp, quick):
    """The QSL folder of 3 synthetic cases, smaller with --quick."""
    shape = "48x80x80" if quick else "96x128x128"
    pre, qsl = os.path.join(tmp, "b9-pre"), os.path.join(tmp, "b9-qsl")
    for cmd in ([PY, os.path.join(TOOLS, "kits_synth.py"), "--out-dir", pre, "--cases", "3",
                 "--shape", shape, "--roi", str(PATCH), "--seed", "5"],
                [PY, os.path.join(TOOLS, "kits_pickle_to_qsl.py"), "--preprocessed-dir", pre,
                 "--out-dir", qsl]):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError(f"{os.path.basename(cmd[1])} exited {r.returncode}: "
                               f"{r.stderr.strip()[-300:]}")
    return qsl


# sut-node's RSS and peak RSS in the SUT namespace (kB), appended to $1.
RSS_SH = ('for p in $(ip netns pids "$FABRIC_SUT_NS"); do [ "$(cat /proc/$p/comm 2>/dev/null)" = '
          'sut-node ] && grep -E "^Vm(RSS|HWM)" /proc/$p/status >>"$1"; done; true')


def inner_script(env, qsl, res, qps, dur_ms):
    """The loop run inside the LoadGen namespace: runs x (none, lz4) Offline performance runs
    (|qps|: offline_expected_qps per codec), with sut-node's RSS before the first and its peak
    after the last."""
    rss = os.path.join(res, "rss")
    lines = ["set -u", "rss() { " + RSS_SH.replace('"$1"', shlex.quote(rss) + '-"$1"') + "; }",
             "rss before"]
    for r in range(1, env.runs + 1):
        for codec in ("none", "lz4"):
            out = os.path.join(res, f"{codec}-{r}")
            cmd = [env.lg, "--scenario", "Offline", "--model", "3d-unet", "--mode",
                   "PerformanceOnly", "--qsl-kits", qsl, "--compress", codec,
                   "--set", f"min_duration_ms={dur_ms}", "--set", f"offline_expected_qps={qps[codec]}",
                   "--set", "min_query_count=1", "--progress-timeout-ms", "120000",
                   "--output-dir", out, "--quiet", "--progress", "off", "--log-level", "warn"]
            if codec == "lz4":
                cmd += ["--result-codec", "lz4"]
            lines.append(f"mkdir -p {shlex.quote(out)}")
            lines.append(shlex.join(cmd) + ' --nodes "$FABRIC_NODES" 2>' +
                         shlex.quote(os.path.join(out, "stderr.log")) +
                         ' || [ $? -eq 1 ] || exit 3')
    lines.append("rss after")
    return "\n".join(lines) + "\n"


def read_rss(res):
    """(RSS before the runs, peak RSS after them) of sut-node in bytes, or (None, None)."""
    got = {}
    for when in ("before", "after"):
        try:
            with open(os.path.join(res, f"rss-{when}")) as f:
                for line in f:
                    k, v = line.split(":", 1)
                    got[(when, k)] = int(v.split()[0]) * 1024
        except (OSError, ValueError):
            pass
    return got.get(("before", "VmRSS")), got.get(("after", "VmHWM"))


def voxels_per_case(qsl):
    """Mean voxels of the QSL's cases (the labels' bytes), from the .npy headers."""
    sizes = []
    for name in sorted(os.listdir(qsl)):
        if name.endswith(".npy"):
            with open(os.path.join(qsl, name), "rb") as f:
                head = f.read(256).decode("latin1")
            m = re.search(r"'shape': \(([0-9, ]+)\)", head)
            if m:
                n = 1
                for d in m.group(1).split(","):
                    n *= int(d) if d.strip() else 1
                sizes.append(n)
    if not sizes:
        raise RuntimeError(f"{qsl}: no .npy case with a shape")
    return int(statistics.mean(sizes))


def b9_window_alone(env, t):
    """B9w: bench/slidebench, the window's arithmetic in process over a cost-free backend and
    over unet-sim, on B9's case shape, against the 10 Gbit/s link in MB/s."""
    exe = os.path.join(env.build, "bench", "slidebench")
    shape = "48x80x80" if env.quick else "96x128x128"
    for backend, tag in (("free", "B9wf"), ("unet-sim", "B9wu")):
        vals = []
        for _ in range(env.runs):
            r = subprocess.run([exe, "--backend", backend, "--patch", str(PATCH), "--shape", shape,
                                "--cases", "3", "--window-batch", "8", "--runs", "3"],
                               capture_output=True, text=True, timeout=300)
            m = re.search(r": ([0-9.]+) MB/s", r.stdout)
            if r.returncode != 0 or not m:
                env.errors.append(f"B9w: slidebench --backend {backend} exited {r.returncode}: "
                                  f"{r.stderr.strip()[-200:]}")
                return
            vals.append(float(m.group(1)))
        t.add(tag, f"3D-UNet window arithmetic alone, {backend} backend below (in process)",
              "MB/s", vals, ref=LINK_MBS, ref_what="10 Gbit/s link",
              note="float32 case bytes taken in")


def one_run(base):
    """(samples/s, bytes out per case, bytes back per case) of one loadgen-node run."""
    with open(os.path.join(base, "mlperf_log_summary.txt")) as f:
        m = re.search(r"Samples per second: *([0-9.e+]+)", f.read())
    with open(os.path.join(base, "mlperf_log_nodes.json")) as f:
        nodes = json.load(f)["nodes"]
    done = sum(n["samples_completed"] for n in nodes)
    if not m or not done:
        raise RuntimeError(f"{base}: no samples/s or no completed sample")
    return (float(m.group(1)), sum(n["bytes_out"] for n in nodes) / done,
            sum(n["bytes_in"] for n in nodes) / done)


def b9_unet_fabric(env, t):
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("tc"):
        print("B9: skipped (needs root, iproute2 and tc for network namespaces)")
        return
    tmp = tempfile.mkdtemp(dir=env.tmp, prefix="b9.")
    try:
        qsl = make_cases(tmp, env.quick)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        env.errors.append(f"B9: cannot make the synthetic cases: {e}")
        return
    qps = 20 if env.quick else 40
    dur = env.dur(3000, 500)
    b9_window_alone(env, t)
    # The harness alone may reach the link's limit: ask for that much (LZ4: 2.2x smaller cases),
    # so that the run is not over before its start and its tail stop mattering.
    link_qps = int(10e9 / 8 / (4 * voxels_per_case(qsl)))
    harness_qps = {"none": link_qps, "lz4": int(2.2 * link_qps)}
    for label, bps, tag in RATES:
        res = os.path.join(tmp, label + tag)
        os.makedirs(res)
        script = os.path.join(tmp, f"inner-{label}{tag}.sh")
        with open(script, "w") as f:
            f.write(inner_script(env, qsl, res, harness_qps if tag.startswith("h") else
                                 {"none": qps, "lz4": qps}, dur))
        if tag.startswith("h"):  # the harness alone: labels' worth of zeros, no window
            sut_args = (f"--backend null --backend-opt output_size={voxels_per_case(qsl)} "
                        f"--result-codec lz4 --max-frame 64M --log-level warn")
        else:
            sut_args = (f"--backend unet-sim --sliding-window {PATCH} --window-batch 8 "
                        "--result-codec lz4 --max-frame 64M --log-level warn")
        sut_args += f" --max-inflight {MAX_INFLIGHT}"
        cmd = [FABRIC, "--quiet", "--suts", "1", "--rate", label, "--sut-node", env.sut,
               "--sut-args", sut_args, "--timeout", "900", "--", "bash", script]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=960)
        if r.returncode != 0:
            why = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
            env.errors.append(f"B9: {label}: fabric.sh or loadgen-node failed: {why}")
            continue
        try:
            runs = {c: [one_run(os.path.join(res, f"{c}-{i}")) for i in range(1, env.runs + 1)]
                    for c in ("none", "lz4")}
        except (OSError, ValueError, KeyError, RuntimeError) as e:
            env.errors.append(f"B9: {label}: {e}")
            continue
        raw_out = statistics.median(x[1] for x in runs["none"])
        raw_in = statistics.median(x[2] for x in runs["none"])
        for codec in ("none", "lz4"):
            sps = [x[0] for x in runs[codec]]
            out = statistics.median(x[1] for x in runs[codec])
            back = statistics.median(x[2] for x in runs[codec])
            # samples/s the LoadGen host's link carries at these bytes
            limit = bps / 8 / out if bps else None
            where = f"{tag.lstrip('h')} Gbit/s netns" if bps else "netns, no rate limit"
            if tag.startswith("h"):
                where += ", harness alone (null backend)"
            key = f"B9{'h' if tag.startswith('h') else ''}{'n' if codec == 'none' else 'z'}"
            t.add(key + tag.lstrip("h"), f"3D-UNet Offline, {where}, {codec}",
                  "samples/s", sps, ref=limit, ref_what="link-limited rate" if bps else "",
                  note="" if not bps else ">= 0.9x link limit" if codec == "none"
                  else "above the none row by the ratio")
            t.add("", "  bytes on the wire per case, out (to node)", "bytes",
                  [x[1] for x in runs[codec]], ref=raw_out if codec == "lz4" else None,
                  ref_what="none")
            t.add("", "  bytes on the wire per case, back (labels)", "bytes",
                  [x[2] for x in runs[codec]], ref=raw_in if codec == "lz4" else None,
                  ref_what="none")
            if codec == "lz4":
                t.add("", "  compression ratio out / back", "x", [raw_out / out],
                      note=f"back {raw_in / back:.1f}x")
        before, peak = read_rss(res)
        if before and peak:
            t.add("", "  sut-node peak RSS (VmHWM) over these runs", "MB", [peak / 1e6],
                  note=f"before the first run {before / 1e6:.1f} MB; "
                  f"{(peak - before) / MAX_INFLIGHT / 1e6:.1f} MB per in-flight case "
                  f"({MAX_INFLIGHT} in flight at most)")
