#!/usr/bin/python3
"""A real third-party engine: llama.cpp's llama-server as Debian packages it (deploy/llama-server.sh
fetches and unpacks it), on a tiny Llama-architecture GGUF written here (make_gguf.py) whose
vocabulary has the 256 byte-fallback tokens, behind sut-node --backend openai dialect=llamacpp,
with loadgen-node in accuracy mode over a token QSL made here.

0. The contrast, a GGUF without byte tokens: llama-server streams every ID, and streaming through
   the harness (Offline and Server) equals the engine's own output asked directly.
1. The engine asked directly, streaming, loses token IDs: for some samples its events carry fewer
   IDs than its own tokens_predicted (tokens held back as incomplete UTF-8). Asserted, so the
   vocabulary is known to exercise the case.
2. oneshot=1 (Offline and Server): every sample's token IDs through loadgen-node -> QDL ->
   sut-node -> llama-server equal the engine's own greedy output asked directly (one response,
   return_tokens, temperature 0, fixed seed), their count equals the engine's tokens_predicted,
   each sample exactly once.
3. Streaming (the default): every sample that lost IDs fails; sut-node logs for each `the engine
   counted N output tokens (tokens_predicted) but sent M token IDs`, with the same (N, M) pairs
   the direct stream showed; loadgen-node exits non-zero; the samples that lost nothing reach the
   accuracy log equal to the engine's output. Never silently short.
4. oneshot=1 with another dialect stops sut-node, naming the option.

    test_llamacpp.py SUT_NODE LOADGEN_NODE OPENAI_PLUGIN SOURCE_DIR

Exits 77 only when llama-server cannot be obtained (deploy/llama-server.sh exits 3: no network or
no apt) or python3-numpy / python3-pandas are missing.
"""
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import enginetest as et  # noqa: E402

MAX_TOKENS = 64
N_PROMPTS = 32
SEED = 1234


def post(port, body, timeout=60):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=timeout)


def request(prompt, stream):
    return {"prompt": prompt, "n_predict": MAX_TOKENS, "temperature": 0, "seed": SEED,
            "ignore_eos": True, "stream": stream, "return_tokens": True, "cache_prompt": False}


def direct(port, prompt):
    """The engine's own greedy output in one response: every token ID and its own count."""
    with post(port, request(prompt, False)) as r:
        d = json.load(r)
    if d["tokens_predicted"] != len(d["tokens"]):
        sys.exit(f"FAIL direct: tokens_predicted {d['tokens_predicted']} for "
                 f"{len(d['tokens'])} tokens in a non-streamed response")
    return d["tokens"]


def direct_stream(port, prompt):
    """The engine streaming: (IDs in its events, its last tokens_predicted)."""
    ids, predicted = [], None
    with post(port, request(prompt, True)) as r:
        for line in r:
            if line.startswith(b"data: "):
                ev = json.loads(line[6:])
                ids += ev.get("tokens", [])
                predicted = ev.get("tokens_predicted", predicted)
                if ev.get("stop"):
                    break
    return ids, predicted


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_engine(procs, server, model, tmp):
    log = os.path.join(tmp, os.path.basename(model) + ".log")
    for _ in range(3):  # the port is picked before the server binds it: retry on a clash
        port = free_port()
        p = procs.start([server, "-m", model, "--host", "127.0.0.1", "--port", str(port),
                         "-c", "1024", "-np", "1", "-t", "1", "--seed", str(SEED)], log)
        end = time.monotonic() + 60
        while time.monotonic() < end and p.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                    if r.status == 200:
                        return p, port, log
            except OSError:
                pass
            time.sleep(0.1)
        procs.stop(p)
    sys.exit(f"FAIL: llama-server did not become healthy; log:\n{open(log).read()[-3000:]}")


def equal_run(procs, sut, lg, plugin, tmp, qsl, tag, opts, scenario, ref):
    """One accuracy run through loadgen-node and sut-node: every sample once, each equal to the
    engine's own output (and so of its count)."""
    sets = ["server_target_qps=20", "use_token_latencies=1"] if scenario == "Server" else []
    node, addr, nlog = et.start_node(procs, sut, tmp, f"{tag}-{scenario}", plugin, opts,
                                     ["--max-batch", "4"])
    out = os.path.join(tmp, f"{tag}-{scenario}")
    rc, text = et.loadgen(lg, out, addr, qsl, scenario, "AccuracyOnly", sets,
                          ["--model", "llama2-70b"])
    procs.stop(node)
    if rc != 0:
        sys.exit(f"FAIL {tag} {scenario}: loadgen-node exit {rc}\n{text[-3000:]}\n"
                 f"node log:\n{open(nlog).read()[-2000:]}")
    # sut-node fails a sample whose IDs differ in number from tokens_predicted: equal outputs
    # mean equal counts too.
    et.check_tokens(f"{tag} {scenario}", out, ref)


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    sut, lg, plugin, src = sys.argv[1:]
    et.need_modules("numpy", "pandas")
    t0 = time.monotonic()
    r = subprocess.run([os.path.join(src, "deploy", "llama-server.sh")], capture_output=True,
                       text=True, timeout=600)
    if r.returncode == 3:
        et.skip(f"llama-server cannot be obtained: {r.stderr.strip()}")
    if r.returncode != 0:
        sys.exit(f"FAIL: deploy/llama-server.sh exit {r.returncode}: {r.stderr}")
    server = r.stdout.strip().splitlines()[-1]
    cache = os.path.dirname(os.path.dirname(server))
    print(f"llama-server: {server} ({time.monotonic() - t0:.1f} s to obtain) "
          f"{open(os.path.join(cache, 'version.txt')).read().strip().splitlines()[0]}; "
          f"Debian {' '.join(l for l in open(os.path.join(cache, 'versions')) if l.startswith('llama.cpp-tools')).strip()}")

    with et.scratch("llamacpp-") as (procs, tmp):
        model = os.path.join(tmp, "tiny-llama-bytes.gguf")
        plain = os.path.join(tmp, "tiny-llama-nobytes.gguf")
        for path, extra in ((model, []), (plain, ["--no-bytes"])):
            subprocess.run([et.PY, os.path.join(src, "tests", "engines", "make_gguf.py"), path,
                            "--seed", "0", "--vocab", "512", "--ctx", "1024"] + extra,
                           check=True)
        tools = os.path.join(src, "loadgen-node", "tools")
        pkl, qsl = os.path.join(tmp, "tokens.pkl"), os.path.join(tmp, "qsl")
        subprocess.run([et.PY, os.path.join(tools, "make_llm_tokens.py"), "--out", pkl,
                        "--count", str(N_PROMPTS), "--vocab", "512", "--avoid", "0", "--avoid",
                        "1", "--avoid", "2"], check=True)
        subprocess.run([et.PY, os.path.join(tools, "llm_pickle_to_qsl.py"), "--pickle", pkl,
                        "--out-dir", qsl], check=True)
        import numpy as np
        prompts = [np.load(os.path.join(qsl, f)).tolist() for f in sorted(os.listdir(qsl))]

        # 0. Without byte tokens llama-server streams every ID: streaming through the harness
        #    equals the engine's own output.
        eng0, port0, _ = start_engine(procs, server, plain, tmp)
        ref0 = [direct(port0, p) for p in prompts]
        lost0 = [i for i, p in enumerate(prompts) if len(direct_stream(port0, p)[0]) != MAX_TOKENS]
        if lost0:
            sys.exit(f"FAIL: without byte tokens the direct stream lost IDs in samples {lost0}")
        opts0 = {"url": f"http://127.0.0.1:{port0}", "dialect": "llamacpp",
                 "max_tokens": MAX_TOKENS, "ignore_eos": 1}
        for scenario in ("Offline", "Server"):
            equal_run(procs, sut, lg, plugin, tmp, qsl, "no-byte-tokens streaming", opts0,
                      scenario, ref0)
        procs.stop(eng0)

        eng, port, elog = start_engine(procs, server, model, tmp)
        ref = [direct(port, p) for p in prompts]
        if any(len(t) != MAX_TOKENS for t in ref):
            sys.exit(f"FAIL: ignore_eos outputs of other lengths than {MAX_TOKENS}: "
                     f"{sorted(set(map(len, ref)))}")
        n_bytes = sum(1 for t in ref for x in t if 3 <= x <= 258)
        streamed = [direct_stream(port, p) for p in prompts]
        lost = [(i, pred, len(ids)) for i, (ids, pred) in enumerate(streamed)
                if len(ids) != pred]
        for i, (ids, pred) in enumerate(streamed):
            if pred != MAX_TOKENS:
                sys.exit(f"FAIL: sample {i}: the stream's tokens_predicted {pred}, expected "
                         f"{MAX_TOKENS}")
        n_lost = sum(p - n for _, p, n in lost)
        print(f"engine asked directly: {N_PROMPTS} prompts x {MAX_TOKENS} tokens, {n_bytes} of "
              f"them byte-fallback tokens; streaming, {n_lost} of {N_PROMPTS * MAX_TOKENS} token "
              f"IDs in no event ({len(lost)} of {N_PROMPTS} samples)")
        if not lost:
            sys.exit("FAIL: the direct stream lost no token ID: the vocabulary does not exercise "
                     "llama-server's held-back tokens, so this test would prove nothing")

        url = f"http://127.0.0.1:{port}"
        common = ["--model", "llama2-70b"]
        opts = {"url": url, "dialect": "llamacpp", "max_tokens": MAX_TOKENS, "ignore_eos": 1}

        # 2. oneshot: every token ID, equal to the engine's own.
        for scenario in ("Offline", "Server"):
            equal_run(procs, sut, lg, plugin, tmp, qsl, "byte tokens oneshot=1",
                      {**opts, "oneshot": 1}, scenario, ref)

        # 3. streaming: the samples that lost IDs fail with both counts; none silently short.
        node, addr, nlog = et.start_node(procs, sut, tmp, "stream", plugin, opts,
                                         ["--max-batch", "4"])
        out = os.path.join(tmp, "stream")
        rc, text = et.loadgen(lg, out, addr, qsl, "Offline", "AccuracyOnly", [], common)
        procs.stop(node)
        nl = open(nlog).read()
        pat = re.compile(r"sample \d+ failed: \S+: the engine counted (\d+) output tokens "
                         r"\(tokens_predicted\) but sent (\d+) token IDs")
        pairs = sorted((int(a), int(b)) for a, b in pat.findall(nl))
        want = sorted((p, n) for _, p, n in lost)
        if rc == 0:
            sys.exit(f"FAIL stream: loadgen-node exit 0 although {len(lost)} samples lost IDs\n"
                     f"{text[-2000:]}")
        if pairs != want:
            sys.exit(f"FAIL stream: the node logged counts {pairs}, the direct stream showed "
                     f"{want}; node log:\n{nl[-3000:]}")
        if os.path.exists(os.path.join(out, "mlperf_log_accuracy.json")):
            got = et.output_tokens(out, "stream")
            lost_idx = {i for i, _, _ in lost}
            short = [i for i, t in got.items() if t != ref[i]]
            if short or lost_idx & set(got):
                sys.exit(f"FAIL stream: samples {sorted(short or lost_idx & set(got))[:8]} in the "
                         f"accuracy log differ from the engine's output")
            passed = len(got)
        else:
            passed = 0
        first = pat.search(nl).group(0)
        print(f"ok streaming: loadgen-node exit {rc}; {len(pairs)} samples failed with both "
              f"counts (the direct stream's), e.g. '{first}'; {passed} complete samples in the "
              f"accuracy log, each equal to the engine's output")

        # oneshot is llama.cpp's only: another dialect stops the node, naming the option.
        r = subprocess.run([sut, "--listen", "127.0.0.1:0", "--backend", plugin, "--backend-opt",
                            f"url={url}", "--backend-opt", "dialect=vllm", "--backend-opt",
                            "oneshot=1"], capture_output=True, text=True, timeout=30)
        msg = r.stdout + r.stderr
        if r.returncode == 0 or "oneshot=1: only with dialect=llamacpp" not in msg:
            sys.exit(f"FAIL dialect=vllm oneshot=1 accepted (exit {r.returncode}):\n{msg[-1000:]}")
        print("ok dialect=vllm oneshot=1 refused: " + msg.strip().splitlines()[-1])
    print("PASS")


if __name__ == "__main__":
    main()
