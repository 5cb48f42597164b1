#!/usr/bin/python3
"""PyTorch training the Llama shape of bench/llama.sh, for the ratio: the same block (RMSNorm,
RoPE, SwiGLU, grouped-query attention, untied output, no biases), written with torch.nn
(causal softmax attention: torch 1.13 has no fused one), AdamW, one sequence per step; bf16
by autocast. Prints one JSON line per precision: mean ms per step after the first. Debian's torch uses the selected
libblas.so.3: OpenBLAS (scripts/setup.sh installs it), not the reference BLAS.
Usage: llama_torch.py SEQ STEPS THREADS
"""
import json
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

H, LAYERS, HEADS, GROUPS, FFN, VOCAB = 768, 12, 12, 4, 2048, 32000


class RMSNorm(nn.Module):
    def __init__(self, h, eps=1e-5):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(h)), eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), -1) * sin


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        d = H // HEADS
        self.norm1, self.norm2 = RMSNorm(H), RMSNorm(H)
        self.q = nn.Linear(H, H, bias=False)
        self.kv = nn.Linear(H, 2 * GROUPS * d, bias=False)
        self.o = nn.Linear(H, H, bias=False)
        self.gate_up = nn.Linear(H, 2 * FFN, bias=False)
        self.down = nn.Linear(FFN, H, bias=False)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        d = H // HEADS
        a = self.norm1(x)
        q = self.q(a).view(b, s, HEADS, d).transpose(1, 2)
        k, v = self.kv(a).view(b, s, 2, GROUPS, d).permute(2, 0, 3, 1, 4)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        k, v = k.repeat_interleave(HEADS // GROUPS, 1), v.repeat_interleave(HEADS // GROUPS, 1)
        # Debian's torch 1.13 has no scaled_dot_product_attention: the plain causal softmax.
        att = (q @ k.transpose(-1, -2)) * d**-0.5
        att = att.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
        y = att.softmax(-1) @ v
        x = x + self.o(y.transpose(1, 2).reshape(b, s, H))
        gate, up = self.gate_up(self.norm2(x)).chunk(2, -1)
        return x + self.down(F.silu(gate) * up)


class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, H)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = RMSNorm(H)
        self.head = nn.Linear(H, VOCAB, bias=False)

    def forward(self, ids, targets):
        d, s = H // HEADS, ids.shape[1]
        inv = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
        angles = torch.outer(torch.arange(s).float(), inv)
        cos, sin = torch.cat((angles, angles), -1).cos(), torch.cat((angles, angles), -1).sin()
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x, cos, sin)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.float().view(-1, VOCAB), targets.view(-1))


def time_steps(seq, steps, bf16):
    torch.manual_seed(0)
    model = Llama()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, VOCAB, (1, seq + 1))
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(ids[:, :-1], ids[:, 1:])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - start)
    after_first = times[1:] or times
    return 1e3 * sum(after_first) / len(after_first)


def main():
    seq, steps, threads = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(threads)
    for precision in ("fp32", "bf16"):
        ms = time_steps(seq, steps, precision == "bf16")
        print(json.dumps({"precision": precision, "ms_per_step": round(ms, 1)}), flush=True)


if __name__ == "__main__":
    main()
