"""Is a document English prose? The one detector that keeps source code, binary data and word
lists out of the pretraining corpus (``corpus build``), by name and by content.

Three checks, cheapest first:

- by name: members whose suffix marks source code, build files or numeric tables (``.c``, ``.h``,
  ``.pyx``, ``.cpp``, ``.java``, ``.csv`` ...);
- binary: NUL bytes, control characters or undecodable UTF-8 in the first 64 KB;
- by content, per document (:func:`prose_verdict`): the share of tokens that are alphabetic words,
  the share of English function words (prose is about 40% function words, code and word lists
  almost none), the share of code punctuation among the characters, and sentence punctuation.

The thresholds (:data:`THRESHOLDS`) were chosen on a labelled sample of 182 documents of the corpus
sources (141 prose, 41 code, tables and word lists; ``benchmarks/prose_detector.py`` prints the
features, the errors and the margin each threshold leaves): 1 prose document judged code (a spam
e-mail full of URLs), 1 Cython file judged prose by its content (its name catches it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

# source code, build and data-table files: never read as text
CODE_SUFFIXES = frozenset(
    "c h cc cpp cxx hpp hxx pyx pxd pxi py pyc pyi js mjs ts java go rs rb pl pm php cs swift kt scala lua "
    "f90 f95 cu cuh sql sh bash zsh bat ps1 cmake mk asm "
    "yaml yml toml ini cfg conf xsd dtd css scss less map svg csv tsv mat npy npz pkl pickle "
    "so dll dylib o a lib exe bin dat model mdl pt pth h5 hdf5 safetensors whl egg".split()
)
CODE_NAMES = frozenset("makefile cmakelists.txt setup.cfg record wheel metadata installer".split())

# English function words (hand-written): their share of the tokens separates running English text
# from code, identifiers and word lists, which have almost none
FUNCTION_WORDS = frozenset(
    """a about above after again against all also an and any are as at be been before being below
    between both but by can could did do does down during each few for from further had has have
    having he her here hers him his how i if in into is it its itself just me more most my no nor
    not now of off on once only or other our ours out over own same she should so some such than
    that the their them then there these they this those through to too under until up very was we
    were what when where which while who whom why will with would you your thou thy thee hath""".split()
)

_ALPHA_WORD = re.compile(r"^[\"'(\[]*[A-Za-z]+(?:['-][A-Za-z]+)*[\"'),.;:!?\]]*$")
_HAS_ALNUM = re.compile(r"[^\W_]")
_CODE_CHARS = set("{}()[];=<>*&#_\\|^~")
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*$")


@dataclass(frozen=True)
class Thresholds:
    """A document is prose when every share is on the right side of its bound."""

    min_alpha_words: float = 0.60  # word tokens (not punctuation alone) that are alphabetic words
    min_function_words: float = 0.15  # word tokens that are English function words
    max_code_chars: float = 0.06  # non-space characters that are code punctuation: {}()[];=<>*&#_\\|^~
    min_sentence_ends: float = 0.01  # tokens that end a sentence or a line: text8 has neither
    min_tokens: int = 40  # shorter documents are too short to judge: kept


THRESHOLDS = Thresholds()


@dataclass(frozen=True)
class ProseFeatures:
    tokens: int
    alpha_words: float
    function_words: float
    code_chars: float
    sentence_ends: float


def prose_features(text: str, max_chars: int = 200_000) -> ProseFeatures:
    """The shares :func:`prose_verdict` judges, on the first ``max_chars`` characters."""
    text = text[:max_chars]
    tokens = text.split()
    words = [t for t in tokens if _HAS_ALNUM.search(t)]  # not punctuation alone: tokenized text has much of it
    n, n_words = max(len(tokens), 1), max(len(words), 1)
    chars = sum(len(t) for t in tokens) or 1
    lines = sum(1 for line in text.splitlines() if line.strip())
    return ProseFeatures(
        tokens=len(tokens),
        alpha_words=sum(bool(_ALPHA_WORD.match(t)) for t in words) / n_words,
        function_words=sum(t.lower().strip("\"'(),.;:!?[]") in FUNCTION_WORDS for t in words) / n_words,
        code_chars=sum(c in _CODE_CHARS for t in tokens for c in t) / chars,
        # sentence punctuation, or a line break (transcripts have a line per utterance and no stops)
        sentence_ends=(sum(bool(_SENTENCE_END.search(t)) for t in tokens) + lines) / n,
    )


def prose_verdict(text: str, thresholds: Thresholds = THRESHOLDS) -> Optional[str]:
    """None for prose (or a document too short to judge), else the reason it is not:
    ``"code"`` (code punctuation), ``"not-words"`` (few alphabetic words), ``"not-english"``
    (few function words) or ``"no-sentences"`` (no sentence punctuation)."""
    f = prose_features(text)
    if f.tokens < thresholds.min_tokens:
        return None
    if f.code_chars > thresholds.max_code_chars:
        return "code"
    if f.alpha_words < thresholds.min_alpha_words:
        return "not-words"
    if f.function_words < thresholds.min_function_words:
        return "not-english"
    if f.sentence_ends < thresholds.min_sentence_ends:
        return "no-sentences"
    return None


def is_code_name(name: str) -> bool:
    """Source code, build files and data tables by their file name."""
    base = name.rsplit("/", 1)[-1]
    return base.lower() in CODE_NAMES or ("." in base and base.rsplit(".", 1)[-1] in CODE_SUFFIXES)


def looks_binary(data: bytes) -> bool:
    """NUL bytes, more than 1% control characters, or more than 1% undecodable UTF-8 in the first
    64 KB: pickles, compiled models, compressed or random bytes."""
    head = data[:65536]
    if not head:
        return False
    if b"\x00" in head:
        return True
    controls = sum(head.count(bytes([b])) for b in range(32) if b not in (9, 10, 12, 13)) + head.count(b"\x7f")
    if controls > 0.01 * len(head):
        return True
    text = head.decode("utf-8", errors="replace")
    # a multi-byte character cut at the 64 KB boundary is one replacement at the end, not binary
    return text.count("\ufffd") > 0.01 * len(text) + 1
