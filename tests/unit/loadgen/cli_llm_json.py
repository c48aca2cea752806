#!/usr/bin/python3
"""loadgen-node --qsl-llm-json: an LLM data set in the form llama3.1-8b's cnn_eval.json has (a
JSON array of objects; the prompt's token IDs in tok_input, beside texts and other fields), written
here, loaded straight into the QSL.

  - valid: through a sut-node with the digest backend (which answers the XXH3-64 of the bytes it
    received), every sample is answered exactly once and each answer is the digest of that
    sample's token IDs as little-endian int32, computed here from the JSON: the count and every ID
    reach the node exactly; --llm-field tok_output takes the other column the same way;
  - memory: a file of large texts and few tokens is read in a bounded pass (peak RSS well under
    the file's size);
  - malformed files (wrong type, a negative or too large ID, a fraction, a missing field, an
    empty array, a truncated file, bad syntax, a top level that is not an array of objects, no
    samples) stop loadgen-node with exit 3 and one line naming the file, the sample, the field
    and the reason; --llm-field without --qsl-llm-json is a usage error (exit 2).

    cli_llm_json.py LOADGEN_NODE SUT_NODE WORKDIR"""
import ctypes
import json
import os
import resource
import shutil
import subprocess
import sys
import time

LG, SUT, WORK = (os.path.abspath(a) for a in sys.argv[1:4])
VOCAB = 128256  # Llama 3's vocabulary


def xxh3():
    f = ctypes.CDLL("libxxhash.so.0").XXH3_64bits
    f.restype = ctypes.c_uint64
    f.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    return lambda b: f(b, len(b))


def int32le(ids):
    return b"".join(int(i).to_bytes(4, "little") for i in ids)


def dataset(n):
    """cnn_eval.json's shape: texts with escapes and non-ASCII, tok_input not always first,
    nested values in other fields, IDs over the whole vocabulary and the int32 extremes."""
    rows = []
    for i in range(n):
        k = 1 + (i * 37) % 300
        toks = [(i * 7919 + j * 104729) % VOCAB for j in range(k)]
        if i == 3:
            toks = [0, 2147483647, 128000]
        row = {"instruction": {"llama": "Summarize \"this\" \\ article:\n", "n": [1, 2.5, None]},
               "input": f"Article {i}: caf\u00e9 \u2014 \U0001f600 " + "word " * (i % 50),
               "tok_input": toks,
               "output": f"summary {i}",
               "tok_output": [(i + j) % VOCAB for j in range(1 + i % 5)]}
        if i % 2:
            row = {"tok_input": row.pop("tok_input"), **row}
        rows.append(row)
    return rows


def run_lg(args, timeout=120):
    r = subprocess.run([LG, "--quiet", "--progress", "off", "--log-level", "warn"] + args,
                       capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


def fail(msg):
    print(f"FAIL {msg}")
    sys.exit(1)


def memory_bound():
    """A 96 MB file of texts and 4 tokens a sample: loadgen-node's peak RSS stays far below it."""
    path = os.path.join(WORK, "big.json")
    text = "x" * 48000
    with open(path, "w") as f:
        f.write("[")
        for i in range(2000):
            f.write(("," if i else "") + json.dumps({"input": text, "tok_input": [i, 1, 2, 3]}))
        f.write("]")
    size = os.path.getsize(path)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    rc, text = run_lg(["--scenario", "Offline", "--mode", "AccuracyOnly", "--sut", "null",
                       "--qsl-llm-json", path, "--output-dir", os.path.join(WORK, "big")])
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    os.unlink(path)
    if rc != 0:
        fail(f"memory: exit {rc}\n{text[-2000:]}")
    if before * 1024 >= size // 2 or peak >= size // 2:
        fail(f"memory: peak RSS {peak} bytes reading a {size}-byte file (bound {size // 2})")
    print(f"ok memory: a {size}-byte file read with a peak RSS of {peak} bytes")


def start_node():
    port_file = os.path.join(WORK, "digest.port")
    log = open(os.path.join(WORK, "digest.log"), "w")
    p = subprocess.Popen([SUT, "--listen", "127.0.0.1:0", "--port-file", port_file, "--backend",
                          "digest", "--name", "digest"], stdout=log, stderr=subprocess.STDOUT)
    end = time.monotonic() + 30
    while time.monotonic() < end:
        if os.path.exists(port_file) and os.path.getsize(port_file) > 0:
            return p, f"127.0.0.1:{int(open(port_file).read())}"
        if p.poll() is not None:
            break
        time.sleep(0.05)
    p.kill()
    fail(f"sut-node did not listen; log:\n{open(log.name).read()[-2000:]}")


def valid(rows, path, node):
    digest = xxh3()
    for field, extra in (("tok_input", []), ("tok_output", ["--llm-field", "tok_output"])):
        out = os.path.join(WORK, f"valid-{field}")
        rc, text = run_lg(["--scenario", "Offline", "--mode", "AccuracyOnly", "--model",
                           "llama3_1-8b", "--qsl-llm-json", path, "--nodes", node,
                           "--verify-digest", "--drain-timeout-ms", "30000", "--output-dir", out]
                          + extra)
        if rc != 0:
            fail(f"valid {field}: exit {rc}\n{text[-2000:]}")
        with open(os.path.join(out, "mlperf_log_accuracy.json")) as f:
            log = json.load(f)
        seen = {}
        for e in log:
            i = int(e["qsl_idx"])
            if i in seen:
                fail(f"valid {field}: sample {i} answered twice")
            seen[i] = e["data"].lower()
        if sorted(seen) != list(range(len(rows))):
            fail(f"valid {field}: {len(seen)} samples answered of {len(rows)}; missing "
                 f"{sorted(set(range(len(rows))) - set(seen))[:10]}")
        for i, row in enumerate(rows):
            want = digest(int32le(row[field])).to_bytes(8, "little").hex()
            if seen[i] != want:
                fail(f"valid {field}: sample {i}: the node got other bytes than the "
                     f"{len(row[field])} int32 IDs of the file (digest {seen[i]}, want {want})")
        print(f"ok valid {field}: {len(rows)} samples, each once, every token ID as in the file "
              f"({sum(len(r[field]) for r in rows)} IDs)")


def malformed(rows):
    text = json.dumps(rows)
    cases = []

    def case(name, content, want):
        cases.append((name, content, want))

    def with_row(i, **kv):
        r = [dict(x) for x in rows]
        for k, v in kv.items():
            if v is None:
                del r[i][k]
            else:
                r[i][k] = v
        return json.dumps(r)

    case("type", with_row(2, tok_input="1 2 3"),
         "sample 2: field 'tok_input' is a string, not an array of token IDs")
    case("object", with_row(4, tok_input={"ids": [1]}),
         "sample 4: field 'tok_input' is an object, not an array of token IDs")
    case("negative", with_row(3, tok_input=[1, -4]),
         "sample 3: tok_input[1] is -4, not a token ID (0 to 2147483647)")
    case("over-int32", with_row(6, tok_input=[5, 6, 2147483648]),
         "sample 6: tok_input[2] is 2147483648, not a token ID (0 to 2147483647)")
    case("fraction", with_row(1, tok_input=[1, 2.0]),
         "sample 1: tok_input[1] is a number with a fraction or an exponent, not a token ID")
    case("string-id", with_row(7, tok_input=[1, "2"]),
         "sample 7: tok_input[1] is a string, not a token ID")
    case("nested", with_row(8, tok_input=[[1, 2]]),
         "sample 8: tok_input[0] is an array, not a token ID")
    case("missing", with_row(5, tok_input=None), "sample 5: no field 'tok_input'")
    case("empty", with_row(9, tok_input=[]), "sample 9: 'tok_input' is an empty array")
    case("twice", text.replace('"tok_input": [0, 2147483647, 128000]',
                               '"tok_input": [0, 2147483647, 128000], "tok_input": [1]', 1),
         "sample 3: field 'tok_input' appears twice")
    cut = text.index('"tok_input"', text.index('"Article 12')) + 20
    case("truncated", text[:cut], "sample 12: the file ends inside it (truncated?")
    case("truncated-top", json.dumps(rows[:3])[:-1],
         "the file ends inside the top array (truncated?")
    # yajl's own message, after the byte offset
    case("syntax", text.replace('"output": "summary 10"', '"output": summary', 1),
         "in sample 10: not valid JSON (lexical error: invalid char in json text.)")
    case("top-object", json.dumps({"data": rows[:2]}),
         "the top level is an object, not a JSON array of objects (one per sample)")
    case("row-number", json.dumps([rows[0], 5]), "sample 1: a number, not an object")
    case("no-samples", "[]", "holds no samples")
    for name, content, want in cases:
        path = os.path.join(WORK, f"bad-{name}.json")
        with open(path, "w") as f:
            f.write(content)
        rc, out = run_lg(["--scenario", "Offline", "--sut", "null", "--qsl-llm-json", path,
                          "--output-dir", os.path.join(WORK, f"bad-{name}")])
        head = f"loadgen-node: {path}"
        lines = [ln for ln in out.splitlines() if ln.startswith(head) and want in ln]
        if rc != 3 or not lines:
            fail(f"malformed {name}: exit {rc} (want 3), want a line\n  {head}...{want}\ngot:\n"
                 f"{out[-1500:]}")
        if os.path.exists(os.path.join(WORK, f"bad-{name}", "mlperf_log_summary.txt")):
            fail(f"malformed {name}: a run was logged")
        print(f"ok malformed {name}: exit 3, " + lines[0])
    rc, out = run_lg(["--scenario", "Offline", "--sut", "null", "--qsl-synthetic", "4",
                      "--sample-size", "16", "--llm-field", "tok_input"])
    if rc != 2 or "--llm-field names a field of --qsl-llm-json's file" not in out:
        fail(f"--llm-field alone: exit {rc} (want 2):\n{out[-800:]}")
    print("ok --llm-field without --qsl-llm-json: exit 2")


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    memory_bound()  # first: RUSAGE_CHILDREN holds the peak of every child so far
    rows = dataset(61)
    path = os.path.join(WORK, "cnn_eval.json")
    with open(path, "w") as f:
        json.dump(rows, f, indent=1, ensure_ascii=False)
    node, addr = start_node()
    try:
        valid(rows, path, addr)
    finally:
        node.terminate()
        node.wait(30)
    malformed(rows)
    print("PASS")


if __name__ == "__main__":
    main()
