"""Streamlit's own command line (``streamlit run ...``), with the lab's heavy imports and the default
model's loading started in a background thread once the server runs: torch, the model loader and
plotly take about a second to import, which would otherwise start only when the first browser tab has
loaded and asked for the Tour. Here they overlap with the browser's page load. ``probing-lab app``
runs this file.

    python app/serve.py run app/Tour.py [streamlit options]
"""

from __future__ import annotations

import os
import sys
import threading

# NumPy's and SciPy's BLAS on one thread (before they load): the pages' matrices are small, and
# OpenBLAS's idle threads spin after each call. Measured in-process, the Polysemy page (open,
# "Type your own", five own sentences): 0.81 -> 0.38 s of CPU per student, the same wall time; Layer
# clustering's first draw 2.86 -> 2.05 s of CPU, 1.8 s wall either way. torch keeps its own threads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# torch's OpenMP threads sleep when idle instead of spinning: with a class's page runs in many threads,
# the spinning was CPU for nothing. Polysemy, 30 students at once, alternating runs: 0.56 / 0.58 -> 0.46 /
# 0.41 s of server CPU per student (10 students: 0.53 / 0.50 -> 0.42 / 0.41 s); peak memory 1.26-1.28x ->
# 1.32-1.37x one student's.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# Arrow (Streamlit's tables) allocates through malloc too, within the arenas below, not in a mimalloc pool
# of its own. Single RSS traces of 30 Polysemy students: peak 1.23-1.32x one student's by default (five
# runs), 1.21x with this alone, 1.18x with the arenas alone, 1.11x with both.
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")


def limit_malloc_arenas(n: int = 2) -> None:
    """glibc gives each thread that allocates its own malloc arena (up to 8 per core), and a class's
    page runs are many threads: each arena keeps the memory its thread freed. Two arenas (set before
    any other thread starts; a no-op off glibc). 30 students at once (``benchmarks/class_load.py``,
    alternating runs), peak memory against one student's: Polysemy 1.24 / 1.21x -> 1.12 / 1.13x (two
    rounds), Sentence explorer 1.24x -> 1.10x; server CPU per student within the spread (Polysemy at 10 /
    30: 0.26 / 0.28 and 0.24 / 0.27 s -> 0.27 / 0.29 and 0.26 / 0.28 s). In the
    RSS sampled every 0.25 s the peak had been the arenas of 30 page runs at once, and their size after."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").mallopt(-8, n)  # M_ARENA_MAX
    except (OSError, AttributeError):
        pass


limit_malloc_arenas()


def preload() -> None:
    """Once the server runs, import what every page needs; the page scripts import the same modules
    (Python's import lock makes a page wait for a half-done import instead of doing it twice). Not
    earlier: the two would share one interpreter lock and delay the server's start."""
    import time

    from streamlit.runtime import Runtime

    while not Runtime.exists():
        time.sleep(0.05)
    time.sleep(0.3)  # the server's own start-up, after the runtime object exists
    import plotly.graph_objects  # noqa: F401
    import torch  # noqa: F401

    import probing_lab.analysis  # noqa: F401
    import probing_lab.model_loading  # noqa: F401

    # the model the first page shows, loaded into the app's cache, and one sentence through it (torch's
    # first forward pass pays a one-off set-up); a failure is left for the page to report
    try:
        import model_choice

        from probing_lab.analysis import embed_activations

        bundle = model_choice.load_bundle(model_choice.default_spec()[0])
        embed_activations(bundle.embedder, [["The", "bank", "."]])
    except Exception:  # noqa: BLE001, S110
        pass
    freeze_what_lasts()


def freeze_what_lasts() -> None:
    """Move every object alive now (the modules, the model: about 300,000 objects) out of the garbage
    collector's sight. Streamlit collects garbage after every script run (``runner.postScriptGC``),
    and a full collection walked all of them: 150 ms of CPU per page run, half of what a student's
    Polysemy page cost the server; after the freeze it takes about 10 ms and still frees what the
    runs leave behind."""
    import gc

    gc.collect()
    gc.freeze()


if __name__ == "__main__":
    # pandas and scikit-learn before the server takes requests (about a second): imported in a thread
    # while a page imports them too, Python can hand the page a half-initialised module (seen: the
    # Polysemy page's "partially initialized module 'pandas' has no attribute 'Series'").
    import pandas  # noqa: F401
    import sklearn.linear_model  # noqa: F401
    import sklearn.model_selection  # noqa: F401

    threading.Thread(target=preload, name="preload", daemon=True).start()
    from streamlit.web.cli import main

    sys.exit(main())
