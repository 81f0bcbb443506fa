import pytest
import torch

from probing_lab.elmo.chars import (
    BEGIN_WORD,
    BOS_CHAR_IDS,
    END_WORD,
    EOS_CHAR_IDS,
    PADDING,
    batch_to_ids,
    token_to_char_ids,
)


def test_ascii_token_layout():
    ids = token_to_char_ids("bank")
    assert ids[:6] == (BEGIN_WORD, 98, 97, 110, 107, END_WORD)
    assert ids[6:] == (PADDING,) * 44 and len(ids) == 50


def test_multibyte_utf8_uses_bytes():
    ids = token_to_char_ids("café")  # é = c3 a9
    assert ids[:7] == (BEGIN_WORD, 99, 97, 102, 0xC3, 0xA9, END_WORD)


def test_long_token_truncated_to_48_bytes():
    ids = token_to_char_ids("é" * 30)  # 60 bytes, cut inside nothing: 24 whole chars
    assert ids[1:49] == (0xC3, 0xA9) * 24 and ids[49] == END_WORD
    odd = token_to_char_ids("a" + "é" * 30)  # cut in the middle of a multibyte char
    assert odd[48] == 0xC3 and odd[49] == END_WORD


def test_boundaries_padding_and_shift():
    ids = batch_to_ids([["a", "b"], ["c"]])
    assert ids.shape == (2, 4, 50)
    assert ids[0, 0].tolist() == [x + 1 for x in BOS_CHAR_IDS]
    assert ids[0, 3].tolist() == [x + 1 for x in EOS_CHAR_IDS]
    assert ids[1, 2].tolist() == [x + 1 for x in EOS_CHAR_IDS]
    assert torch.all(ids[1, 3] == 0)  # no token: all zeros after the shift
    assert BOS_CHAR_IDS[:3] == (258, 256, 259) and EOS_CHAR_IDS[1] == 257


def test_empty_sentence_gives_boundaries_only():
    ids = batch_to_ids([[]])
    assert ids.shape == (1, 2, 50)


@pytest.mark.parametrize("bad", [[["ok", ""]], [["ok", None]]])
def test_bad_tokens_named(bad):
    with pytest.raises(ValueError, match="sentence 0, token 1"):
        batch_to_ids(bad)


def test_string_instead_of_token_list():
    with pytest.raises(TypeError, match="list of token lists"):
        batch_to_ids(["The bank closed"])
