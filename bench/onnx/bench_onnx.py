#!/usr/bin/python3
"""Samples/s of the onnx backend (oneDNN) against PyTorch CPU, same model, same threads.

    bench_onnx.py [--bench-bin build/bench/onnx/onnx_bench] [--models fmnist,resnet50]
                  [--batch 1,64] [--threads 2] [--runs 5] [--seconds 2] [--torch eager,jit]
    bench_onnx.py --device cuda[:N] [--gpu-opts streams=2,tf32=0] [--models ...] [--batch 1,64]

With --device cuda the comparison is on the GPU: the backend's CUDA engine (device=cuda, through
the ABI with one worker thread per stream, as sut-node runs it), its CPU engine (oneDNN, --threads)
and PyTorch on the same GPU (eager NCHW and channels_last, cudnn.benchmark on, TF32 as the
engine's tf32 option; each timed call copies the batch from pinned host memory and the results
back, as a SUT must). Without a usable GPU, or with a PyTorch built without CUDA, it says so
for each side, and skips the GPU figures (exit status 0).

Models:
  fmnist    the committed sut-node/backends/onnx/models/fashion_mnist_cnn.onnx; PyTorch runs
            the training script's FashionCNN with the weights read back from that file.
  resnet50  torchvision's resnet50 architecture with random weights (seeded), exported here to
            ONNX (opset 13, symbolic batch) in a temporary folder that is deleted afterwards.

PyTorch modes (all model.eval() under torch.inference_mode()):
  eager     the model as most harnesses run it (NCHW tensors)
  eager_cl  the same in channels_last memory format (model and input)
  jit       torch.jit.trace + freeze + optimize_for_inference (folds BatchNorm, prepacks weights
            for oneDNN)
  jit_cl    jit on the channels_last model and input: PyTorch's fastest CPU path without extra
            packages
The table gives the ratio to eager and to the best PyTorch mode of each row.

On a shared machine, --quiet-wait S makes each run wait (up to S seconds) until the CPUs have been
idle for a second, and --retries N repeats a run (up to N times) while other processes took more
than 10 % of the CPUs during it; the report counts both. Each figure is the median of --runs timed runs of at least --seconds each, each after a warm-up,
the contenders taking turns run by run; onnx_bench drives the backend through the plugin ABI
exactly as sut-node does (a fresh process per run, so its plans are built each time too, outside
the timed part). Prints a table
with the ratios onnx / PyTorch; the machine's load average is printed before and after, since
other processes on a small machine distort both sides.
"""
import argparse
import copy
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

try:  # the GPU comparison runs without PyTorch (the engines alone); the CPU one needs it
    import numpy as np  # noqa: F401 (onnx.numpy_helper needs it)
    import torch
    TORCH_MISSING = None
except ImportError as e:
    torch = None
    TORCH_MISSING = str(e)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MODELS = os.path.join(ROOT, "sut-node", "backends", "onnx", "models")
FMNIST_ONNX = os.path.join(MODELS, "fashion_mnist_cnn.onnx")


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def cpu_idle(interval):
    """Fraction of all CPUs idle over |interval| seconds (/proc/stat)."""
    def sample():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        return sum(v), v[3] + v[4]
    t1, i1 = sample()
    time.sleep(interval)
    t2, i2 = sample()
    return (i2 - i1) / max(1, t2 - t1)


class Foreign:
    """Measures how much CPU other processes used while the block ran, as a fraction of all
    CPUs over its wall time: the block's own CPU time (this process and its children) is
    subtracted from the machine's busy time in /proc/stat."""

    @staticmethod
    def _busy():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _own():
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def __enter__(self):
        self.t0, self.busy0, self.own0 = time.time(), self._busy(), self._own()
        return self

    def __exit__(self, *exc):
        wall = time.time() - self.t0
        other = (self._busy() - self.busy0) - (self._own() - self.own0)
        self.fraction = max(0.0, other) / max(1e-9, wall * os.cpu_count())
        return False


def wait_quiet(limit):
    """On a shared machine: wait up to |limit| s for the CPUs to be >= 90 % idle over 1 s."""
    deadline = time.time() + limit
    while limit > 0 and time.time() < deadline:
        if cpu_idle(1.0) >= 0.9:
            return True
    return limit <= 0


def fmnist_torch():
    """FashionCNN with the committed model's weights (the export keeps the state_dict names)."""
    import onnx
    from onnx import numpy_helper
    sys.path.insert(0, MODELS)
    from train_fashion_mnist import FashionCNN
    m = onnx.load(FMNIST_ONNX)
    state = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy())
             for t in m.graph.initializer}
    net = FashionCNN()
    missing, unexpected = net.load_state_dict(state, strict=False)
    if missing:
        sys.exit(f"{FMNIST_ONNX}: no weights for {missing}")
    return net.eval(), lambda b: torch.randint(0, 256, (b, 1, 28, 28), dtype=torch.uint8)


def resnet50_torch():
    import torchvision
    torch.manual_seed(0)
    net = torchvision.models.resnet50(weights=None).eval()
    return net, lambda b: torch.randn(b, 3, 224, 224)


def export_resnet50(net, path):
    torch.onnx.export(net, torch.randn(1, 3, 224, 224), path, opset_version=13,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})


def time_torch(fn, x, runs, seconds, warmup):
    """Median samples/s of |runs| timed runs of |fn| on the batch |x|, and all the rates."""
    rates = []
    with torch.inference_mode():
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < warmup:
            fn(x)
        for _ in range(runs):
            n = 0
            t0 = time.perf_counter()
            while True:
                fn(x)
                n += x.shape[0]
                t1 = time.perf_counter()
                if t1 - t0 >= seconds:
                    break
            rates.append(n / (t1 - t0))
    return statistics.median(rates), rates


def channels_last(x):
    return x.to(memory_format=torch.channels_last) if x.dim() == 4 else x


def torch_variant(net, mode, example):
    """(callable, input) for one PyTorch mode; the model is copied, never changed."""
    if mode.endswith("_cl"):
        net = copy.deepcopy(net).to(memory_format=torch.channels_last)
        example = channels_last(example)
    if mode.startswith("eager"):
        return net, example
    with torch.no_grad():
        traced = torch.jit.trace(net, example)
        frozen = torch.jit.freeze(traced)
        return torch.jit.optimize_for_inference(frozen), example


def run_onnx(binary, model, batches, threads, runs, seconds, warmup):
    cmd = [binary, "--model", model, "--batch", ",".join(map(str, batches)),
           "--threads", str(threads), "--runs", str(runs), "--seconds", str(seconds),
           "--warmup", str(warmup)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    device = next((l[7:] for l in out.splitlines() if l.startswith("device ")), "?")
    rates = {int(b): float(r) for b, r in
             re.findall(r"^RESULT batch=(\d+) samples_per_s=([\d.]+)", out, re.M)}
    return rates, device, out


def torch_cuda_reason():
    """None when PyTorch can use a GPU, else why not."""
    if torch is None:
        return f"PyTorch is not installed ({TORCH_MISSING})"
    if torch.version.cuda is None:
        return f"this PyTorch ({torch.__version__}) is a CPU-only build"
    if not torch.cuda.is_available():
        return (f"torch.cuda.is_available() is False (PyTorch {torch.__version__} built for CUDA "
                f"{torch.version.cuda}: no GPU or no driver)")
    return None


def time_torch_cuda(fn, x_host, runs, seconds, warmup):
    """Median samples/s on the GPU, host to host: pinned input copied in, results copied out."""
    dev = torch.device("cuda")
    rates = []
    with torch.inference_mode():
        def once():
            return fn(x_host.to(dev, non_blocking=True)).to("cpu")
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < warmup:
            once()
        torch.cuda.synchronize()
        for _ in range(runs):
            n = 0
            t0 = time.perf_counter()
            while True:
                once()
                n += x_host.shape[0]
                t1 = time.perf_counter()
                if t1 - t0 >= seconds:
                    break
            torch.cuda.synchronize()
            rates.append(n / (time.perf_counter() - t0))
    return statistics.median(rates), rates


def run_onnx_dev(binary, model, batch, device, opts, threads, seconds, warmup):
    """One onnx_bench run on |device|; (rate, device line, None) or (None, None, why skipped)."""
    cmd = [binary, "--model", model, "--batch", str(batch), "--device", device, "--runs", "1",
           "--seconds", str(seconds), "--warmup", str(warmup)]
    if device == "cpu":
        cmd += ["--threads", str(threads)]
    for o in opts:
        cmd += ["--opt", o]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode == 77:
        return None, None, r.stdout.strip().split(": ", 1)[-1]
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    line = next((l[7:] for l in r.stdout.splitlines() if l.startswith("device ")), "?")
    m = re.search(r"^RESULT batch=\d+ samples_per_s=([\d.]+)", r.stdout, re.M)
    return float(m.group(1)), line, None


def main_gpu(args):
    """--device cuda: the CUDA engine against the CPU engine and PyTorch on the same GPU."""
    batches = [int(b) for b in args.batch.split(",")]
    opts = [o for o in args.gpu_opts.split(",") if o]
    tf32 = any(o.replace(" ", "") == "tf32=1" for o in opts)
    why_torch = torch_cuda_reason()
    if torch is not None:
        torch.set_num_threads(args.threads)
    print(f"machine: {cpu_name()}, {os.cpu_count()} CPUs; "
          f"torch {torch.__version__ if torch else 'not installed'}")
    # A first short run says whether the engine can use the device at all.
    _, line, why_engine = run_onnx_dev(args.bench_bin, FMNIST_ONNX, 1, args.device, opts,
                                       args.threads, 0.05, 0.0)
    if why_engine:
        print(f"GPU engine: skipped: {why_engine}")
    else:
        print(f"GPU engine: {line}")
    if why_torch:
        print(f"PyTorch on the GPU: skipped: {why_torch}")
    if why_engine and why_torch:
        print("SKIP: no GPU to measure on this machine; nothing was timed (see deploy/gpu/README.md)")
        return
    modes = [] if why_torch else ["cuda_eager", "cuda_eager_cl"]
    if not why_torch:
        torch.backends.cudnn.benchmark = True
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        print(f"PyTorch on the GPU: {torch.cuda.get_device_name(0)}, CUDA {torch.version.cuda}, "
              f"cuDNN {torch.backends.cudnn.version()}, TF32 {'on' if tf32 else 'off'}")
    tmp = tempfile.mkdtemp(prefix="bench_onnx_")
    rows = []
    try:
        for name in args.models.split(","):
            if name == "fmnist":
                net, make_input = fmnist_torch() if torch else (None, None)
                path = FMNIST_ONNX
            elif name == "resnet50":
                path = os.path.join(tmp, "resnet50.onnx")
                if torch:
                    net, make_input = resnet50_torch()
                    export_resnet50(net, path)
                else:
                    # the same architecture, written without PyTorch
                    gen = os.path.join(os.path.dirname(args.bench_bin), "resnet50_onnx")
                    subprocess.run([gen, path], check=True, stdout=subprocess.DEVNULL)
                    net, make_input = None, None
            else:
                sys.exit(f"unknown model {name}")
            nets = {}
            if modes:
                gnet = copy.deepcopy(net).to("cuda")
                nets = {"cuda_eager": gnet,
                        "cuda_eager_cl": copy.deepcopy(gnet).to(memory_format=torch.channels_last)}
            for b in batches:
                x = make_input(b) if make_input else None
                rates = {k: [] for k in ["gpu", "cpu"] + modes}
                for _ in range(args.runs):
                    if not why_engine:
                        r, _, _ = run_onnx_dev(args.bench_bin, path, b, args.device, opts,
                                               args.threads, args.seconds, args.warmup)
                        rates["gpu"].append(r)
                    r, _, _ = run_onnx_dev(args.bench_bin, path, b, "cpu", [], args.threads,
                                           args.seconds, args.warmup)
                    rates["cpu"].append(r)
                    for mode in modes:
                        xm = channels_last(x) if mode.endswith("_cl") else x
                        rates[mode].append(time_torch_cuda(nets[mode], xm.pin_memory(), 1,
                                                           args.seconds, args.warmup)[0])
                row = {"model": name, "batch": b}
                for k, v in rates.items():
                    row[k] = statistics.median(v) if v else None
                rows.append(row)
                print(f"  {name} batch {b}: " + ", ".join(
                    f"{k} {row[k]:.1f}/s" for k in rates if row[k] is not None), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def cell(v):
        return f"{v:.1f}" if v is not None else "skipped"
    print("\n| model | batch | GPU engine | CPU engine |" + "".join(f" torch {m} |" for m in modes) +
          " GPU / CPU engine |" + (" GPU / best torch |" if modes else ""))
    print("|---|---:|---:|---:|" + "---:|" * len(modes) + "---:|" + ("---:|" if modes else ""))
    for r in rows:
        line = f"| {r['model']} | {r['batch']} | {cell(r['gpu'])} | {cell(r['cpu'])} |"
        line += "".join(f" {cell(r[m])} |" for m in modes)
        line += f" {r['gpu'] / r['cpu']:.2f}x |" if r["gpu"] else " - |"
        if modes:
            best = max(modes, key=lambda m: r[m])
            line += f" {r['gpu'] / r[best]:.2f}x ({best}) |" if r["gpu"] else " - |"
        print(line)
    print(f"(samples/s, median of {args.runs} runs; the CPU engine on {args.threads} threads)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench-bin", default=os.path.join(ROOT, "build", "bench", "onnx",
                                                        "onnx_bench"))
    ap.add_argument("--models", default="fmnist,resnet50")
    ap.add_argument("--batch", default="1,64")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--torch", default="eager,eager_cl,jit,jit_cl",
                    help="PyTorch modes to measure")
    ap.add_argument("--quiet-wait", type=float, default=0.0,
                    help="before each run, wait up to this many seconds for idle CPUs")
    ap.add_argument("--retries", type=int, default=0,
                    help="repeat a run up to this many times while other processes took more "
                         "than 10%% of the CPUs during it")
    ap.add_argument("--verbose", action="store_true", help="print every run")
    ap.add_argument("--device", default="cpu",
                    help="cpu (the oneDNN engine against PyTorch CPU) or cuda[:N] (the CUDA "
                         "engine against the CPU engine and PyTorch on the same GPU)")
    ap.add_argument("--gpu-opts", default="",
                    help="with --device cuda: backend options for the CUDA engine, comma-separated "
                         "(streams=2,tf32=1,conv_algo=heuristic)")
    args = ap.parse_args()
    if args.runs < 3:
        sys.exit("--runs must be at least 3 (the figures are medians)")
    if not os.access(args.bench_bin, os.X_OK):
        sys.exit(f"{args.bench_bin} is not built (cmake --build build --target onnx_bench)")
    if args.device != "cpu":
        return main_gpu(args)
    if torch is None:
        sys.exit(f"the CPU comparison needs PyTorch: {TORCH_MISSING}")
    batches = [int(b) for b in args.batch.split(",")]
    modes = [m for m in args.torch.split(",") if m]
    torch.set_num_threads(args.threads)

    print(f"machine: {cpu_name()}, {os.cpu_count()} CPUs, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"threads {args.threads}, median of {args.runs} runs of >= {args.seconds} s; "
          f"torch {torch.__version__}")
    tmp = tempfile.mkdtemp(prefix="bench_onnx_")
    rows = []
    device = "?"
    noisy = retried = 0
    try:
        for name in args.models.split(","):
            if name == "fmnist":
                net, make_input = fmnist_torch()
                path = FMNIST_ONNX
            elif name == "resnet50":
                net, make_input = resnet50_torch()
                path = os.path.join(tmp, "resnet50.onnx")
                export_resnet50(net, path)
            else:
                sys.exit(f"unknown model {name}")
            for b in batches:
                x = make_input(b)
                fns = {mode: torch_variant(net, mode, x) for mode in modes}
                rates = {k: [] for k in ["onnx"] + modes}
                # One run of each contender in turn, so that load from other processes falls on
                # all of them alike.
                def onnx_run():
                    nonlocal device
                    r, device, _ = run_onnx(args.bench_bin, path, [b], args.threads, 1,
                                            args.seconds, args.warmup)
                    return r[b]

                def measured(run):
                    """A run, repeated while other processes disturbed it (--retries)."""
                    nonlocal noisy, retried
                    for attempt in range(args.retries + 1):
                        wait_quiet(args.quiet_wait)
                        with Foreign() as f:
                            rate = run()
                        if f.fraction <= 0.1:
                            return rate
                        retried += attempt < args.retries
                    noisy += 1
                    return rate

                for _ in range(args.runs):
                    rates["onnx"].append(measured(onnx_run))
                    for mode in modes:
                        fn, xm = fns[mode]
                        rates[mode].append(measured(
                            lambda: time_torch(fn, xm, 1, args.seconds, args.warmup)[0]))
                row = {"model": name, "batch": b}
                for k, v in rates.items():
                    row[k] = statistics.median(v)
                    if args.verbose:
                        print(f"    {k} {name} batch {b}: {' '.join(f'{r:.1f}' for r in v)}")
                rows.append(row)
                print(f"  {name} batch {b}: onnx {row['onnx']:.1f}/s, " +
                      ", ".join(f"torch {m} {row[m]:.1f}/s" for m in modes), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"\nonnx backend: {device}")
    head = "| model | batch | onnx |" + "".join(f" torch {m} |" for m in modes)
    head += " onnx / eager | onnx / best torch |" if "eager" in modes else " onnx / best torch |"
    print(head)
    print("|---|---:|---:|" + "---:|" * len(modes) + ("---:|---:|" if "eager" in modes else
                                                         "---:|"))
    for r in rows:
        best = max(modes, key=lambda m: r[m])
        line = f"| {r['model']} | {r['batch']} | {r['onnx']:.1f} |"
        line += "".join(f" {r[m]:.1f} |" for m in modes)
        if "eager" in modes:
            line += f" {r['onnx'] / r['eager']:.2f}x |"
        line += f" {r['onnx'] / r[best]:.2f}x ({best}) |"
        print(line)
    print("(samples/s, median of the runs)")
    print(f"{retried} runs repeated, {noisy} kept although other processes took more than 10% "
          f"of the CPUs during them")
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
