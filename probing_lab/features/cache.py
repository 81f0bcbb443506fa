"""Layer activations of a dataset, extracted once per (model, data, settings) and memory-mapped.

``extract_features(encoder, sentences, ...)`` returns :class:`Features`: ``layers`` is a
read-only memory map ``(n_layers, n_tokens, dim)`` (float16 by default) with every sentence's
tokens in order; ``offsets[i]:offsets[i+1]`` are sentence ``i``'s rows. The cache key hashes
the model's weights, the sentences' words and the settings, so changing any of them never
serves stale vectors. Extraction writes into a ``.partial`` folder and records how far it got:
an interrupted extraction resumes from there; only a finished one is renamed into place.

The encoder is anything with ``embed(list_of_token_lists) -> list[(n_layers, n, dim) arrays]``
plus ``n_layers``, ``dim`` and ``fingerprint()``; :class:`ElmoEncoder` wraps the lab's biLM.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Protocol, Sequence

import numpy as np

from .activations import Activations

CACHE_ENV = "PROBING_LAB_CACHE"
FORMAT_VERSION = 1


def default_cache_dir() -> Path:
    """``$PROBING_LAB_CACHE``, else the user's cache folder (``$XDG_CACHE_HOME`` or ``~/.cache``)
    under ``probing-lab/features``: never the install tree, which may be read-only or shared."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "probing-lab" / "features"


class Encoder(Protocol):
    n_layers: int
    dim: int

    def embed(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]: ...

    def fingerprint(self) -> str: ...


class ElmoEncoder:
    """The biLM behind the probes: stateless, deterministic, float32 compute."""

    def __init__(self, model, name: str = "elmo", batch_size: int = 64):
        from ..elmo import Embedder

        self.model = model
        self.name = name
        self.embedder = Embedder(model, batch_size=batch_size)
        self.n_layers = self.embedder.n_layers
        self.dim = self.embedder.dim
        self._fingerprint: Optional[str] = None

    def embed(self, sentences):
        return self.embedder.embed(sentences, progress=False)

    def vocabulary_of(self, sentences):
        """The words' type vectors computed once for a whole extraction (``Embedder.vocabulary_of``)."""
        return self.embedder.vocabulary_of(sentences)

    def fingerprint(self) -> str:
        """sha256 of the weights themselves (names, shapes, bytes)."""
        if self._fingerprint is None:
            h = hashlib.sha256()
            for name, t in sorted(self.model.state_dict().items()):
                h.update(name.encode())
                h.update(str(tuple(t.shape)).encode())
                h.update(t.detach().cpu().float().contiguous().numpy().tobytes())
            self._fingerprint = h.hexdigest()
        return self._fingerprint


@dataclass
class Features(Activations):
    """Cached activations: ``layers`` is a read-only memory map; ``key`` and ``path`` say where."""

    key: str
    path: Path


def cache_key(fingerprint: str, sentences: Sequence[Sequence[str]], settings: dict) -> str:
    h = hashlib.sha256()
    h.update(
        json.dumps({"format": FORMAT_VERSION, "model": fingerprint, "settings": settings}, sort_keys=True).encode()
    )
    for s in sentences:
        h.update("\x1f".join(s).encode("utf-8"))
        h.update(b"\x1e")
    return h.hexdigest()[:24]


def _settings(encoder: Encoder, dtype: str) -> dict:
    return {"dtype": dtype, "stateless": True, "layers": encoder.n_layers, "dim": encoder.dim}


def _key(encoder: Encoder, sentences: Sequence[Sequence[str]], dtype: str) -> str:
    """The cache folder's name of these features."""
    return cache_key(encoder.fingerprint(), sentences, _settings(encoder, dtype))


def _finished(folder: Path) -> bool:
    """Whether ``folder`` holds a finished extraction (its ``meta.json`` is written last)."""
    return (folder / "meta.json").is_file()


def is_cached(
    encoder: Encoder, sentences: Sequence[Sequence[str]], cache_dir: Optional[str | Path] = None, dtype="float16"
) -> bool:
    """Whether :func:`extract_features` would read these features from the cache (not extract them)."""
    cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
    return _finished(cache_dir / _key(encoder, sentences, dtype))


def _extract_lane(jobs: list, cache_dir: Path) -> None:
    import torch

    torch.set_num_threads(1)
    try:
        for encoder, sentences in jobs:
            extract_features(encoder, sentences, cache_dir=cache_dir, progress=False)
    except BaseException:  # what is missing is extracted again by its user, who reports what goes wrong
        os._exit(1)


def extract_side_by_side(jobs: list, cache_dir: Optional[str | Path] = None, workers: int = 2, progress=True) -> int:
    """Extract ``jobs`` (``(encoder, sentences)`` pairs) into the cache, ``workers`` at a time: the jobs
    not cached yet (each once, however often listed) are dealt into ``workers`` lanes of about equal
    tokens, the first lane runs here and each other in a forked process, every lane on one torch thread.
    The biLM's steps are small products that a second thread speeds up only 1.4-1.6x, so two extractions
    side by side finish sooner than one after the other on two threads (EWT dev + test, two models: 12 s
    against 2 x 7.5 s). The vectors are the shipped model's on EWT to the bit (checked on one and two
    threads); at other shapes a thread count can move a few float16 values by one step.
    A lane that fails leaves its features uncached, to be extracted (and its error raised) by whoever
    reads them; one lane runs here on the caller's threads, as does everything where processes cannot be
    forked (Windows). Returns how many extractions there were to do."""
    import multiprocessing

    import torch

    cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
    todo = {}  # key -> (encoder, sentences, tokens)
    for encoder, sentences in jobs:
        key = _key(encoder, sentences, "float16")
        if key not in todo and not _finished(cache_dir / key):
            todo[key] = (encoder, sentences, sum(map(len, sentences)))
    if "fork" not in multiprocessing.get_all_start_methods():
        workers = 1  # one lane, here
    lanes, tokens = [[] for _ in range(max(workers, 1))], [0] * max(workers, 1)
    for encoder, sentences, n in sorted(todo.values(), key=lambda job: -job[2]):  # largest first, to the lightest lane
        lane = tokens.index(min(tokens))
        lanes[lane].append((encoder, sentences))
        tokens[lane] += n
    lanes = [lane for lane in lanes if lane] or [[]]
    children = [
        multiprocessing.get_context("fork").Process(target=_extract_lane, args=(lane, cache_dir)) for lane in lanes[1:]
    ]
    threads = torch.get_num_threads()
    finished = False
    try:
        for child in children:
            child.start()
        if children:  # every lane on one thread; a lone lane keeps the caller's threads
            torch.set_num_threads(1)
        for encoder, sentences in lanes[0]:
            extract_features(encoder, sentences, cache_dir=cache_dir, progress=progress)
        finished = True
    finally:
        torch.set_num_threads(threads)
        for child in children:
            if not finished:  # interrupted or failed here: stop the others (their partial caches resume)
                child.terminate()
            child.join()
    return len(todo)


def extract_features(
    encoder: Encoder,
    sentences: Sequence[Sequence[str]],
    cache_dir: Optional[str | Path] = None,
    dtype: str = "float16",
    chunk_sentences: int = 1024,
    progress: bool = True,
    restart: bool = False,
) -> Features:
    """Extract (or load from the cache) every layer for ``sentences``. ``chunk_sentences``: how many
    are embedded (length-sorted into batches) and written at a time, the point an interrupted run
    resumes from. Larger chunks pad less (EWT dev + test, 4,078 sentences: 256 -> 1,024 a chunk,
    5.0 -> 3.9 s, the same vectors) and hold more in memory (a chunk's float32 vectors: about 80 MB
    with the shipped model, 300 MB with the original ELMo)."""
    if dtype not in ("float16", "float32"):
        raise ValueError(f"dtype must be float16 or float32, got {dtype!r}")
    empty = [i for i, s in enumerate(sentences) if not s]
    if empty:
        raise ValueError(f"sentence(s) {empty[:5]} have no tokens; drop them before extracting")
    cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
    settings = _settings(encoder, dtype)
    key = _key(encoder, sentences, dtype)
    final = cache_dir / key
    if _finished(final):
        return _open(final, key)
    cache_dir.mkdir(parents=True, exist_ok=True)
    with _locked(cache_dir / f"{key}.lock"):  # another process extracting the same: wait, then read its files
        if _finished(final):
            return _open(final, key)
        return _extract(encoder, sentences, cache_dir, key, settings, dtype, chunk_sentences, progress, restart)


@contextmanager
def _locked(path: Path):
    """An exclusive lock on ``path`` (POSIX ``flock``, released however the process ends), removed
    when done; a waiter that finds its file removed or replaced locks the new one. Without ``fcntl``
    (Windows) no lock: two processes must not extract the same features at once there."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    while True:
        handle = open(path, "a")
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            if os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino:
                break
        except FileNotFoundError:
            pass
        handle.close()  # the holder before us removed it: lock the one there now
    try:
        yield
    finally:
        path.unlink(missing_ok=True)
        handle.close()


def _extract(encoder, sentences, cache_dir: Path, key: str, settings, dtype, chunk_sentences, progress, restart):
    final = cache_dir / key
    partial = cache_dir / f"{key}.partial"
    if restart:
        shutil.rmtree(partial, ignore_errors=True)
    lengths = np.array([len(s) for s in sentences], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    shape = (encoder.n_layers, int(offsets[-1]), encoder.dim)
    partial.mkdir(parents=True, exist_ok=True)
    progress_file = partial / "progress.json"
    done = 0
    if progress_file.is_file() and (partial / "layers.npy").is_file():
        record = json.loads(progress_file.read_text())
        if record.get("shape") == list(shape):
            done = int(record["sentences_done"])
    if not done:
        np.lib.format.open_memmap(partial / "layers.npy", mode="w+", dtype=dtype, shape=shape).flush()
    np.save(partial / "offsets.npy", offsets)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=int(offsets[-1]), initial=int(offsets[done]), unit="tok", desc="extract", file=sys.stderr)
    start = time.perf_counter()
    # Length-sorted inside each chunk (the embedder does it), chunk by chunk in order so that
    # "sentences_done" is a clean resume point.
    # The file is mapped afresh for each chunk and unmapped after it: pages of a mapping count in the
    # process's memory, so a long-lived map would grow with the file (see layer_rows.LayerRows).
    # Every word's type vector once for the whole extraction (of all the sentences: a resumed run
    # computes the same vectors as an uninterrupted one).
    scope = encoder.vocabulary_of(sentences) if hasattr(encoder, "vocabulary_of") else nullcontext()
    with scope:
        for lo in range(done, len(sentences), chunk_sentences):
            hi = min(lo + chunk_sentences, len(sentences))
            arrays = encoder.embed([list(s) for s in sentences[lo:hi]])
            layers = np.load(partial / "layers.npy", mmap_mode="r+")
            for i, a in zip(range(lo, hi), arrays):
                if not np.isfinite(a).all():
                    del layers
                    shutil.rmtree(partial, ignore_errors=True)
                    raise ValueError(
                        f"{getattr(encoder, 'name', 'the model')} gives non-finite activations (NaN or inf) for "
                        f"sentence {i} ({' '.join(sentences[i][:8])} ...): its weights are broken (a diverged "
                        "training run?); nothing was cached"
                    )
                layers[:, offsets[i] : offsets[i + 1]] = a.astype(dtype)
            layers.flush()
            del layers
            progress_file.write_text(json.dumps({"sentences_done": hi, "shape": list(shape)}))
            if bar is not None:
                bar.update(int(offsets[hi] - offsets[lo]))
    if bar is not None:
        bar.close()
    meta = {
        "key": key,
        "settings": settings,
        "fingerprint": encoder.fingerprint(),
        "sentences": len(sentences),
        "tokens": int(offsets[-1]),
        "seconds": round(time.perf_counter() - start, 2),
        "format": FORMAT_VERSION,
    }
    (partial / "meta.json").write_text(json.dumps(meta, indent=2))
    progress_file.unlink(missing_ok=True)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(partial, final)
    return _open(final, key)


def _open(path: Path, key: str) -> Features:
    layers = np.load(path / "layers.npy", mmap_mode="r")
    offsets = np.load(path / "offsets.npy")
    return Features(layers, offsets, key, path)
