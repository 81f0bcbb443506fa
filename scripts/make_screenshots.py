"""Regenerate the README's two pictures: the Polysemy and the Probes page of the app, shipped model.

Starts the app headless on a free port (the same Streamlit command as ``probing-lab app``), opens each page in
headless Chromium through Playwright's Python package (the system Chromium, ``apt-get install -y chromium``;
Playwright's own browser download is not used), waits until the plotly charts are drawn and Streamlit's
"Running" indicator is gone, and saves a PNG per page into ``docs/img/``::

    python scripts/make_screenshots.py                  # docs/img/polysemy.png, docs/img/probes.png
    python scripts/make_screenshots.py --out /tmp/img   # elsewhere

Takes about a minute with the shipped model on two cores. The model is the app's default (``$PROBING_LAB_MODEL``,
else the shipped ``data/models/elmo-lab``).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "app"))
import launch  # noqa: E402

RUNNING = (
    "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
    " || !document.querySelector('[data-testid=\"stStatusWidget\"]').innerText.includes('Running')"
)
# (file name, page path, a text the page shows once drawn, height of the picture in px)
PAGES = [
    ("polysemy.png", "/Polysemy", "(the higher of the upper layers)", 1500),
    ("probes.png", "/Probes", "Probes: what each layer encodes", 1500),
]


def find_chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("no Chromium found: apt-get install -y chromium")


def settle(page, timeout_ms: int = 180_000) -> None:
    """Wait until Streamlit has finished its script run."""
    page.wait_for_timeout(800)
    page.wait_for_function(RUNNING, timeout=timeout_ms)


def shoot(browser, url: str, out: Path, width: int) -> None:
    for name, path, marker, height in PAGES:
        page = browser.new_page(viewport={"width": width, "height": height})
        page.goto(url + path, wait_until="networkidle")
        page.get_by_text(marker).first.wait_for(timeout=180_000)
        settle(page)
        page.locator(".js-plotly-plot").first.wait_for(timeout=180_000)  # the first chart is drawn (visible)
        settle(page)
        page.wait_for_timeout(1500)  # plotly's last layout pass
        errors = page.locator('[data-testid="stException"]')
        if errors.count():
            sys.exit(f"{path}: the page shows an exception: {errors.first.inner_text()[:500]}")
        page.screenshot(path=str(out / name), clip={"x": 0, "y": 0, "width": width, "height": height})
        print(f"{out / name}: {(out / name).stat().st_size // 1024} KB")
        page.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img", help="folder for the PNGs")
    parser.add_argument("--width", type=int, default=1400, help="viewport width in pixels")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    port = launch.free_port()
    url = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        launch.streamlit_command(port), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
    )
    try:
        if not launch.wait_until_healthy(url, process, timeout_s=120):
            sys.exit(f"Streamlit did not come up on {url}")
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=find_chromium(), headless=True, args=["--no-sandbox", "--disable-gpu"]
            )
            try:
                shoot(browser, url, args.out, args.width)
            finally:
                browser.close()
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()


if __name__ == "__main__":
    main()
