#!/usr/bin/python3
"""Test fixture, the stand-in accuracy of the LLM submission test (accuracy_standin =): NOT the
official script (language/*/evaluate-accuracy.py / evaluation.py need Hugging Face packages that
Debian 12 lacks, and a real tokenizer and data set). Scores the output token IDs of an accuracy log
against reference token IDs (the engine's own greedy output, asked directly) with ROUGE-1, ROUGE-2
and ROUGE-L F1 computed on token IDs, and prints them in the official scripts' dictionary form, so
the checker parses the line (and reports the targets a stand-in cannot meet):

    STAND-IN (token-ID ROUGE against the engine's own output): {'rouge1': '100.0', ...}

    llm_standin_accuracy.py --mlperf-accuracy-file LOG --reference REF.json [--dtype int32]
"""
import argparse
import json
import struct


def ngrams(t, n):
    out = {}
    for i in range(len(t) - n + 1):
        k = tuple(t[i:i + n])
        out[k] = out.get(k, 0) + 1
    return out


def f1(overlap, got, want):
    if overlap == 0 or got == 0 or want == 0:
        return 0.0
    p, r = overlap / got, overlap / want
    return 2 * p * r / (p + r)


def rouge_n(a, b, n):
    x, y = ngrams(a, n), ngrams(b, n)
    return f1(sum(min(c, y.get(k, 0)) for k, c in x.items()), sum(x.values()), sum(y.values()))


def rouge_l(a, b):
    prev = [0] * (len(b) + 1)
    for u in a:
        cur = [0]
        for j, v in enumerate(b):
            cur.append(prev[j] + 1 if u == v else max(prev[j + 1], cur[j]))
        prev = cur
    return f1(prev[-1], len(a), len(b))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mlperf-accuracy-file", required=True)
    ap.add_argument("--reference", required=True, help="JSON: a list of token-ID lists")
    ap.add_argument("--dtype", default="int32", choices=["int32"])
    a = ap.parse_args()
    with open(a.reference) as f:
        ref = json.load(f)
    with open(a.mlperf_accuracy_file) as f:
        log = json.load(f)
    seen, scores, toks = set(), [[], [], []], 0
    for r in log:
        i = int(r["qsl_idx"])
        if i in seen:
            continue
        seen.add(i)
        data = bytes.fromhex(r["data"])
        got = list(struct.unpack(f"<{len(data) // 4}i", data[:len(data) // 4 * 4]))
        toks += len(got)
        want = ref[i]
        scores[0].append(rouge_n(got, want, 1))
        scores[1].append(rouge_n(got, want, 2))
        scores[2].append(rouge_l(got, want))
    n = max(len(seen), 1)
    mean = [round(100.0 * sum(s) / n, 4) for s in scores]
    result = {"rouge1": str(mean[0]), "rouge2": str(mean[1]), "rougeL": str(mean[2]),
              "rougeLsum": str(mean[2]), "gen_len": toks, "gen_num": len(seen),
              "gen_tok_len": toks, "tokens_per_sample": round(toks / n, 1)}
    print("STAND-IN (token-ID ROUGE against the engine's own output): " + str(result))


if __name__ == "__main__":
    main()
