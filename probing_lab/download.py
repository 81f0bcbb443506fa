"""``probing-lab download NAME``: AllenNLP's published ELMo ``options.json`` + ``weights.hdf5``.

Each file is streamed to ``<file>.part`` (resumed with an HTTP Range request when a ``.part`` is
left from an interrupted run), checked against the announced size and renamed into place; the pair
is then loaded once with :func:`probing_lab.elmo.load_hdf5_model` and checked against the preset the
name stands for (its options, hence every weight's shape, and the published SHA-256 where known); a
pair that does not load or does not match is refused and the files this run fetched are removed.
Only a pair that passes gets a ``manifest.json`` (name, url, size and sha256 of each file) so that
:func:`verify` can catch a file that changes later. The base URL can be pointed at a mirror (``base_url=`` or
``$PROBING_LAB_ELMO_URL``).
"""

from __future__ import annotations

import argparse
import http.client
import json
import logging
import os
import re
import shlex
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from .fileio import atomic_path, file_sha256

log = logging.getLogger("probing_lab")

DEFAULT_BASE_URL = "https://allennlp.s3.amazonaws.com/models/elmo/"
URL_ENV = "PROBING_LAB_ELMO_URL"
# name -> the folder under the base URL; its files are named elmo_<folder>_options.json / _weights.hdf5
MODELS: dict[str, str] = {
    "small": "2x1024_128_2048cnn_1xhighway",
    "medium": "2x2048_256_2048cnn_1xhighway",
    "original": "2x4096_512_2048cnn_2xhighway",
    "original-5.5b": "2x4096_512_2048cnn_2xhighway_5.5B",
}
FILES = ("options.json", "weights.hdf5")  # the local names, in this order
# name -> the preset of probing_lab.elmo whose shapes the published files have
PRESET_OF: dict[str, str] = {"small": "small", "medium": "medium", "original": "original", "original-5.5b": "original"}
# name -> {local file name: sha256} of the published files, where known; checked after download
PUBLISHED_SHA256: dict[str, dict[str, str]] = {}
# the options that fix the shapes of the weights
SHAPE_FIELDS = ("lstm_dim", "projection_dim", "n_layers", "char_dim", "filters", "n_highway")
MANIFEST = "manifest.json"
CHUNK = 1 << 20


class DownloadError(OSError):
    """A file could not be fetched: HTTP error, unreachable server, dropped or truncated transfer."""


class VerifyError(ValueError):
    """Downloaded files that do not load as an ELMo, or no longer match their ``manifest.json``."""


@dataclass(frozen=True)
class ElmoFiles:
    name: str
    directory: Path
    options: Path
    weights: Path
    fetched: bool  # False when everything was already there and matched the manifest

    def cli_args(self) -> str:
        return f"--options {shlex.quote(str(self.options))} --weights {shlex.quote(str(self.weights))}"


def _check_name(name: str) -> None:
    if name not in MODELS:
        raise ValueError(f"unknown ELMo model {name!r}; choose one of {', '.join(MODELS)}")


def resolve_base_url(explicit: str | None = None) -> str:
    """``explicit``, else ``$PROBING_LAB_ELMO_URL``, else AllenNLP's bucket; always ending in ``/``."""
    url = explicit or os.environ.get(URL_ENV) or DEFAULT_BASE_URL
    return url.rstrip("/") + "/"


def model_urls(name: str, base: str | None = None) -> dict[str, str]:
    """Local file name -> URL of the published file, for model ``name``."""
    _check_name(name)
    folder = MODELS[name]
    root = resolve_base_url(base)
    return {f: f"{root}{folder}/elmo_{folder}_{f}" for f in FILES}


def default_dir(name: str) -> Path:
    """``$XDG_CACHE_HOME/probing-lab/elmo/NAME`` (``~/.cache`` when unset or not absolute)."""
    _check_name(name)
    cache = os.environ.get("XDG_CACHE_HOME", "")
    root = Path(cache) if cache and Path(cache).is_absolute() else Path.home() / ".cache"
    return root / "probing-lab" / "elmo" / name


# --- fetching one file --------------------------------------------------------------------


def _total_from_content_range(value: str | None) -> tuple[int | None, int | None]:
    """(first byte, total size) of a ``Content-Range: bytes a-b/N`` or ``bytes */N`` header."""
    m = re.fullmatch(r"\s*bytes\s+(?:(\d+)-\d+|\*)/(\d+|\*)\s*", value or "")
    if not m:
        return None, None
    start = int(m.group(1)) if m.group(1) is not None else None
    total = int(m.group(2)) if m.group(2) != "*" else None
    return start, total


def _fetch(url: str, dest: Path, model: str, progress: bool, timeout: float, on_progress=None) -> None:
    """Download ``url`` to ``dest`` through ``dest.part``, resuming a ``.part`` left from before."""
    from tqdm import tqdm

    part = dest.with_name(dest.name + ".part")
    resume_note = f"the partial file {part} is kept: run the same command again to resume"
    for _attempt in range(2):  # a second attempt only after a .part that cannot be resumed was discarded
        offset = part.stat().st_size if part.is_file() else 0
        request = urllib.request.Request(url, headers={"Range": f"bytes={offset}-"} if offset else {})
        try:
            response = urllib.request.urlopen(request, timeout=timeout)
        except urllib.error.HTTPError as e:
            e.close()
            if e.code == 416 and offset:  # nothing after `offset`: the .part is complete, or longer than the file
                _, total = _total_from_content_range(e.headers.get("Content-Range"))
                if total == offset:
                    log.info("%s: the partial download was already complete", dest.name)
                    os.replace(part, dest)
                    return
                log.warning("%s: %s (%d bytes) does not fit the file on the server; starting over", dest, part, offset)
                part.unlink()
                continue
            if e.code == 404:
                raise DownloadError(
                    f"HTTP 404 Not Found: {url} (the {dest.name} of ELMo {model!r}); check the base URL "
                    f"{base_url_of(url, model)!r} (${URL_ENV} or --base-url overrides it)"
                ) from None
            raise DownloadError(f"HTTP {e.code} {e.reason}: {url} (the {dest.name} of ELMo {model!r})") from None
        except (OSError, http.client.HTTPException) as e:  # URLError, refused, timeout, bad status line
            reason = getattr(e, "reason", e)
            raise DownloadError(f"cannot reach {url} ({reason}); check the network or ${URL_ENV}") from None

        with response:
            length = response.headers.get("Content-Length")
            length = int(length) if length and length.isdigit() else None
            if response.status == 206:
                start, total = _total_from_content_range(response.headers.get("Content-Range"))
                if start != offset:
                    log.warning("%s: the server resumed at byte %s, not %d; starting over", dest.name, start, offset)
                    part.unlink()
                    continue
                if total is None and length is not None:
                    total = offset + length
                mode = "ab"
                log.info("%s: resuming at byte %d", dest.name, offset)
            else:
                if offset:
                    log.info("%s: the server ignored the Range request; downloading from the start", dest.name)
                offset, total, mode = 0, length, "wb"
            done = offset
            bar = tqdm(
                total=total,
                initial=offset,
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                desc=dest.name,
                file=sys.stderr,
                disable=not progress,
                leave=False,
            )
            try:
                with open(part, mode) as f:
                    while True:
                        try:
                            chunk = response.read(CHUNK)
                        except (OSError, http.client.HTTPException) as e:  # reset, timeout, IncompleteRead
                            of = f" of {total:,}" if total is not None else ""
                            raise DownloadError(
                                f"{dest.name}: the connection dropped after {done:,}{of} bytes ({e!r}) "
                                f"while downloading {url}; {resume_note}"
                            ) from None
                        if not chunk:
                            break
                        f.write(chunk)
                        done += len(chunk)
                        bar.update(len(chunk))
                        if on_progress is not None:
                            on_progress(dest.name, done, total)
            finally:
                bar.close()
        if total is not None and done != total:
            raise DownloadError(
                f"{dest.name}: got {done:,} of the {total:,} bytes announced for {url} (the connection dropped "
                f"or the body was truncated); {resume_note}"
            )
        os.replace(part, dest)
        return
    raise DownloadError(f"{url}: could not resume or restart the download of {dest.name}")


def base_url_of(url: str, model: str) -> str:
    """The base URL a model file's URL was built from (for error messages)."""
    folder = MODELS[model]
    i = url.rfind(f"{folder}/")
    return url[:i] if i >= 0 else url


# --- manifest -----------------------------------------------------------------------------


def _read_manifest(directory: Path) -> dict:
    path = directory / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no manifest; run `probing-lab download NAME --dir {directory}` first")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        entries = manifest["files"]
        if not all(isinstance(e["name"], str) and int(e["size"]) >= 0 and e["sha256"] for e in entries):
            raise ValueError("an entry without name, size or sha256")
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise VerifyError(f"{path}: not a probing-lab download manifest ({e!r}); delete it, download again") from None
    return manifest


def _mismatch(directory: Path, entry: dict, hash_it: bool = True) -> str | None:
    """Why the file of a manifest entry does not match it, or None."""
    path = directory / entry["name"]
    if not path.is_file():
        return f"{path}: missing"
    size = path.stat().st_size
    if size != int(entry["size"]):
        return f"{path}: {size:,} bytes, the manifest says {int(entry['size']):,}"
    if hash_it and file_sha256(path) != entry["sha256"]:
        return f"{path}: sha256 differs from the manifest's (the file was changed or corrupted after download)"
    return None


def verify(directory: str | Path) -> dict:
    """Recompute the size and sha256 of every file listed in ``directory/manifest.json``; raise
    :class:`VerifyError` naming the first file that does not match. Returns the manifest."""
    directory = Path(directory)
    manifest = _read_manifest(directory)
    for entry in manifest["files"]:
        problem = _mismatch(directory, entry)
        if problem:
            name = manifest.get("model", "NAME")
            raise VerifyError(
                f"{problem}; delete it and run `probing-lab download {name} --dir {directory}` to fetch it again"
            )
    return manifest


def expected_options(name: str):
    """The :class:`~probing_lab.elmo.ElmoOptions` of the preset the published ELMo ``name`` has."""
    from .elmo import get_preset

    _check_name(name)
    return get_preset(PRESET_OF[name])


def _validate(name: str, options: Path, weights: Path) -> int:
    """Load the pair once and check it is the ELMo ``name``: its parameter count, or VerifyError
    naming what does not load or does not match (options, shapes, published SHA-256)."""
    from .elmo import OptionsError, WeightsError, load_hdf5_model

    try:
        model = load_hdf5_model(options, weights)  # every dataset's shape is checked against the options
    except (OptionsError, WeightsError) as e:  # their messages name the file
        raise VerifyError(f"the downloaded pair does not load: {e}") from None
    except Exception as e:  # anything else a broken download can raise while loading
        raise VerifyError(f"{options} + {weights} do not load as an ELMo ({type(e).__name__}: {e})") from None
    want = expected_options(name)
    wrong = [
        f"{f} {getattr(model.options, f)!r} (expected {getattr(want, f)!r})"
        for f in SHAPE_FIELDS
        if getattr(model.options, f) != getattr(want, f)
    ]
    if wrong:
        raise VerifyError(
            f"{options} is not the published ELMo {name!r}: {'; '.join(wrong)}; "
            f"the pair loads, but as a model of {model.count_parameters():,} parameters"
        )
    for f, digest in PUBLISHED_SHA256.get(name, {}).items():
        path = options if f == "options.json" else weights
        if file_sha256(path) != digest:
            raise VerifyError(f"{path}: its SHA-256 differs from the published {f} of ELMo {name!r}")
    return model.count_parameters()


# --- the command --------------------------------------------------------------------------


def download(
    name: str,
    directory: str | Path | None = None,
    *,
    base_url: str | None = None,
    progress: bool = True,
    timeout: float = 60.0,
    on_progress: Optional[Callable[[str, int, Optional[int]], None]] = None,
) -> ElmoFiles:
    """Fetch the published ELMo ``name`` into ``directory`` (default :func:`default_dir`), validate
    the pair and write ``manifest.json``. Does nothing when the files are there and match the manifest.
    ``on_progress(file name, bytes done, total or None)`` is called as the bytes come (a progress bar)."""
    _check_name(name)
    directory = Path(directory).expanduser() if directory is not None else default_dir(name)
    if directory.exists() and not directory.is_dir():
        raise NotADirectoryError(f"--dir {directory} is a file; give a folder")
    urls = model_urls(name, base_url)
    paths = {f: directory / f for f in FILES}
    files = ElmoFiles(name, directory, paths["options.json"], paths["weights.hdf5"], fetched=True)

    manifest_path = directory / MANIFEST
    if manifest_path.is_file():
        manifest = _read_manifest(directory)
        if manifest.get("model") not in (None, name):
            raise VerifyError(
                f"{directory} holds ELMo {manifest.get('model')!r} (see {manifest_path}), not {name!r}; "
                "give another --dir"
            )
        if all(directory.joinpath(f).is_file() for f in FILES):
            verify(directory)  # raises, naming the file, when one was changed since
            log.info("%s: ELMo %r already downloaded and matches %s; nothing to do", directory, name, MANIFEST)
            return ElmoFiles(name, directory, paths["options.json"], paths["weights.hdf5"], fetched=False)
        for entry in manifest["files"]:  # a file was deleted (to fetch it again): the others must still match
            problem = directory.joinpath(entry["name"]).is_file() and _mismatch(directory, entry)
            if problem:
                raise VerifyError(f"{problem}; delete it too and run the command again to fetch it")
        manifest_path.unlink()  # it no longer describes the folder; a new one is written after validation

    directory.mkdir(parents=True, exist_ok=True)
    fetched = []
    for f in FILES:
        if paths[f].is_file():
            log.info("%s: already there (an earlier complete download); not fetched again", paths[f])
            continue
        log.info("downloading %s", urls[f])
        _fetch(urls[f], paths[f], name, progress, timeout, on_progress)
        fetched.append(paths[f])

    try:
        parameters = _validate(name, files.options, files.weights)
    except VerifyError as e:  # what this run fetched goes; a file that was there before is the user's to judge
        for path in fetched:
            path.unlink(missing_ok=True)
        kept = [str(paths[f]) for f in FILES if paths[f] not in fetched]
        what = f"removed {', '.join(map(str, fetched))}" if fetched else "nothing fetched"
        were = "was" if len(kept) == 1 else "were"
        also = f"; kept {', '.join(kept)}, which {were} there before: delete what is not yours" if kept else ""
        raise VerifyError(
            f"{e}. Refused: {what} and no manifest was written{also}; check the base URL ({resolve_base_url(base_url)})"
        ) from None
    manifest = {
        "model": name,
        "parameters": parameters,
        "files": [
            {"name": f, "url": urls[f], "size": paths[f].stat().st_size, "sha256": file_sha256(paths[f])} for f in FILES
        ],
    }
    with atomic_path(manifest_path) as tmp:
        tmp.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    log.info("ELMo %r (%s parameters) in %s", name, f"{parameters:,}", directory)
    return files


def cmd_download(args: argparse.Namespace) -> int:
    try:
        files = download(args.name, args.dir, base_url=args.base_url, progress=not args.quiet)
    except KeyboardInterrupt:
        print(
            "probing-lab download: interrupted; a partial file is kept as *.part: run the same command to resume",
            file=sys.stderr,
        )
        return 130
    if not files.fetched:
        print(f"ELMo {files.name!r} is already in {files.directory} and matches its {MANIFEST}; nothing to do")
    else:
        print(f"ELMo {files.name!r} downloaded to {files.directory} (checked: it loads; {MANIFEST} written)")
    print(f"use it with: {files.cli_args()}")
    print(f"  e.g. probing-lab embed {files.cli_args()} --input sents.txt --output out.hdf5")
    print(f"or, in every command that takes --model (probe, transfer, compare, ...): --model {files.directory}")
    return 0


def add_download_command(sub) -> None:
    p = sub.add_parser("download", help="fetch a published ELMo (options.json + weights.hdf5) from AllenNLP")
    p.add_argument("name", choices=list(MODELS), help="which published ELMo")
    p.add_argument("--dir", help="target folder (default: $XDG_CACHE_HOME or ~/.cache, then probing-lab/elmo/NAME)")
    p.add_argument("--base-url", help=f"mirror of {DEFAULT_BASE_URL} (default: ${URL_ENV} or that)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_download)
