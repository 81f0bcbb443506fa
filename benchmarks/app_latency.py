"""How fast the app answers, measured in a real browser in one run.

    python benchmarks/app_latency.py [--model shipped] [--repeats 3] [--threads 2] [--before REV]

1. Cold start (target under 4 s): from launching Streamlit (the command `probing-lab app` runs) to
   the Tour page drawn with its figures: model loaded, sentences embedded, nothing running. Median of
   ``--repeats`` cold starts, each a new server.
2. First draw of every other page (target under 3 s each): after the cold start, each page of the
   sidebar is opened by its link, in order, and timed until its title is shown and nothing runs.
3. Polysemy update (target under 2 s): on the Polysemy page, type 20 new labelled "bank" contexts,
   press Ctrl+Enter, and time until "20 occurrences" and both figures are shown. Every repeat uses
   different sentences, so no cached result is reused. The same computation through the library
   alone is timed too, to show what the browser and Streamlit add.

``--before REV`` measures 1 and 2 for the app of another commit too (a ``git worktree`` of REV, its
own ``probing_lab`` first on the path) in the same run, and prints before / after per page: the
machine is shared and noisy, so only ratios from one run compare. ``--json PATH`` also writes the
medians there (``benchmarks/results/app_latency.json`` is the run the README quotes).

Needs Playwright's Python package and Debian's Chromium (``apt-get install -y chromium``), as the
browser test does.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "app"))

import launch  # noqa: E402

CHROMIUM = os.environ.get("PROBING_LAB_CHROMIUM", "/usr/bin/chromium")
TARGET_S = 2.0  # a Polysemy update
COLD_TARGET_S = 4.0
PAGE_TARGET_S = 3.0
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


def open_browser(p):
    browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"])
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    page.add_init_script(WATCH_DOM)
    page.finished = watch_script_runs(page)
    return browser, page


def start_server(root: Path, env: dict, port: int) -> tuple[subprocess.Popen, float]:
    """``probing-lab app``'s Streamlit command as the checkout under ``root`` (this one or a worktree of
    another commit) builds it, run there; and the ``perf_counter`` time it was started."""
    code = f"import json, launch; print(json.dumps(launch.streamlit_command({port})))"
    out = subprocess.run([sys.executable, "-c", code], cwd=root / "app", env=env, capture_output=True, text=True)
    command = json.loads(out.stdout.strip().splitlines()[-1])
    t0 = time.perf_counter()
    return subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), t0


# A page is drawn when the server has said its script run finished (the ``script_finished`` message
# on the websocket, a successful end: not one cut short by a rerun) and the page's DOM has then been
# quiet for QUIET_MS: its draw time is the later of the two. Every DOM change stamps the time.
WATCH_DOM = """
window.__lastChange = performance.now();
new MutationObserver(() => { window.__lastChange = performance.now(); })
    .observe(document, {subtree: true, childList: true, characterData: true, attributes: true});
"""
QUIET_MS = 1000


def watch_script_runs(page) -> list[float]:
    """``perf_counter`` times at which the server said a script run finished successfully."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    finished: list[float] = []

    def on_frame(payload) -> None:
        if isinstance(payload, (bytes, bytearray)):
            msg = ForwardMsg.FromString(bytes(payload))
            if msg.WhichOneof("type") == "script_finished" and msg.script_finished in (
                ForwardMsg.FINISHED_SUCCESSFULLY,
                ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY,
            ):
                finished.append(time.perf_counter())

    page.on("websocket", lambda ws: ws.on("framereceived", on_frame))
    return finished


def drawn(page, finished: list[float], title: str, since: float, timeout_s: float = 180.0) -> float:
    """Seconds from ``since`` (a ``perf_counter`` time) until the page titled ``title`` is drawn."""
    page.locator("h1", has_text=title).first.wait_for(timeout=timeout_s * 1000)
    deadline = time.perf_counter() + timeout_s
    while not any(t > since for t in finished):
        if time.perf_counter() > deadline:
            raise TimeoutError(f"the page {title!r} did not finish its run in {timeout_s:.0f} s")
        page.wait_for_timeout(20)
    page.wait_for_function(f"() => performance.now() - window.__lastChange > {QUIET_MS}", timeout=timeout_s * 1000)
    # the DOM's clock against perf_counter, read now (the round trip is a few ms)
    offset = time.perf_counter() - page.evaluate("performance.now()") / 1000
    last_change = offset + page.evaluate("window.__lastChange") / 1000
    return max(max(t for t in finished if t > since), last_change) - since


def page_titles(root: Path) -> list[tuple[str, str]]:
    """(sidebar name, title) of every page of the app under ``root``, in sidebar order."""
    code = "import json, lab_ui; print(json.dumps([(p['name'], p['title']) for p in lab_ui.page_index()]))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=root / "app",
        env=app_env(root, {}),
        capture_output=True,
        text=True,
        check=True,
    )
    return [tuple(x) for x in json.loads(out.stdout.strip().splitlines()[-1])]


def app_env(root: Path, base: dict) -> dict:
    env = dict(os.environ, **base)
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(root / "app"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def cold_starts(p, root: Path, env: dict, repeats: int) -> dict:
    """Median seconds: server up, Tour drawn, and each page's first draw (sidebar link) after it."""
    pages = page_titles(root)
    times: dict[str, list[float]] = {"server up": [], "Tour": []}
    errors = 0
    for _ in range(repeats):
        browser, page = open_browser(p)
        port = launch.free_port()
        url = f"http://127.0.0.1:{port}"
        server, t0 = start_server(root, env, port)
        try:
            if not launch.wait_until_healthy(url, server, timeout_s=180):
                raise SystemExit(f"Streamlit did not come up from {root} (run `probing-lab app` there to see why)")
            times["server up"].append(time.perf_counter() - t0)
            page.goto(url)
            times["Tour"].append(drawn(page, page.finished, "ELMo probing lab", t0))
            for name, title in pages:
                since = time.perf_counter()
                page.locator('[data-testid="stSidebarNav"] a', has_text=name).first.click()
                times.setdefault(name, []).append(drawn(page, page.finished, title, since))
            errors += page.locator('[data-testid="stException"]').count()
        finally:
            server.terminate()
            server.wait(timeout=15)
            browser.close()
    return {"median": {k: statistics.median(v) for k, v in times.items()}, "runs": times, "exceptions": errors}


def polysemy_updates(p, env: dict, repeats: int) -> list[float]:
    browser, page = open_browser(p)
    port = launch.free_port()
    url = f"http://127.0.0.1:{port}"
    server, _ = start_server(ROOT, env, port)
    try:
        if not launch.wait_until_healthy(url, server, timeout_s=180):
            raise SystemExit("Streamlit did not come up (run `probing-lab app` to see why)")
        page.goto(f"{url}/Polysemy")
        page.locator(".js-plotly-plot >> visible=true").nth(1).wait_for(timeout=180_000)  # the preset, first visit
        settle(page)
        page.get_by_text("Type your own").click()
        settle(page)
        area = page.locator("textarea").first
        updates = []
        for repeat in range(repeats):
            area.fill(contexts(repeat))
            t = time.perf_counter()
            area.press("Control+Enter")
            page.locator(".js-plotly-plot").first.get_by_text(f"river{repeat}").first.wait_for(timeout=120_000)
            page.locator(".js-plotly-plot >> visible=true").nth(1).wait_for(timeout=60_000)
            settle(page)
            page.get_by_text("20 occurrences, 2 senses").wait_for(timeout=60_000)
            updates.append(time.perf_counter() - t)
        return updates
    finally:
        server.terminate()
        server.wait(timeout=15)
        browser.close()


def worktree(rev: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix="app-latency-before-"))
    subprocess.run(
        ["git", "worktree", "add", "--detach", "-f", str(path), rev], cwd=ROOT, check=True, capture_output=True
    )
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="shipped", help="shipped, random:PRESET or a checkpoint directory")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--before", metavar="REV", help="also measure the app of this commit (a git worktree)")
    parser.add_argument("--no-update", action="store_true", help="skip the Polysemy update measure")
    parser.add_argument("--json", metavar="PATH", help="also write the medians to this file")
    args = parser.parse_args()
    import torch
    from playwright.sync_api import sync_playwright

    torch.set_num_threads(args.threads)
    from probing_lab.datasets import resolve_data_dir

    base = {"PROBING_LAB_MODEL": args.model, "OMP_NUM_THREADS": str(args.threads)}
    data_dir, _ = resolve_data_dir()  # a worktree elsewhere would not find ../shared/datasets itself
    if data_dir is not None:
        base["PROBING_LAB_DATA"] = str(data_dir)
    results = {}
    with sync_playwright() as p:
        before_root = worktree(args.before) if args.before else None
        try:
            if before_root is not None:
                before_env = app_env(before_root, base)
                results["before"] = cold_starts(p, before_root, before_env, args.repeats)
            results["after"] = cold_starts(p, ROOT, app_env(ROOT, base), args.repeats)
        finally:
            if before_root is not None:
                subprocess.run(
                    ["git", "worktree", "remove", "--force", str(before_root)], cwd=ROOT, capture_output=True
                )

    after = results["after"]
    print(f"model {args.model}, {args.threads} threads, median of {args.repeats} cold starts")
    header = f"  {'':28s}" + ("  before" if args.before else "") + "    now  target"
    print(header + ("  now/before" if args.before else ""))
    for name, now in after["median"].items():
        target = COLD_TARGET_S if name == "Tour" else (None if name == "server up" else PAGE_TARGET_S)
        label = {"Tour": "cold start to Tour drawn", "server up": "server answers"}.get(name, f"first draw: {name}")
        row = f"  {label:28s}"
        if args.before:
            old = results["before"]["median"].get(name)
            row += f"  {old:6.2f}" if old is not None else "       -"
        row += f"  {now:5.2f}  " + (f"{target:4.1f} {'met' if now < target else 'NOT met'}" if target else "")
        if args.before and results["before"]["median"].get(name):
            row += f"  {now / results['before']['median'][name]:.2f}"
        print(row)
    print(f"  Streamlit exceptions shown: {after['exceptions']}", flush=True)
    if not args.no_update:
        with sync_playwright() as p:
            updates = polysemy_updates(p, app_env(ROOT, base), args.repeats)
        library = [library_update(args.model, repeat) for repeat in range(args.repeats)]
        update = statistics.median(updates)
        print(
            f"  Polysemy update, 20 contexts, in the browser: median {update:5.2f} s  "
            f"(runs: {', '.join(f'{u:.2f}' for u in updates)}); the library alone: "
            f"{statistics.median(library):5.2f} s; update / target ({TARGET_S:.0f} s) = {update / TARGET_S:.2f}"
        )
    if args.json:
        record = {
            "command": " ".join(["python", "benchmarks/app_latency.py", *sys.argv[1:]]),
            "model": args.model,
            "threads": args.threads,
            "repeats": args.repeats,
            "before_rev": args.before,
            "seconds": {side: results[side]["median"] for side in results},
            "targets_s": {"cold_start": COLD_TARGET_S, "first_draw": PAGE_TARGET_S, "polysemy_update": TARGET_S},
        }
        if not args.no_update:
            record["seconds"]["polysemy_update"] = update
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
