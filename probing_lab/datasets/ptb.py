"""NLTK's Penn Treebank WSJ sample: constituency trees, the same sentences' dependency heads,
and CoNLL-2000 chunks.

Inputs are NLTK data zips (``treebank.zip``, ``dependency_treebank.zip``, ``conll2000.zip``) or
the folders they unpack to. Token forms use literal brackets (``-LRB-`` -> ``(``, ``-LCB-`` -> ``{``
...) as in UD and in ELMo's training text; ``xpos`` keeps the treebank tag (``-LRB-``).
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import Collection, Iterator, Optional

from .records import DatasetFormatError, LabelledSpan, Sentence, Token

BRACKETS = {"-LRB-": "(", "-RRB-": ")", "-LCB-": "{", "-RCB-": "}", "-LSB-": "[", "-RSB-": "]"}
_TREE_TOKEN = re.compile(r"\(|\)|[^\s()]+")


def _files(path: str | Path, pattern: str) -> Iterator[tuple[str, str]]:
    """(name, text) of each file whose path matches ``pattern``, from a zip or a folder, sorted by name."""
    path = Path(path)
    rx = re.compile(pattern)
    if path.is_dir():
        for p in sorted(path.rglob("*")):
            rel = p.relative_to(path).as_posix()
            if p.is_file() and rx.search(rel):
                yield rel, p.read_text(encoding="utf-8")
        return
    with zipfile.ZipFile(path) as z:
        for name in sorted(n for n in z.namelist() if rx.search(n) and not n.endswith("/")):
            yield name, z.read(name).decode("utf-8")


def _stem(name: str) -> str:
    return name.rsplit("/", 1)[-1].rsplit(".", 1)[0]


def _wanted(name: str, docs: Optional[Collection[int]]) -> bool:
    """Whether the file ``wsj_NNNN.*`` is one of the documents ``docs`` (None: every file)."""
    return docs is None or int(_stem(name).rsplit("_", 1)[-1]) in docs


# --- constituency trees ------------------------------------------------------------------------


def _parse_trees(text: str, name: str) -> list:
    """Bracketed trees -> nested ``[label, child, ...]`` lists (a leaf is a str)."""
    trees, stack = [], []
    for tok in _TREE_TOKEN.findall(text):
        if tok == "(":
            stack.append([None])
        elif tok == ")":
            if not stack:
                raise DatasetFormatError(f"{name}: unbalanced ')' in a tree")
            node = stack.pop()
            (stack[-1].append(node) if stack else trees.append(node))
        elif not stack:
            raise DatasetFormatError(f"{name}: text outside a tree: {tok!r}")
        elif stack[-1][0] is None and len(stack[-1]) == 1:
            stack[-1][0] = tok  # the node's label
        else:
            stack[-1].append(tok)
    if stack:
        raise DatasetFormatError(f"{name}: unbalanced '(' at the end of the file")
    return trees


def _preterminals(node: list, depth: int) -> Iterator[tuple[str, str, int]]:
    children = node[1:]
    if len(children) == 1 and isinstance(children[0], str):
        yield children[0], node[0], depth
        return
    for child in children:
        if isinstance(child, list):
            yield from _preterminals(child, depth + 1)


def _phrases(node: list, start: int, out: dict) -> int:
    """Record ``(start, end) -> label`` of every phrasal node under ``node`` (positions over the
    words without traces; the upper label of a unary chain wins); returns the node's word count."""
    children = node[1:]
    if len(children) == 1 and isinstance(children[0], str):
        return 0 if node[0] == "-NONE-" else 1
    n = start
    for child in children:
        if isinstance(child, list):
            n += _phrases(child, n, out)
    if n > start and node[0]:
        out[(start, n)] = node[0]  # after its children: the upper node of a unary chain wins
    return n - start


def parse_mrg(text: str, source: str = "ptb", doc: str = "mrg") -> list[Sentence]:
    """``.mrg`` text -> one Sentence per tree; ``-NONE-`` traces dropped.

    ``extra["const_depth"]`` is the depth of the token's preterminal (its POS node): the number
    of edges from the tree's root to it, counted on the tree as written (no unary collapsing).
    The root is the top labelled node (usually ``S``): the ``( ... )`` wrapper .mrg files put
    around each tree is dropped, as NLTK does, so the root's children have depth 1 and in
    ``( (S (NP (NNP Vinken)) (VP (VBZ is)) (. .)) )`` Vinken has depth 2, is 2, ``.`` 1.
    Traces are removed after depths are computed, which changes no other token's depth.

    ``Sentence.spans`` holds the constituents: every phrasal node as ``(start, end)`` over the
    words without traces (a node of traces only is none), labelled as written (``NP-SBJ-1``; the
    upper node of a unary chain).
    """
    sentences = []
    for k, tree in enumerate(_parse_trees(text, doc)):
        if tree[0] is None and len(tree) == 2 and isinstance(tree[1], list):
            tree = tree[1]
        tokens = [
            Token(form=BRACKETS.get(word, word), xpos=tag, extra={"const_depth": depth})
            for word, tag, depth in _preterminals(tree, 0)
            if tag != "-NONE-"
        ]
        phrases: dict = {}
        _phrases(tree, 0, phrases)
        spans = [LabelledSpan(span, None, label) for span, label in sorted(phrases.items())]
        sentences.append(Sentence(tokens, f"{doc}/{k}", source, spans=spans))
    return sentences


def read_ptb_dependencies(
    path: str | Path, source: str = "ptb-sample/dependency_treebank", docs: Optional[Collection[int]] = None
) -> list[Sentence]:
    """``dependency_treebank`` ``.dp`` files (``word TAG head`` lines, blank line between sentences):
    forms, xpos and heads (no relation labels); ``docs``: only these documents (``wsj_NNNN``)."""
    sentences = []
    for name, text in _files(path, r"\.dp$"):
        if not _wanted(name, docs):
            continue
        doc = _stem(name)
        for k, block in enumerate(b for b in re.split(r"\n\s*\n", text.strip()) if b.strip()):
            tokens = []
            for i, line in enumerate(block.splitlines(), 1):
                cols = line.split("\t")
                if len(cols) != 3 or not cols[2].isdigit():
                    raise DatasetFormatError(
                        f"{name}: sentence {k + 1} line {i}: expected 'word<TAB>TAG<TAB>head', got {line!r}"
                    )
                tokens.append(Token(form=BRACKETS.get(cols[0], cols[0]), xpos=cols[1], head=int(cols[2])))
            sentences.append(Sentence(tokens, f"{doc}/{k}", source))
    return sentences


def read_ptb(
    treebank: str | Path,
    dependencies: str | Path | None = None,
    source: str = "ptb-sample/treebank",
    docs: Optional[Collection[int]] = None,
) -> list[Sentence]:
    """The ``treebank/combined/*.mrg`` trees; with ``dependencies`` (``dependency_treebank.zip``),
    each token also gets its ``head``. The two must hold the same sentences with the same words.
    ``docs``: only these documents (``wsj_NNNN``; a split's trees are not parsed for the others)."""
    sentences = []
    for name, text in _files(treebank, r"(^|/)combined/.*\.mrg$|^[^/]*\.mrg$"):
        if _wanted(name, docs):
            sentences.extend(parse_mrg(text, source, _stem(name)))
    if dependencies is not None:
        deps = {s.id: s for s in read_ptb_dependencies(dependencies, docs=docs)}
        for s in sentences:
            d = deps.get(s.id)
            if d is None or d.words != s.words:
                raise DatasetFormatError(
                    f"{dependencies}: sentence {s.id} does not match the treebank's "
                    f"({'missing' if d is None else f'{len(d.tokens)} vs {len(s.tokens)} tokens'})"
                )
            for t, dt in zip(s.tokens, d.tokens):
                t.head = dt.head
    return sentences


# --- CoNLL-2000 chunks -------------------------------------------------------------------------


def read_conll2000(path: str | Path, split: str, source: str | None = None) -> list[Sentence]:
    """``conll2000/{train,test}.txt`` (``word POS chunk`` lines): xpos and ``extra["chunk"]`` (BIO)."""
    sentences = []
    for name, text in _files(path, rf"(^|/){re.escape(split)}\.txt$"):
        for k, block in enumerate(b for b in re.split(r"\n\s*\n", text.strip()) if b.strip()):
            tokens = []
            for line in block.splitlines():
                cols = line.split()
                if len(cols) != 3:
                    raise DatasetFormatError(f"{name}: sentence {k + 1}: expected 'word POS chunk', got {line!r}")
                tokens.append(Token(form=cols[0], xpos=cols[1], extra={"chunk": cols[2]}))
            sentences.append(Sentence(tokens, f"{split}/{k}", source or f"conll2000/{split}"))
    return sentences
