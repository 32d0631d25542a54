#!/usr/bin/env python3
"""PyTorch's recurrent decoder of the headline Performer, timed like `pianoformer bench decode`.

The same model as the Rust benchmark's headline rows (`PerformerConfig::bench`): the token
vocabulary of 509, d_model 256, 4 pre-LN layers of 4 heads x 64, d_ff 1024 with GELU, gated
sineSPE (K = 5 sines, R = 64 realisations, one shared code), 128 FAVOR+ features (64 orthogonal
directions, +/-), and a whole token as generation pays it: the step (embedding, every layer's
codes, features, state update S += phi(k) v^T, z += phi(k), read-out), log-softmax, a grammar
mask and a top-p draw. Eager PyTorch on the CPU with as many threads as `--threads` (2, like the
Rust benchmark on this machine), in `torch.inference_mode()`.

A recurrent token costs the same whatever the state holds, so positions are reached by setting
the position (the codes' phases), not by a prefill; the weights are random (the cost does not
depend on them either).

    python3 tools/bench_torch.py --setup      # once: a venv with torch from PyPI (large)
    python3 tools/bench_torch.py [--positions 512,2048,8192] [--steps 32] [--json]

Not part of `make test`. The venv lives outside the clone (`--venv`, default
~/.cache/pianoformer/torch-venv), like the cargo target dir.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import time

VENV = os.path.expanduser("~/.cache/pianoformer/torch-venv")


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--setup", action="store_true", help="create the venv and pip install torch")
    p.add_argument("--venv", default=VENV)
    p.add_argument("--positions", default="512,2048,8192")
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", action="store_true")
    return p.parse_args()


def in_venv(args):
    """Runs this script again with the venv's Python when torch is not importable here."""
    try:
        import torch  # noqa: F401

        return False
    except ImportError:
        python = os.path.join(args.venv, "bin", "python")
        if not os.path.exists(python):
            sys.exit(f"torch is not installed: run `python3 {sys.argv[0]} --setup` first (a venv in {args.venv})")
        if os.path.realpath(sys.prefix) == os.path.realpath(args.venv):
            sys.exit(f"the venv {args.venv} has no torch: run `python3 {sys.argv[0]} --setup` again")
        sys.exit(subprocess.call([python, *sys.argv]))


def setup(args):
    subprocess.check_call([sys.executable, "-m", "venv", args.venv])
    subprocess.check_call([os.path.join(args.venv, "bin", "pip"), "install", "torch", "numpy"])


def main():
    args = parse()
    if args.setup:
        setup(args)
        return
    if in_venv(args):
        return
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    vocab, d, layers, heads, dh, dff = 509, 256, 4, 4, 64, 1024
    sines, r, m = 5, 64, 128
    directions = m // 2
    j = 2 * sines
    lin = lambda i, o: (torch.randn(i, o) / math.sqrt(i), torch.randn(o) * 0.01)
    emb = torch.randn(vocab, d) / math.sqrt(d)
    blocks = []
    for _ in range(layers):
        blocks.append(
            dict(
                ln1=(torch.ones(d), torch.zeros(d)),
                wq=lin(d, heads * dh),
                wk=lin(d, heads * dh),
                wv=lin(d, heads * dh),
                wo=lin(heads * dh, d),
                ln2=(torch.ones(d), torch.zeros(d)),
                ff1=lin(d, dff),
                ff2=lin(dff, d),
                # Gate: sqrt(1 - delta), sqrt(delta) per head and dimension; eps [H, D, R].
                delta=torch.sigmoid(torch.randn(heads, dh)),
                eps=torch.randn(heads, dh, r),
                # FAVOR+ directions [H, R, directions] (orthogonal rows, norm-scaled).
                w=torch.stack([torch.linalg.qr(torch.randn(r, r))[0][:, :directions] * math.sqrt(r) for _ in range(heads)]),
            )
        )
    norm = (torch.ones(d), torch.zeros(d))
    head = lin(d, vocab)
    freqs = torch.sigmoid(torch.randn(heads, dh, sines) - 4) / 2
    offsets = torch.randn(heads, dh, sines)
    gains = torch.nn.functional.softplus(torch.randn(heads, dh, sines))
    mix = torch.randn(heads, dh, j, r)  # Z, shared by layers
    scale_hat = (dh * r) ** -0.25 * r ** -0.25
    allowed = torch.rand(vocab) < 0.3  # a grammar mask's share of allowed tokens

    def layer_norm(x, p):
        return torch.nn.functional.layer_norm(x, (d,), p[0], p[1], 1e-5)

    def codes(position):
        phase_k = 2 * math.pi * freqs * position
        phase_q = phase_k + offsets
        s = gains / math.sqrt(j)
        omega = lambda ph: torch.stack([ph.cos() * s, ph.sin() * s], -1).reshape(heads, dh, j)
        # Qbar_d = Omega_d Z_d: [H, D, R].
        return torch.einsum("hdj,hdjr->hdr", omega(phase_q), mix), torch.einsum("hdj,hdjr->hdr", omega(phase_k), mix)

    def favor(x, w, query):
        proj = torch.einsum("hr,hrf->hf", x, w)
        arg = torch.cat([proj, -proj], -1) - 0.5 * (x * x).sum(-1, keepdim=True)
        if query:
            arg = arg - arg.max(-1, keepdim=True).values
        return arg.exp() / math.sqrt(m)

    def step(token, position, state):
        x = emb[token]
        qbar, kbar = codes(position)
        for b, (s, z) in zip(blocks, state):
            h = layer_norm(x, b["ln1"])
            q, k, v = ((h @ b[n][0] + b[n][1]).reshape(heads, dh) for n in ("wq", "wk", "wv"))
            a, g = (1 - b["delta"]).sqrt(), b["delta"].sqrt()
            hat = lambda y, bar: (torch.einsum("hd,hdr->hr", y * a, bar) + torch.einsum("hd,hdr->hr", y * g, b["eps"])) * scale_hat
            pq, pk = favor(hat(q, qbar), b["w"], True), favor(hat(k, kbar), b["w"], False)
            s += pk.unsqueeze(-1) * v.unsqueeze(1)
            z += pk
            out = torch.einsum("hf,hfe->he", pq, s) / (torch.einsum("hf,hf->h", pq, z).unsqueeze(-1) + 1e-6)
            x = x + out.reshape(-1) @ b["wo"][0] + b["wo"][1]
            h = layer_norm(x, b["ln2"])
            x = x + torch.nn.functional.gelu(h @ b["ff1"][0] + b["ff1"][1]) @ b["ff2"][0] + b["ff2"][1]
        logits = layer_norm(x, norm) @ head[0] + head[1]
        logp = torch.log_softmax(logits, -1).masked_fill(~allowed, float("-inf"))
        probs, order = torch.sort(logp.softmax(-1), descending=True)
        keep = probs.cumsum(-1) - probs < 0.95
        pick = torch.multinomial(probs * keep, 1)
        return int(order[pick])

    positions = [int(p) for p in args.positions.split(",")]
    times = []
    with torch.inference_mode():
        for p in positions:
            state = [(torch.zeros(heads, m, dh), torch.zeros(heads, m)) for _ in blocks]
            token = 1
            step(token, p, state)  # warm-up
            t = []
            for i in range(args.steps):
                started = time.perf_counter()
                token = step(token, p + 1 + i, state)
                t.append((time.perf_counter() - started) * 1e3)
            t.sort()
            times.append(t[len(t) // 2])
    params = sum(x.numel() for x in [emb, *norm, *head, freqs, offsets, gains]) + sum(
        sum(v.numel() for kk, v2 in b.items() for v in (v2 if isinstance(v2, tuple) else (v2,)) if kk not in ("eps", "w"))
        for b in blocks
    )
    if args.json:
        print(json.dumps({"torch": torch.__version__, "threads": args.threads, "positions": positions, "ms_per_token": times, "parameters": params}))
        return
    print(f"PyTorch {torch.__version__} eager, {args.threads} threads: the headline Performer ({params} parameters), whole tokens")
    print(f"median ms per token over {args.steps} tokens at each position")
    print("position".ljust(24) + "".join(f"{p:>10}" for p in positions) + f"{'t(last)/t(first)':>18}")
    print("PyTorch, recurrent".ljust(24) + "".join(f"{t:>10.2f}" for t in times) + f"{times[-1] / times[0]:>18.2f}")


if __name__ == "__main__":
    main()
