import numpy as np
import pytest
import torch

from probing_lab.elmo import ElmoBiLM, Embedder, ScalarMix, get_preset
from probing_lab.text import split_and_tokenize, tokenize


@pytest.fixture(scope="module")
def model():
    m = ElmoBiLM(get_preset("cpu-tiny"))
    m.reset_parameters(torch.Generator().manual_seed(1))
    return m


SHORT = ["The", "bank", "closed", "."]
LONG = "Reeds grow thick along the muddy bank of the slow brown river in the late summer heat .".split()


def test_same_sentence_same_vectors_whatever_the_batch(model):
    alone = Embedder(model).embed([SHORT])[0]
    for batch in ([LONG, SHORT], [SHORT, LONG, LONG[:3]], [LONG] * 5 + [SHORT]):
        got = Embedder(model).embed(batch)[batch.index(SHORT)]
        np.testing.assert_allclose(got, alone, atol=1e-5)


def test_output_shapes_order_and_layer0(model):
    sents = [LONG, SHORT, [], LONG[:5]]
    out = Embedder(model, batch_size=2).embed(sents)
    assert [a.shape for a in out] == [(3, len(s), 128) for s in sents]
    np.testing.assert_array_equal(out[1][0, :, :64], out[1][0, :, 64:])  # L0 = type vector twice
    # L0 is context-free: "bank" has the same L0 in both sentences, different L1/L2
    a, b = out[0][:, LONG.index("bank")], out[1][:, 1]
    np.testing.assert_allclose(a[0], b[0], atol=1e-6)
    assert np.abs(a[1] - b[1]).max() > 1e-3


def test_keep_boundaries(model):
    out = Embedder(model).run_batch([SHORT], keep_boundaries=True)
    assert out.layers[0].shape[1] == len(SHORT) + 2 and int(out.mask.sum()) == len(SHORT) + 2
    inner = Embedder(model).embed([SHORT])[0]
    np.testing.assert_allclose(out.layers[2][0, 1:-1].numpy(), inner[2], atol=1e-6)


def test_stateful_carries_and_resets(model):
    elmo = Embedder(model, stateful=True)
    first = elmo.embed_batch([SHORT])[0]
    second = elmo.embed_batch([SHORT])[0]
    assert np.abs(first[1] - second[1]).max() > 1e-4  # state carried: different vectors
    elmo.reset_state()
    np.testing.assert_allclose(elmo.embed_batch([SHORT])[0], first, atol=1e-6)
    elmo.embed_batch([SHORT, LONG, SHORT])  # a larger batch grows the state
    assert elmo._state[0].shape[2] == 3


def test_scalar_mix_by_hand():
    mix = ScalarMix(3, weights=[0.0, np.log(2.0), np.log(3.0)], gamma=2.0)
    layers = [torch.full((2, 4), v) for v in (1.0, 2.0, 3.0)]
    expected = 2.0 * (1 * 1 + 2 * 2 + 3 * 3) / 6
    torch.testing.assert_close(mix(layers), torch.full((2, 4), expected))
    with pytest.raises(ValueError, match="expects 3 layers"):
        mix(layers[:2])


def test_bad_input_errors(model):
    elmo = Embedder(model)
    with pytest.raises(TypeError, match="list of token lists"):
        elmo.embed(["The bank closed"])
    with pytest.raises(ValueError, match="sentence 1, token 0"):
        elmo.embed([SHORT, ["", "x"]])
    with pytest.raises(ValueError, match="empty"):
        elmo.embed_text("   ")
    huge = ["x" * 10_000, "🙂" * 40, "\u0000odd", "日本語"]
    assert elmo.embed([huge])[0].shape == (3, 4, 128)


def test_tokenizer_conventions():
    assert tokenize("I don't know, it's 3.5% of U.S. sales...") == [
        "I",
        "do",
        "n't",
        "know",
        ",",
        "it",
        "'s",
        "3.5",
        "%",
        "of",
        "U.S.",
        "sales",
        "...",
    ]
    assert split_and_tokenize('Mr. Smith said "Hi." Then he left!\n\nNew para.') == [
        ["Mr.", "Smith", "said", '"', "Hi", ".", '"'],
        ["Then", "he", "left", "!"],
        ["New", "para", "."],
    ]
    assert split_and_tokenize("") == []


def test_char_cnn_once_per_distinct_word_equals_a_cnn_run_on_every_token(model):
    from probing_lab.elmo.chars import batch_to_ids

    sentences = [SHORT, LONG, ["bank", "bank", "bank"], [], LONG[:3]]
    calls = []
    hook = model.token_encoder.register_forward_hook(lambda m, args, out: calls.append(args[0].shape))
    try:
        out = Embedder(model).run_batch(sentences, keep_boundaries=True)
    finally:
        hook.remove()
    distinct = len({w for s in sentences for w in s})
    assert calls == [(1, 2, 50), (1, distinct, 50)]  # the boundaries, then each distinct word once
    with torch.inference_mode():
        reference = model(batch_to_ids(sentences))  # the char CNN on every position of the padded batch
    assert torch.equal(out.mask, reference.mask)
    for a, b in zip(out.layers, reference.layers):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)


def test_char_cnn_in_chunks_gives_the_same_vectors(model, monkeypatch):
    sentences = [SHORT, LONG]
    whole = Embedder(model).embed(sentences)
    monkeypatch.setattr(Embedder, "CNN_CHUNK", 3)  # many chunks of 3 words
    for a, b in zip(whole, Embedder(model).embed(sentences)):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_one_embedder_serves_several_threads(model):
    """The app's sessions share one Embedder: threads embedding at once get what each gets alone."""
    from concurrent.futures import ThreadPoolExecutor

    elmo = Embedder(model)
    texts = [[f"word{i}", "by", "the", "river", "bank", "."][: 2 + i % 5] for i in range(16)]
    alone = [elmo.embed([t])[0] for t in texts]
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda t: elmo.embed([t])[0], texts))
    for a, b in zip(alone, together):
        np.testing.assert_array_equal(a, b)
