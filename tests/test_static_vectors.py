"""Static word2vec vectors (probing_lab.static): training on a corpus folder, loading without gensim,
the OOV policy, bad files, the encoder protocol, and the shipped vectors' neighbours."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from probing_lab.fileio import RUN_MARKER, OutputError
from probing_lab.static import StaticEncoder, StaticVectors, train_word2vec

pytest.importorskip("gensim")

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "data" / "models" / "word2vec-lab"


def _write_corpus(folder: Path, n: int = 400, seed: int = 0) -> list[list[str]]:
    """A corpus folder as `probing-lab corpus build` writes it: train/shard-*.txt and stats.json."""
    rng = random.Random(seed)
    animals, money, verbs = ["cat", "dog", "horse", "cow"], ["bank", "money", "loan", "cash"], ["sees", "likes", "has"]
    sentences = []
    for i in range(n):
        group = animals if i % 2 else money
        sentences.append(["The", rng.choice(group), rng.choice(verbs), "a", rng.choice(group), "."])
    (folder / "train").mkdir(parents=True)
    half = n // 2
    for k, part in enumerate((sentences[:half], sentences[half:])):
        (folder / "train" / f"shard-{k:03d}.txt").write_text("".join(" ".join(s) + "\n" for s in part))
    tokens = sum(len(s) for s in sentences)
    (folder / "stats.json").write_text(json.dumps({"train": {"sentences": n, "tokens": tokens, "shards": 2}}))
    return sentences


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    base = tmp_path_factory.mktemp("w2v")
    sentences = _write_corpus(base / "corpus")
    card = train_word2vec(
        base / "corpus", base / "vectors", dim=16, top=10, epochs=3, min_count=2, workers=1, log=lambda m: None
    )
    return base, sentences, card


def test_train_writes_top_words_in_frequency_order(trained):
    base, sentences, card = trained
    out = base / "vectors"
    assert sorted(p.name for p in out.iterdir()) == [RUN_MARKER, "card.json", "vectors.safetensors", "vocab.txt"]
    v = StaticVectors.load(out)
    assert v.matrix.shape == (10, 16) and v.matrix.dtype == np.float16 and v.dim == 16
    counts = Counter(t for s in sentences for t in s)
    kept = [counts[w] for w in v.words]
    assert kept == sorted(kept, reverse=True)  # most frequent first
    dropped = [c for w, c in counts.items() if w not in v.index and c >= 2]
    assert dropped and max(dropped) <= min(kept)  # the top cut keeps the most frequent words
    assert v.words == (out / "vocab.txt").read_text().split("\n")[:-1]
    written = json.loads((out / "card.json").read_text())
    assert written == card
    assert card["corpus_tokens"] == sum(counts.values()) == card["corpus_tokens_read"]
    assert card["corpus_sentences"] == len(sentences)
    for key in ("dim", "epochs", "window", "min_count", "seed", "training_seconds", "gensim", "corpus"):
        assert key in card
    assert card["words"] == 10 and card["vocab_trained"] == len([w for w, c in counts.items() if c >= 2])


def test_same_seed_one_worker_gives_the_same_vectors(trained, tmp_path):
    base, _, _ = trained
    train_word2vec(
        base / "corpus", tmp_path / "again", dim=16, top=10, epochs=3, min_count=2, workers=1, log=lambda m: None
    )
    assert StaticEncoder(tmp_path / "again").fingerprint() == StaticEncoder(base / "vectors").fingerprint()


def test_oov_policy(trained):
    v = StaticVectors.load(trained[0] / "vectors")
    assert "The" in v.index and "the" not in v.index
    np.testing.assert_array_equal(v.vector("The"), v.matrix[v.index["The"]].astype(np.float32))
    assert v.vector("The").dtype == np.float32 and v.oov == 0
    np.testing.assert_array_equal(v.vector("A"), v.vector("a"))  # lowercased fallback
    assert v.oov == 0
    z = v.vector("zebra")
    assert z.shape == (16,) and not z.any() and v.oov == 1 and v.lookups == 5
    assert v.nearest("zebra") == [] and v.similarity("zebra", "The") == 0.0
    near = v.nearest("The", 3)
    assert len(near) == 3 and "The" not in [w for w, _ in near]
    assert near[0][1] >= near[1][1] >= near[2][1]


def test_encoder_protocol_and_fingerprint(trained, tmp_path):
    from probing_lab.features.cache import extract_features

    enc = StaticEncoder(StaticVectors.load(trained[0] / "vectors"), "w2v-test")
    assert enc.n_layers == 1 and enc.dim == 16
    arrays = enc.embed([["The", "cat", "unknownword"], ["a"]])
    assert [a.shape for a in arrays] == [(1, 3, 16), (1, 1, 16)]
    assert all(a.dtype == np.float32 for a in arrays)
    assert not arrays[0][0, 2].any()
    fp = enc.fingerprint()
    assert len(fp) == 64 and fp == StaticEncoder(trained[0] / "vectors").fingerprint()
    changed = StaticVectors.load(trained[0] / "vectors")
    changed.matrix = changed.matrix.copy()
    changed.matrix[0, 0] += 1
    assert StaticEncoder(changed).fingerprint() != fp
    feats = extract_features(enc, [["The", "cat", "."], ["a", "dog"]], cache_dir=tmp_path / "cache", progress=False)
    assert feats.layers.shape == (1, 5, 16)
    np.testing.assert_allclose(feats.layers[0, 1], enc.vectors.vector("cat"), atol=1e-3)
    # the same word gets the same vector wherever it occurs: a context-free layer
    a = enc.embed([["The", "cat", "sees", "a", "cat"]])[0]
    np.testing.assert_array_equal(a[0, 1], a[0, 4])


def _copy(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for p in src.iterdir():
        (dst / p.name).write_bytes(p.read_bytes())
    return dst


def test_bad_files_give_clear_errors(trained, tmp_path):
    src = trained[0] / "vectors"
    d = _copy(src, tmp_path / "truncated")
    data = (d / "vectors.safetensors").read_bytes()
    (d / "vectors.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"vectors\.safetensors.*corrupt or truncated"):
        StaticVectors.load(d)

    d = _copy(src, tmp_path / "garbage")
    (d / "vectors.safetensors").write_bytes(b"\x00\x01not a safetensors file at all" * 3)
    with pytest.raises(ValueError, match=r"garbage/vectors\.safetensors"):
        StaticVectors.load(d)

    d = _copy(src, tmp_path / "mismatch")
    words = (d / "vocab.txt").read_text().split("\n")[:-1]
    (d / "vocab.txt").write_text("\n".join(words[:-1]) + "\n")
    with pytest.raises(ValueError, match=r"vocab\.txt lists 9 words but .*vectors\.safetensors holds 10 vectors"):
        StaticVectors.load(d)

    d = _copy(src, tmp_path / "duplicate")
    (d / "vocab.txt").write_text("\n".join(words[:-1] + [words[0]]) + "\n")
    with pytest.raises(ValueError, match=r"vocab\.txt.*twice"):
        StaticVectors.load(d)

    d = _copy(src, tmp_path / "novectors")
    (d / "vectors.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match=r"novectors/vectors\.safetensors: missing"):
        StaticVectors.load(d)
    with pytest.raises(FileNotFoundError, match="no such folder"):
        StaticVectors.load(tmp_path / "nothing")


def test_output_and_corpus_checks(trained, tmp_path):
    base = trained[0]
    with pytest.raises(OutputError, match="holds an earlier run"):  # checked before any training
        train_word2vec(base / "corpus", base / "vectors", log=lambda m: None)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no train/shard"):
        train_word2vec(tmp_path / "empty", tmp_path / "out", log=lambda m: None)
    with pytest.raises(ValueError, match="--dim"):
        train_word2vec(base / "corpus", tmp_path / "out", dim=0, log=lambda m: None)
    assert not (tmp_path / "out").exists()


def test_cli_and_loading_without_gensim(trained, tmp_path):
    from probing_lab.cli import main

    base = trained[0]
    args = ["word2vec", "--corpus", str(base / "corpus"), "--out", str(tmp_path / "cli"), "--dim", "8"]
    assert main(args + ["--top", "5", "--epochs", "1", "--min-count", "2", "--workers", "1"]) == 0
    assert StaticVectors.load(tmp_path / "cli").matrix.shape == (5, 8)
    assert main(args) == 2  # not empty, no --force
    code = (
        "import sys; from probing_lab.static import StaticVectors; "
        f"v = StaticVectors.load({str(tmp_path / 'cli')!r}); assert 'gensim' not in sys.modules, 'gensim loaded'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


@pytest.mark.skipif(not SHIPPED.is_dir(), reason="data/models/word2vec-lab is absent (probing-lab word2vec builds it)")
def test_shipped_vectors_know_money_rivers_and_animals():
    v = StaticVectors.load(SHIPPED)
    assert v.matrix.dtype == np.float16 and v.matrix.shape == (40000, 100)
    near = [w for w, _ in v.nearest("bank", 20)]
    senses = {"money", "loan", "loans", "banks", "deposit", "deposits", "credit", "financial", "lender", "savings"}
    senses |= {"river", "rivers", "shore", "banks", "stream", "creek", "water", "riverbank", "valley"}
    assert senses & set(near), near
    assert v.similarity("cat", "dog") > v.similarity("cat", "bank")
    assert v.similarity("cat", "dog") > 0.5
