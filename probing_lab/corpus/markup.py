"""Markup a corpus source carries and the LM corpus must not: POS tags (Brown, MASC), MediaWiki
source, WordNet's data-file layout."""

from __future__ import annotations

import io
import re
from typing import Iterator, Optional

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


def ptb_quotes(text: str) -> str:
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


def wiki_pages(data: bytes) -> Iterator[str]:
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
