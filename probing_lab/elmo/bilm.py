"""The ELMo bidirectional language model: char CNN type layer + projected biLSTM."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import torch
from torch import nn

from .config import ElmoOptions
from .interventions import Intervention, apply_functions, check_interventions
from .modules import BiLstm, CharTokenEncoder, LstmState


@dataclass
class BiLMOutput:
    """``layers[k]``: ``(batch, T, 2*proj)`` for k = 0 (type layer, repeated fwd|bwd), 1..n
    (LSTM layers, forward | backward); ``mask (batch, T)`` bool; ``state`` the final LSTM state."""

    layers: list[torch.Tensor]
    mask: torch.Tensor
    state: LstmState

    def without_boundaries(self) -> "BiLMOutput":
        """Drop ``<S>`` and ``</S>``: every row is shifted left by one and loses its last token."""
        lengths = self.mask.sum(dim=1) - 2
        T = max(int(lengths.max()) if lengths.numel() else 0, 0)
        new_mask = torch.arange(T, device=self.mask.device).unsqueeze(0) < lengths.unsqueeze(1)
        layers = [x[:, 1 : T + 1] * new_mask.unsqueeze(-1) for x in self.layers]
        return BiLMOutput(layers, new_mask, self.state)


class ElmoBiLM(nn.Module):
    def __init__(self, options: ElmoOptions):
        super().__init__()
        self.options = options
        self.token_encoder = CharTokenEncoder(options)
        self.lstm = BiLstm(options)
        self.reset_parameters()

    @property
    def n_layers(self) -> int:
        """Number of output layers, type layer included (3 for ELMo)."""
        return len(self.lstm.layers) + 1

    @property
    def output_dim(self) -> int:
        return self.options.output_dim

    def forward(
        self,
        char_ids: torch.Tensor,
        state: Optional[LstmState] = None,
        fused: bool = False,
        token_vectors: Optional[torch.Tensor] = None,
        interventions: Sequence[Intervention] = (),
    ) -> BiLMOutput:
        """``char_ids (batch, T, 50)`` shifted ids with the boundary tokens included (see
        :func:`~probing_lab.elmo.chars.batch_to_ids`). ``token_vectors (batch, T, proj)`` may
        be given instead of running the char CNN (a type-vector cache). ``interventions``
        change layer outputs on the way up (:mod:`probing_lab.elmo.interventions`)."""
        mask = (char_ids > 0).any(dim=-1)
        if token_vectors is None:
            token_vectors = self.token_encoder(char_ids)
        return self.from_token_vectors(token_vectors, mask, state, fused, interventions)

    def from_token_vectors(
        self,
        token_vectors: torch.Tensor,
        mask: torch.Tensor,
        state: Optional[LstmState] = None,
        fused: bool = False,
        interventions: Sequence[Intervention] = (),
    ) -> BiLMOutput:
        """The biLM above the type layer: ``token_vectors (batch, T, proj)`` (zero at padding),
        ``mask (batch, T)`` bool, boundaries included."""
        if not interventions:
            lstm_layers, new_state = self.lstm(token_vectors, mask, state, fused=fused)
            layers = [torch.cat([token_vectors, token_vectors], dim=-1), *lstm_layers]
            return BiLMOutput(layers, mask, new_state)
        if fused:
            raise ValueError("interventions run on the exact LSTM path; leave fused off")
        check_interventions(interventions, len(self.lstm.layers), self.options.lstm_dim)
        keep = mask.unsqueeze(-1)
        forward_in, backward_in = (apply_functions(interventions, 0, side, token_vectors) * keep for side in (0, 1))
        lstm_layers, new_state = self.lstm(
            forward_in, mask, state, inputs_backward=backward_in, interventions=interventions
        )
        return BiLMOutput([torch.cat([forward_in, backward_in], dim=-1), *lstm_layers], mask, new_state)

    def count_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    @torch.no_grad()
    def reset_parameters(self, generator: Optional[torch.Generator] = None) -> None:
        """bilm-tf's initialisation, each part by its own rule (see their ``reset_parameters``);
        the order of the random draws is fixed, so a seed always gives the same model."""
        self.token_encoder.reset_parameters(generator)
        for layer in self.lstm.layers:
            layer.reset_parameters(generator)
