"""Universal Dependencies CoNLL-U -> :class:`Sentence` (EWT, GUM, any UD treebank).

Tokens are the syntactic words: multiword-token lines (``1-2 didn't``) and empty nodes
(``8.1``, enhanced-graph only) are skipped, so ``head`` values, which in UD already refer to
word ids, stay valid. The reader checks that the remaining ids are exactly 1..n and every head
is in 0..n, so a corrupt file fails loudly instead of giving a wrong tree.
``Token.extra["feats"]`` holds the FEATS column when it is not ``_``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from .records import DatasetFormatError, Sentence, Token


def _opt(value: str) -> str | None:
    return None if value == "_" else value


def parse_conllu(lines: Iterable[str], name: str = "<conllu>", source: str = "conllu") -> list[Sentence]:
    """CoNLL-U lines -> sentences; ``name`` is the file name used in error messages."""
    sentences: list[Sentence] = []
    tokens: list[Token] = []
    sent_id: str | None = None
    start = 0  # line number of the current sentence's first token, for errors

    def finish(lineno: int) -> None:
        nonlocal tokens, sent_id
        if tokens:
            n = len(tokens)
            for t in tokens:
                if t.head is not None and not 0 <= t.head <= n:
                    raise DatasetFormatError(
                        f"{name}:{start}: sentence {sent_id or len(sentences) + 1}: head {t.head} of {t.form!r} "
                        f"is outside 0..{n}"
                    )
            sentences.append(Sentence(tokens, sent_id or str(len(sentences) + 1), source))
        tokens, sent_id = [], None

    lineno = 0
    for lineno, line in enumerate(lines, 1):
        line = line.rstrip("\r\n")
        if not line.strip():
            finish(lineno)
            continue
        if line.startswith("#"):
            if line.startswith("# sent_id") and "=" in line:
                sent_id = line.split("=", 1)[1].strip()
            continue
        cols = line.split("\t")
        if len(cols) != 10:
            raise DatasetFormatError(
                f"{name}:{lineno}: expected 10 tab-separated CoNLL-U columns "
                f"(ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC), got {len(cols)}: {line[:80]!r}"
            )
        wid, form, lemma, upos, xpos, feats, head, deprel = cols[:8]
        if "-" in wid or "." in wid:
            continue  # multiword token range or empty node: not a syntactic word
        if not tokens:
            start = lineno
        if not wid.isdigit() or int(wid) != len(tokens) + 1:
            raise DatasetFormatError(
                f"{name}:{lineno}: expected word id {len(tokens) + 1} (ids must run 1..n once ranges and "
                f"empty nodes are skipped), got {wid!r}"
            )
        if head != "_" and not head.isdigit():
            raise DatasetFormatError(f"{name}:{lineno}: expected an integer HEAD or '_', got {head!r}")
        tokens.append(
            Token(
                form=form,
                lemma=lemma if lemma != "_" or form == "_" else None,
                upos=_opt(upos),
                xpos=_opt(xpos),
                head=None if head == "_" else int(head),
                deprel=_opt(deprel),
                extra={"feats": feats} if feats != "_" else {},
            )
        )
    finish(lineno + 1)
    return sentences


def read_conllu(path: str | Path, source: str | None = None) -> list[Sentence]:
    """One ``.conllu`` file; ``source`` defaults to the file's stem."""
    path = Path(path)
    with open(path, encoding="utf-8") as f:
        return parse_conllu(f, str(path), source or path.stem)
