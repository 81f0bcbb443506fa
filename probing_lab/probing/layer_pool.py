"""An experiment's layer entries probed side by side (the token, sentence, span and structural probes): with
several workers (``RunProgress.workers``; the command line gives one per ``--threads``) each entry's
fits run in a forked worker process on one torch thread, so a layer's numbers are the same however
many workers ran them, and the same as with one worker on one thread (``--threads 1``, a sweep's cell).
With one worker the fits run in the caller, on its threads (the app: its sessions are threads of one
process, whose torch setting is not theirs to change).

Why processes, and one thread each: a probe's step is a few dozen small tensor operations (a token
probe's 1,024-row minibatch of 256 numbers; a span probe's few hundred tokens of whole sentences),
which two threads barely speed up; two fits at once, one per core, do. Threads in one process would
share torch's global random generator (probe initialisation, dropout) and so change each other's
numbers; forked processes each have their own.

The structural probes joined once their learning rate decayed on a plateau: before, their Adam steps
bounced around the optimum and their UUAS moved by up to 0.0096 with the threads' rounding (one vs two
threads); with the decay by at most 0.0008 (layers 2, 2f and mix, measured).
"""

from __future__ import annotations

import multiprocessing
from typing import Callable

import torch

_FIT: Callable | None = None  # the runner's fit_layer, inherited by the forked workers


def _fit_in_worker(key: str) -> tuple[str, dict]:
    return key, _FIT(key)


def probe_layers(keys: list[str], fit_layer: Callable[[str], dict], report, say: Callable[[str, dict], str]) -> dict:
    """``{key: fit_layer(key)}`` in the order of ``keys``; up to ``report.workers`` of them at once
    in forked processes on one torch thread each (a fresh process per layer, so each layer's memory
    is given back), the mix started first. As each layer finishes, ``report.layer_done(say(key, entry))``.

    pos_ewt, 2 cores, features cached: the model's probes 48.1-56.0 s one layer after the other on
    two threads, 38.5-39.7 s two layers at once (each fit slower beside the other: 72.7 s of worker
    time). The mix (probe and MDL 18.6 s of pos_ewt's 61 worker-seconds, 29.8 of deprel_ewt's 59) ran
    last and alone; started first, the model's probes 41.6 / 34.2 -> 30.3 / 30.5 s (pos_ewt) and
    42.2 / 38.8 -> 33.7 / 30.1 s (deprel_ewt), two rounds, identical scores."""
    global _FIT
    workers = min(report.workers, len(keys))
    results = {}
    if workers <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        for key in keys:  # on the caller's threads: one for the command line's --threads 1
            results[key] = fit_layer(key)
            report.layer_done(say(key, results[key]))
        return results
    _FIT = fit_layer
    # the mix first: it reads every layer and takes the longest, and started last it runs alone at the end
    order = sorted(keys, key=lambda key: key != "mix")
    try:
        context = multiprocessing.get_context("fork")
        with context.Pool(workers, initializer=torch.set_num_threads, initargs=(1,), maxtasksperchild=1) as pool:
            for key, entry in pool.imap_unordered(_fit_in_worker, order):
                results[key] = entry
                report.layer_done(say(key, entry))
    finally:
        _FIT = None
    return {key: results[key] for key in keys}
