"""WordNet 3.0 example sentences as sense-tagged data, from Debian's ``wordnet-base`` package.

Each synset's gloss ends with quoted examples (``"he cashed a check at the bank"``). An example
becomes a Sentence when it contains one of the synset's lemmas; that token gets
``sense`` = ``<offset>-<pos>`` (``08420278-n``; the 8-digit byte offset in ``data.<pos>`` plus
n/v/a/r, adjective satellites ``s`` written ``a`` as the offsets are unique per file) and
``lemma`` = the matched WordNet lemma, lowercased, underscores kept (``depository_financial_institution``).
Lemma.pos.NN names (``bank.n.01``) need the index files' sense order, which the data files do
not give, so the offset id is what is exact here.

Every double-quoted string in a gloss is an example. Matching is deliberately simple: examples are
tokenized with :func:`probing_lab.text.tokenize` and lowercased; a lemma's words (underscores =
spaces) must match consecutive tokens, each word as itself or ``+s/es/ed/ing`` (also
``+d``/``e->ing`` after a final ``e``, ``y->ies/ied``), so irregular forms (``took``) are missed.
The synset's lemmas are tried in the data file's order, and the first occurrence of the first
lemma found is the target; for a multiword lemma the first token is marked and ``extra["span"]``
gives its length. Ids are ``<offset>-<pos>/<k>`` with ``k`` the example's position in the gloss;
``source`` is ``wordnet-3.0/<noun|verb|adj|adv>``.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..fileio import deb_members
from ..text import tokenize
from .records import DatasetFormatError, Sentence, Token

WORDNET_FILES = ("data.noun", "data.verb", "data.adj", "data.adv")
_EXAMPLE = re.compile(r'"([^"]+)"')
_ADJ_MARKER = re.compile(r"\((?:a|p|ip)\)$")


def _forms(word: str) -> set[str]:
    forms = {word, word + "s", word + "es", word + "ed", word + "ing"}
    if word.endswith("e"):
        forms |= {word + "d", word[:-1] + "ing"}
    if word.endswith("y") and len(word) > 2:
        forms |= {word[:-1] + "ies", word[:-1] + "ied"}
    return forms


def _find(lemma_words: list[str], tokens: list[str]) -> int | None:
    forms = [_forms(w) for w in lemma_words]
    for i in range(len(tokens) - len(forms) + 1):
        if all(tokens[i + j] in f for j, f in enumerate(forms)):
            return i
    return None


def parse_wordnet_data(text: str, source: str = "wordnet-3.0") -> list[Sentence]:
    """One ``data.<pos>`` file's text -> the sense-tagged example sentences."""
    sentences = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line or line.startswith(" "):
            continue  # the licence header lines start with two spaces
        head, bar, gloss = line.partition(" | ")
        fields = head.split()
        try:
            offset, ss_type, n_words = fields[0], fields[2], int(fields[3], 16)
            lemmas = [_ADJ_MARKER.sub("", fields[4 + 2 * i]).lower() for i in range(n_words)]
        except (IndexError, ValueError):
            raise DatasetFormatError(
                f"{source}:{lineno}: not a WordNet data line "
                f"('offset lex_filenum ss_type w_cnt word lex_id ... | gloss'): {line[:80]!r}"
            ) from None
        if not bar:
            continue
        synset = f"{offset}-{'a' if ss_type == 's' else ss_type}"
        for k, example in enumerate(_EXAMPLE.findall(gloss)):
            words = tokenize(example)
            lowered = [w.lower() for w in words]
            for lemma in lemmas:
                lemma_words = [w.lower() for w in tokenize(lemma.replace("_", " "))]
                i = _find(lemma_words, lowered) if lemma_words else None
                if i is None:
                    continue
                tokens = [Token(form=w) for w in words]
                tokens[i].sense, tokens[i].lemma = synset, lemma
                if len(lemma_words) > 1:
                    tokens[i].extra = {"span": len(lemma_words)}
                sentences.append(Sentence(tokens, f"{synset}/{k}", source))
                break
    return sentences


def _wordnet_texts(path: Path, names: tuple = WORDNET_FILES) -> dict[str, str]:
    """{``data.noun``: text, ...} from a ``wordnet-base*.deb`` or a folder like /usr/share/wordnet."""
    if path.is_dir():
        return {n: (path / n).read_text(encoding="utf-8", errors="replace") for n in names if (path / n).is_file()}
    try:
        return {
            name.rsplit("/", 1)[-1]: data.decode("utf-8", errors="replace")
            for name, data in deb_members(path)
            if name.rsplit("/", 1)[-1] in names and "wordnet" in name
        }
    except ValueError as e:
        raise DatasetFormatError(str(e)) from None


def read_wordnet_examples(path: str | Path) -> list[Sentence]:
    """All four parts of speech (noun, verb, adj, adv), in that order."""
    path = Path(path)
    texts = _wordnet_texts(path)
    missing = [n for n in WORDNET_FILES if n not in texts]
    if missing:
        raise DatasetFormatError(f"{path}: no {', '.join(missing)} (expected WordNet 3.0 database files)")
    sentences = []
    for name in WORDNET_FILES:
        sentences.extend(parse_wordnet_data(texts[name], f"wordnet-3.0/{name.split('.')[1]}"))
    return sentences


_SS_TYPE_POS = {"1": "n", "2": "v", "3": "a", "4": "r", "5": "a"}  # satellites as "a", like the synset ids above


def read_sense_index(path: str | Path) -> tuple[dict[str, str], dict[tuple[str, str], str]]:
    """From ``index.sense`` (Debian's ``wordnet-sense-index*.deb`` or a folder holding it):
    sense keys -> synset ids ``<offset>-<pos>`` (the ids of the examples above), and
    (lemma, pos) -> the synset of its first WordNet sense (the usual back-off for WSD)."""
    path = Path(path)
    texts = _wordnet_texts(path, ("index.sense",))
    if "index.sense" not in texts:
        raise DatasetFormatError(f"{path}: no index.sense (expected the WordNet 3.0 sense index)")
    out, first = {}, {}
    for line in texts["index.sense"].splitlines():
        parts = line.split()
        if len(parts) >= 3 and "%" in parts[0]:
            key, offset = parts[0], parts[1]
            lemma, pos = key.split("%")[0], _SS_TYPE_POS[key.split("%")[1][0]]
            out[key] = f"{offset}-{pos}"
            if parts[2] == "1":
                first[(lemma, pos)] = out[key]
    return out, first
