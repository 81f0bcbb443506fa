"""How fast the app answers, measured in a real browser in one run.

    python benchmarks/app_latency.py [--model shipped] [--repeats 3] [--threads 2]

1. Cold start: from launching Streamlit (the command `probing-lab app` runs) to the Tour page
   drawn with its live "bank" figure: model loaded, sentences embedded, nothing running.
2. Polysemy update: on the Polysemy page, type 20 new labelled "bank" contexts, press Ctrl+Enter,
   and time until "20 occurrences" and both figures are shown and the run has finished. Every repeat
   uses different sentences, so no cached result is reused. Target: under 2 s.
   The same computation through the library alone (embed, separation numbers, projections,
   cosine matrices, figures) is timed too, to show what the browser and Streamlit add.

Needs Playwright's Python package and Debian's Chromium (``apt-get install -y chromium``), as the
browser test does. Prints each time and its ratio to the target.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "app"))

import launch  # noqa: E402

CHROMIUM = os.environ.get("PROBING_LAB_CHROMIUM", "/usr/bin/chromium")
TARGET_S = 2.0
MONEY = [
    "the cheque went into my account at the",
    "the {} raised its interest rates",
    "a teller at the savings",
    "the central {} printed money",
    "he asked the {} for a loan",
    "thieves robbed the",
    "the {} charges a fee",
    "our {} closed its branch",
    "she deposited her wages at the",
    "the {} approved the mortgage",
]
RIVER = [
    "we had a picnic on the grassy",
    "the boat drifted to the muddy",
    "fishermen lined the {} of the stream",
    "the river burst its",
    "reeds grew along the {} of the canal",
    "the children slid down the steep",
    "a heron stood on the far",
    "they pulled the canoe up on the",
    "the {} of the creek was steep",
    "willows grew on the {} of the pond",
]


def contexts(repeat: int) -> str:
    """20 labelled lines, different for every repeat (sentences and sense names), so nothing is
    cached and the new legend entries show when the page has redrawn."""
    lines = []
    for sense, stems in (("money", MONEY), ("river", RIVER)):
        for i, stem in enumerate(stems):
            text = stem.format("bank") if "{}" in stem else f"{stem} bank"
            lines.append(f"{text.capitalize()} on day {repeat * 100 + i}. | {sense}{repeat}")
    return "\n".join(lines)


def settle(page, timeout_ms: int = 120_000) -> None:
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
        " || !document.querySelector('[data-testid=\"stStatusWidget\"]').innerText.includes('Running')",
        timeout=timeout_ms,
        polling=50,
    )


def library_update(model: str, repeat: int) -> float:
    """The Polysemy page's work for 20 contexts, through the library only."""
    import figures

    from probing_lab.analysis import collect, cosine_matrix, parse_lines, project
    from probing_lab.elmo import Embedder
    from probing_lab.model_loading import load_model

    embedder = Embedder(load_model(None if model == "shipped" else model).model, batch_size=32)  # as the app does
    lines = parse_lines(contexts(repeat + 1000))
    t = time.perf_counter()
    occ = collect(embedder, [s for s, _ in lines], target="bank", labels=[label for _, label in lines])
    occ.separation()
    points = {k: project(occ.vectors[k], "pca") for k in occ.keys}
    figures.projection_grid(points, occ.labels, [occ.context(i) for i in range(occ.n)], "bank", "pca")
    figures.cosine_heatmaps({k: cosine_matrix(occ.vectors[k]) for k in occ.keys}, [str(i) for i in range(occ.n)], "cos")
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="shipped", help="shipped, random:PRESET or a checkpoint directory")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import torch
    from playwright.sync_api import sync_playwright

    torch.set_num_threads(args.threads)
    env = dict(os.environ, PROBING_LAB_MODEL=args.model, OMP_NUM_THREADS=str(args.threads))
    port = launch.free_port()
    url = f"http://127.0.0.1:{port}"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1500, "height": 1100})
        t0 = time.perf_counter()
        server = subprocess.Popen(
            launch.streamlit_command(port), cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            if not launch.wait_until_healthy(url, server, timeout_s=180):
                raise SystemExit("Streamlit did not come up (run `probing-lab app` to see why)")
            t_server = time.perf_counter() - t0
            page.goto(url)
            page.get_by_text("Live: one word, three sentences").wait_for(timeout=180_000)
            page.locator(".js-plotly-plot").first.wait_for(timeout=180_000)
            settle(page, 180_000)
            t_cold = time.perf_counter() - t0

            page.goto(f"{url}/Polysemy")
            page.locator(".js-plotly-plot").nth(1).wait_for(timeout=180_000)  # the preset, first visit
            settle(page)
            page.get_by_text("Type your own").click()
            settle(page)
            area = page.locator("textarea").first
            updates = []
            for repeat in range(args.repeats):
                area.fill(contexts(repeat))
                t = time.perf_counter()
                area.press("Control+Enter")
                page.locator(".js-plotly-plot").first.get_by_text(f"river{repeat}").first.wait_for(timeout=120_000)
                page.locator(".js-plotly-plot").nth(1).wait_for(timeout=60_000)
                settle(page)
                page.get_by_text("20 occurrences, 2 senses").wait_for(timeout=60_000)
                updates.append(time.perf_counter() - t)
            errors = page.locator('[data-testid="stException"]').count()
        finally:
            server.terminate()
            server.wait(timeout=15)
            browser.close()
    library = [library_update(args.model, repeat) for repeat in range(args.repeats)]

    update = statistics.median(updates)
    print(f"model {args.model}, {args.threads} threads, {args.repeats} repeats, Streamlit exceptions shown: {errors}")
    print(
        f"  cold start: server answers after {t_server:5.2f} s; "
        f"Tour page drawn (model loaded, live figure) after {t_cold:5.2f} s"
    )
    print(
        f"  Polysemy update, 20 contexts, in the browser: median {update:5.2f} s  "
        f"(runs: {', '.join(f'{u:.2f}' for u in updates)})"
    )
    print(f"  the same work in the library alone:        median {statistics.median(library):5.2f} s")
    print(
        f"  update / target ({TARGET_S:.0f} s) = {update / TARGET_S:.2f}  ({'met' if update < TARGET_S else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
