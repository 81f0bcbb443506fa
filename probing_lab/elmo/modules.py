"""The ELMo building blocks: char CNN + highway + projection, the projected biLSTM, scalar mix.

Parameter layouts follow the math, not TensorFlow: everything is ``x @ W`` with ``W`` of
shape ``(in, out)`` (as in the hdf5 file), LSTM gates are ordered i, f, g, o as in PyTorch,
and the LSTM bias already contains the forget bias of 1.0 that TensorFlow adds at run time.
Conversions from and to the released files live in :mod:`probing_lab.elmo.weights`.
"""

from __future__ import annotations

import math
import warnings
from typing import Optional, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .config import ElmoOptions
from .interventions import apply_functions, unit_masks

LstmState = tuple[torch.Tensor, torch.Tensor]  # h (layers, 2, batch, proj), c (layers, 2, batch, cell)


class Highway(nn.Module):
    """bilm-tf's highway layer: ``carry * relu(x W_t + b_t) + (1 - carry) * x``,
    ``carry = sigmoid(x W_c + b_c)``. (AllenNLP's ``g*x + (1-g)*f(x)`` form is the same
    layer with the carry weights negated.)"""

    def __init__(self, dim: int):
        super().__init__()
        self.w_carry = nn.Parameter(torch.empty(dim, dim))
        self.b_carry = nn.Parameter(torch.empty(dim))
        self.w_transform = nn.Parameter(torch.empty(dim, dim))
        self.b_transform = nn.Parameter(torch.empty(dim))

    @torch.no_grad()
    def reset_parameters(self, generator: Optional[torch.Generator] = None) -> None:
        """N(0, 1/dim) weights; carry bias -2 so that the layer starts close to the identity."""
        std = math.sqrt(1.0 / self.w_carry.shape[0])
        self.w_carry.normal_(0.0, std, generator=generator)
        self.w_transform.normal_(0.0, std, generator=generator)
        self.b_carry.fill_(-2.0)
        self.b_transform.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        carry = torch.sigmoid(torch.addmm(self.b_carry, x, self.w_carry))
        transform = torch.relu(torch.addmm(self.b_transform, x, self.w_transform))
        return carry * transform + (1.0 - carry) * x


class CharTokenEncoder(nn.Module):
    """Shifted char ids ``(batch, tokens, 50)`` -> type vectors ``(batch, tokens, proj)``.

    Embedding (row 0 fixed at zero) -> one convolution per filter width, max over positions,
    activation -> highway layers -> linear projection. Positions whose ids are all 0 ("no
    token") come out as zeros.
    """

    def __init__(self, options: ElmoOptions):
        super().__init__()
        # 261 trainable rows; row 0 ("no token") is prepended as zeros at run time.
        self.char_embed = nn.Parameter(torch.empty(N_STORED_CHARS, options.char_dim))
        self.convs = nn.ModuleList(nn.Conv1d(options.char_dim, n, kernel_size=width) for width, n in options.filters)
        self.highways = nn.ModuleList(Highway(options.n_filters) for _ in range(options.n_highway))
        self.w_proj = nn.Parameter(torch.empty(options.n_filters, options.projection_dim))
        self.b_proj = nn.Parameter(torch.empty(options.projection_dim))
        self.activation = torch.relu if options.activation == "relu" else torch.tanh

    @torch.no_grad()
    def reset_parameters(self, generator: Optional[torch.Generator] = None) -> None:
        """Char embeddings U(-1, 1); convolutions and projection N(0, 1/fan_in), zero biases."""
        self.char_embed.uniform_(-1.0, 1.0, generator=generator)
        for conv in self.convs:
            _, char_dim, width = conv.weight.shape
            conv.weight.normal_(0.0, math.sqrt(1.0 / (width * char_dim)), generator=generator)
            conv.bias.zero_()
        for highway in self.highways:
            highway.reset_parameters(generator)
        self.w_proj.normal_(0.0, math.sqrt(1.0 / self.w_proj.shape[0]), generator=generator)
        self.b_proj.zero_()

    def char_table(self) -> torch.Tensor:
        return F.pad(self.char_embed, (0, 0, 1, 0))

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        batch, tokens, n_chars = char_ids.shape
        flat = char_ids.reshape(-1, n_chars)
        x = F.embedding(flat, self.char_table())  # (N, 50, char_dim)
        h = torch.cat([self.activation(_conv_max(x, conv)) for conv in self.convs], dim=-1)
        for highway in self.highways:
            h = highway(h)
        out = torch.addmm(self.b_proj, h, self.w_proj)
        present = (flat > 0).any(dim=-1, keepdim=True)
        return (out * present).view(batch, tokens, -1)


N_STORED_CHARS = 261


def _conv_max(x: torch.Tensor, conv: nn.Conv1d) -> torch.Tensor:
    """``max over positions of conv1d(x)``, ``x (N, chars, char_dim)`` -> ``(N, filters)``, as one
    matrix product over the unfolded character windows: 1.3-1.8x faster than ``conv1d`` here,
    forward and backward (benchmarks/embed_speed.py). The bias is added after the max (same
    result: it is constant over positions); max(), not amax(), whose backward compares every
    position instead of scattering to the argmax."""
    n_filters, char_dim, width = conv.weight.shape
    windows = x.unfold(1, width, 1)  # (N, positions, char_dim, width)
    flat = windows.reshape(*windows.shape[:2], char_dim * width)
    return torch.matmul(flat, conv.weight.reshape(n_filters, -1).t()).max(dim=1).values + conv.bias


class ProjectedLstmLayer(nn.Module):
    """Forward and backward LSTM cells with projection, one layer, both directions together.

    Shapes: ``input_weight (2, in, 4*cell)``, ``hidden_weight (2, proj, 4*cell)``,
    ``bias (2, 4*cell)``, ``proj_weight (2, cell, proj)``; index 0 = forward, 1 = backward.
    """

    def __init__(self, input_dim: int, cell_dim: int, proj_dim: int):
        super().__init__()
        self.input_weight = nn.Parameter(torch.empty(2, input_dim, 4 * cell_dim))
        self.hidden_weight = nn.Parameter(torch.empty(2, proj_dim, 4 * cell_dim))
        self.bias = nn.Parameter(torch.empty(2, 4 * cell_dim))
        self.proj_weight = nn.Parameter(torch.empty(2, cell_dim, proj_dim))

    @torch.no_grad()
    def reset_parameters(self, generator: Optional[torch.Generator] = None) -> None:
        """Glorot-uniform kernels (input and recurrent as one matrix, as TF's LSTMCell), zero
        biases but the forget gate's 1.0 (gate order i, f, g, o)."""
        fan_in = self.input_weight.shape[1] + self.hidden_weight.shape[1]
        four_cell = self.input_weight.shape[2]
        bound = math.sqrt(6.0 / (fan_in + four_cell))
        self.input_weight.uniform_(-bound, bound, generator=generator)
        self.hidden_weight.uniform_(-bound, bound, generator=generator)
        cell, proj = self.proj_weight.shape[1:]
        bound = math.sqrt(6.0 / (cell + proj))
        self.proj_weight.uniform_(-bound, bound, generator=generator)
        self.bias.zero_()
        self.bias[:, cell : 2 * cell] = 1.0


class BiLstm(nn.Module):
    """The ELMo biLSTM: separate forward and backward stacks of projected LSTMs with cell
    and projection clipping and a residual connection around every layer but the first.

    The exact path does the input-to-gate products of all time steps in one batched matrix
    product per layer (both directions at once), then a loop over time steps whose body is a
    handful of batched tensor ops: no Python work per token.
    """

    def __init__(self, options: ElmoOptions):
        super().__init__()
        self.cell_dim = options.lstm_dim
        self.proj_dim = options.projection_dim
        self.cell_clip = options.cell_clip
        self.proj_clip = options.proj_clip
        self.residual = options.use_skip_connections
        self.layers = nn.ModuleList(
            ProjectedLstmLayer(options.projection_dim, options.lstm_dim, options.projection_dim)
            for _ in range(options.n_layers)
        )

    def zero_state(self, batch: int, device=None, dtype=torch.float32) -> LstmState:
        n = len(self.layers)
        return (
            torch.zeros(n, 2, batch, self.proj_dim, device=device, dtype=dtype),
            torch.zeros(n, 2, batch, self.cell_dim, device=device, dtype=dtype),
        )

    def forward(
        self,
        inputs: torch.Tensor,
        mask: torch.Tensor,
        state: Optional[LstmState] = None,
        fused: bool = False,
        inputs_backward: Optional[torch.Tensor] = None,
        interventions: Sequence = (),
    ) -> tuple[list[torch.Tensor], LstmState]:
        """``inputs (batch, T, proj)``, ``mask (batch, T)`` bool, left-aligned sequences;
        ``inputs_backward``: what the backward LM reads instead, when it differs (an intervention
        on the type layer); ``interventions``: those of the LSTM layers (see ``ElmoBiLM.forward``).

        Returns the output of every layer, each ``(batch, T, 2*proj)`` (forward | backward,
        zero at padding), and the final state of every row (after its last real token going
        forward, after its first token going backward), for stateful use.
        ``fused=True`` runs ``torch.lstm`` (no clipping; see the README for its difference).
        """
        batch, T, _ = inputs.shape
        if fused and state is not None:
            raise ValueError("the fused torch.lstm path is stateless; use the exact path for stateful mode")
        if state is None:
            state = self.zero_state(batch, inputs.device, inputs.dtype)
        lengths = mask.sum(dim=1)
        rev = _reverse_index(lengths, T)  # backward direction runs on per-row reversed sequences
        backward = inputs if inputs_backward is None else inputs_backward
        x = torch.stack([inputs, _gather_time(backward, rev)])  # (2, batch, T, proj)
        # (T, batch, 1); None when no row is padded (length-sorted batches mostly are not)
        step_mask = mask.t().unsqueeze(-1) if not bool(mask.all()) else None
        layers, final = self._layer_loop(x, step_mask, state, fused=fused, interventions=interventions, rev=rev)
        # padding comes after each row's real steps in both reading orders, so it never reaches
        # a real position; it is zeroed in what is returned
        outputs = [torch.cat([y[0], _gather_time(y[1], rev)], dim=-1) * mask.unsqueeze(-1) for y in layers]
        return outputs, final

    def forward_streams(
        self, x: torch.Tensor, state: LstmState, dropout: float = 0.0
    ) -> tuple[torch.Tensor, LstmState]:
        """Language-model training: ``x (2, batch, T, proj)`` holds each direction's window in
        its own reading order (the backward LM reads reversed sentences), no padding; the state
        carries over from the previous window. Dropout on every layer's input, as bilm-tf.
        Returns the top layer ``(2, batch, T, proj)`` and the new state."""
        layers, final = self._layer_loop(x, None, state, dropout=dropout)
        return layers[-1], final

    def _layer_loop(
        self, x, step_mask, state: LstmState, dropout: float = 0.0, fused: bool = False, interventions=(), rev=None
    ):
        """Every layer over ``x (2, batch, T, in)`` (each direction in its reading order): the
        outputs of each layer, residual included, and the final state ``(h, c)``. ``rev`` turns the
        backward direction's reading order into sentence order (for ``interventions``)."""
        run = self._run_fused if fused else self._run_exact
        outputs, h_final, c_final = [], [], []
        for k, layer in enumerate(self.layers):
            inputs = F.dropout(x, dropout, self.training) if dropout else x
            if interventions:
                cell_keep, output_keep = unit_masks(interventions, k + 1, self.cell_dim)
                y, h, c = run(layer, inputs, step_mask, state[0][k], state[1][k], cell_keep, output_keep)
            else:
                y, h, c = run(layer, inputs, step_mask, state[0][k], state[1][k])
            if self.residual and k > 0:
                y = y + x
            if interventions:
                forward = apply_functions(interventions, k + 1, 0, y[0])
                backward = _gather_time(apply_functions(interventions, k + 1, 1, _gather_time(y[1], rev)), rev)
                y = torch.stack([forward, backward])
            outputs.append(y)
            h_final.append(h)
            c_final.append(c)
            x = y
        return outputs, (torch.stack(h_final), torch.stack(c_final))

    def _run_exact(self, layer, x, step_mask, h, c, cell_keep=None, output_keep=None):
        """One layer, both directions: ``x (2, batch, T, in)`` -> ``(2, batch, T, proj)``.
        ``cell_keep`` / ``output_keep (2, 1, cell)``: 0/1 masks on the cell state and on the units'
        output before the projection, applied at every step (unit ablation)."""
        directions, batch, T, _ = x.shape
        cell = self.cell_dim
        # Gate columns reordered i, f, o, g so that the three sigmoid gates are one slice: one
        # sigmoid per step, and split/chunk (whose backward concatenates) instead of slicing
        # (whose backward writes a zero tensor per slice).
        w_input, w_hidden, bias = (
            _sigmoid_gates_first(w) for w in (layer.input_weight, layer.hidden_weight, layer.bias)
        )
        # Every step's gate inputs (2, T, batch, 4*cell): step t reads gates_x[:, t], a contiguous
        # (batch, 4*cell) block per direction (a time-major copy across directions was a tenth of an extraction).
        x_time = x.transpose(1, 2).reshape(directions, T * batch, -1)
        gates_x = torch.baddbmm(bias.unsqueeze(1), x_time, w_input).view(directions, T, batch, -1)
        steps = []
        n_full = T if step_mask is None else int(step_mask.squeeze(-1).all(dim=1).logical_not().int().argmax())
        # unbind, not gates_x[t]: the backward of an index op writes a zero tensor the size of
        # all T steps for every step (quadratic in T); unbind's backward stacks once.
        for t, gates_in in enumerate(gates_x.unbind(1)):
            gates = torch.baddbmm(gates_in, h, w_hidden)
            ifo, g = gates.split([3 * cell, cell], dim=-1)
            i, f, o = torch.sigmoid(ifo).chunk(3, dim=-1)
            c_new = torch.addcmul(f * c, i, torch.tanh(g))
            if self.cell_clip:
                c_new = c_new.clamp(-self.cell_clip, self.cell_clip)
            if cell_keep is not None:
                c_new = c_new * cell_keep
            unit_out = o * torch.tanh(c_new)
            if output_keep is not None:
                unit_out = unit_out * output_keep
            h_new = torch.bmm(unit_out, layer.proj_weight)
            if self.proj_clip:
                h_new = h_new.clamp(-self.proj_clip, self.proj_clip)
            if step_mask is None or t < n_full:
                c, h = c_new, h_new
            else:  # rows past their end keep their state
                c = torch.where(step_mask[t], c_new, c)
                h = torch.where(step_mask[t], h_new, h)
            steps.append(h_new)
        return torch.stack(steps, dim=2), h, c

    def _run_fused(self, layer, x, step_mask, h, c):
        # Padding comes after each row's real steps (backward rows are reversed), so the
        # outputs at real positions are right; the final state is not (stateless only).
        outs = []
        for d in range(2):
            params = [
                layer.input_weight[d].t(),
                layer.hidden_weight[d].t(),
                layer.bias[d],
                torch.zeros_like(layer.bias[d]),
                layer.proj_weight[d].t(),
            ]
            with warnings.catch_warnings():  # "projections not supported with oneDNN": expected
                warnings.simplefilter("ignore", UserWarning)
                y, _, _ = torch.lstm(x[d], (h[d : d + 1], c[d : d + 1]), params, True, 1, 0.0, False, False, True)
            outs.append(y)
        return torch.stack(outs), h, c


def _sigmoid_gates_first(w: torch.Tensor) -> torch.Tensor:
    """Last dim in gate order i, f, g, o -> i, f, o, g."""
    i, f, g, o = w.chunk(4, dim=-1)
    return torch.cat([i, f, o, g], dim=-1)


def _reverse_index(lengths: torch.Tensor, T: int) -> torch.Tensor:
    """``(batch, T)`` index that reverses each row's first ``length`` steps, padding in place."""
    t = torch.arange(T, device=lengths.device).unsqueeze(0)
    L = lengths.unsqueeze(1)
    return torch.where(t < L, L - 1 - t, t)


def _gather_time(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``x (..., batch, T, d)`` reordered along T by ``index (batch, T)``."""
    return torch.gather(x, -2, index.unsqueeze(-1).expand_as(x))


class ScalarMix(nn.Module):
    """``gamma * sum_j softmax(w)_j * layer_j`` over the biLM's layers (Peters et al. eq. 1)."""

    def __init__(
        self, n_layers: int = 3, weights: Optional[list[float]] = None, gamma: float = 1.0, trainable: bool = True
    ):
        super().__init__()
        init = torch.tensor(weights if weights is not None else [0.0] * n_layers, dtype=torch.float32)
        if init.numel() != n_layers:
            raise ValueError(f"ScalarMix: {init.numel()} weights given for {n_layers} layers")
        self.weights = nn.Parameter(init, requires_grad=trainable)
        self.gamma = nn.Parameter(torch.tensor(float(gamma)), requires_grad=trainable)

    def forward(self, layers) -> torch.Tensor:
        """``layers``: a list of equal-shape tensors, or one tensor with layers on dim 0."""
        stacked = torch.stack(list(layers)) if not torch.is_tensor(layers) else layers
        if stacked.shape[0] != self.weights.numel():
            raise ValueError(f"ScalarMix expects {self.weights.numel()} layers, got {stacked.shape[0]}")
        w = torch.softmax(self.weights, dim=0).view(-1, *([1] * (stacked.dim() - 1)))
        return self.gamma * (w * stacked).sum(dim=0)
