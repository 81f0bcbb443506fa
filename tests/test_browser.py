"""The app in a real browser: Streamlit headless on a free port, Debian's Chromium driven by Playwright.

Types sentences on the Polysemy page, waits for the figures, checks that no Streamlit exception box is
shown, and saves screenshots into artifacts/ (gitignored). Skipped when Playwright's Python package or
/usr/bin/chromium is missing (``pip install playwright``; ``apt-get install -y chromium``; Playwright's own
browser download is not needed). The model is ``random:cpu-tiny`` unless $PROBING_LAB_BROWSER_MODEL says
otherwise.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path(os.environ.get("PROBING_LAB_CHROMIUM", "/usr/bin/chromium"))
ARTIFACTS = ROOT / "artifacts"

playwright_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install playwright)"
)
if not CHROMIUM.is_file():
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)", allow_module_level=True)

sys.path.insert(0, str(ROOT / "app"))
import launch  # noqa: E402

SENTENCES = """I paid the cheque into my account at the bank. | money
The bank raised its interest rates again. | money
Thieves robbed the bank on Friday. | money
This line has no target at all. | money
We had a picnic on the grassy bank of the river. | river
The boat drifted towards the muddy bank. | river
Fishermen lined the [bank] of the stream. | river"""


@pytest.fixture(scope="module")
def app_url():
    port = launch.free_port()
    env = dict(os.environ, PROBING_LAB_MODEL=os.environ.get("PROBING_LAB_BROWSER_MODEL", "random:cpu-tiny"))
    ARTIFACTS.mkdir(exist_ok=True)
    log = open(ARTIFACTS / "streamlit.log", "w")
    process = subprocess.Popen(launch.streamlit_command(port), cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    if not launch.wait_until_healthy(url, process, timeout_s=120):
        process.kill()
        log.close()
        pytest.fail(f"Streamlit did not come up on {url} (see artifacts/streamlit.log)")
    yield url
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
    log.close()


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


def settle(page, timeout_ms: int = 120_000) -> None:
    """Wait until Streamlit has finished its script run (the status widget says 'Running')."""
    page.wait_for_timeout(500)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
        " || !document.querySelector('[data-testid=\"stStatusWidget\"]').innerText.includes('Running')",
        timeout=timeout_ms,
    )


def snapshot(page, name: str, height: int = 3400) -> None:
    """Streamlit scrolls inside its own container, so a full-page screenshot shows one screen only:
    make the window tall enough for the whole page first."""
    page.set_viewport_size({"width": page.viewport_size["width"], "height": height})
    settle(page)
    page.wait_for_timeout(1000)  # plotly re-lays out on resize
    page.screenshot(path=str(ARTIFACTS / name), full_page=True)


def no_exception(page) -> None:
    boxes = page.locator('[data-testid="stException"]')
    assert boxes.count() == 0, boxes.first.inner_text()


def test_polysemy_page_in_chromium(app_url, browser):
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    page.goto(f"{app_url}/Polysemy", wait_until="networkidle")
    page.get_by_text("Polysemy: one word, many contexts").wait_for(timeout=120_000)
    settle(page)
    # the built-in "bank" preset drew its figures: the maps, the heatmap (last) and, in its expander, the
    # supervised view, which draws when opened
    page.locator(".js-plotly-plot").last.wait_for(timeout=120_000)
    page.get_by_text("Supervised view").click()
    page.locator(".js-plotly-plot").nth(1).wait_for(timeout=60_000)
    # under load the third figure may still be drawing: wait for it rather than count at once (seen flaky)
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length === 3", timeout=60_000)
    page.get_by_text("(the higher of the upper layers)").first.wait_for(timeout=30_000)
    no_exception(page)
    snapshot(page, "polysemy-preset.png")
    page.set_viewport_size({"width": 1500, "height": 1100})

    page.get_by_text("Type your own").click()
    settle(page)
    area = page.locator("textarea").first
    area.fill(SENTENCES)
    area.press("Control+Enter")
    settle(page)
    page.get_by_text("6 occurrences, 2 senses").wait_for(timeout=120_000)
    page.get_by_text("do not contain “bank”").wait_for(timeout=30_000)
    page.locator(".js-plotly-plot").last.wait_for(timeout=60_000)
    assert page.locator(".js-plotly-plot").count() >= 2
    no_exception(page)
    snapshot(page, "polysemy-typed.png")
    page.close()


def test_tour_page_in_chromium(app_url, browser):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(app_url, wait_until="networkidle")
    page.get_by_text("Live: one word, three sentences").wait_for(timeout=120_000)
    settle(page)
    page.locator(".js-plotly-plot").first.wait_for(timeout=60_000)  # 1-NN accuracy on 16 sentences
    page.get_by_text("Verdict.").wait_for(timeout=30_000)
    no_exception(page)
    snapshot(page, "tour.png", 2600)
    page.close()


def test_language_model_page_in_chromium(app_url, browser):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{app_url}/Language_model", wait_until="networkidle")
    page.get_by_text("Language model: what each direction predicts").wait_for(timeout=120_000)
    settle(page)
    page.locator(".js-plotly-plot").first.wait_for(timeout=60_000)  # the surprisal strip
    page.get_by_text("Perplexity, forward").wait_for(timeout=30_000)
    no_exception(page)
    snapshot(page, "language-model.png", 2000)
    page.close()


def test_probes_runs_follow_the_experiment_in_chromium(app_url, browser):
    """The bug a class saw: after another experiment, "Runs to compare" still listed pos_ewt's runs."""
    page = browser.new_page(viewport={"width": 1400, "height": 1400})
    page.goto(f"{app_url}/Probes", wait_until="networkidle")
    page.get_by_text("Runs to compare").first.wait_for(timeout=120_000)
    settle(page)
    runs = page.locator('[data-testid="stMultiSelect"]').filter(has_text="Runs to compare")
    assert "pos_ewt" in runs.inner_text()
    page.locator('input[aria-label*="Experiment"]').last.click(force=True)
    page.get_by_role("option", name="tense_ewt").click()
    settle(page)
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-testid=\"stMultiSelect\"]')]"
        ".some(e => e.innerText.includes('Runs to compare') && e.innerText.includes('tense_ewt'))",
        timeout=60_000,
    )
    shown = runs.inner_text()
    assert "tense_ewt" in shown and "pos_ewt" not in shown, shown
    no_exception(page)
    page.close()
