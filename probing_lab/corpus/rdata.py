"""R's lazy-load databases (``data/Rdata.rdb`` + ``Rdata.rdx`` of an R package) read without R: each
object is a length-prefixed compressed stream holding R's XDR serialization, of which this reads
what text data needs (character vectors, lists, attributes and pairlists)."""

from __future__ import annotations

import bz2
import gzip
import lzma
import struct
import zlib
from dataclasses import dataclass, field
from typing import Iterator, Optional

from ..training.errors import SourceFormatError


@dataclass
class RValue:
    """One unserialized R object: ``value`` is a list for vectors (str/None for a character vector,
    RValue for a list), a list of (tag, RValue) for a pairlist, a str for a CHARSXP or symbol."""

    type: int
    value: object = None
    attributes: dict = field(default_factory=dict)


_NILSXP, _SYMSXP, _LISTSXP, _CHARSXP, _LGLSXP, _STRSXP, _VECSXP = 0, 1, 2, 9, 10, 16, 19
_PAIRLISTS = {2, 3, 5, 6, 17, 239, 240}  # LISTSXP, CLOSXP, PROMSXP, LANGSXP, DOTSXP, ATTRLISTSXP, ATTRLANGSXP
_NO_PAYLOAD = {241, 242, 250, 251, 252, 253, 254}  # base/empty/global environments, NULL, markers
_NUMERIC = {10: ("i", 1), 13: ("i", 1), 14: ("d", 1), 15: ("d", 2)}  # logical, integer, double, complex


class _RUnserializer:
    """R's ``serialize(xdr = TRUE)`` format (versions 2 and 3), enough for data objects."""

    def __init__(self, data: bytes, name: str):
        self.data, self.pos, self.name, self.refs = data, 0, name, []
        if data[:2] != b"X\n":
            raise SourceFormatError(f"{name}: not an R XDR serialization")
        self.pos = 2
        version = self.int()
        self.int(), self.int()  # writer and minimal reader R versions
        if version == 3:
            self.bytes(self.int())  # native encoding name
        elif version != 2:
            raise SourceFormatError(f"{name}: R serialization version {version} is not supported")

    def int(self) -> int:
        (value,) = struct.unpack_from(">i", self.data, self.pos)
        self.pos += 4
        return value

    def bytes(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise SourceFormatError(f"{self.name}: truncated R serialization")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def length(self) -> int:
        n = self.int()
        return n if n != -1 else (self.int() << 32) + self.int()  # long vectors: two words

    def item(self) -> RValue:
        flags = self.int()
        kind, has_attr = flags & 0xFF, flags & (1 << 9)
        if kind in _NO_PAYLOAD:
            return RValue(_NILSXP)
        if kind == 255:  # reference to an earlier symbol or environment
            index = (flags >> 8) or self.int()
            return self.refs[index - 1]
        if kind in _PAIRLISTS:
            return self.pairlist(flags)
        if kind == _SYMSXP:
            value = RValue(_SYMSXP, self.item().value)
            self.refs.append(value)
            return value
        if kind in (247, 248, 249):  # persistent names, package and namespace environments
            self.int()
            value = RValue(kind, [self.item().value for _ in range(self.int())])
            self.refs.append(value)
            return value
        if kind == 4:  # environment: locked flag, enclosure, frame, hash table, attributes
            value = RValue(kind)
            self.refs.append(value)
            self.int()
            value.value = [self.item() for _ in range(4)]
            return value
        if kind == 238:  # ALTREP (compact sequences, deferred strings): class info, state, attributes
            _info, state, attributes = self.item(), self.item(), self.item()  # read in order; the class info is unused
            return RValue(state.type, state.value, _tagged(attributes))
        value = RValue(kind, self.vector(kind, flags))
        if has_attr:
            value.attributes = _tagged(self.item())
        return value

    def vector(self, kind: int, flags: int) -> object:
        if kind == _CHARSXP:
            n = self.int()
            if n == -1:
                return None  # NA_character_
            encoding = "latin-1" if flags & (1 << 14) else "utf-8"  # LATIN1_MASK is bit 2 of the levels
            return self.bytes(n).decode(encoding, errors="replace")
        if kind in (_STRSXP, _VECSXP, 20):  # character vector, list, expression
            return [self.item() if kind != _STRSXP else self.item().value for _ in range(self.length())]
        if kind in _NUMERIC:
            code, per = _NUMERIC[kind]
            n = self.length() * per
            return list(struct.unpack(f">{n}{code}", self.bytes(n * struct.calcsize(code))))
        if kind == 24:  # raw bytes
            return self.bytes(self.length())
        if kind in (7, 8):  # builtin function: its name
            return self.bytes(self.int()).decode()
        if kind == 25:  # S4 object: everything is in the attributes
            return None
        if kind in (22, 23):  # external and weak pointers: only their protected values and tags
            value = RValue(kind)
            self.refs.append(value)
            return [self.item(), self.item()] if kind == 22 else None
        raise SourceFormatError(f"{self.name}: R object type {kind} is not supported (byte {self.pos - 4})")

    def pairlist(self, flags: int) -> RValue:
        """Iteratively (pairlists can be long): (tag, value) cells until the terminating NULL."""
        cells: list[tuple[Optional[str], RValue]] = []
        attributes: dict = {}
        while True:
            kind = flags & 0xFF
            if kind not in _PAIRLISTS:
                self.pos -= 4
                self.item()  # a dotted pair's tail; NULL for a proper list
                break
            if flags & (1 << 9):
                attributes = _tagged(self.item())
            tag = self.item().value if flags & (1 << 10) else None
            cells.append((tag, self.item()))
            flags = self.int()
        return RValue(_LISTSXP, cells, attributes)


def _tagged(pairlist: RValue) -> dict:
    return {tag: value for tag, value in pairlist.value} if pairlist.type == _LISTSXP else {}


def unserialize_r(data: bytes, name: str = "<R data>") -> RValue:
    try:
        return _RUnserializer(data, name).item()
    except (struct.error, IndexError, UnicodeDecodeError, RecursionError) as e:
        raise SourceFormatError(f"{name}: not a readable R serialization ({e})") from None


def _r_decompress(blob: bytes, method: int, name: str) -> bytes:
    """One lazy-load record: a 4-byte big-endian length, then zlib data (``compress = TRUE``), or a
    type byte and the data (``compress = 2``: bzip2, ``3``: xz)."""
    try:
        if method == 1:
            return zlib.decompress(blob[4:])
        kind, body = blob[4:5], blob[5:]
        return {b"Z": zlib.decompress, b"2": bz2.decompress, b"X": lzma.decompress, b"0": bytes}[kind](body)
    except (zlib.error, OSError, lzma.LZMAError, KeyError, ValueError) as e:
        raise SourceFormatError(f"{name}: record cannot be decompressed ({e or 'unknown method'})") from None


def _r_index(rdx: Optional[bytes], rdb: bytes, name: str) -> tuple[list[tuple[str, int, int]], int]:
    """(variable, offset, length) of each object and the compression method, from the ``.rdx``
    index; without one, the records are walked in turn (zlib, the default)."""
    if rdx is None:
        records, pos = [], 0
        while pos < len(rdb):
            stream = zlib.decompressobj()
            try:
                stream.decompress(rdb[pos + 4 :])
            except zlib.error as e:
                raise SourceFormatError(f"{name}: record at byte {pos} cannot be decompressed ({e})") from None
            end = len(rdb) - len(stream.unused_data)
            records.append((str(len(records)), pos, end - pos))
            pos = end
        return records, 1
    index = unserialize_r(gzip.decompress(rdx) if rdx[:2] == b"\x1f\x8b" else rdx, name.replace(".rdb", ".rdx"))
    try:  # list(variables = list(name = c(offset, length), ...), references = ..., compressed = TRUE)
        parts = dict(zip(index.attributes["names"].value, index.value))
        variables = parts["variables"]
        compressed = parts.get("compressed", RValue(_LGLSXP, [1])).value[0]
        names = variables.attributes["names"].value
        return [(n, v.value[0], v.value[1]) for n, v in zip(names, variables.value)], int(compressed)
    except (KeyError, IndexError, TypeError, AttributeError) as e:
        raise SourceFormatError(f"{name}: the .rdx index is not a lazy-load index ({e!r})") from None


def r_data_vectors(rdb: bytes, rdx: Optional[bytes], name: str) -> Iterator[tuple[str, list[str]]]:
    """(variable, lines) for every character vector stored in an R package's ``data/Rdata.rdb``
    (a data frame's character columns included)."""
    records, method = _r_index(rdx, rdb, name)
    for variable, offset, length in records:
        if offset < 0 or offset + length > len(rdb):
            raise SourceFormatError(f"{name}: object {variable!r} lies outside the file")
        value = unserialize_r(_r_decompress(rdb[offset : offset + length], method, name), f"{name}: {variable}")
        yield from ((variable, lines) for lines in _strings(value))


def _strings(value: RValue) -> Iterator[list[str]]:
    if value.type == _STRSXP:
        yield [s or "" for s in value.value]
    elif value.type == _VECSXP:
        for element in value.value:
            yield from _strings(element)
