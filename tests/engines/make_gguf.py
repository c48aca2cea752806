#!/usr/bin/python3
"""Writes a tiny Llama-architecture model as GGUF (llama.cpp's file format, version 3) for the
real-engine test: seeded random F32 weights and a SentencePiece-style ("llama") vocabulary that
has, as every real Llama vocabulary has, the 256 byte-fallback tokens <0x00>..<0xFF>. Greedy
decoding of random weights picks those often, including UTF-8 lead bytes that llama-server
holds back as incomplete text: the case the harness must not lose.

    make_gguf.py OUT.gguf [--seed 0] [--vocab 512] [--dim 64] [--layers 2] [--heads 4]
                 [--ff 128] [--ctx 512] [--no-bytes]

Token IDs: 0 <unk>, 1 <s> (BOS), 2 </s> (EOS), 3..258 <0x00>..<0xFF> (type BYTE), then plain
pieces ("▁a", "é", ...) up to --vocab. --no-bytes leaves the byte tokens out (plain pieces from
ID 3 on, each whole UTF-8): the contrast, where llama-server streams every token's ID. No package beyond numpy: Debian 12 has no python3-gguf,
and the format is a header, typed key/value pairs, tensor descriptors and aligned data
(https://github.com/ggml-org/ggml/blob/master/docs/gguf.md).
"""
import argparse
import struct
import sys

import numpy as np

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
ALIGN = 32
# Value types (gguf.md).
T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY, T_UINT64 = 4, 5, 6, 7, 8, 9, 10
GGML_F32 = 0
# llama.cpp's token types.
TT_NORMAL, TT_UNKNOWN, TT_CONTROL, TT_BYTE = 1, 2, 3, 6


def s_bytes(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, value):
    out = s_bytes(key) + struct.pack("<I", vtype)
    if vtype == T_STRING:
        return out + s_bytes(value)
    if vtype == T_ARRAY:
        etype, items = value
        out += struct.pack("<IQ", etype, len(items))
        if etype == T_STRING:
            return out + b"".join(s_bytes(x) for x in items)
        fmt = {T_INT32: "<i", T_FLOAT32: "<f", T_UINT32: "<I"}[etype]
        return out + b"".join(struct.pack(fmt, x) for x in items)
    fmt = {T_UINT32: "<I", T_INT32: "<i", T_FLOAT32: "<f", T_BOOL: "<?", T_UINT64: "<Q"}[vtype]
    return out + struct.pack(fmt, value)


def vocabulary(n, byte_tokens):
    nb = 256 if byte_tokens else 0
    toks = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(nb)]
    types = [TT_UNKNOWN, TT_CONTROL, TT_CONTROL] + [TT_BYTE] * nb
    letters = "abcdefghijklmnopqrstuvwxyz"
    extra = ["é", "ü", "ß", "ñ", "ø", "λ", "ж", "日", "本", "語", "€", "→", "✓"]
    pieces = [f"▁{c}" for c in letters] + list(letters) + extra
    pieces += [f"▁{a}{b}" for a in letters for b in letters]
    seen = set(toks)
    for p in pieces:
        if len(toks) >= n:
            break
        if p not in seen:
            seen.add(p)
            toks.append(p)
            types.append(TT_NORMAL)
    if len(toks) < n:
        sys.exit(f"make_gguf: --vocab {n} is over the {len(toks)} pieces this script makes")
    scores = [0.0] * 3 + [-1000.0] * nb + [-float(i) for i in range(len(toks) - 3 - nb)]
    return toks, scores, types


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ff", type=int, default=128)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--no-bytes", action="store_true")
    a = ap.parse_args()
    if a.vocab < 260 or a.dim % a.heads or (a.dim // a.heads) % 2:
        sys.exit("make_gguf: --vocab >= 260, and --dim / --heads must be an even whole number")

    toks, scores, types = vocabulary(a.vocab, not a.no_bytes)
    meta = [
        kv("general.architecture", T_STRING, "llama"),
        kv("general.name", T_STRING, f"tiny-llama-bytes-seed{a.seed}"),
        kv("general.alignment", T_UINT32, ALIGN),
        kv("llama.context_length", T_UINT32, a.ctx),
        kv("llama.embedding_length", T_UINT32, a.dim),
        kv("llama.block_count", T_UINT32, a.layers),
        kv("llama.feed_forward_length", T_UINT32, a.ff),
        kv("llama.attention.head_count", T_UINT32, a.heads),
        kv("llama.attention.head_count_kv", T_UINT32, a.heads),
        kv("llama.rope.dimension_count", T_UINT32, a.dim // a.heads),
        kv("llama.attention.layer_norm_rms_epsilon", T_FLOAT32, 1e-5),
        kv("tokenizer.ggml.model", T_STRING, "llama"),
        kv("tokenizer.ggml.tokens", T_ARRAY, (T_STRING, toks)),
        kv("tokenizer.ggml.scores", T_ARRAY, (T_FLOAT32, scores)),
        kv("tokenizer.ggml.token_type", T_ARRAY, (T_INT32, types)),
        kv("tokenizer.ggml.unknown_token_id", T_UINT32, 0),
        kv("tokenizer.ggml.bos_token_id", T_UINT32, 1),
        kv("tokenizer.ggml.eos_token_id", T_UINT32, 2),
        kv("tokenizer.ggml.add_bos_token", T_BOOL, False),
    ]

    rng = np.random.default_rng(a.seed)
    d, f, v = a.dim, a.ff, a.vocab

    def w(rows, cols, scale):  # GGUF dims are [cols (ne0), rows]: rows of cols floats
        return ((cols, rows), rng.standard_normal((rows, cols), dtype=np.float32) * scale)

    tensors = [("token_embd.weight", w(v, d, 1.0))]
    for i in range(a.layers):
        p = f"blk.{i}."
        tensors += [
            (p + "attn_norm.weight", ((d,), np.ones(d, np.float32))),
            (p + "attn_q.weight", w(d, d, d ** -0.5)),
            (p + "attn_k.weight", w(d, d, d ** -0.5)),
            (p + "attn_v.weight", w(d, d, d ** -0.5)),
            (p + "attn_output.weight", w(d, d, d ** -0.5)),
            (p + "ffn_norm.weight", ((d,), np.ones(d, np.float32))),
            (p + "ffn_gate.weight", w(f, d, d ** -0.5)),
            (p + "ffn_up.weight", w(f, d, d ** -0.5)),
            (p + "ffn_down.weight", w(d, f, f ** -0.5)),
        ]
    tensors += [("output_norm.weight", ((d,), np.ones(d, np.float32))),
                ("output.weight", w(v, d, 4 * d ** -0.5))]

    infos, blobs, off = [], [], 0
    for name, (dims, arr) in tensors:
        infos.append(s_bytes(name) + struct.pack("<I", len(dims)) +
                     b"".join(struct.pack("<Q", x) for x in dims) + struct.pack("<IQ", GGML_F32, off))
        data = np.ascontiguousarray(arr, dtype="<f4").tobytes()
        pad = (-len(data)) % ALIGN
        blobs.append(data + b"\0" * pad)
        off += len(data) + pad

    head = GGUF_MAGIC + struct.pack("<IQQ", GGUF_VERSION, len(tensors), len(meta))
    head += b"".join(meta) + b"".join(infos)
    head += b"\0" * ((-len(head)) % ALIGN)
    with open(a.out, "wb") as fh:
        fh.write(head)
        for b in blobs:
            fh.write(b)


if __name__ == "__main__":
    main()
