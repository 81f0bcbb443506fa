"""Byte-level character ids, exactly as the released ELMo (bilm-tf / AllenNLP) computes them.

A token becomes 50 ids: ``[begin-word, utf-8 bytes (at most 48)..., end-word, padding...]``.
The sentence boundaries ``<S>`` and ``</S>`` are ``[begin-word, 256 | 257, end-word, padding...]``.
At inference every id is shifted by +1 so that 0 means "no token here" (batch padding); the
model's character table therefore has 262 rows, row 0 being a fixed zero vector.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import torch

MAX_CHARS = 50
MAX_WORD_BYTES = MAX_CHARS - 2  # room for begin-word and end-word
BEGIN_SENTENCE = 256
END_SENTENCE = 257
BEGIN_WORD = 258
END_WORD = 259
PADDING = 260
N_CHARACTERS = 262  # 261 ids + the "no token" row created by the +1 shift

BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"


def _boundary(char: int) -> tuple[int, ...]:
    ids = [PADDING] * MAX_CHARS
    ids[0], ids[1], ids[2] = BEGIN_WORD, char, END_WORD
    return tuple(ids)


BOS_CHAR_IDS = _boundary(BEGIN_SENTENCE)
EOS_CHAR_IDS = _boundary(END_SENTENCE)


@lru_cache(maxsize=200_000)
def token_to_char_ids(token: str) -> tuple[int, ...]:
    """The 50 unshifted character ids of one token (0..260).

    Tokens longer than 48 UTF-8 bytes are cut at 48 bytes, possibly inside a multibyte
    character, as the original does. ``<S>`` / ``</S>`` are ordinary text here; use
    :data:`BOS_CHAR_IDS` / :data:`EOS_CHAR_IDS` for the boundaries.
    """
    if not isinstance(token, str):
        raise TypeError(f"a token must be a str, got {type(token).__name__}: {token!r}")
    if token == "":
        raise ValueError(
            "empty token: ELMo tokens are non-empty strings; drop empty strings from the "
            "token list (whitespace tokenization never produces them)"
        )
    data = token.encode("utf-8", errors="surrogatepass")[:MAX_WORD_BYTES]
    ids = [PADDING] * MAX_CHARS
    ids[0] = BEGIN_WORD
    ids[1 : len(data) + 1] = data
    ids[len(data) + 1] = END_WORD
    return tuple(ids)


def check_sentences(sentences: Sequence[Sequence[str]]) -> None:
    """Raise a ValueError naming the sentence and token position of any malformed input."""
    if isinstance(sentences, str) or (len(sentences) > 0 and isinstance(sentences[0], str)):
        raise TypeError(
            "expected a list of token lists, e.g. [['The', 'bank', 'closed']]; for raw text "
            "use probing_lab.text.tokenize()"
        )
    for i, sentence in enumerate(sentences):
        if isinstance(sentence, str):
            raise TypeError(f"sentence {i} is a str, expected a list of tokens: {sentence!r}")
        for j, token in enumerate(sentence):
            if not isinstance(token, str) or token == "":
                raise ValueError(
                    f"sentence {i}, token {j}: {token!r} is not a non-empty string; "
                    "remove empty tokens before embedding"
                )


def batch_to_ids(sentences: Sequence[Sequence[str]], add_boundaries: bool = True) -> torch.Tensor:
    """Shifted character ids for a batch: LongTensor ``(batch, max_tokens, 50)``.

    With ``add_boundaries`` each sentence is wrapped in ``<S> ... </S>`` (what the biLM
    expects). Rows past a sentence's end are all 0 ("no token"). An empty sentence yields
    just the two boundary tokens.
    """
    check_sentences(sentences)
    extra = 2 if add_boundaries else 0
    width = max((len(s) for s in sentences), default=0) + extra
    ids = torch.zeros(len(sentences), width, MAX_CHARS, dtype=torch.long)
    for i, sentence in enumerate(sentences):
        rows = [token_to_char_ids(t) for t in sentence]
        if add_boundaries:
            rows = [BOS_CHAR_IDS, *rows, EOS_CHAR_IDS]
        if rows:
            ids[i, : len(rows)] = torch.tensor(rows, dtype=torch.long) + 1
    return ids
