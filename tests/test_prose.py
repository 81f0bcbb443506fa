"""The corpus's prose detector: source code, binary data, tables and word lists stay out of the
pretraining corpus, and what was dropped is counted per source and reason."""

from __future__ import annotations

import json
import random

import pytest

from probing_lab.corpus.build import build_corpus
from probing_lab.corpus.prose import is_code_name, looks_binary, prose_verdict
from probing_lab.training.errors import CorpusError

PROSE = (
    "The river rose in the night, and by morning the water had reached the bank where the boats were "
    "tied. Nobody in the village had seen it so high since the spring of the great flood. The ferryman "
    "said that he would not cross until it fell again, and so the market was held on this side. "
) * 2
C_CODE = (
    """
static PyObject *__pyx_pf_6gensim_9_matutils_mean_absolute_difference(CYTHON_UNUSED PyObject *__pyx_self) {
  PyObject *__pyx_r = NULL;
  __Pyx_RefNannyDeclarations
  __Pyx_RefNannySetupContext("mean_absolute_difference", 0);
  __Pyx_XDECREF(__pyx_r);
  if (unlikely(!__pyx_t_1)) { __PYX_ERR(0, 12, __pyx_L1_error) }
  __Pyx_GOTREF(__pyx_t_1);
  return __pyx_r;
}
"""
    * 3
)
WORD_LIST = "\n".join(f"Athens Greece Baghdad Iraq Berlin Germany Cairo Egypt {i}" for i in range(20))
TEXT8 = "anarchism originated as a term of abuse first used against early working class radicals " * 8
TRANSCRIPT = "\n".join(
    ["uh how do you feel about the new bridge", "well i think it is going to help the town a lot"] * 6
)
VECTORS = "\n".join(f"the {' '.join(f'{random.Random(i).random():.5f}' for _ in range(10))}" for i in range(20))


@pytest.mark.parametrize(
    "text, verdict",
    [
        (PROSE, None),
        (TRANSCRIPT, None),  # a line per utterance, no full stops: still English
        ("Too short to judge {;}", None),
        (C_CODE, "code"),
        (VECTORS, "not-words"),
        (WORD_LIST, "not-english"),
        (TEXT8, "no-sentences"),
    ],
)
def test_each_kind_of_document_gets_its_verdict(text, verdict):
    assert prose_verdict(text) == verdict


def test_binary_and_code_are_known_by_bytes_and_name():
    assert looks_binary(random.Random(0).randbytes(3000))
    assert looks_binary(b"\x80\x04\x95pickle\x00data")
    assert not looks_binary(PROSE.encode())
    assert not looks_binary("Café au lait, naïve façade.".encode() * 100)
    assert is_code_name("gensim/models/word2vec_inner.c") and is_code_name("x/_mmreader.pyx")
    assert is_code_name("pkg/data/table.csv") and not is_code_name("texts/moby_dick.txt")


def test_binary_or_code_files_given_to_corpus_build_are_refused(tmp_path):
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(random.Random(1).randbytes(3000))
    with pytest.raises(CorpusError, match="garbage.bin: binary data, not text"):
        build_corpus(tmp_path / "out", [garbage], progress=None)
    code = tmp_path / "module.c"
    code.write_text(C_CODE)
    with pytest.raises(CorpusError, match="module.c: source code or data, by its name, not text"):
        build_corpus(tmp_path / "out", [code], progress=None)
    assert not (tmp_path / "out").exists()


def test_a_folder_source_keeps_prose_and_counts_what_it_dropped(tmp_path):
    src = tmp_path / "pkg"
    (src / "data").mkdir(parents=True)
    (src / "data" / "story.txt").write_text(PROSE)
    (src / "data" / "module.cpp").write_text(C_CODE)  # by name
    (src / "data" / "generated").write_text(C_CODE)  # no suffix: by content
    (src / "data" / "model").write_bytes(b"\x80\x04\x95" + random.Random(2).randbytes(2000))
    (src / "data" / "pairs.txt").write_text(WORD_LIST)
    stats = build_corpus(tmp_path / "out", [src], progress=None)
    dropped = stats["sources"]["pkg"]["dropped"]
    assert {k: v["documents"] for k, v in dropped.items()} == {
        "code-name": 1,
        "code": 1,
        "binary": 1,
        "not-english": 1,
    }
    assert dropped["binary"]["bytes"] == 2003
    assert stats["not_prose_removed"]["documents"] == 4
    assert stats["not_prose_removed"]["thresholds"]["max_code_chars"] == 0.06
    text = "".join(p.read_text() for p in (tmp_path / "out" / "train").glob("*.txt"))
    text += (tmp_path / "out" / "heldout.txt").read_text()
    assert "ferryman" in text and "Pyx" not in text and "Baghdad" not in text
    assert json.loads((tmp_path / "out" / "stats.json").read_text())["sources"]["pkg"]["dropped"] == dropped
