"""Dataset readers: every dataset as ``list[Sentence]`` of :class:`Token` (see ``records``).

``load_dataset(name, split, data_dir)`` finds a dataset by name in the data directory; the
per-format readers below take explicit paths; ``files`` reads the user's own labelled files
(conllu, tokens, wic, sentences, spans).
"""

from .brown import BROWN_UPOS, brown_upos, parse_brown, read_brown
from .conllu import iter_conllu, parse_conllu, read_conllu
from .files import (
    FORMATS,
    file_record,
    iter_labelled_file,
    iter_sentence_file,
    read_labelled_file,
    read_span_file,
)
from .ptb import parse_mrg, read_conll2000, read_ptb, read_ptb_dependencies
from .records import DatasetFormatError, DatasetMissingError, LabelledSpan, Sentence, Token
from .registry import PTB_SPLITS, SPLITS, load_dataset, resolve_data_dir
from .wordnet import parse_wordnet_data, read_wordnet_examples
from .wsd import COARSEWSD_WORDS, RAGANATO_SETS, coarsewsd_words, read_coarsewsd, read_gold_keys, read_raganato

__all__ = [
    "BROWN_UPOS",
    "COARSEWSD_WORDS",
    "DatasetFormatError",
    "FORMATS",
    "LabelledSpan",
    "DatasetMissingError",
    "PTB_SPLITS",
    "RAGANATO_SETS",
    "SPLITS",
    "Sentence",
    "Token",
    "brown_upos",
    "coarsewsd_words",
    "file_record",
    "iter_conllu",
    "iter_labelled_file",
    "iter_sentence_file",
    "load_dataset",
    "parse_brown",
    "parse_conllu",
    "parse_mrg",
    "parse_wordnet_data",
    "read_brown",
    "read_coarsewsd",
    "read_conll2000",
    "read_conllu",
    "read_gold_keys",
    "read_labelled_file",
    "read_ptb",
    "read_ptb_dependencies",
    "read_raganato",
    "read_span_file",
    "read_wordnet_examples",
    "resolve_data_dir",
]
