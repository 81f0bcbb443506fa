"""Training tokens/s of a CPU preset, measured in one run (same model, data, batch, softmax):

- ``now``: the lab's trainer step as it is;
- ``before``: the step as it was before issue 12's profile-driven changes, rebuilt here (the LSTM
  indexing one time step of the precomputed gate inputs at a time, whose backward writes a
  zero tensor of all T steps per step; three gate sigmoids on slices; ``conv1d`` + ``amax``
  char CNN; a softmax gathering its rows twice per direction; the per-tensor optimizer loop);
- ``nn.LSTM``: ``now`` with the biLSTM swapped for ``torch.nn.LSTM(proj_size)`` (no clipping).

Targets: now >= 0.7x nn.LSTM; now / before is the speed-up.

    python benchmarks/train_throughput.py [--preset cpu-small] [--batch 128] [--steps 6]
"""

from __future__ import annotations

import argparse
import time
import types
import warnings

import torch
import torch.nn.functional as F
from torch import nn

from probing_lab.elmo import get_preset
from probing_lab.training.objective import BiLanguageModel


class NnLstmStreams(nn.Module):
    """``forward_streams`` over torch.nn.LSTM(proj_size=...) per direction and layer (no clipping)."""

    def __init__(self, options):
        super().__init__()
        self.stacks = nn.ModuleList(
            nn.ModuleList(
                nn.LSTM(options.projection_dim, options.lstm_dim, proj_size=options.projection_dim, batch_first=True)
                for _ in range(options.n_layers)
            )
            for _ in range(2)
        )

    def forward_streams(self, x, state, dropout=0.0):
        h0, c0 = state
        outs, hs, cs = [], [], []
        for d, stack in enumerate(self.stacks):
            inputs, hd, cd = x[d], [], []
            for k, lstm in enumerate(stack):
                y, (h, c) = lstm(
                    nn.functional.dropout(inputs, dropout, self.training), (h0[k, d : d + 1], c0[k, d : d + 1])
                )
                inputs = y + inputs if k > 0 else y
                hd.append(h[0])
                cd.append(c[0])
            outs.append(inputs)
            hs.append(torch.stack(hd))
            cs.append(torch.stack(cd))
        return torch.stack(outs), (torch.stack(hs, 1), torch.stack(cs, 1))


# --- the step before issue 12 (for the speed-up; same math) ------------------------------------


def _before_encoder(self, char_ids):
    batch, tokens, n_chars = char_ids.shape
    flat = char_ids.reshape(-1, n_chars)
    x = F.embedding(flat, self.char_table()).transpose(1, 2)
    h = torch.cat([self.activation(conv(x).amax(dim=-1)) for conv in self.convs], dim=-1)
    for highway in self.highways:
        h = highway(h)
    out = torch.addmm(self.b_proj, h, self.w_proj)
    return (out * (flat > 0).any(dim=-1, keepdim=True)).view(batch, tokens, -1)


def _before_run_exact(self, layer, x, step_mask, h, c):
    directions, batch, T, _ = x.shape
    x_time = x.transpose(1, 2).reshape(directions, T * batch, -1)
    gates_x = torch.baddbmm(layer.bias.unsqueeze(1), x_time, layer.input_weight)
    gates_x = gates_x.view(directions, T, batch, -1).transpose(0, 1).contiguous()
    steps = []
    for t in range(T):
        gates = torch.baddbmm(gates_x[t], h, layer.hidden_weight)
        i, f, g, o = gates.chunk(4, dim=-1)
        c = (torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)).clamp(-self.cell_clip, self.cell_clip)
        h = torch.bmm(torch.sigmoid(o) * torch.tanh(c), layer.proj_weight).clamp(-self.proj_clip, self.proj_clip)
        steps.append(h)
    return torch.stack(steps, dim=2), h, c


def _before_loss(head, h, targets, generator):
    sampled, tries = head.sampler.sample(head.n_negative, generator)
    true_logit = (h * head.weight[targets]).sum(-1) + head.bias[targets]
    true_logit = true_logit - torch.log(head.sampler.expected_count(targets, tries)).float()
    sampled_logit = h @ head.weight[sampled].t() + head.bias[sampled]
    sampled_logit = sampled_logit - torch.log(head.sampler.expected_count(sampled, tries)).float()
    sampled_logit = sampled_logit.masked_fill(targets.unsqueeze(1) == sampled.unsqueeze(0), float("-inf"))
    logits = torch.cat([true_logit.unsqueeze(1), sampled_logit], dim=1)
    return F.cross_entropy(logits, torch.zeros(len(targets), dtype=torch.long))


def _before_forward(self, char_ids, positions, targets, state, generator=None):
    tokens = self.bilm.token_encoder(char_ids.unsqueeze(0))[0][positions]
    top, state = self.bilm.lstm.forward_streams(tokens, state, self.dropout)
    top = F.dropout(top, self.dropout, self.training)
    dim = top.shape[-1]
    loss_f = _before_loss(self.softmax, top[0].reshape(-1, dim), targets[0].reshape(-1), generator)
    loss_b = _before_loss(self.softmax, top[1].reshape(-1, dim), targets[1].reshape(-1), generator)
    return loss_f, loss_b, state


def make_before(lm: BiLanguageModel) -> BiLanguageModel:
    lm.forward = types.MethodType(_before_forward, lm)
    lm.bilm.token_encoder.forward = types.MethodType(_before_encoder, lm.bilm.token_encoder)
    lm.bilm.lstm._run_exact = types.MethodType(_before_run_exact, lm.bilm.lstm)
    return lm


# --- timing --------------------------------------------------------------------------------------


def make_step(lm: BiLanguageModel, batch: int, unroll: int, vocab: int, distinct: int, fused_optimizer: bool):
    """One optimizer step on a fixed window of ``distinct`` word types (the trainer's inputs)."""
    g = torch.Generator().manual_seed(0)
    optimizer = torch.optim.Adam(lm.parameters(), lr=0.002, fused=fused_optimizer)
    char_ids = torch.randint(1, 200, (distinct, 50), generator=g)
    positions = torch.randint(0, distinct, (2, batch, unroll), generator=g)
    targets = torch.randint(0, vocab, (2, batch, unroll), generator=g)
    o = lm.bilm.options
    state = (torch.zeros(o.n_layers, 2, batch, o.projection_dim), torch.zeros(o.n_layers, 2, batch, o.lstm_dim))
    sampler = torch.Generator().manual_seed(1)

    def step():
        loss_f, loss_b, _ = lm(char_ids, positions, targets, state, sampler)
        optimizer.zero_grad(set_to_none=True)
        (0.5 * (loss_f + loss_b)).backward()
        nn.utils.clip_grad_norm_(lm.parameters(), 10.0)
        optimizer.step()

    return step


def median_time(fn, steps: int) -> float:
    fn()
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="cpu-small")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--unroll", type=int, default=20)
    parser.add_argument("--vocab", type=int, default=40000)
    parser.add_argument("--negatives", type=int, default=2048)
    parser.add_argument(
        "--distinct",
        type=int,
        default=1100,
        help="distinct word types per window (about 1,100 in a 128 x 20 window of the lab's corpus)",
    )
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", message=".*projections.*")
    options = get_preset(args.preset)

    def model() -> BiLanguageModel:
        torch.manual_seed(0)
        return BiLanguageModel(options, args.vocab, args.negatives, dropout=0.1).train()

    nn_lstm = model()
    nn_lstm.bilm.lstm = NnLstmStreams(options)
    contenders = {
        "now": make_step(model(), args.batch, args.unroll, args.vocab, args.distinct, True),
        "before": make_step(make_before(model()), args.batch, args.unroll, args.vocab, args.distinct, False),
        "nn.LSTM": make_step(nn_lstm, args.batch, args.unroll, args.vocab, args.distinct, True),
    }
    best = {name: float("inf") for name in contenders}
    for _ in range(args.rounds):  # interleaved rounds: a slow spell of the machine hits all alike
        for name, step in contenders.items():
            best[name] = min(best[name], median_time(step, args.steps))
    tokens = args.batch * args.unroll
    print(
        f"preset {args.preset}: batch {args.batch} x {args.unroll} tokens ({args.distinct} distinct types), "
        f"vocab {args.vocab}, {args.negatives} negatives, Adam, {args.threads} threads"
    )
    for name, t in best.items():
        print(f"  {name:8s} {tokens / t:8.0f} tokens/s")
    print(f"  now / before  = {best['before'] / best['now']:.2f}x")
    print(f"  now / nn.LSTM = {best['nn.LSTM'] / best['now']:.2f}x (target >= 0.7x)")


if __name__ == "__main__":
    main()
