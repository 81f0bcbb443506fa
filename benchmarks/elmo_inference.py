"""ELMo biLSTM inference speed, measured in one run (ratios are what to compare).

At the `small` and `original` sizes, random weights, a batch of 32 sentences x 20 tokens,
2 threads: tokens/s of
  exact   this lab's exact path (all input-to-gate products in one matmul per layer,
          both directions batched, clipping as in the original),
  loop    a per-time-step LSTM-cell loop in the style of AllenNLP's LstmCellWithProjection
          (length-sorted rows, input and state linearities every step, gates from slices,
          full-batch state copied each step, one direction and layer at a time),
  nn.LSTM torch.nn.LSTM(proj_size=...) at the same size (no clipping),
and the exact path's achieved GFLOP/s against a measured torch.mm peak.
Targets: exact >= 2x loop, >= 0.8x nn.LSTM, >= 50% of the matmul peak at the original size.

    python benchmarks/elmo_inference.py [--sizes small original] [--repeats 5]

The contenders run in interleaved rounds and each keeps its best time.
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


def interleaved_best(fns: dict, repeats: int, warm_up: bool = True) -> dict:
    """The best time of each function over ``repeats`` rounds that run all of them in turn, so a
    slow spell of the shared machine hits every contender alike (the ratios are what matter)."""
    for fn in fns.values() if warm_up else ():
        fn()
    best = {name: float("inf") for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def matmul_peak(repeats: int) -> float:
    """GFLOP/s of torch.mm on square float32 matrices (the best of a few sizes)."""
    best = 0.0
    for n in (1024, 2048):
        a, b = torch.randn(n, n), torch.randn(n, n)
        t = best_time(lambda a=a, b=b: torch.mm(a, b), repeats)
        best = max(best, 2 * n**3 / t / 1e9)
    return best


class AllenNlpStyleCell(nn.Module):
    """A per-time-step projected LSTM cell written the way AllenNLP's LstmCellWithProjection
    works: rows sorted by length, at each step the still-running rows' input and state
    linearities, gates from slices, clipping, and fresh copies of the full-batch state."""

    def __init__(self, layer, d: int, cell_clip: float, proj_clip: float, go_forward: bool):
        super().__init__()
        in_dim, four_c = layer.input_weight.shape[1:]
        self.cell_dim, self.proj_dim = four_c // 4, layer.proj_weight.shape[-1]
        self.input_linearity = nn.Linear(in_dim, four_c, bias=False)
        self.state_linearity = nn.Linear(self.proj_dim, four_c, bias=True)
        self.state_projection = nn.Linear(self.cell_dim, self.proj_dim, bias=False)
        with torch.no_grad():
            self.input_linearity.weight.copy_(layer.input_weight[d].t())
            self.state_linearity.weight.copy_(layer.hidden_weight[d].t())
            self.state_linearity.bias.copy_(layer.bias[d])
            self.state_projection.weight.copy_(layer.proj_weight[d].t())
        self.cell_clip, self.proj_clip, self.go_forward = cell_clip, proj_clip, go_forward

    def forward(self, inputs: torch.Tensor, lengths: list[int]) -> torch.Tensor:
        batch, T, _ = inputs.shape  # rows sorted by decreasing length
        c = self.cell_dim
        output = inputs.new_zeros(batch, T, self.proj_dim)
        full_memory = inputs.new_zeros(batch, c)
        full_state = inputs.new_zeros(batch, self.proj_dim)
        last = batch - 1 if self.go_forward else 0
        for step in range(T):
            index = step if self.go_forward else T - step - 1
            if self.go_forward:
                while last >= 0 and lengths[last] <= index:
                    last -= 1
            else:
                while last < batch - 1 and lengths[last + 1] > index:
                    last += 1
            previous_memory = full_memory[: last + 1].clone()
            previous_state = full_state[: last + 1].clone()
            projected_input = self.input_linearity(inputs[: last + 1, index])
            projected_state = self.state_linearity(previous_state)
            input_gate = torch.sigmoid(projected_input[:, :c] + projected_state[:, :c])
            forget_gate = torch.sigmoid(projected_input[:, c : 2 * c] + projected_state[:, c : 2 * c])
            memory_init = torch.tanh(projected_input[:, 2 * c : 3 * c] + projected_state[:, 2 * c : 3 * c])
            output_gate = torch.sigmoid(projected_input[:, 3 * c :] + projected_state[:, 3 * c :])
            memory = (input_gate * memory_init + forget_gate * previous_memory).clamp(-self.cell_clip, self.cell_clip)
            timestep_output = self.state_projection(output_gate * torch.tanh(memory))
            timestep_output = timestep_output.clamp(-self.proj_clip, self.proj_clip)
            full_memory = full_memory.clone()
            full_state = full_state.clone()
            full_memory[: last + 1] = memory
            full_state[: last + 1] = timestep_output
            output[: last + 1, index] = timestep_output
        return output


def allennlp_style_stack(model: ElmoBiLM) -> list[list[AllenNlpStyleCell]]:
    lstm = model.lstm
    return [
        [AllenNlpStyleCell(layer, d, lstm.cell_clip, lstm.proj_clip, go_forward=d == 0) for layer in lstm.layers]
        for d in range(2)
    ]


def run_allennlp_style(stacks, x: torch.Tensor) -> torch.Tensor:
    """One direction and layer at a time (AllenNLP's ElmoLstm), residual around layer 2."""
    lengths = [x.shape[1]] * x.shape[0]
    outs = []
    for stack in stacks:
        inputs = x
        for k, cell in enumerate(stack):
            y = cell(inputs, lengths)
            inputs = y + inputs if k > 0 else y
        outs.append(inputs)
    return torch.cat(outs, dim=-1)


def nn_lstm_stack(model: ElmoBiLM) -> list[list[nn.LSTM]]:
    o = model.options
    return [
        [
            nn.LSTM(o.projection_dim, o.lstm_dim, proj_size=o.projection_dim, batch_first=True).eval()
            for _ in model.lstm.layers
        ]
        for _ in range(2)
    ]


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
    parser.add_argument("--repeats", type=int, default=5)
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
            loop = allennlp_style_stack(model)
            same = (run_allennlp_style(loop, x) - model.lstm(x, mask)[0][-1]).abs().max().item()
            assert same < 1e-4, f"the per-step loop and the exact path disagree by {same}"
            times = interleaved_best(
                {
                    "exact": lambda model=model, x=x, mask=mask: model.lstm(x, mask),
                    "loop": lambda loop=loop, x=x: run_allennlp_style(loop, x),
                    "nn": lambda stacks=stacks, x=x: run_nn_lstm(stacks, x),
                    "full": lambda model=model, char_ids=char_ids: model(char_ids),
                },
                args.repeats,
            )
            t_exact, t_loop, t_nn, t_full = times["exact"], times["loop"], times["nn"], times["full"]
        gflops = lstm_flops_per_token(model) * n_tokens / t_exact / 1e9
        print(f"\n[{size}] {model.count_parameters():,} parameters")
        print(
            f"  exact path       {n_tokens / t_exact:9.0f} tokens/s   "
            f"{gflops:6.1f} GFLOP/s = {gflops / peak:.0%} of mm peak"
        )
        print(
            f"  per-step loop    {n_tokens / t_loop:9.0f} tokens/s   "
            f"exact/loop    = {t_loop / t_exact:.2f}x (target >= 2x)"
        )
        print(
            f"  nn.LSTM(proj)    {n_tokens / t_nn:9.0f} tokens/s   "
            f"exact/nn.LSTM = {t_nn / t_exact:.2f}x (target >= 0.8x)"
        )
        print(f"  full biLM (char CNN + LSTM) {n_tokens / t_full:.0f} tokens/s")


if __name__ == "__main__":
    main()
