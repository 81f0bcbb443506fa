"""The subject-verb agreement sentences as a probing dataset (``load_dataset("agreement", split)``).

Both sentences of every minimal pair of ``data/agreement/subject_verb.jsonl`` (the grammatical one
and the one with the verb in the other number), so that the verb's own form says nothing about the
subject's number. The verb token carries ``extra["subject_number"]`` ("singular" / "plural") and
``extra["construction"]``; the other tokens carry no label. Splits are by subject noun, so that a
probe is tested on subjects it never saw: every fifth noun of the word list (from the first) is
test, every fifth from the second is dev, the rest train.
"""

from __future__ import annotations

from .records import Sentence, Token

SPLITS = ("train", "dev", "test")


def split_of(noun_index: int) -> str:
    return {0: "test", 1: "dev"}.get(noun_index % 5, "train")


def read_agreement(split: str, path=None) -> list[Sentence]:
    from ..lm.agreement import NOUNS, PAIRS_FILE, read_pairs

    noun_index = {form: i for i, pair in enumerate(NOUNS) for form in pair}
    sentences = []
    for n, pair in enumerate(read_pairs(path or PAIRS_FILE)):
        subject = pair.grammatical[1]
        if split_of(noun_index[subject]) != split:
            continue
        for kind, words in (("grammatical", pair.grammatical), ("ungrammatical", pair.ungrammatical)):
            tokens = [Token(form=w) for w in words]
            tokens[pair.verb_index].extra.update(subject_number=pair.subject_number, construction=pair.construction)
            sentences.append(Sentence(tokens, f"{n}/{kind}", f"agreement/{split}"))
    return sentences
