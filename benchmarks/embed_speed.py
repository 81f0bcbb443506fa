"""The whole embedding pipeline on natural text, measured in one run (ratios are what to compare).

Tokens/s of ``Embedder.embed`` (char CNN once per distinct word of a batch, the exact biLSTM,
stateless, sentences batched by length) against an AllenNLP-style pipeline written here the way
AllenNLP 2.10's ``ElmoEmbedder`` runs (batches of 64 sentences in input order, the char CNN +
highway + projection on every position of the padded batch, then one direction and layer at a
time through a per-time-step LSTM cell loop, ``elmo_inference.AllenNlpStyleCell``), on UD EWT dev
sentences (natural lengths and word frequencies), random weights, at the ``small`` and
``original`` shapes; outputs compared (max abs difference). Targets: >= 2.0x at small, >= 1.6x
at original.

The char CNN alone, three ways (``--cnn``): ``conv1d`` + max per filter width, one matrix
product over the unfolded character windows per width (what the lab runs), and one product for
all widths at once (windows of the widest filter, narrower filters zero-padded, positions past
each width's end masked); forward only (inference) and forward + backward (training).

Then the whole ``probing-lab embed`` command (a subprocess writing hdf5) on 2,000 and 20,000
sentences at the small shape: tokens/s and peak RSS (which must stay flat with input size).

    python benchmarks/embed_speed.py [--sentences 600] [--repeats 2] [--data-dir ../shared/datasets]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).parent))
from elmo_inference import AllenNlpStyleCell, interleaved_best  # noqa: E402

from probing_lab.datasets import load_dataset  # noqa: E402
from probing_lab.elmo import ElmoBiLM, Embedder, get_preset, save_checkpoint  # noqa: E402
from probing_lab.elmo.chars import batch_to_ids  # noqa: E402


class AllenNlpStylePipeline:
    """Char CNN on every token position, then the per-step cell loop, batches in input order."""

    def __init__(self, model: ElmoBiLM, batch_size: int = 64):
        self.model, self.batch_size = model, batch_size
        lstm = model.lstm
        self.cells = [
            [AllenNlpStyleCell(layer, d, lstm.cell_clip, lstm.proj_clip, go_forward=d == 0) for layer in lstm.layers]
            for d in range(2)
        ]

    def char_cnn(self, char_ids: torch.Tensor) -> torch.Tensor:
        enc = self.model.token_encoder
        batch, T, n_chars = char_ids.shape
        x = F.embedding(char_ids.view(-1, n_chars), enc.char_table()).transpose(1, 2)
        h = torch.cat([enc.activation(torch.max(conv(x), dim=-1)[0]) for conv in enc.convs], dim=-1)
        for hw in enc.highways:
            carry = torch.sigmoid(h @ hw.w_carry + hw.b_carry)
            h = carry * torch.relu(h @ hw.w_transform + hw.b_transform) + (1 - carry) * h
        out = h @ enc.w_proj + enc.b_proj
        return (out * (char_ids > 0).any(-1).view(-1, 1)).view(batch, T, -1)

    def embed_batch(self, sentences: list[list[str]]) -> list[np.ndarray]:
        char_ids = batch_to_ids(sentences)
        x = self.char_cnn(char_ids)
        lengths = [len(s) + 2 for s in sentences]
        order = sorted(range(len(sentences)), key=lambda i: -lengths[i])  # the cell wants rows by decreasing length
        xs, ls = x[order], [lengths[i] for i in order]
        layers = [torch.cat([xs, xs], dim=-1)]
        inputs = [xs, xs]
        for k in range(len(self.cells[0])):
            outs = []
            for d in range(2):
                y = self.cells[d][k](inputs[d], ls)
                outs.append(y + inputs[d] if k > 0 else y)
            inputs = outs
            layers.append(torch.cat(outs, dim=-1))
        stacked = torch.stack(layers, dim=1)  # (batch, layers, T, dim), rows in sorted order
        result = [None] * len(sentences)
        for row, i in enumerate(order):
            result[i] = stacked[row, :, 1 : lengths[i] - 1].numpy()
        return result

    def embed(self, sentences: list[list[str]]) -> list[np.ndarray]:
        out = []
        with torch.inference_mode():
            for start in range(0, len(sentences), self.batch_size):
                out.extend(self.embed_batch(sentences[start : start + self.batch_size]))
        return out


def cnn_contenders(model: ElmoBiLM, char_ids: torch.Tensor) -> dict:
    """Max-pooled convolution features ``(N, n_filters)`` before the activation, three ways."""
    from probing_lab.elmo.modules import _conv_max

    enc = model.token_encoder
    convs = list(enc.convs)
    widest = max(c.weight.shape[2] for c in convs)
    dim = enc.char_embed.shape[1]

    def embed():
        return F.embedding(char_ids, enc.char_table())  # (N, 50, char_dim)

    def conv1d():
        x = embed().transpose(1, 2)
        return torch.cat([conv(x).max(dim=-1).values for conv in convs], dim=-1)

    def unfolded():
        x = embed()
        return torch.cat([_conv_max(x, conv) for conv in convs], dim=-1)

    def all_widths():
        x = F.pad(embed(), (0, 0, 0, widest - 1))  # zero rows past the last character
        windows = x.unfold(1, widest, 1)  # (N, 50, char_dim, widest)
        weight = torch.cat([F.pad(c.weight, (0, widest - c.weight.shape[2])) for c in convs]).reshape(-1, dim * widest)
        y = torch.matmul(windows.reshape(*windows.shape[:2], -1), weight.t())
        ends = torch.cat([torch.full((c.weight.shape[0],), char_ids.shape[1] - c.weight.shape[2] + 1) for c in convs])
        y = y.masked_fill(torch.arange(char_ids.shape[1]).unsqueeze(1) >= ends, float("-inf"))
        return y.max(dim=1).values + torch.cat([c.bias for c in convs])

    return {"conv1d": conv1d, "unfolded": unfolded, "all widths": all_widths}


def compare_cnn(size: str, n_words: int, repeats: int) -> None:
    torch.manual_seed(0)
    model = ElmoBiLM(get_preset(size))
    char_ids = torch.randint(1, 262, (n_words, 50))
    fns = cnn_contenders(model, char_ids)
    with torch.no_grad():
        ref = fns["conv1d"]()
        diffs = {name: (fn() - ref).abs().max().item() / ref.abs().max().item() for name, fn in fns.items()}
        inference = interleaved_best(fns, repeats, warm_up=False)

    def with_backward(fn):
        return lambda: fn().sum().backward()

    training = interleaved_best({name: with_backward(fn) for name, fn in fns.items()}, repeats, warm_up=False)
    for name in fns:
        print(
            f"  [{size}] char CNN {name:10s} forward {inference['conv1d'] / inference[name]:.2f}x, "
            f"forward+backward {training['conv1d'] / training[name]:.2f}x of conv1d; "
            f"max relative difference {diffs[name]:.1e}"
        )


def command_run(model_dir: Path, sentences: list[list[str]], work: Path, threads: int) -> tuple[float, float]:
    """``probing-lab embed`` as a user runs it: (tokens/s, peak RSS in MB of the child)."""
    src = work / f"input-{len(sentences)}.txt"
    src.write_text("".join(" ".join(s) + "\n" for s in sentences), encoding="utf-8")
    code = (
        "import resource, sys, time; from probing_lab.cli import main; "
        "t = time.perf_counter(); rc = main(sys.argv[1:]); "
        "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024); sys.exit(rc)"
    )
    cmd = [
        sys.executable,
        "-c",
        code,
        "--threads",
        str(threads),
        "embed",
        "--model",
        str(model_dir),
        "--input",
        str(src),
        "--output",
        str(work / f"out-{len(sentences)}.hdf5"),  # a new file per run: embed refuses to overwrite
        "--quiet",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    seconds, rss = map(float, done.stdout.split()[-2:])
    return sum(map(len, sentences)) / seconds, rss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=600, help="EWT dev sentences for the in-process comparison")
    parser.add_argument("--sizes", nargs="+", default=["small", "original"])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--skip-command", action="store_true")
    parser.add_argument("--cnn", action="store_true", help="only the char CNN comparison")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.cnn:
        for size in ("cpu-small", "small"):
            compare_cnn(size, 1100, args.repeats + 2)
        return
    dev = [s.words for s in load_dataset("ewt", "dev", args.data_dir)]
    sentences = dev[: args.sentences]
    n_tokens = sum(map(len, sentences))
    print(f"{len(sentences)} EWT dev sentences, {n_tokens} tokens, {args.threads} threads, random weights")
    for size in args.sizes:
        torch.manual_seed(0)
        model = ElmoBiLM(get_preset(size)).eval()
        lab, allen = Embedder(model, batch_size=64), AllenNlpStylePipeline(model)
        diff = max(np.abs(a - b).max() for a, b in zip(lab.embed(sentences[:64]), allen.embed(sentences[:64])))
        times = interleaved_best(
            {"lab": lambda lab=lab: lab.embed(sentences), "allennlp": lambda allen=allen: allen.embed(sentences)},
            args.repeats,
            warm_up=False,  # the output comparison above ran both already
        )
        ratio = times["allennlp"] / times["lab"]
        target = 2.0 if size == "small" else 1.6
        print(
            f"[{size}] lab {n_tokens / times['lab']:7.0f} tokens/s, AllenNLP-style {n_tokens / times['allennlp']:7.0f} "
            f"tokens/s: {ratio:.2f}x (target >= {target}x); max abs difference {diff:.1e}"
        )
    if args.skip_command:
        return
    train = [s.words for s in load_dataset("ewt", "train", args.data_dir)]
    corpus = train + dev
    big = (corpus * (20000 // len(corpus) + 1))[:20000]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        torch.manual_seed(0)
        save_checkpoint(ElmoBiLM(get_preset("small")), work / "small", {"name": "random small"}, dtype=torch.float32)
        for n in (2000, 20000):
            rate, rss = command_run(work / "small", big[:n], work, args.threads)
            print(f"probing-lab embed, small, {n} sentences: {rate:.0f} tokens/s, peak RSS {rss:.0f} MB")


if __name__ == "__main__":
    main()
