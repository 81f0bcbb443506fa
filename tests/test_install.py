"""A built (non-editable) install carries everything `probing-lab app` needs: the app, the shipped
model and the experiment files, and serves the app from outside the checkout."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "app"))
import launch  # noqa: E402


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """``pip wheel`` of the checkout, installed with ``pip install --target``; returns the folder."""
    tmp = tmp_path_factory.mktemp("install")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp / "wheel"), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if build.returncode != 0:
        pytest.skip(f"cannot build a wheel here (no package index for the build backend?): {build.stderr[-500:]}")
    (wheel,) = (tmp / "wheel").glob("probing_lab-*.whl")
    site = tmp / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return site


def run_installed(site: Path, code: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(site)}  # the installed package first, the dependencies from this venv
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=site.parent, env=env, capture_output=True, text=True, check=True, timeout=120
    )
    return done.stdout.split()


def test_the_built_install_carries_the_app_model_and_experiments(installed):
    out = run_installed(
        installed,
        "import probing_lab.paths as p; print(p.__file__, p.INSTALLED, "
        "(p.APP_DIR / 'Tour.py').is_file(), (p.SHIPPED_MODEL_DIR / 'model.safetensors').is_file(), "
        "(p.PROBES_DIR / 'pos_ewt.toml').is_file(), p.AGREEMENT_PAIRS_FILE.is_file(), p.WORK_DIR)",
    )
    assert out[0].startswith(str(installed)), out  # not the checkout's editable package
    assert out[1:6] == ["True"] * 5, out
    assert out[6] == str(installed.parent)  # runs and caches go to the working directory, not site-packages


def test_the_built_install_serves_the_app(installed):
    port = launch.free_port()
    env = {**os.environ, "PYTHONPATH": str(installed)}
    process = subprocess.Popen(
        [sys.executable, "-m", "probing_lab.cli", "app", "--port", str(port)],
        cwd=installed.parent,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        assert launch.wait_until_healthy(f"http://127.0.0.1:{port}", process, timeout_s=120)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as page:
            assert page.status == 200 and b"<html" in page.read().lower()
    finally:
        os.killpg(process.pid, signal.SIGTERM)  # the launcher and its Streamlit child
        process.wait(timeout=30)
