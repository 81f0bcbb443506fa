"""Dataset readers: every dataset as ``list[Sentence]`` of :class:`Token` (see ``records``).

``load_dataset(name, split, data_dir)`` finds a dataset by name in the data directory; the
per-format readers below take explicit paths.
"""

from .brown import BROWN_UPOS, brown_upos, parse_brown, read_brown
from .conllu import parse_conllu, read_conllu
from .ptb import parse_mrg, read_conll2000, read_ptb, read_ptb_dependencies
from .records import DatasetFormatError, DatasetMissingError, Sentence, Token
from .registry import PTB_SPLITS, SPLITS, load_dataset, resolve_data_dir
from .wordnet import parse_wordnet_data, read_wordnet_examples
from .wsd import COARSEWSD_WORDS, RAGANATO_SETS, coarsewsd_words, read_coarsewsd, read_gold_keys, read_raganato

__all__ = [
    "BROWN_UPOS",
    "COARSEWSD_WORDS",
    "DatasetFormatError",
    "DatasetMissingError",
    "PTB_SPLITS",
    "RAGANATO_SETS",
    "SPLITS",
    "Sentence",
    "Token",
    "brown_upos",
    "coarsewsd_words",
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
    "read_ptb",
    "read_ptb_dependencies",
    "read_raganato",
    "read_wordnet_examples",
    "resolve_data_dir",
]
