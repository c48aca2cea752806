#!/usr/bin/python3
"""A real, small LLM serving engine for the tests: a PyTorch decoder-only transformer with a KV
cache and greedy decoding, served by FastAPI + uvicorn (the stack vLLM serves with), speaking the
token-ID dialects of the engines the openai backend supports:

    POST /v1/completions   vLLM / TensorRT-LLM (trtllm-serve): "prompt" as token IDs, SSE chunks
                           with choices[0].token_ids and logprobs.tokens "token_id:N", a last
                           chunk with usage when stream_options.include_usage, [DONE]
    POST /generate         SGLang native: "input_ids", "sampling_params", cumulative
                           "output_ids" and "meta_info", [DONE]
    POST /completion       llama.cpp server: "prompt" token IDs, "n_predict", "tokens", "stop",
                           "tokens_predicted"
    GET  /health

    llm_engine.py [--host 127.0.0.1] [--port 0] [--port-file F] [--seed 0] [--vocab 512]
                  [--dim 64] [--layers 2] [--heads 4] [--eos 2]

The weights are seeded here (nothing is downloaded); the same seed gives the same model and the
same greedy output. Requests run concurrently: each decoding step of each request is one short
job on a single model thread, so streams interleave token by token as in continuous batching.
--port 0 binds an ephemeral port and writes it to --port-file once the server accepts.
"""
import argparse
import asyncio
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import torch
import torch.nn.functional as F
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

import enginetest as et  # this folder's, on sys.path as the script's own


class Decoder(torch.nn.Module):
    """Pre-norm decoder-only transformer with learned positions and a KV cache."""

    def __init__(self, vocab, dim, layers, heads, max_len):
        super().__init__()
        self.heads, self.max_len = heads, max_len
        self.emb = torch.nn.Embedding(vocab, dim)
        self.pos = torch.nn.Embedding(max_len, dim)
        self.blocks = torch.nn.ModuleList()
        for _ in range(layers):
            self.blocks.append(torch.nn.ModuleDict({
                "ln1": torch.nn.LayerNorm(dim), "qkv": torch.nn.Linear(dim, 3 * dim),
                "proj": torch.nn.Linear(dim, dim), "ln2": torch.nn.LayerNorm(dim),
                "fc1": torch.nn.Linear(dim, 4 * dim), "fc2": torch.nn.Linear(4 * dim, dim)}))
        self.ln = torch.nn.LayerNorm(dim)
        self.head = torch.nn.Linear(dim, vocab, bias=False)

    def forward(self, ids, start, cache):
        """ids: [t] new tokens at positions start..start+t-1; cache: per layer (k, v) or None.
        Returns the logits of the last position and the new cache."""
        t = ids.shape[0]
        x = self.emb(ids) + self.pos(torch.arange(start, start + t))
        h = self.heads
        new_cache = []
        for i, b in enumerate(self.blocks):
            q, k, v = b["qkv"](b["ln1"](x)).chunk(3, dim=-1)
            q, k, v = (z.view(t, h, -1).transpose(0, 1) for z in (q, k, v))  # [h, t, d]
            if cache is not None:
                k = torch.cat([cache[i][0], k], dim=1)
                v = torch.cat([cache[i][1], v], dim=1)
            new_cache.append((k, v))
            att = (q @ k.transpose(1, 2)) / (q.shape[-1] ** 0.5)  # [h, t, start+t]
            if t > 1:  # causal mask within the new tokens
                mask = torch.ones(t, start + t, dtype=torch.bool).tril(diagonal=start)
                att = att.masked_fill(~mask, float("-inf"))
            y = (att.softmax(-1) @ v).transpose(0, 1).reshape(t, -1)
            x = x + b["proj"](y)
            x = x + b["fc2"](F.gelu(b["fc1"](b["ln2"](x))))
        return self.head(self.ln(x[-1])), new_cache


class Engine:
    def __init__(self, args):
        torch.manual_seed(args.seed)
        torch.set_num_threads(1)
        self.vocab, self.eos = args.vocab, args.eos
        self.model = Decoder(args.vocab, args.dim, args.layers, args.heads, args.max_len).eval()
        with torch.no_grad():  # a sharper output distribution than the default init
            self.model.head.weight.mul_(4.0)
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="model")

    def check(self, prompt, max_tokens):
        if not isinstance(prompt, list) or not prompt:
            return "prompt must be a non-empty list of token IDs"
        for t in prompt:
            if not isinstance(t, int) or t < 0 or t >= self.vocab:
                return f"token id {t!r} is outside the vocabulary (0..{self.vocab - 1})"
        if not isinstance(max_tokens, int) or max_tokens < 1:
            return "max_tokens must be a positive integer"
        if len(prompt) + max_tokens > self.model.max_len:
            return (f"prompt ({len(prompt)} tokens) + max_tokens ({max_tokens}) exceed the "
                    f"context of {self.model.max_len}")
        return None

    @torch.no_grad()
    def _step(self, ids, start, cache, allow_eos):
        logits, cache = self.model(torch.tensor(ids, dtype=torch.long), start, cache)
        if not allow_eos:
            logits[self.eos] = float("-inf")
        tok = int(torch.argmax(logits))
        return tok, float(torch.log_softmax(logits, -1)[tok]), cache

    async def generate(self, prompt, max_tokens, min_tokens, ignore_eos):
        """Yields (token, logprob, finish_reason or None), one per decoding step."""
        loop = asyncio.get_running_loop()
        cache, ids, pos = None, list(prompt), 0
        for i in range(max_tokens):
            allow_eos = not ignore_eos and i >= min_tokens
            tok, lp, cache = await loop.run_in_executor(self.pool, self._step, ids, pos, cache,
                                                        allow_eos)
            pos += len(ids)
            ids = [tok]
            if tok == self.eos and not ignore_eos:
                yield tok, lp, "stop"
                return
            yield tok, lp, "length" if i == max_tokens - 1 else None


def sse(obj):
    return f"data: {json.dumps(obj, separators=(',', ':'))}\n\n"


def error(status, msg):
    return JSONResponse({"object": "error", "message": msg, "code": status,
                         "error": {"message": msg, "code": status}}, status_code=status)


def greedy_only(temperature):
    return temperature is None or temperature == 0


def make_app(engine):
    app = FastAPI()

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    @app.post("/v1/completions")
    async def completions(req: Request):
        body = await req.json()
        prompt, max_tokens = body.get("prompt"), body.get("max_tokens", 16)
        min_tokens, ignore_eos = body.get("min_tokens", 0), bool(body.get("ignore_eos", False))
        if (msg := engine.check(prompt, max_tokens)) or not greedy_only(body.get("temperature")):
            return error(400, msg or "this engine decodes greedily only (temperature 0)")
        want_ids = bool(body.get("return_token_ids", False))
        as_ids = bool(body.get("return_tokens_as_token_ids", False))
        want_lp = body.get("logprobs") is not None
        rid, created, model = f"cmpl-{id(req):x}", int(time.time()), body.get("model", "model")
        gen = engine.generate(prompt, max_tokens, min_tokens, ignore_eos)

        def choice(toks, lps, fin):
            c = {"index": 0, "text": "".join(f"<{t}>" for t in toks), "finish_reason": fin}
            if want_lp:
                c["logprobs"] = {"tokens": [f"token_id:{t}" if as_ids else f"<{t}>" for t in toks],
                                 "token_logprobs": lps}
            if want_ids:
                c["token_ids"] = toks
            return c

        if not body.get("stream", False):
            toks, lps, fin = [], [], None
            async for t, lp, fin in gen:
                toks.append(t)
                lps.append(lp)
            return {"id": rid, "object": "text_completion", "created": created, "model": model,
                    "choices": [choice(toks, lps, fin)],
                    "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(toks)}}

        usage = bool((body.get("stream_options") or {}).get("include_usage", False))

        async def stream():
            n = 0
            async for t, lp, fin in gen:
                n += 1
                yield sse({"id": rid, "object": "text_completion", "created": created,
                           "model": model, "choices": [choice([t], [lp], fin)]})
            if usage:  # as vLLM: a last chunk with no choices and the counts
                yield sse({"id": rid, "object": "text_completion", "created": created,
                           "model": model, "choices": [],
                           "usage": {"prompt_tokens": len(prompt), "completion_tokens": n}})
            yield "data: [DONE]\n\n"
        return StreamingResponse(stream(), media_type="text/event-stream")

    @app.post("/generate")
    async def generate(req: Request):
        body = await req.json()
        sp = body.get("sampling_params", {}) or {}
        prompt, max_tokens = body.get("input_ids"), sp.get("max_new_tokens", 128)
        if (msg := engine.check(prompt, max_tokens)) or not greedy_only(sp.get("temperature")):
            return error(400, msg or "this engine decodes greedily only (temperature 0)")
        gen = engine.generate(prompt, max_tokens, sp.get("min_new_tokens", 0),
                              bool(sp.get("ignore_eos", False)))

        def out(toks, fin):
            return {"text": "".join(f"<{t}>" for t in toks), "output_ids": list(toks),
                    "meta_info": {"prompt_tokens": len(prompt), "completion_tokens": len(toks),
                                  "finish_reason": {"type": fin} if fin else None}}

        if not body.get("stream", False):
            toks, fin = [], None
            async for t, _, fin in gen:
                toks.append(t)
            return out(toks, fin)

        async def stream():
            toks = []
            async for t, _, fin in gen:
                toks.append(t)
                yield sse(out(toks, fin))  # cumulative, as SGLang streams by default
            yield "data: [DONE]\n\n"
        return StreamingResponse(stream(), media_type="text/event-stream")

    @app.post("/completion")
    async def completion(req: Request):
        body = await req.json()
        prompt, max_tokens = body.get("prompt"), body.get("n_predict", 16)
        if (msg := engine.check(prompt, max_tokens)) or not greedy_only(body.get("temperature")):
            return error(400, msg or "this engine decodes greedily only (temperature 0)")
        gen = engine.generate(prompt, max_tokens, 0, bool(body.get("ignore_eos", False)))
        want = bool(body.get("return_tokens", False))

        def out(toks, stop, fin, predicted):
            o = {"content": "".join(f"<{t}>" for t in toks), "stop": stop,
                 "tokens_predicted": predicted}
            if want:
                o["tokens"] = toks
            if stop:
                o["stop_type"] = "eos" if fin == "stop" else "limit"
            return o

        if not body.get("stream", False):
            toks, fin = [], None
            async for t, _, fin in gen:
                toks.append(t)
            return out(toks, True, fin, len(toks))

        async def stream():
            n = 0
            async for t, _, fin in gen:
                n += 1
                yield sse(out([t], False, fin, n))
                if fin:
                    yield sse(out([], True, fin, n))
        return StreamingResponse(stream(), media_type="text/event-stream")

    return app


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--max-len", type=int, default=1024)
    ap.add_argument("--eos", type=int, default=2)
    args = ap.parse_args()

    et.serve_asgi(make_app(Engine(args)), args.host, args.port, args.port_file)


if __name__ == "__main__":
    sys.exit(main())
