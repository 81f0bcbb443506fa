"""Start the Streamlit app: the function behind ``probing-lab app``.

Streamlit is started as a child process (``python app/serve.py run app/Tour.py``: Streamlit's command
line with the heavy imports started at once, see ``serve.py``), headless, on
127.0.0.1, with the file watcher off (it floods on a large checkout). The model choice travels in
``$PROBING_LAB_MODEL``, which the app reads as its default model; ``--allowed-root`` and ``--no-runs``
travel as ``$PROBING_LAB_ALLOWED_ROOTS`` and ``$PROBING_LAB_NO_RUNS`` (read by ``app/allowed_paths.py``).
SIGTERM, SIGINT and SIGHUP sent to the launcher are passed on to Streamlit, so stopping the launcher
stops the server (no orphan left listening). Importing this module needs no Streamlit, so the CLI
stays fast.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterable, Optional

APP_DIR = Path(__file__).resolve().parent
HOME = APP_DIR / "Tour.py"  # the first page: its file name is its name in the navigation
MODEL_ENV = "PROBING_LAB_MODEL"
ALLOWED_ROOTS_ENV = "PROBING_LAB_ALLOWED_ROOTS"  # the same names as in allowed_paths.py (which needs Streamlit)
NO_RUNS_ENV = "PROBING_LAB_NO_RUNS"
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
STOP_TIMEOUT_S = 10.0  # after a forwarded signal: how long Streamlit gets before it is killed


def free_port() -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_model(model: Optional[str]) -> Optional[str]:
    """A reason the model argument cannot work, or None; checked before Streamlit starts so a typo
    fails in the terminal, not in the browser."""
    if model is None or model == "shipped":
        return None
    if model.startswith("random:"):
        from probing_lab.elmo import PRESETS

        preset = model.split(":", 1)[1]
        return None if preset in PRESETS else f"unknown preset {preset!r} in --model; choose one of {sorted(PRESETS)}"
    path = Path(model).expanduser()
    if not path.is_dir():
        return f"--model {model}: no such directory (give a checkpoint directory or random:PRESET)"
    if not (path / "model.safetensors").is_file():
        return (
            f"--model {model}: no model.safetensors in that directory (for a released ELMo choose it on the Model page)"
        )
    return None


def check_port(port: Optional[int]) -> Optional[str]:
    """A reason Streamlit could not serve on 127.0.0.1:``port``, or None (None or 0: a free port is picked).

    Binds the port for a moment (with SO_REUSEADDR, as Streamlit's server does, so a port in TIME_WAIT
    passes). Another process can still take it before Streamlit starts; that race is not closed here."""
    if not port:
        return None
    if not 1 <= port <= 65535:
        return f"--port {port} is not a TCP port (1-65535); omit --port for a free one"
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as e:
            why = "already in use" if e.errno == errno.EADDRINUSE else (e.strerror or str(e))
            return (
                f"--port {port}: cannot listen on 127.0.0.1:{port} ({why}); "
                "choose another port or omit --port for a free one"
            )
    return None


def check_roots(roots: Optional[Iterable[str]]) -> tuple[list[str], Optional[str]]:
    """``--allowed-root`` folders resolved (the app runs in another working directory), or a reason."""
    resolved = []
    for root in roots or ():
        path = Path(root).expanduser()
        if not path.is_dir():
            return [], f"--allowed-root {root}: no such directory"
        resolved.append(str(path.resolve()))
    return resolved, None


def stop_child(process: subprocess.Popen, signum: int = signal.SIGTERM, timeout_s: float = STOP_TIMEOUT_S) -> None:
    """Pass ``signum`` on to the child, wait for it, kill it if it has not exited after ``timeout_s``."""
    if process.poll() is not None:
        return
    try:
        process.send_signal(signum)
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def wait_until_healthy(url: str, process: subprocess.Popen, timeout_s: float = 120.0) -> bool:
    """Poll Streamlit's health endpoint until it answers "ok" (True), or the process exits or the
    time is up (False)."""
    import time
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=1) as r:
                if r.read().strip() == b"ok":
                    return True
        except OSError:
            time.sleep(0.05)
    return False


LOOPBACK = ("127.0.0.1", "localhost", "::1")
MAX_UPLOAD_MB = 20  # on a network: a student's upload is a probe file, not a corpus


def is_loopback(address: str) -> bool:
    return address in LOOPBACK or address.startswith("127.")


def check_address(address: str) -> Optional[str]:
    """A reason the app cannot listen on ``address`` (an IP address of this machine or 0.0.0.0), or None."""
    try:
        infos = socket.getaddrinfo(address, None)
    except (socket.gaierror, UnicodeError) as e:
        return f"--address {address}: not an address of this machine ({e}); e.g. 0.0.0.0 for every interface"
    for family, *_rest, sockaddr in infos:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((sockaddr[0], 0))
                return None
            except OSError:
                continue
    return f"--address {address}: this machine cannot listen there; e.g. 0.0.0.0 for every interface"


def streamlit_command(port: int, address: str = "127.0.0.1") -> list[str]:
    """Streamlit's command line. On a network address: uploads capped at ``MAX_UPLOAD_MB``, XSRF
    protection and CORS checks on (Streamlit's defaults, said explicitly so no config file turns
    them off)."""
    network = [] if is_loopback(address) else [
        "--server.maxUploadSize", str(MAX_UPLOAD_MB),
        "--server.enableXsrfProtection", "true",
        "--server.enableCORS", "true",
    ]  # fmt: skip
    return [
        sys.executable,
        str(APP_DIR / "serve.py"),
        "run",
        str(HOME),
        "--server.headless",
        "true",
        "--server.address",
        address,
        "--server.port",
        str(port),
        *network,
        "--server.fileWatcherType",
        "none",
        "--browser.gatherUsageStats",
        "false",
        "--client.toolbarMode",  # no "Deploy" button or developer menu: this is a lab, not a dev server
        "minimal",
    ]


def run_app(
    port: Optional[int] = None,
    model: Optional[str] = None,
    allowed_roots: Optional[Iterable[str]] = None,
    no_runs: bool = False,
    address: str = "127.0.0.1",
    allow_runs: bool = False,
) -> int:
    """Run the app until stopped; returns the exit status: Streamlit's own if it exits by itself, 0 when
    stopped by SIGINT (Ctrl-C), SIGTERM or SIGHUP (passed on to Streamlit, which is waited for), 2 for a
    bad argument (with the reason on stderr and nothing started).

    ``allowed_roots`` confines the app's path fields to these folders (and the checkout); ``no_runs``
    hides the form that starts probe runs. Both default to what the environment already says.

    ``address``: where to listen (default loopback only). Any other address serves a class network,
    and then the app is locked down: path fields confined (to ``allowed_roots``, else to the
    checkout and the app's runs folder), starting probe runs off unless ``allow_runs``, uploads
    capped at ``MAX_UPLOAD_MB`` MB, XSRF protection on."""
    problem = check_model(model) or check_port(port) or (None if is_loopback(address) else check_address(address))
    roots, roots_problem = check_roots(allowed_roots)
    problem = problem or roots_problem
    if problem:
        print(f"probing-lab app: {problem}", file=sys.stderr)
        return 2
    try:
        import streamlit  # noqa: F401
    except ImportError:
        print("probing-lab app: streamlit is not installed (pip install 'streamlit>=1.30')", file=sys.stderr)
        return 2
    port = port or free_port()
    env = dict(os.environ)
    if model is not None:
        env[MODEL_ENV] = (
            str(Path(model).expanduser().resolve()) if not model.startswith("random:") and model != "shipped" else model
        )
    if roots:  # the command line wins over an inherited $PROBING_LAB_ALLOWED_ROOTS
        env[ALLOWED_ROOTS_ENV] = os.pathsep.join(roots)
    network = not is_loopback(address)
    if network and not env.get(ALLOWED_ROOTS_ENV, "").strip(os.pathsep + " "):
        from probing_lab.paths import app_runs_dir

        runs = app_runs_dir()
        runs.mkdir(parents=True, exist_ok=True)
        env[ALLOWED_ROOTS_ENV] = str(runs.resolve())  # and the checkout (allowed_paths.allowed_roots)
    if no_runs or (network and not allow_runs):
        env[NO_RUNS_ENV] = "1"
    notes = [f"model: {model or 'shipped'}"]
    if network:
        notes.append(f"on the network: uploads up to {MAX_UPLOAD_MB} MB, XSRF protection on")
    if env.get(ALLOWED_ROOTS_ENV, "").strip(os.pathsep + " "):
        notes.append("paths confined to $" + ALLOWED_ROOTS_ENV)
    if env.get(NO_RUNS_ENV, "").strip().lower() not in ("", "0", "false", "no"):
        notes.append("probe runs off")
    host = "127.0.0.1" if not network or address in ("0.0.0.0", "::") else address
    where = f"http://{host}:{port}" + (
        f" (listening on {address}: give students this machine's address)" if network else ""
    )
    print(f"probing-lab app: {where}  ({'; '.join(notes)}; Ctrl-C stops)", file=sys.stderr)

    received: list[int] = []

    def on_signal(signum, frame):  # only record it: the loop below passes it on (no exception mid-Popen)
        received.append(signum)

    previous = {}
    if threading.current_thread() is threading.main_thread():  # signal handlers can only be set there
        for signum in FORWARDED_SIGNALS:
            previous[signum] = signal.signal(signum, on_signal)
    process = None
    try:
        process = subprocess.Popen(streamlit_command(port, address), env=env, cwd=str(APP_DIR.parent))
        while not received:  # a signal that came during Popen is seen here too
            try:
                return process.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                continue
        stop_child(process, received[0])
        return 0
    except BaseException:  # whatever stops the launcher stops the server with it
        if process is not None:
            stop_child(process)
        raise
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
