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

import inspect
import multiprocessing
from dataclasses import dataclass, replace
from typing import Callable

import torch

_FITS: list = []  # the jobs' fit_layer functions, inherited by the forked workers


@dataclass(frozen=True)
class LayerJobs:
    """What a runner asks of the pool: ``fit_layer(key)`` for each of ``keys``; ``say(key, entry)`` is the log
    line of a finished entry, after ``label`` (e.g. "random init", where two models' entries interleave).
    A tuple of keys is one task, entries fitted together (e.g. ``span_probe.fit_span_layers``): its
    ``fit_layer(keys)`` returns ``{key: entry}``."""

    keys: list
    fit_layer: Callable[[str], dict]
    say: Callable[[str, dict], str]
    label: str = ""

    def said(self, key: str, entry: dict) -> str:
        line = self.say(key, entry)
        return f"  {self.label} {line.strip()}" if self.label else line


def _fit_in_worker(task: tuple[int, str]) -> tuple[tuple[int, str], dict]:
    job, key = task
    return task, _FITS[job](key)


def probe_jobs(jobs: list[LayerJobs], report) -> list[dict]:
    """Per job ``{key: job.fit_layer(key)}`` in the order of its keys; every job's entries up to
    ``report.workers`` at once in forked processes on one torch thread each (a fresh process per entry, so
    each entry's memory is given back), the mixes started first. As each entry finishes,
    ``report.layer_done(job.said(key, entry))``.

    pos_ewt, 2 cores, features cached: the model's probes 48.1-56.0 s one layer after the other on
    two threads, 38.5-39.7 s two layers at once (each fit slower beside the other: 72.7 s of worker
    time). The mix (probe and MDL 18.6 s of pos_ewt's 61 worker-seconds, 29.8 of deprel_ewt's 59) ran
    last and alone; started first, the model's probes 41.6 / 34.2 -> 30.3 / 30.5 s (pos_ewt) and
    42.2 / 38.8 -> 33.7 / 30.1 s (deprel_ewt), two rounds, identical scores. Two jobs (a model and its
    random-init baseline) share the pool, so that neither waits while the other's last entry runs alone."""
    global _FITS
    tasks = [(j, key) for j, job in enumerate(jobs) for key in job.keys]
    workers = min(report.workers, len(tasks))
    results: list[dict] = [{} for _ in jobs]

    def done(j: int, key, entry) -> None:
        for k, e in entry.items() if isinstance(key, tuple) else [(key, entry)]:
            results[j][k] = e
            report.layer_done(jobs[j].said(k, e))

    if workers <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        for j, key in tasks:  # on the caller's threads: one for the command line's --threads 1
            done(j, key, jobs[j].fit_layer(key))
    else:
        _FITS = [job.fit_layer for job in jobs]
        # the mixes first: they read every layer and take the longest, and started last they run alone at the end
        order = sorted(tasks, key=lambda task: "mix" not in _keys(task[1]))
        try:
            context = multiprocessing.get_context("fork")
            with context.Pool(workers, initializer=torch.set_num_threads, initargs=(1,), maxtasksperchild=1) as pool:
                for (j, key), entry in pool.imap_unordered(_fit_in_worker, order):
                    done(j, key, entry)
        finally:
            _FITS = []
    return [{k: result[k] for key in job.keys for k in _keys(key)} for job, result in zip(jobs, results)]


def _keys(key) -> tuple:
    """The layer keys of a task: its one key, or its tuple's."""
    return key if isinstance(key, tuple) else (key,)


def run_runners(started: list, labels: list[str], report) -> list:
    """The results of task runners started on their splits (``runners.RUNNERS``): a runner that probes
    layer entries is a generator that yields its :class:`LayerJobs` once and is sent back ``{key:
    entry}``; one that does its own work has returned its result already. Every generator's entries are
    probed in one pool (:func:`probe_jobs`), each job's log lines after its ``labels`` entry."""
    waiting = {i: runner for i, runner in enumerate(started) if inspect.isgenerator(runner)}
    jobs = [replace(next(runner), label=labels[i]) for i, runner in waiting.items()]
    out = list(started)
    for (i, runner), results in zip(waiting.items(), probe_jobs(jobs, report)):
        try:
            runner.send(results)
        except StopIteration as done:
            out[i] = done.value
        else:
            raise RuntimeError("a runner yields its layer jobs once")
    return out
