"""The probe datasets' sentences, which must never enter the LM pretraining corpus: where they are
under a data directory, how to read them, and a tokenization-independent key to match them by."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Optional

from ..training.errors import CorpusError


def sentence_key(tokens: Iterable[str]) -> str:
    """Tokenization-independent identity of a sentence: lowercase letters and digits only."""
    return re.sub(r"[^0-9a-z]", "", "".join(tokens).lower())


_PTB_SAMPLE_ZIPS = ("treebank", "dependency_treebank", "conll2000")  # NLTK's zips in <data_dir>/ptb-sample


def read_exclusion_file(path: Path) -> list[list[str]]:
    """Sentences of a CoNLL-U file, a Raganato ``*.data.xml``, a CoarseWSD ``*.data.txt``, a
    minimal-pair ``.jsonl`` (BLiMP: ``sentence_good`` and ``sentence_bad``), or the
    PTB sample: ``.mrg`` trees (leaves, ``-NONE-`` traces skipped), NLTK's ``treebank.zip``,
    ``dependency_treebank.zip`` and ``conll2000.zip`` (train and test)."""
    from ..datasets import ptb

    if path.suffix == ".zip" and path.stem in _PTB_SAMPLE_ZIPS:
        if path.stem == "treebank":
            sentences = ptb.read_ptb(path)
        elif path.stem == "dependency_treebank":
            sentences = ptb.read_ptb_dependencies(path)
        else:
            sentences = ptb.read_conll2000(path, "train") + ptb.read_conll2000(path, "test")
        return [s.words for s in sentences]
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".mrg":
        return [s.words for s in ptb.parse_mrg(text, doc=path.stem)]
    if path.suffix == ".conllu":
        sentences, current = [], []
        for line in text.splitlines():
            if not line.strip():
                if current:
                    sentences.append(current)
                current = []
            elif not line.startswith("#"):
                cols = line.split("\t")
                if len(cols) > 1 and cols[0].isdigit():
                    current.append(cols[1])
        return sentences + ([current] if current else [])
    if path.name.endswith(".data.xml"):
        import xml.etree.ElementTree as ET

        return [[w.text or "" for w in s] for s in ET.parse(path).getroot().iter("sentence")]
    if path.suffix == ".jsonl":  # BLiMP's (and any) minimal pairs: both sentences of every pair
        import json

        from ..text import tokenize

        records = [json.loads(line) for line in text.splitlines() if line.strip()]
        return [tokenize(r[k]) for r in records for k in ("sentence_good", "sentence_bad") if isinstance(r.get(k), str)]
    if path.name.endswith(".data.txt"):
        return [line.split("\t", 1)[-1].split() for line in text.splitlines() if line.strip()]
    raise CorpusError(
        f"{path}: exclusion files are .conllu, Raganato .data.xml, CoarseWSD .data.txt, minimal-pair .jsonl, .mrg "
        "or the PTB sample zips"
    )


def default_exclusions(data_dir: Optional[Path]) -> list[Path]:
    """Every probe dataset's files under a data directory, train and test alike, so that no probe
    sentence was seen by the LM (the dataset registry says which files those are)."""
    from ..datasets.registry import evaluation_files

    return evaluation_files(data_dir)
