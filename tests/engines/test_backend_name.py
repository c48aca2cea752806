#!/usr/bin/python3
"""sut-node --backend NAME finds libsut_backend_NAME.so, from the build tree and from an install.

A fake OpenAI-compatible engine (vLLM dialect, Python standard library only) streams TOKENS
tokens per completion. Each case starts sut-node with `--backend openai --backend-opt url=...`
(or as said), runs an Offline accuracy test of SAMPLES samples through it with loadgen-node, and
asserts every sample came back with exactly the engine's tokens and that the node's log names
the plugin file it loaded:

  - from the build tree: `openai` loads <build>/sut-node/backends/openai/libsut_backend_openai.so;
  - its path still works;
  - SUT_NODE_BACKEND_PATH: a copy of the plugin as libsut_backend_fwd.so in a folder of the
    variable is found by `--backend fwd`, and --list-backends lists it first;
  - from `cmake --install BUILD --prefix TMP --component daemon`: TMP/bin/sut-node loads
    TMP/lib/sut-node/libsut_backend_openai.so;
  - a wrong name (build tree and install) exits 2 with the message that names the folders
    searched and the plugins found there.

    test_backend_name.py SUT_NODE LOADGEN_NODE CMAKE BUILD_DIR"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import enginetest as et  # noqa: E402

TOKENS = 3
SAMPLES = 8


class Engine:
    """Answers every completion with tokens 7, 8, 9 in vLLM's stream shape; counts requests."""

    def __init__(self):
        self.requests = 0
        self.mu = threading.Lock()
        self.srv = et.http_engine(self.post)
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}"

    def post(self, h, _body):
        with self.mu:
            self.requests += 1
        body = b""
        for k in range(TOKENS):
            fin = "length" if k == TOKENS - 1 else None
            ev = {"choices": [{"index": 0, "text": "t", "token_ids": [7 + k],
                               "finish_reason": fin}]}
            body += b"data: " + json.dumps(ev).encode() + b"\n\n"
        body += b"data: [DONE]\n\n"
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def run_case(tag, sut, lg, backend, want_plugin, eng, tmp, env=None):
    """One node with |backend|, one accuracy run through it; the node must have loaded
    |want_plugin| and answered every sample with the engine's tokens."""
    procs = et.Procs()
    saved = dict(os.environ)
    if env:
        os.environ.update(env)
    try:
        node, addr, nlog = et.start_node(procs, sut, tmp, tag, backend,
                                         {"url": eng.url, "max_tokens": TOKENS},
                                         ["--max-batch", "4"])
    finally:
        os.environ.clear()
        os.environ.update(saved)
    try:
        before = eng.requests
        out = os.path.join(tmp, tag + "-out")
        r = subprocess.run([lg, "--scenario", "Offline", "--mode", "AccuracyOnly", "--model",
                            "llama2-70b", "--qsl-synthetic", str(SAMPLES), "--sample-size", "16",
                            "--nodes", addr, "--output-dir", out, "--quiet", "--progress", "off",
                            "--log-level", "warn", "--drain-timeout-ms", "30000"],
                           capture_output=True, text=True, timeout=120)
        rc, text = r.returncode, r.stdout + r.stderr
        log = open(nlog).read()
        if rc != 0:
            sys.exit(f"FAIL {tag}: loadgen-node exit {rc}:\n{text[-2000:]}\nnode log:\n"
                     f"{log[-2000:]}")
        want_log = f"backend {backend}: plugin {want_plugin}"
        if os.sep not in backend and want_log not in log:
            sys.exit(f"FAIL {tag}: the node's log does not say '{want_log}':\n{log[-2000:]}")
        acc = et.accuracy_log(out)
        bad = [a for a in acc if a["data"].lower() != want_tokens_hex()]
        if len(acc) < SAMPLES or bad or eng.requests - before != len(acc):
            sys.exit(f"FAIL {tag}: {len(acc)} samples in the accuracy log ({SAMPLES} at least), "
                     f"{len(bad)} with other data than the engine's tokens ({bad[:2]}), "
                     f"{eng.requests - before} requests to the engine")
        if procs.stop(node, timeout=30) != 0:
            sys.exit(f"FAIL {tag}: sut-node did not exit 0 on SIGTERM:\n{log[-2000:]}")
        print(f"ok {tag}: --backend {backend} loaded {want_plugin}; {len(acc)} samples with "
              f"the engine's {TOKENS} tokens")
    finally:
        procs.stop_all()


def want_tokens_hex():
    """The engine's tokens as the accuracy log writes a response: int32 little endian, hex."""
    return b"".join((7 + k).to_bytes(4, "little") for k in range(TOKENS)).hex()


def wrong_name(tag, sut, folders, found):
    """--backend openaj: exit 2, naming the folders searched and the plugins found."""
    r = subprocess.run([sut, "--listen", "127.0.0.1:0", "--backend", "openaj"],
                       capture_output=True, text=True, timeout=30)
    msg = r.stdout + r.stderr
    want = [f"unknown backend 'openaj': not built in (", "and no libsut_backend_openaj.so in "
            + ", ".join(folders), "(plugins found there: "]
    if r.returncode != 2 or any(w not in msg for w in want) or any(
            f not in msg.split("plugins found there:")[-1] for f in found):
        sys.exit(f"FAIL {tag}: exit {r.returncode} (want 2), message lacks one of {want} or "
                 f"the plugins {found}:\n{msg}")
    print(f"ok {tag}: a wrong name exits 2: {msg.strip().split('ERROR: ')[-1]}")


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    sut, lg, cmake, build = sys.argv[1:]
    build = os.path.realpath(build)
    tmp = tempfile.mkdtemp(prefix="backendname-")
    eng = Engine()
    try:
        built = os.path.join(build, "sut-node", "backends")
        plugin = os.path.join(built, "openai", "libsut_backend_openai.so")
        run_case("build-name", sut, lg, "openai", plugin, eng, tmp)
        run_case("build-path", sut, lg, plugin, plugin, eng, tmp)
        wrong_name("build-wrong", sut, [built], ["openai"])

        extra = os.path.join(tmp, "plugins")
        os.mkdir(extra)
        shutil.copy(plugin, os.path.join(extra, "libsut_backend_fwd.so"))
        run_case("env-path", sut, lg, "fwd", os.path.join(extra, "libsut_backend_fwd.so"),
                 eng, tmp, {"SUT_NODE_BACKEND_PATH": "/nonexistent-folder:" + extra})
        r = subprocess.run([sut, "--list-backends"], capture_output=True, text=True,
                           timeout=30, env=dict(os.environ, SUT_NODE_BACKEND_PATH=extra))
        lines = r.stdout.splitlines()
        folders = lines[lines.index(next(l for l in lines if l.startswith("Plugin folders"))) + 1:]
        if (r.returncode != 0 or not lines[0].startswith("Backends built in: null, digest, sim")
                or not any(l.split() == ["fwd", os.path.join(extra, "libsut_backend_fwd.so")]
                           for l in lines)
                or not any(l.split() == ["openai", plugin] for l in lines)
                or [f.strip() for f in folders] != [extra, built]):
            sys.exit(f"FAIL list: --list-backends exit {r.returncode}:\n{r.stdout}{r.stderr}")
        print(f"ok list: --list-backends names fwd and openai, folders {extra}, {built}")

        prefix = os.path.join(tmp, "inst")
        r = subprocess.run([cmake, "--install", build, "--prefix", prefix, "--component",
                            "daemon"], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            sys.exit(f"FAIL install: cmake --install exit {r.returncode}:\n{r.stdout}{r.stderr}")
        isut = os.path.join(prefix, "bin", "sut-node")
        idir = os.path.join(prefix, "lib", "sut-node")
        run_case("install-name", isut, lg, "openai",
                 os.path.join(idir, "libsut_backend_openai.so"), eng, tmp)
        wrong_name("install-wrong", isut, [idir], ["openai"])
    finally:
        eng.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
