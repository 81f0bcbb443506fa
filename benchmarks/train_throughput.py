"""Training tokens/s of a CPU preset: this lab's exact LSTM against torch.nn.LSTM(proj_size),
measured in one run (same model, data, batch, softmax, optimizer; only the biLSTM differs).
Target: exact >= 0.7x nn.LSTM.

    python benchmarks/train_throughput.py [--preset cpu-small] [--batch 64] [--steps 6]
"""

from __future__ import annotations

import argparse
import time
import warnings

import torch
from torch import nn

from probing_lab.elmo import get_preset
from probing_lab.training.trainer import BiLanguageModel


class NnLstmStreams(nn.Module):
    """``forward_streams`` over torch.nn.LSTM(proj_size=...) per direction and layer (no clipping)."""

    def __init__(self, options):
        super().__init__()
        self.stacks = nn.ModuleList(
            nn.ModuleList(nn.LSTM(options.projection_dim, options.lstm_dim, proj_size=options.projection_dim, batch_first=True)
                          for _ in range(options.n_layers))
            for _ in range(2)
        )

    def forward_streams(self, x, state, dropout=0.0):
        h0, c0 = state
        outs, hs, cs = [], [], []
        for d, stack in enumerate(self.stacks):
            inputs, hd, cd = x[d], [], []
            for k, lstm in enumerate(stack):
                y, (h, c) = lstm(nn.functional.dropout(inputs, dropout, self.training), (h0[k, d : d + 1], c0[k, d : d + 1]))
                inputs = y + inputs if k > 0 else y
                hd.append(h[0])
                cd.append(c[0])
            outs.append(inputs)
            hs.append(torch.stack(hd))
            cs.append(torch.stack(cd))
        return torch.stack(outs), (torch.stack(hs, 1), torch.stack(cs, 1))

    def zero_state(self, batch):
        raise NotImplementedError


def make_step(lm: BiLanguageModel, batch: int, unroll: int, vocab: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adagrad(lm.parameters(), lr=0.2, initial_accumulator_value=1.0)
    distinct = 800
    char_ids = torch.randint(1, 200, (distinct, 50), generator=g)
    positions = torch.randint(0, distinct, (2, batch, unroll), generator=g)
    targets = torch.randint(0, vocab, (2, batch, unroll), generator=g)
    o = lm.bilm.options
    state = (torch.zeros(o.n_layers, 2, batch, o.projection_dim), torch.zeros(o.n_layers, 2, batch, o.lstm_dim))
    sampler = torch.Generator().manual_seed(seed + 1)

    def step():
        loss_f, loss_b, _ = lm(char_ids, positions, targets, state, sampler)
        optimizer.zero_grad()
        (0.5 * (loss_f + loss_b)).backward()
        nn.utils.clip_grad_norm_(lm.parameters(), 10.0)
        optimizer.step()

    return step


def best_time(fn, steps: int) -> float:
    fn()
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2]  # median step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="cpu-small")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--unroll", type=int, default=20)
    parser.add_argument("--vocab", type=int, default=40000)
    parser.add_argument("--negatives", type=int, default=2048)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", message=".*projections.*")
    options = get_preset(args.preset)
    torch.manual_seed(0)
    exact = BiLanguageModel(options, args.vocab, args.negatives, dropout=0.1).train()
    fused = BiLanguageModel(options, args.vocab, args.negatives, dropout=0.1).train()
    fused.bilm.lstm = NnLstmStreams(options)
    tokens = args.batch * args.unroll
    step_exact = make_step(exact, args.batch, args.unroll, args.vocab, 0)
    step_fused = make_step(fused, args.batch, args.unroll, args.vocab, 0)
    t_exact, t_fused = [], []
    for _ in range(2):  # interleave to share the machine's noise
        t_exact.append(best_time(step_exact, args.steps))
        t_fused.append(best_time(step_fused, args.steps))
    te, tf = min(t_exact), min(t_fused)
    print(f"preset {args.preset}: batch {args.batch} x {args.unroll} tokens, vocab {args.vocab}, "
          f"{args.negatives} negatives, {args.threads} threads")
    print(f"  exact LSTM (clipped)     {tokens / te:8.0f} tokens/s")
    print(f"  nn.LSTM(proj_size)       {tokens / tf:8.0f} tokens/s")
    print(f"  exact / nn.LSTM = {tf / te:.2f}x (target >= 0.7x)")


if __name__ == "__main__":
    main()
