#!/usr/bin/python3
"""Makes a small token data set in the official LLM pickle form, for tests and demos.

    make_llm_tokens.py --out FILE.pkl [--count 24] [--min-len 4] [--max-len 48] [--vocab 512]
                       [--seed 1] [--avoid 2]

A pandas DataFrame, one row per sample, with the columns the MLCommons reference pickles have
for their prompts: input (a placeholder text), tok_input (the token IDs, a list of ints) and
tok_input_length. Prompt lengths are spread evenly over [min-len, max-len]; token IDs are drawn
from a seeded generator over [0, vocab), skipping the --avoid IDs (e.g. the engine's EOS).
Convert it with llm_pickle_to_qsl.py.
"""
import argparse

import numpy as np
import pandas as pd


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--count", type=int, default=24)
    ap.add_argument("--min-len", type=int, default=4)
    ap.add_argument("--max-len", type=int, default=48)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--avoid", type=int, action="append", default=[])
    args = ap.parse_args()

    rng = np.random.default_rng(args.seed)
    allowed = np.setdiff1d(np.arange(args.vocab), np.array(args.avoid, dtype=np.int64))
    lens = np.linspace(args.min_len, args.max_len, args.count).round().astype(int)
    toks = [rng.choice(allowed, size=n).astype(int).tolist() for n in lens]
    df = pd.DataFrame({"input": [f"synthetic prompt {i}" for i in range(args.count)],
                       "tok_input": toks, "tok_input_length": [len(t) for t in toks]})
    df.to_pickle(args.out)
    print(f"samples={args.count} out={args.out}")


if __name__ == "__main__":
    main()
