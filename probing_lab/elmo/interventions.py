"""Interventions: run the biLM with one layer's output changed before the layers above it and the
softmax read it (the model's one hook for causal analysis; it knows nothing of who uses it).

An :class:`Intervention` names a site, ``layer`` (0: the type layer, 1..n: the LSTM layers) and
``direction`` (``"forward"`` or ``"backward"``: each LM reads only its own half, and the type layer
feeds both), and what to do there:

* ``fn``: a function on the layer's output ``(batch, T, proj) -> (batch, T, proj)``, positions in
  sentence order with the boundary tokens (position 0 is ``<S>``, the first word is 1), whatever the
  direction reads them in. :func:`replace`, :func:`project_out`, :func:`set_units` and
  :func:`copy_from` make the usual ones.
* ``cell_units`` / ``output_units`` (LSTM layers only): units of the LSTM (0..lstm_dim-1) zeroed
  inside the recurrence at every time step: the unit's cell state, or its output ``o * tanh(c)``
  before the projection, so the change also reaches the layer's later time steps (the unit
  ablation of Lakretz et al. 2019). :func:`ablate_units` makes them.

``ElmoBiLM.forward(..., interventions=[...])`` applies them, in the order given at each site; with
none the model runs the very same operations as without the argument (bit-identical outputs).
The exact LSTM path only: the fused path refuses them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import torch

DIRECTIONS = ("forward", "backward")


@dataclass(frozen=True)
class Intervention:
    layer: int
    direction: str
    fn: Optional[Callable[[torch.Tensor], torch.Tensor]] = None
    cell_units: tuple = ()
    output_units: tuple = ()

    @property
    def side(self) -> int:
        """0 for the forward LM, 1 for the backward LM (the biLSTM's direction axis)."""
        return DIRECTIONS.index(self.direction)


def check_interventions(interventions: Sequence[Intervention], n_lstm_layers: int, lstm_dim: int) -> None:
    """Refuse what the model cannot do, naming the intervention (ValueError)."""
    for iv in interventions:
        if not isinstance(iv, Intervention):
            raise ValueError(f"not an Intervention: {iv!r}")
        if iv.direction not in DIRECTIONS:
            raise ValueError(f"intervention direction must be one of {DIRECTIONS}, got {iv.direction!r}")
        if not isinstance(iv.layer, int) or not 0 <= iv.layer <= n_lstm_layers:
            raise ValueError(f"intervention layer {iv.layer!r} does not exist: the model has layers 0-{n_lstm_layers}")
        units = (*iv.cell_units, *iv.output_units)
        if units and iv.layer == 0:
            raise ValueError("layer 0 (the type layer) has no LSTM units; ablate units of layers 1 and up")
        bad = [u for u in units if not isinstance(u, int) or not 0 <= u < lstm_dim]
        if bad:
            raise ValueError(f"unknown LSTM unit(s) {bad[:5]}: the layers have units 0-{lstm_dim - 1}")
        if iv.fn is None and not units:
            raise ValueError(f"intervention at layer {iv.layer} {iv.direction} does nothing: give fn or units")


def apply_functions(interventions: Sequence[Intervention], layer: int, side: int, h: torch.Tensor) -> torch.Tensor:
    """``h (batch, T, proj)`` (sentence order) after the functions of that site, in order."""
    for iv in interventions:
        if iv.fn is not None and iv.layer == layer and iv.side == side:
            out = iv.fn(h)
            if not torch.is_tensor(out) or out.shape != h.shape:
                raise ValueError(
                    f"intervention at layer {layer} {iv.direction} returned {getattr(out, 'shape', type(out))}, "
                    f"expected a tensor of shape {tuple(h.shape)}"
                )
            h = out
    return h


def unit_masks(interventions: Sequence[Intervention], layer: int, lstm_dim: int) -> tuple:
    """``(cell_keep, output_keep)`` for an LSTM layer: ``(2, 1, lstm_dim)`` 0/1 masks per direction,
    or None where nothing is ablated."""
    masks = []
    for field in ("cell_units", "output_units"):
        chosen = [(iv.side, u) for iv in interventions if iv.layer == layer for u in getattr(iv, field)]
        if not chosen:
            masks.append(None)
            continue
        keep = torch.ones(2, 1, lstm_dim)
        for side, u in chosen:
            keep[side, 0, u] = 0.0
        masks.append(keep)
    return tuple(masks)


def _positions(h: torch.Tensor, positions) -> torch.Tensor:
    """A bool ``(batch, T, 1)`` selector of ``positions`` (None: every position)."""
    select = torch.zeros(h.shape[:2] + (1,), dtype=torch.bool, device=h.device)
    if positions is None:
        select[:] = True
    else:
        select[:, list(positions)] = True
    return select


def replace(layer: int, direction: str, values: torch.Tensor, positions=None) -> Intervention:
    """The layer's output at ``positions`` (None: all) becomes ``values`` (broadcast to
    ``(batch, T, proj)``: a vector, or a whole activation)."""
    return Intervention(layer, direction, lambda h: torch.where(_positions(h, positions), values.to(h), h))


def project_out(layer: int, direction: str, basis: torch.Tensor, positions=None) -> Intervention:
    """Remove the subspace spanned by the rows of ``basis (k, proj)`` (orthonormalised here):
    ``h - h Q Q^T``, as INLP's nullspace projection does."""
    q = torch.linalg.qr(basis.t().to(torch.float64))[0].to(torch.float32)  # (proj, k), orthonormal columns

    def fn(h: torch.Tensor) -> torch.Tensor:
        projected = h - (h @ q.to(h)) @ q.to(h).t()
        return torch.where(_positions(h, positions), projected, h)

    return Intervention(layer, direction, fn)


def set_units(layer: int, direction: str, units: Sequence[int], value: float = 0.0, positions=None) -> Intervention:
    """Dimensions ``units`` of the layer's output set to ``value`` (0: zeroed) at ``positions``."""
    units = list(units)

    def fn(h: torch.Tensor) -> torch.Tensor:
        out = h.clone()
        chosen = out[..., units]
        out[..., units] = torch.where(_positions(h, positions), torch.full_like(chosen, value), chosen)
        return out

    return Intervention(layer, direction, fn)


def copy_from(layer: int, direction: str, source: torch.Tensor, positions: Sequence[int]) -> Intervention:
    """Activation patching: at ``positions``, the layer's output is copied from ``source``, the same
    layer's output ``(batch or 1, T, proj)`` on another sentence of the same length (e.g. from
    ``ElmoBiLM.forward(...).layers[layer]``, the matching half)."""

    def fn(h: torch.Tensor) -> torch.Tensor:
        if source.shape[-2:] != h.shape[-2:]:
            raise ValueError(
                f"copy_from: the source has {source.shape[-2]} positions, this sentence {h.shape[-2]}: "
                "patching needs two sentences of the same length"
            )
        return torch.where(_positions(h, positions), source.to(h).expand_as(h), h)

    return Intervention(layer, direction, fn)


def ablate_units(
    layer: int, direction: str, cell_units: Sequence[int] = (), output_units: Sequence[int] = ()
) -> Intervention:
    """LSTM units of ``layer`` (>= 1) zeroed at every time step inside the recurrence."""
    return Intervention(layer, direction, cell_units=tuple(cell_units), output_units=tuple(output_units))
