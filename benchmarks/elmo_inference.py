"""ELMo biLSTM inference speed, measured in one run (ratios are what to compare).

At the `small` and `original` sizes, random weights, a batch of 32 sentences x 20 tokens,
2 threads: tokens/s of
  exact   this lab's exact path (all input-to-gate products in one matmul per layer,
          both directions batched, clipping as in the original),
  loop    a per-time-step LSTM-cell loop in the style of AllenNLP's LstmCellWithProjection
          (input and state linearities every step, one direction and layer at a time),
  nn.LSTM torch.nn.LSTM(proj_size=...) at the same size (no clipping),
and the exact path's achieved GFLOP/s against a measured torch.mm peak.
Targets: exact >= 2x loop, >= 0.8x nn.LSTM, >= 50% of the matmul peak at the original size.

    python benchmarks/elmo_inference.py [--sizes small original] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn

from probing_lab.elmo import ElmoBiLM, get_preset

BATCH, TOKENS = 32, 20


def best_time(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def matmul_peak(repeats: int) -> float:
    """GFLOP/s of torch.mm on square float32 matrices (the best of a few sizes)."""
    best = 0.0
    for n in (1024, 2048):
        a, b = torch.randn(n, n), torch.randn(n, n)
        t = best_time(lambda: torch.mm(a, b), repeats)
        best = max(best, 2 * n**3 / t / 1e9)
    return best


def allennlp_style_loop(model: ElmoBiLM, x: torch.Tensor) -> torch.Tensor:
    """One direction and layer at a time, every product inside the time loop."""
    lstm = model.lstm
    c_dim, p_dim = lstm.cell_dim, lstm.proj_dim
    batch, T, _ = x.shape
    outs = []
    for d in range(2):
        inputs = x if d == 0 else x.flip(1)
        for k, layer in enumerate(lstm.layers):
            w_in, w_h, b, w_p = layer.input_weight[d], layer.hidden_weight[d], layer.bias[d], layer.proj_weight[d]
            h = x.new_zeros(batch, p_dim)
            c = x.new_zeros(batch, c_dim)
            steps = []
            for t in range(T):
                gates = inputs[:, t] @ w_in + b + h @ w_h
                i, f, g, o = gates.chunk(4, dim=-1)
                c = (torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)).clamp(-lstm.cell_clip, lstm.cell_clip)
                h = ((torch.sigmoid(o) * torch.tanh(c)) @ w_p).clamp(-lstm.proj_clip, lstm.proj_clip)
                steps.append(h)
            y = torch.stack(steps, dim=1)
            inputs = y + inputs if k > 0 else y
        outs.append(inputs)
    return torch.cat(outs, dim=-1)


def nn_lstm_stack(model: ElmoBiLM) -> list[list[nn.LSTM]]:
    o = model.options
    return [[nn.LSTM(o.projection_dim, o.lstm_dim, proj_size=o.projection_dim, batch_first=True).eval()
             for _ in model.lstm.layers] for _ in range(2)]


def run_nn_lstm(stacks, x: torch.Tensor) -> torch.Tensor:
    outs = []
    for d, stack in enumerate(stacks):
        inputs = x if d == 0 else x.flip(1)
        for k, lstm in enumerate(stack):
            y, _ = lstm(inputs)
            inputs = y + inputs if k > 0 else y
        outs.append(inputs)
    return torch.cat(outs, dim=-1)


def lstm_flops_per_token(model: ElmoBiLM) -> int:
    o = model.options
    per_layer_dir = 2 * (o.projection_dim * 4 * o.lstm_dim * 2 + o.lstm_dim * o.projection_dim)
    return per_layer_dir * 2 * o.n_layers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["small", "original"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    import warnings

    warnings.filterwarnings("ignore", message="LSTM with projections")
    peak = matmul_peak(args.repeats)
    n_tokens = BATCH * TOKENS
    print(f"threads={torch.get_num_threads()} batch={BATCH}x{TOKENS}  torch.mm peak {peak:.1f} GFLOP/s")
    for size in args.sizes:
        model = ElmoBiLM(get_preset(size)).eval()
        x = torch.randn(BATCH, TOKENS, model.options.projection_dim)
        mask = torch.ones(BATCH, TOKENS, dtype=torch.bool)
        char_ids = torch.randint(1, 261, (BATCH, TOKENS, 50))
        stacks = nn_lstm_stack(model)
        with torch.inference_mode():
            t_exact = best_time(lambda: model.lstm(x, mask), args.repeats)
            t_loop = best_time(lambda: allennlp_style_loop(model, x), max(1, args.repeats - 1))
            t_nn = best_time(lambda: run_nn_lstm(stacks, x), args.repeats)
            t_full = best_time(lambda: model(char_ids), max(1, args.repeats - 1))
        gflops = lstm_flops_per_token(model) * n_tokens / t_exact / 1e9
        print(f"\n[{size}] {model.count_parameters():,} parameters")
        print(f"  exact path       {n_tokens / t_exact:9.0f} tokens/s   {gflops:6.1f} GFLOP/s = {gflops / peak:.0%} of mm peak")
        print(f"  per-step loop    {n_tokens / t_loop:9.0f} tokens/s   exact/loop    = {t_loop / t_exact:.2f}x (target >= 2x)")
        print(f"  nn.LSTM(proj)    {n_tokens / t_nn:9.0f} tokens/s   exact/nn.LSTM = {t_nn / t_exact:.2f}x (target >= 0.8x)")
        print(f"  full biLM (char CNN + LSTM) {n_tokens / t_full:.0f} tokens/s")


if __name__ == "__main__":
    main()
