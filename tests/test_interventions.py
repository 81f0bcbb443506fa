"""The biLM's intervention hook: nothing changes without one (bit for bit), each kind does what it
says at its site, the change travels only where the architecture lets it, bad ones are refused."""

from __future__ import annotations

import pytest
import torch
from conftest import TINY_MODEL

from probing_lab.elmo import ElmoBiLM, ElmoOptions, batch_to_ids
from probing_lab.elmo.interventions import (
    Intervention,
    ablate_units,
    copy_from,
    project_out,
    replace,
    set_units,
)

SENTENCES = [["the", "cats", "near", "the", "door", "sleep"], ["a", "dog", "barks"]]


@pytest.fixture(scope="module")
def model():
    m = ElmoBiLM(ElmoOptions.from_dict(TINY_MODEL))
    m.reset_parameters(torch.Generator().manual_seed(0))
    return m.eval()


def run(model, interventions=(), sentences=SENTENCES):
    with torch.no_grad():
        return model(batch_to_ids(sentences), interventions=interventions)


def halves(x):
    d = x.shape[-1] // 2
    return x[..., :d], x[..., d:]


def test_identity_interventions_at_every_site_change_nothing_bit_for_bit(model):
    plain = run(model)
    every = [Intervention(k, d, fn=lambda h: h) for k in range(3) for d in ("forward", "backward")]
    changed = run(model, every)
    for a, b in zip(plain.layers, changed.layers):
        assert torch.equal(a, b)  # padded second row included
    assert all(torch.equal(a, b) for a, b in zip(plain.state, changed.state))


def test_a_forward_change_reaches_later_forward_positions_and_never_the_backward_lm(model):
    plain = run(model)
    p = 3  # "near" (position 0 is <S>)
    out = run(model, [set_units(1, "forward", range(8), 0.0, positions=[p])])
    f_plain, b_plain = halves(plain.layers[1])
    f_new, b_new = halves(out.layers[1])
    assert torch.equal(f_new[0, p], torch.zeros(8))
    assert torch.equal(f_new[:, :p], f_plain[:, :p])  # the forward LM has not read position p yet
    assert torch.equal(b_new, b_plain) and torch.equal(halves(out.layers[2])[1], halves(plain.layers[2])[1])
    assert not torch.allclose(halves(out.layers[2])[0][0, p:], halves(plain.layers[2])[0][0, p:])  # the layer above
    assert torch.equal(halves(out.layers[2])[0][:, :p], halves(plain.layers[2])[0][:, :p])


def test_a_backward_change_at_the_type_layer_reaches_earlier_positions_only(model):
    plain = run(model)
    p = 4
    out = run(model, [replace(0, "backward", torch.full((8,), 2.0), positions=[p])])
    assert torch.equal(halves(out.layers[0])[0], halves(plain.layers[0])[0])  # the forward LM reads the original
    assert torch.equal(halves(out.layers[0])[1][0, p], torch.full((8,), 2.0))
    for k in (1, 2):
        b_new, b_plain = halves(out.layers[k])[1], halves(plain.layers[k])[1]
        assert torch.equal(b_new[0, p + 1 :], b_plain[0, p + 1 :])  # read before position p, going backward
        assert not torch.allclose(b_new[0, : p + 1], b_plain[0, : p + 1])
        assert torch.equal(halves(out.layers[k])[0], halves(plain.layers[k])[0])


def test_project_out_removes_the_subspace_where_it_is_applied(model):
    basis = torch.randn(2, 8, generator=torch.Generator().manual_seed(1))
    out = run(model, [project_out(2, "forward", basis)])
    forward = halves(out.layers[2])[0]
    q, _ = torch.linalg.qr(basis.t())
    assert (forward @ q).abs().max() < 1e-5
    assert (halves(run(model).layers[2])[0] @ q).abs().max() > 1e-2  # it was there before


def test_ablating_every_cell_unit_of_the_first_layer_silences_it(model):
    out = run(model, [ablate_units(1, "forward", cell_units=range(16))])
    assert torch.equal(halves(out.layers[1])[0], torch.zeros_like(halves(out.layers[1])[0]))
    plain = run(model)
    one = run(model, [ablate_units(1, "backward", output_units=[3])])
    assert torch.equal(halves(one.layers[1])[0], halves(plain.layers[1])[0])
    assert not torch.allclose(halves(one.layers[1])[1], halves(plain.layers[1])[1])


def test_copy_from_patches_one_sentence_with_another_of_the_same_length(model):
    a, b = [["the", "cat", "sleeps"]], [["the", "cats", "sleep"]]
    source = halves(run(model, sentences=b).layers[1])[0]
    patched = run(model, [copy_from(1, "forward", source, positions=range(5))], sentences=a)
    target = run(model, sentences=b)
    assert torch.allclose(halves(patched.layers[2])[0], halves(target.layers[2])[0], atol=1e-6)
    with pytest.raises(ValueError, match="same length"):
        run(model, [copy_from(1, "forward", source, positions=[1])], sentences=[["a", "much", "longer", "one"]])


@pytest.mark.parametrize(
    "bad, message",
    [
        (Intervention(3, "forward", fn=lambda h: h), "layers 0-2"),
        (Intervention(1, "sideways", fn=lambda h: h), "direction"),
        (ablate_units(1, "forward", cell_units=[16]), "units 0-15"),
        (ablate_units(0, "forward", cell_units=[1]), "no LSTM units"),
        (Intervention(1, "forward"), "does nothing"),
        (Intervention(1, "forward", fn=lambda h: h[..., :3]), "expected a tensor of shape"),
    ],
)
def test_bad_interventions_are_refused_naming_the_problem(model, bad, message):
    with pytest.raises(ValueError, match=message):
        run(model, [bad])


def test_the_fused_path_refuses_interventions(model):
    with pytest.raises(ValueError, match="exact LSTM path"):
        model(batch_to_ids(SENTENCES), fused=True, interventions=[set_units(1, "forward", [0])])
