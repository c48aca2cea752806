#!/usr/bin/python3
"""Turns an official LLM data-set pickle into the QSL folder loadgen-node reads (--qsl-npy DIR).

    llm_pickle_to_qsl.py [--model MODEL] --pickle FILE.pkl --out-dir DIR [--column NAME]
                         [--output-column tok_output] [--count N] [--max-tokens N]
    llm_pickle_to_qsl.py --list-models

The MLCommons reference implementations ship their LLM data sets (llama2-70b's OpenOrca,
deepseek-r1's, gpt-oss-120b's...) as a pickled pandas DataFrame with one row per sample and the
prompt's token IDs in a column; --model picks the column that model's reference reads (see
--list-models), --column names another. (llama3.1-8b's cnn_eval.json needs no conversion:
loadgen-node --qsl-llm-json reads it.) gpt-oss-120b's data also comes as Parquet (.parquet),
read when pandas has a Parquet engine. This writes one int32 .npy per row, DIR/00000000.npy, DIR/00000001.npy... (the QSL takes a folder's files in name order, so
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

# The prompt token-ID column each model's reference implementation reads (mlcommons/inference,
# language/<model>/), in the order they are tried; the names as mlperf.conf spells the models.
MODEL_COLUMNS = {
    # dataset.py: processed_data.tok_input (open_orca_gpt4_tokenized_llama.sampled_24576.pkl)
    "llama2-70b": ["tok_input"],
    # dataset.py: pd.read_json(...).tok_input (cnn_eval.json; --qsl-llm-json reads it directly)
    "llama3_1-8b": ["tok_input"],
    "llama3_1-405b": ["tok_input"],
    # mlperf_deepseek_r1_dataset_4388_fp8_eval.pkl: tok_input; the reference's token backends
    # make the same IDs from text_input with the model's chat template, which needs its tokenizer
    "deepseek-r1": ["tok_input"],
    # utils load_tokenized_dataset: tok_input (pre-v4.0 files), input_tokens (v4.0 on)
    "gpt-oss-120b": ["tok_input", "input_tokens"],
}


def model_key(name):
    """mlperf.conf's spelling of a model, from that or the checker's (llama3.1-8b,
    llama2-70b-99.9, llama2-70b-interactive-99...)."""
    n = name.replace("llama3.1", "llama3_1")
    for suffix in ("-99.9", "-99", "-interactive"):
        if n.endswith(suffix):
            n = n[: -len(suffix)]
    return n


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
    ap.add_argument("--model", help="the benchmark (mlperf.conf's or the checker's spelling): "
                    "picks the prompt column its reference reads")
    ap.add_argument("--list-models", action="store_true",
                    help="print each model's prompt column(s) and exit")
    ap.add_argument("--pickle", help="pandas DataFrame pickle (.pkl), or .parquet")
    ap.add_argument("--out-dir", help="QSL folder to write (created)")
    ap.add_argument("--column", help="prompt token-ID column (default: the --model's, else "
                    "tok_input)")
    ap.add_argument("--output-column", help="reference output token-ID column (optional)")
    ap.add_argument("--count", type=int, help="only the first N rows")
    ap.add_argument("--max-tokens", type=int, help="refuse prompts longer than N tokens")
    args = ap.parse_args()
    if args.list_models:
        for m, cols in MODEL_COLUMNS.items():
            print(f"{m}: {' or '.join(cols)}")
        return
    if not args.pickle or not args.out_dir:
        ap.error("--pickle and --out-dir are required")
    candidates = ["tok_input"]
    if args.model:
        key = model_key(args.model)
        if key not in MODEL_COLUMNS:
            sys.exit(f"--model {args.model}: no known prompt column; models: "
                     f"{', '.join(MODEL_COLUMNS)} (or give --column)")
        candidates = MODEL_COLUMNS[key]

    try:
        df = (pd.read_parquet(args.pickle) if args.pickle.endswith(".parquet")
              else pd.read_pickle(args.pickle))
    except (ImportError, ValueError) as e:
        sys.exit(f"{args.pickle}: cannot read it: {e}")
    if not isinstance(df, pd.DataFrame):
        sys.exit(f"{args.pickle}: a {type(df).__name__}, not a pandas DataFrame")
    if args.column is None:
        found = [c for c in candidates if c in df.columns]
        if not found:
            hint = (" (deepseek-r1's reference tokenizes text_input with the model's chat "
                    "template; do that with its tokenizer first)"
                    if args.model and model_key(args.model) == "deepseek-r1" else "")
            sys.exit(f"{args.pickle}: no column {' or '.join(map(repr, candidates))}"
                     f"{' for ' + args.model if args.model else ''} (columns: "
                     f"{', '.join(map(str, df.columns))}){hint}")
        args.column = found[0]
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
    print(f"samples={len(lens)} column={args.column} prompt_tokens_min={min(lens)} "
          f"prompt_tokens_max={max(lens)} out_dir={args.out_dir}")


if __name__ == "__main__":
    main()
