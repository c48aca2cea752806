#!/usr/bin/python3
"""Turns an official LLM data-set pickle into the QSL folder loadgen-node reads (--qsl-npy DIR).

    llm_pickle_to_qsl.py --pickle FILE.pkl --out-dir DIR [--column tok_input]
                         [--output-column tok_output] [--count N] [--max-tokens N]

The MLCommons reference implementations ship their LLM data sets (llama2-70b's OpenOrca,
llama3.1's, mixtral's, deepseek-r1's...) as a pickled pandas DataFrame with one row per sample
and the prompt's token IDs in a column (tok_input in the references). This writes one int32 .npy
per row, DIR/00000000.npy, DIR/00000001.npy... (the QSL takes a folder's files in name order, so
row i is QSL index i), which is what the openai backend sends the engine. With --output-column
(tok_output in the references, when present) the reference outputs go to DIR/../<DIR
name>_ref_outputs.npz, keyed by row (for checking outputs afterwards). Prints the number of
samples and the prompt-length range.

Reading a pickle runs code from it: only convert files from a source you trust.
"""
import argparse
import os
import sys

import numpy as np
import pandas as pd


def as_ids(v, row, column):
    """A cell as an int32 array: a list, tuple or array of non-negative integers < 2^31."""
    a = np.asarray(v)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"row {row}: column {column!r} holds {a.shape}, not a non-empty list")
    if not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"row {row}: column {column!r} holds {a.dtype}, not token IDs")
    if a.min() < 0 or a.max() > 0x7FFFFFFF:
        raise ValueError(f"row {row}: column {column!r} has a token ID outside int32")
    return a.astype("<i4")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pickle", required=True, help="pandas DataFrame pickle (.pkl)")
    ap.add_argument("--out-dir", required=True, help="QSL folder to write (created)")
    ap.add_argument("--column", default="tok_input", help="prompt token-ID column")
    ap.add_argument("--output-column", help="reference output token-ID column (optional)")
    ap.add_argument("--count", type=int, help="only the first N rows")
    ap.add_argument("--max-tokens", type=int, help="refuse prompts longer than N tokens")
    args = ap.parse_args()

    df = pd.read_pickle(args.pickle)
    if not isinstance(df, pd.DataFrame):
        sys.exit(f"{args.pickle}: a {type(df).__name__}, not a pandas DataFrame")
    for c in [args.column] + ([args.output_column] if args.output_column else []):
        if c not in df.columns:
            sys.exit(f"{args.pickle}: no column {c!r} (columns: {', '.join(map(str, df.columns))})")
    if args.count is not None:
        df = df.iloc[:args.count]
    if len(df) == 0:
        sys.exit(f"{args.pickle}: no rows")
    os.makedirs(args.out_dir, exist_ok=True)
    if any(n.endswith(".npy") for n in os.listdir(args.out_dir)):
        sys.exit(f"{args.out_dir}: already holds .npy files (the QSL would read them too)")

    lens, refs = [], {}
    try:
        for i, v in enumerate(df[args.column]):
            a = as_ids(v, i, args.column)
            if args.max_tokens and a.size > args.max_tokens:
                raise ValueError(f"row {i}: {a.size} prompt tokens, over --max-tokens "
                                 f"{args.max_tokens}")
            np.save(os.path.join(args.out_dir, f"{i:08d}.npy"), a)
            lens.append(a.size)
        if args.output_column:
            for i, v in enumerate(df[args.output_column]):
                refs[str(i)] = as_ids(v, i, args.output_column)
    except ValueError as e:
        sys.exit(f"{args.pickle}: {e}")
    if refs:
        out = os.path.normpath(args.out_dir)
        np.savez(out + "_ref_outputs.npz", **refs)
    print(f"samples={len(lens)} prompt_tokens_min={min(lens)} prompt_tokens_max={max(lens)} "
          f"out_dir={args.out_dir}")


if __name__ == "__main__":
    main()
