"""Raw text -> sentences of tokens, in the conventions the released ELMo was trained on
(the 1B Word Benchmark's PTB-like tokenization: ``do n't``, ``it 's``, punctuation split off,
``U.S.`` and ``3.5`` kept whole)."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

_CONTRACTIONS = re.compile(r"(?i)\b(\w+)(n't)\b|\b(\w+)('s|'re|'ve|'ll|'d|'m)\b|\b(can)(not)\b")
_TOKEN = re.compile(
    r"""
    (?:[A-Za-z]\.){2,}              # abbreviations with dots: U.S. e.g.
  | (?:Mr|Mrs|Ms|Dr|Prof|Sr|Jr|St|Mt|Inc|Ltd|Co|Corp|vs|etc|No)\.(?=\s|$)
  | \d+(?:[.,:/]\d+)*                # numbers: 3.5 1,000 10:30 6/7
  | n't | '(?:s|re|ve|ll|d|m)\b      # contraction pieces (split below)
  | \w+(?:[-']\w+)*                  # words, hyphenated words, o'clock
  | \.\.\.|--|``|''|[^\w\s]          # ellipsis, dashes, any other symbol alone
    """,
    re.VERBOSE,
)
_SENTENCE_END = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]]))\s+(?=[\"'(\[]*[A-Z0-9])")
_ABBREVIATION_END = re.compile(r"(?:\b(?:[A-Za-z]\.){2,}|\b(?:Mr|Mrs|Ms|Dr|Prof|Sr|Jr|St|Mt|vs|No)\.)$")


def normalize(text: str) -> str:
    """NFKC, curly quotes to straight, control characters to spaces."""
    text = unicodedata.normalize("NFKC", text)
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("\u201c", '"').replace("\u201d", '"')
    return "".join(" " if unicodedata.category(c) in ("Cc", "Zl", "Zp") and c not in "\n" else c for c in text)


def tokenize(sentence: str) -> list[str]:
    """One sentence -> tokens. ``"I don't know."`` -> ``['I', 'do', "n't", 'know', '.']``."""
    text = _CONTRACTIONS.sub(lambda m: " ".join(g for g in m.groups() if g), normalize(sentence))
    return _TOKEN.findall(text)


def split_sentences(text: str) -> list[str]:
    """Split at ``. ! ?`` followed by space and a capital or digit, not after ``Mr.``/``U.S.``."""
    sentences: list[str] = []
    for paragraph in re.split(r"\n\s*\n", normalize(text)):  # never glue across paragraphs
        merged: list[str] = []
        for piece in _SENTENCE_END.split(" ".join(paragraph.split())):
            if merged and _ABBREVIATION_END.search(merged[-1]):
                merged[-1] += " " + piece  # the split was after an abbreviation
            elif piece:
                merged.append(piece)
        sentences.extend(merged)
    return sentences


def split_and_tokenize(text: str) -> list[list[str]]:
    return [tokens for tokens in (tokenize(s) for s in split_sentences(text)) if tokens]


def read_sentence_file(path: str | Path, allow_empty: bool = False) -> list[list[str]]:
    """A text file of one whitespace-tokenized sentence per line -> token lists. Errors name the file
    and the line: a missing file, bytes that are not UTF-8, and (unless ``allow_empty``) blank lines."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"input file not found: {path} (one whitespace-tokenized sentence per line)")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise ValueError(f"{path}, line {line}: not UTF-8 ({e.reason}); save the file as UTF-8") from None
    sentences = [line.split() for line in text.splitlines()]
    empty = [i + 1 for i, s in enumerate(sentences) if not s]
    if empty and not allow_empty:
        raise ValueError(f"{path}: line(s) {empty[:10]} are empty; give one sentence per line, with no blank lines")
    return sentences


def first_sentences(sentences: list[list[str]], max_tokens: int) -> list[list[str]]:
    """Whole sentences from the start, up to ``max_tokens`` tokens in all (the first sentence cut to
    ``max_tokens`` when it alone is longer): how the views keep a text small enough to draw."""
    kept, total = [], 0
    for s in sentences:
        if total + len(s) > max_tokens:
            break
        kept.append(s)
        total += len(s)
    if not kept and sentences:
        kept = [sentences[0][:max_tokens]]
    return kept
