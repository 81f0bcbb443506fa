"""The app as a server: the launcher's port checks, stopping it with a signal (no orphaned Streamlit left
listening), and the settings that confine the path fields ($PROBING_LAB_ALLOWED_ROOTS, --allowed-root) and
turn off probe runs ($PROBING_LAB_NO_RUNS, --no-runs)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from conftest import ok, texts, widget  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app"
PAGES = {
    "probes": APP / "pages" / "3_Probes.py",
    "model": APP / "pages" / "8_Model.py",
    "training": APP / "pages" / "7_Training.py",
    "polysemy": APP / "pages" / "1_Polysemy.py",
}
TIMEOUT = 180
sys.path.insert(0, str(APP))

import launch  # noqa: E402


@pytest.fixture(autouse=True)
def tiny_model(monkeypatch):
    monkeypatch.setenv("PROBING_LAB_MODEL", "random:cpu-tiny")
    monkeypatch.delenv("PROBING_LAB_ALLOWED_ROOTS", raising=False)
    monkeypatch.delenv("PROBING_LAB_NO_RUNS", raising=False)


def run(page: str) -> AppTest:
    at = AppTest.from_file(str(PAGES[page]), default_timeout=TIMEOUT)
    at.run()
    return at


# --- launcher: ports ----------------------------------------------------------------------------


@pytest.mark.parametrize("port", [80000, -1, 65536])
def test_run_app_refuses_a_port_out_of_range(port, capsys):
    assert launch.run_app(port=port, model="random:cpu-tiny") == 2
    err = capsys.readouterr().err
    assert err.startswith("probing-lab app: ") and f"--port {port}" in err and "1-65535" in err
    assert "omit --port" in err and "http://" not in err


def test_run_app_refuses_a_port_in_use(capsys):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert launch.run_app(port=port, model="random:cpu-tiny") == 2
    err = capsys.readouterr().err
    assert err.startswith("probing-lab app: ") and f"127.0.0.1:{port}" in err and "in use" in err
    assert "omit --port" in err and "http://" not in err


def test_run_app_refuses_a_missing_allowed_root(tmp_path, capsys):
    assert launch.run_app(model="random:cpu-tiny", allowed_roots=[str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert "--allowed-root" in err and "no such directory" in err and "http://" not in err


class FakePopen:
    """Stands in for Streamlit: records how it was started and exits at once."""

    started: list = []

    def __init__(self, command, env=None, cwd=None):
        FakePopen.started.append({"command": command, "env": env, "cwd": cwd})

    def wait(self, timeout=None):
        return 0

    def poll(self):
        return 0


def test_cli_passes_allowed_roots_and_no_runs_to_the_app(tmp_path, monkeypatch, capsys):
    from probing_lab.cli import main

    FakePopen.started = []
    monkeypatch.setattr(subprocess, "Popen", FakePopen)  # cli.py loads its own copy of launch.py
    handlers = {s: signal.getsignal(s) for s in launch.FORWARDED_SIGNALS}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    argv = ["app", "--model", "random:cpu-tiny", "--allowed-root", str(tmp_path / "a")]
    assert main(argv + ["--allowed-root", str(tmp_path / "b"), "--no-runs"]) == 0
    (started,) = FakePopen.started
    env = started["env"]
    assert env["PROBING_LAB_ALLOWED_ROOTS"].split(os.pathsep) == [str(tmp_path / "a"), str(tmp_path / "b")]
    assert env["PROBING_LAB_NO_RUNS"] == "1" and env["PROBING_LAB_MODEL"] == "random:cpu-tiny"
    assert "paths confined" in capsys.readouterr().err
    assert {s: signal.getsignal(s) for s in launch.FORWARDED_SIGNALS} == handlers  # put back afterwards

    FakePopen.started = []
    assert main(["app", "--model", "random:cpu-tiny"]) == 0  # neither: nothing set for the app
    env = FakePopen.started[0]["env"]
    assert "PROBING_LAB_ALLOWED_ROOTS" not in env and "PROBING_LAB_NO_RUNS" not in env


# --- launcher: stopping it stops Streamlit ------------------------------------------------------


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def test_sigterm_to_the_launcher_stops_streamlit():
    """Slow-ish (Streamlit starts in seconds, more on a busy machine) but in the default run: no `slow` marker."""
    port = launch.free_port()
    launcher = subprocess.Popen(
        [sys.executable, "-m", "probing_lab.cli", "app", "--port", str(port), "--model", "random:cpu-tiny"],
        cwd=str(ROOT),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group, so that a failed test can clean up both processes
    )
    try:
        assert launch.wait_until_healthy(f"http://127.0.0.1:{port}", launcher, timeout_s=120), (
            launcher.poll(),
            launcher.stderr.read().decode() if launcher.poll() is not None else "",
        )
        launcher.send_signal(signal.SIGTERM)
        start = time.monotonic()
        assert launcher.wait(timeout=20) == 0
        assert time.monotonic() - start < 20
        assert not listening(port), f"something still listens on {port}: an orphaned Streamlit"
        assert f"http://127.0.0.1:{port}" in launcher.stderr.read().decode()
    finally:
        if launcher.poll() is None or listening(port):
            try:
                os.killpg(launcher.pid, signal.SIGKILL)  # the group this test started
            except ProcessLookupError:
                pass
            launcher.wait()
        launcher.stderr.close()


# --- path confinement ---------------------------------------------------------------------------


def test_allowed_path(tmp_path, monkeypatch):
    import allowed_paths

    from probing_lab import paths

    assert allowed_paths.allowed_path("/etc") == Path("/etc")  # nothing set: any path, as typed
    assert allowed_paths.runs_allowed()
    monkeypatch.setenv("PROBING_LAB_ALLOWED_ROOTS", os.pathsep.join(["", str(tmp_path), ""]))
    (tmp_path / "inside").mkdir()
    (tmp_path / "escape").symlink_to("/etc")
    assert allowed_paths.allowed_path(f" {tmp_path / 'inside'} ") == (tmp_path / "inside").resolve()
    assert allowed_paths.allowed_path(str(tmp_path)) == tmp_path.resolve()
    assert allowed_paths.allowed_path(str(paths.REPO_ROOT / "probes")) == (paths.REPO_ROOT / "probes").resolve()
    for outside in ("/etc", tmp_path / "escape", tmp_path / "escape" / "passwd", tmp_path / "inside" / ".." / ".."):
        with pytest.raises(ValueError, match="outside the folders this server allows"):
            allowed_paths.allowed_path(str(outside))
    for value, allowed in (("1", False), ("yes", False), ("0", True), ("", True)):
        monkeypatch.setenv("PROBING_LAB_NO_RUNS", value)
        assert allowed_paths.runs_allowed() is allowed


def _checkpoint(path: Path) -> Path:
    import torch

    from probing_lab.elmo import ElmoBiLM, get_preset, save_checkpoint

    model = ElmoBiLM(get_preset("cpu-tiny"))
    model.reset_parameters(torch.Generator().manual_seed(1))
    save_checkpoint(model, path, card={"name": "test-card"})
    return path


def test_model_page_refuses_paths_outside_the_allowed_roots(tmp_path, monkeypatch):
    monkeypatch.setenv("PROBING_LAB_ALLOWED_ROOTS", str(tmp_path))
    at = ok(run("model"))
    before = at.session_state["model_spec"]
    at.radio(key="kind").set_value("Another checkpoint directory").run()
    at.text_input(key="checkpoint").input("/etc").run()
    assert "outside the folders this server allows" in texts(ok(at).error)
    assert at.button(key="use").disabled  # the model cannot be switched to it
    assert at.session_state["model_spec"] == before and not at.success
    assert "random init cpu-tiny" in texts(ok(at).markdown)

    at.radio(key="kind").set_value("Released ELMo (options.json + weights.hdf5)").run()
    at.text_input(key="options").input("/etc/passwd")
    at.text_input(key="weights").input(str(tmp_path / "weights.hdf5")).run()
    assert "outside the folders this server allows" in texts(ok(at).error) and at.button(key="use").disabled

    at.radio(key="kind").set_value("Another checkpoint directory").run()  # inside: works as before
    at.text_input(key="checkpoint").input(str(_checkpoint(tmp_path / "ckpt"))).run()
    assert not ok(at).error
    at.button(key="use").click().run()
    assert "Now using checkpoint:" in texts(ok(at).success)
    assert any("test-card" in str(j.value) for j in at.json)


def _write_run(folder: Path) -> None:
    layers = {k: {"score": s, "control_score": s / 2, "selectivity": s / 2} for k, s in (("0", 0.8), ("1", 0.9))}
    metrics = {
        "task": "upos",
        "experiment": "pos_ewt",
        "dataset": "ewt",
        "model": "random:cpu-small (seed 0)",
        "splits": {"train": "train", "dev": "dev", "test": "test"},
        "seed": 0,
        "layers": layers,
        "labels": ["NOUN", "VERB"],
        "baselines": {"majority": 0.7},
        "seconds": 1.0,
    }
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps(metrics))


def test_probes_page_refuses_folders_outside_the_allowed_roots(tmp_path, monkeypatch):
    allowed = tmp_path / "allowed"
    _write_run(allowed / "runs" / "pos-a")
    _write_run(tmp_path / "elsewhere" / "pos-b")  # a readable run, but outside the root
    (allowed / "escape").symlink_to(tmp_path / "elsewhere")
    monkeypatch.setenv("PROBING_LAB_ALLOWED_ROOTS", str(allowed))
    at = ok(run("probes"))
    at.radio(key="results_source").set_value("Another folder").run()
    for outside in ("/etc", str(allowed / "escape"), str(allowed / ".." / "elsewhere")):
        at.text_input(key="run_dir").input(outside).run()
        assert "outside the folders this server allows" in texts(ok(at).error), outside
        listed = [w.key for w in (*at.selectbox, *at.multiselect)]
        assert (
            "experiment" not in listed and not any(str(k).startswith("runs@") for k in listed) and not at.dataframe
        ), outside  # nothing listed
        assert "No runs under" not in texts(at.info) and "No folder" not in texts(at.warning), outside

    at.text_input(key="run_dir").input(str(allowed / "runs")).run()  # inside: works as before
    assert not ok(at).error
    assert at.selectbox(key="experiment").value == "pos_ewt" and widget(at, "multiselect", "Runs to compare").value == [
        "pos-a"
    ]
    assert set(at.dataframe[0].value["model"]) == {"random init (cpu-small, seed 0)"}


def test_probes_page_without_runs(monkeypatch):
    assert "start_run" in [b.key for b in ok(run("probes")).button]  # the form is there by default
    monkeypatch.setenv("PROBING_LAB_NO_RUNS", "1")
    at = ok(run("probes"))
    assert "start_run" not in [b.key for b in at.button] and "new_experiment" not in [s.key for s in at.selectbox]
    assert "turned off on this server" in texts(at.info)
    assert at.radio(key="results_source").value == "Results shipped with the lab"  # the results still show


# --- a server on a class network (--address) -------------------------------------------------------


def test_a_network_address_locks_the_app_down(tmp_path, monkeypatch, capsys):
    from probing_lab.cli import main

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))  # the app's runs folder goes here
    monkeypatch.delenv("PROBING_LAB_ALLOWED_ROOTS", raising=False)
    monkeypatch.delenv("PROBING_LAB_NO_RUNS", raising=False)
    monkeypatch.setattr(subprocess, "Popen", FakePopen)
    FakePopen.started = []
    assert main(["app", "--model", "random:cpu-tiny", "--address", "0.0.0.0"]) == 0
    (started,) = FakePopen.started
    command, env = started["command"], started["env"]
    flags = dict(zip(command[4::2], command[5::2]))  # after: python serve.py run Tour.py
    assert flags["--server.address"] == "0.0.0.0" and flags["--server.maxUploadSize"] == "20"
    assert flags["--server.enableXsrfProtection"] == "true" and flags["--server.enableCORS"] == "true"
    assert env["PROBING_LAB_NO_RUNS"] == "1"  # students do not start probe runs unless the teacher allows it
    assert env["PROBING_LAB_ALLOWED_ROOTS"] == str((tmp_path / "data" / "probing-lab" / "runs" / "probes").resolve())
    assert "on the network" in capsys.readouterr().err

    FakePopen.started = []
    (tmp_path / "class").mkdir()
    argv = ["app", "--model", "random:cpu-tiny", "--address", "0.0.0.0", "--allow-runs"]
    assert main(argv + ["--allowed-root", str(tmp_path / "class")]) == 0
    env = FakePopen.started[0]["env"]
    assert "PROBING_LAB_NO_RUNS" not in env and env["PROBING_LAB_ALLOWED_ROOTS"] == str((tmp_path / "class").resolve())

    FakePopen.started = []
    assert main(["app", "--model", "random:cpu-tiny"]) == 0  # loopback, as before: nothing locked
    command = FakePopen.started[0]["command"]
    assert "--server.maxUploadSize" not in command and command[command.index("--server.address") + 1] == "127.0.0.1"
    # an address that is not this machine's: refused before anything starts (only bound locally, never contacted)
    FakePopen.started = []
    assert main(["app", "--model", "random:cpu-tiny", "--address", "203.0.113.7"]) == 2
    assert "cannot listen there" in capsys.readouterr().err and not FakePopen.started


def test_a_network_server_answers_on_loopback():
    """The real launcher with --address 0.0.0.0; the test connects only through 127.0.0.1."""
    port = launch.free_port()
    launcher = subprocess.Popen(
        [sys.executable, "-m", "probing_lab.cli", "app", "--port", str(port), "--model", "random:cpu-tiny",
         "--address", "0.0.0.0"],
        cwd=str(ROOT), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        assert launch.wait_until_healthy(f"http://127.0.0.1:{port}", launcher, timeout_s=120)
        launcher.send_signal(signal.SIGTERM)
        assert launcher.wait(timeout=20) == 0
        assert "listening on 0.0.0.0" in launcher.stderr.read().decode()
    finally:
        if launcher.poll() is None or listening(port):
            try:
                os.killpg(launcher.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            launcher.wait()
        launcher.stderr.close()


RELEASED = "Released ELMo (options.json + weights.hdf5)"
PATH_FIELDS = [  # every field where a user types a path on the server: (page, how to reach it, the field)
    ("model", [("radio", "kind", RELEASED), ("text_input", "weights", "INSIDE/w.hdf5")], "options"),
    ("model", [("radio", "kind", RELEASED), ("text_input", "options", "INSIDE/options.json")], "weights"),
    ("model", [("radio", "kind", "Another checkpoint directory")], "checkpoint"),
    ("probes", [("radio", "results_source", "Another folder")], "run_dir"),
    ("training", [], "curves_run"),
    ("polysemy", [("radio", "source", "A wic file")], "poly_wic_path"),
]


@pytest.mark.parametrize("page,steps,field", PATH_FIELDS, ids=[f"{p}-{f}" for p, _, f in PATH_FIELDS])
def test_no_path_field_reads_outside_the_allowed_roots(page, steps, field, tmp_path, monkeypatch):
    allowed = tmp_path / "allowed"
    (allowed / "inside").mkdir(parents=True)
    (allowed / "escape").symlink_to("/etc")
    monkeypatch.setenv("PROBING_LAB_ALLOWED_ROOTS", str(allowed))
    monkeypatch.setenv("PROBING_LAB_NO_RUNS", "1")
    at = ok(run(page))
    for kind, key, value in steps:
        getattr(at, kind)(key=key).set_value(value.replace("INSIDE", str(allowed / "inside"))).run()
    for outside in ("/etc/passwd", str(allowed / "inside" / ".." / ".." / ".."), str(allowed / "escape" / "passwd")):
        at.text_input(key=field).input(outside).run()
        assert "outside the folders this server allows" in texts(ok(at).error), (page, field, outside)


def test_the_server_freezes_what_lasts_so_its_collections_stay_cheap(monkeypatch):
    """Streamlit collects garbage after every script run; the server moves the objects alive after its
    start (modules, model) out of the collector's sight, so a collection walks only what runs made."""
    import gc

    monkeypatch.setattr(os, "environ", dict(os.environ))  # importing serve sets variables: not for later tests
    import serve

    serve.freeze_what_lasts()
    try:
        assert len(gc.get_objects()) < gc.get_freeze_count()  # what the next collection walks
    finally:
        gc.unfreeze()


ARENAS = """
import ctypes, sys, threading
sys.path.insert(0, {app!r})
if {limit}:
    import serve  # limits the arenas when imported, as the server does before its threads start
barrier = threading.Barrier(8)
def allocate():
    kept = [bytearray(50_000) for _ in range(20)]  # malloc'd (above pymalloc's sizes, below mmap's)
    barrier.wait()  # all eight threads hold memory at once
ts = [threading.Thread(target=allocate) for _ in range(8)]
[t.start() for t in ts]; [t.join() for t in ts]
ctypes.CDLL("libc.so.6").malloc_stats()  # one "Arena N:" block per arena, on stderr
"""


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's malloc")
def test_the_server_keeps_two_malloc_arenas_however_many_threads_allocate():
    """glibc gives each allocating thread an arena of its own (up to 8 per core), each keeping what its
    thread freed; the server allows two (``serve.limit_malloc_arenas``)."""

    def arenas(limit: bool) -> int:
        code = ARENAS.format(app=str(ROOT / "app"), limit=limit)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stderr.count("Arena ")

    assert arenas(limit=True) <= 2 < arenas(limit=False)
