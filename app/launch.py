"""Start the Streamlit app: the function behind ``probing-lab app``.

Streamlit is started as a child process (``python -m streamlit run app/Tour.py``), headless, on
127.0.0.1, with the file watcher off (it floods on a large checkout). The model choice travels in
``$PROBING_LAB_MODEL``, which the app reads as its default model. Importing this module needs no
Streamlit, so the CLI stays fast.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Optional

APP_DIR = Path(__file__).resolve().parent
HOME = APP_DIR / "Tour.py"  # the first page: its file name is its name in the navigation
MODEL_ENV = "PROBING_LAB_MODEL"


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


def streamlit_command(port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(HOME),
        "--server.headless",
        "true",
        "--server.address",
        "127.0.0.1",
        "--server.port",
        str(port),
        "--server.fileWatcherType",
        "none",
        "--browser.gatherUsageStats",
        "false",
        "--client.toolbarMode",  # no "Deploy" button or developer menu: this is a lab, not a dev server
        "minimal",
    ]


def run_app(port: Optional[int] = None, model: Optional[str] = None) -> int:
    """Run the app until interrupted; returns the exit status (0 after Ctrl-C, 2 for a bad argument)."""
    problem = check_model(model)
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
    print(f"probing-lab app: http://127.0.0.1:{port}  (model: {model or 'shipped'}; Ctrl-C stops)", file=sys.stderr)
    process = subprocess.Popen(streamlit_command(port), env=env, cwd=str(APP_DIR.parent))
    try:
        return process.wait()
    except KeyboardInterrupt:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        return 0
