"""Word-sense disambiguation sets: Raganato et al. (2017) all-words XML and CoarseWSD-20.

Raganato: every word of a sentence is a Token (lemma, upos); ``instance`` words also carry
``sense`` = the first gold WordNet 3.0 sense key, ``extra["id"]`` = the instance id and
``extra["senses"]`` = all gold keys (some instances have several, any of which counts as correct).

CoarseWSD-20: one Sentence per data line; the target (index = the line's first field) has
``lemma`` = the word, ``sense`` = the sense name from ``classes_map.txt`` (e.g. ``bank_bank``,
``bank_bank_(geography)``) and ``extra["class"]`` = the class number in the gold file.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from .records import DatasetFormatError, Sentence, Token

RAGANATO_SETS = ("senseval2", "senseval3", "semeval2007", "semeval2013", "semeval2015", "ALL")

# The XML's ``pos`` is the universal tagset of Petrov et al. (2012); these are the UPOS names
# (CONJ -> CCONJ: the coarse tagset has no SCONJ).
_UNIVERSAL_TO_UPOS = {"PRT": "PART", "CONJ": "CCONJ", ".": "PUNCT"}


def read_gold_keys(path: str | Path) -> dict[str, list[str]]:
    """``<instance id> <sense key> [<sense key> ...]`` lines -> {id: keys}."""
    keys = {}
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) < 2:
                raise DatasetFormatError(
                    f"{path}:{lineno}: expected '<instance id> <sense key> ...', got {line.strip()!r}"
                )
            keys[parts[0]] = parts[1:]
    return keys


def read_raganato(
    xml_path: str | Path, key_path: str | Path | None = None, source: str | None = None
) -> list[Sentence]:
    """``<set>.data.xml`` + its gold keys (default: ``<set>.gold.key.txt`` next to it)."""
    xml_path = Path(xml_path)
    if key_path is None:
        key_path = xml_path.with_name(xml_path.name.replace(".data.xml", ".gold.key.txt"))
    keys = read_gold_keys(key_path)
    source = source or f"raganato/{xml_path.name.split('.')[0]}"
    sentences = []
    for sent in ET.parse(xml_path).getroot().iter("sentence"):
        tokens = []
        for el in sent:
            if el.tag not in ("wf", "instance"):
                continue
            pos = el.get("pos")
            token = Token(
                form=(el.text or "").strip(),
                lemma=el.get("lemma"),
                upos=_UNIVERSAL_TO_UPOS.get(pos, pos) if pos else None,
            )
            if el.tag == "instance":
                iid = el.get("id")
                if iid not in keys:
                    raise DatasetFormatError(f"{key_path}: no gold sense for instance {iid} of {xml_path}")
                token.sense = keys[iid][0]
                token.extra = {"id": iid, "senses": keys[iid]}
            tokens.append(token)
        sentences.append(Sentence(tokens, sent.get("id") or str(len(sentences)), source))
    return sentences


# --- CoarseWSD-20 --------------------------------------------------------------------------------

COARSEWSD_WORDS = (
    "apple",
    "arm",
    "bank",
    "bass",
    "bow",
    "chair",
    "club",
    "crane",
    "deck",
    "digit",
    "hood",
    "java",
    "mole",
    "pitcher",
    "pound",
    "seal",
    "spring",
    "square",
    "trunk",
    "yard",
)


def coarsewsd_words(root: str | Path | None = None) -> list[str]:
    """The 20 target words; with ``root`` (the ``CoarseWSD-20`` folder), the words that folder holds."""
    if root is None:
        return list(COARSEWSD_WORDS)
    return sorted(p.name for p in Path(root).iterdir() if (p / "train.data.txt").is_file())


def read_coarsewsd(word_dir: str | Path, split: str, source: str | None = None) -> list[Sentence]:
    """``<word>/<split>.data.txt`` + ``<split>.gold.txt`` + ``classes_map.txt`` -> one Sentence per line.

    Sentences are already tokenized and lowercased; tokens are split on any whitespace (a few
    lines contain non-breaking spaces that the target index counts as separators).
    """
    word_dir = Path(word_dir)
    word = word_dir.name
    map_file = next((p for p in (word_dir / "classes_map.txt", word_dir / "class_map.txt") if p.is_file()), None)
    if map_file is None:
        raise DatasetFormatError(f"{word_dir}: no classes_map.txt (sense number -> sense name)")
    names = json.loads(map_file.read_text(encoding="utf-8"))
    data_file, gold_file = word_dir / f"{split}.data.txt", word_dir / f"{split}.gold.txt"
    lines = data_file.read_text(encoding="utf-8").splitlines()
    gold = gold_file.read_text(encoding="utf-8").split()
    if len(gold) != len(lines):
        raise DatasetFormatError(f"{gold_file}: {len(gold)} labels for {len(lines)} sentences in {data_file}")
    source = source or f"coarsewsd-20/{word}/{split}"
    sentences = []
    for lineno, (line, label) in enumerate(zip(lines, gold), 1):
        index, _, text = line.partition("\t")
        tokens = [Token(form=w) for w in text.split()]
        if not index.isdigit() or not 0 <= int(index) < len(tokens):
            raise DatasetFormatError(
                f"{data_file}:{lineno}: expected '<target index>\\t<sentence>' with the index "
                f"inside the sentence, got index {index!r} for {len(tokens)} tokens"
            )
        if label not in names:
            raise DatasetFormatError(
                f"{gold_file}:{lineno}: class {label!r} is not in {map_file.name} ({sorted(names)})"
            )
        target = tokens[int(index)]
        target.lemma, target.sense, target.extra = word, names[label], {"class": int(label)}
        sentences.append(Sentence(tokens, f"{word}/{split}/{lineno - 1}", source))
    return sentences
