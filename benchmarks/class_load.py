"""A class in front of one server: N browser sessions at once on one page, measured in one run.

    python benchmarks/class_load.py [--sessions 1 10 30] [--page Sentence_explorer] [--model shipped]

For each N: a fresh ``probing-lab app`` server (its Streamlit command), then N Chromium sessions
(separate contexts: separate Streamlit sessions) that all at once (1) open the page and wait until
it is drawn, then (2) each type their own text (Sentence explorer: two sentences; Polysemy: "Type your own",
five labelled "bank" sentences) and wait until it is drawn. Reported per N: the server's CPU seconds per student (its
process's user + system time over the whole test, divided by N: what the class costs the server),
p50 / p95 seconds per step, sessions with an error (an exception or error box, or a timeout), and the
server's peak memory (VmHWM) against a server that has served one student.

Needs Playwright's Python package and Debian's Chromium (``apt-get install -y chromium``). The
browsers share the machine with the server, so latencies include their own CPU; the server's CPU
time does not.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "app"))

import launch  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
TICKS = os.sysconf("SC_CLK_TCK")
PAGES = {"Sentence_explorer": "Text (one or more sentences)", "Polysemy": None}


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its children that have exited (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / TICKS


def peak_memory_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


SETTLED = (
    "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
    " || !document.querySelector('[data-testid=\"stStatusWidget\"]').innerText.includes('Running')"
)


async def student(browser, url: str, label: str, i: int, timeout_ms: int) -> dict:
    """One student's two steps; returns their seconds and whether an error showed."""
    context = await browser.new_context(viewport={"width": 1400, "height": 1000})
    page = await context.new_page()
    page.set_default_timeout(timeout_ms)  # under load a click's rerun takes longer than Playwright's 30 s
    out = {"open": None, "type": None, "error": None}
    try:
        t = time.perf_counter()
        await page.goto(url)
        await page.wait_for_selector('[data-testid="stPlotlyChart"]', timeout=timeout_ms)
        await page.wait_for_function(SETTLED, timeout=timeout_ms, polling=100)
        out["open"] = time.perf_counter() - t
        word = f"Zorblax{i}"
        t = time.perf_counter()
        if label is None:  # Polysemy: five labelled "bank" sentences of the student's own
            await page.get_by_text("Type your own").click()
            await page.wait_for_function(SETTLED, timeout=timeout_ms, polling=100)
            area = page.locator("textarea").first
            lines = [f"{word} paid {k} coins into the bank. | money" for k in range(3)]
            lines += [f"{word} fished from the river bank at {k}. | river" for k in range(2)]
            await area.fill("\n".join(lines))
            await area.press("Control+Enter")
            await page.get_by_text("5 occurrences, 2 senses").wait_for(timeout=timeout_ms)
        else:  # a text box whose words the page draws
            area = page.get_by_label(label)
            await area.fill(f"{word} walked to the bank on Monday. The river bank near {word}'s house was steep.")
            await area.press("Control+Enter")
            await page.wait_for_function(
                "(w) => Array.from(document.querySelectorAll('[data-testid=\"stPlotlyChart\"]'))"
                ".some(c => c.textContent.includes(w))",  # drawn in a figure, not only typed in the box
                arg=word,
                timeout=timeout_ms,
                polling=100,
            )
        await page.wait_for_function(SETTLED, timeout=timeout_ms, polling=100)
        out["type"] = time.perf_counter() - t
        if await page.locator('[data-testid="stException"]').count():
            out["error"] = "exception shown"
        elif await (box := page.locator('[data-testid="stAlertContentError"]')).count():  # the page's own error
            out["error"] = "error shown: " + (await box.first.inner_text())[:200]
    except Exception as e:  # noqa: BLE001 - a timeout or a crash counts as this student's error
        out["error"] = f"{type(e).__name__}: {str(e)[:200]}"
    finally:
        await context.close()
    return out


async def load(port: int, page_name: str, n: int, timeout_ms: int) -> list[dict]:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        url = f"http://127.0.0.1:{port}/{page_name}"
        results = await asyncio.gather(*(student(browser, url, PAGES[page_name], i, timeout_ms) for i in range(n)))
        await browser.close()
    return list(results)


def quantile(values: list, q: float) -> float:
    values = sorted(v for v in values if v is not None)
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def measure(n: int, args) -> dict:
    port = launch.free_port()
    env = {**os.environ, "PROBING_LAB_NO_RUNS": "1", **dict(kv.split("=", 1) for kv in args.server_env)}
    if args.model != "shipped":
        env["PROBING_LAB_MODEL"] = args.model
    server = subprocess.Popen(
        launch.streamlit_command(port), cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        assert launch.wait_until_healthy(f"http://127.0.0.1:{port}", server, timeout_s=120), "the server did not start"
        asyncio.run(load(port, args.page, 1, args.timeout * 1000))  # warm: model loaded, caches filled once
        cpu0, memory0 = cpu_seconds(server.pid), peak_memory_mb(server.pid)
        start = time.perf_counter()
        results = asyncio.run(load(port, args.page, n, args.timeout * 1000))
        wall = time.perf_counter() - start
        cpu = cpu_seconds(server.pid) - cpu0
        memory = peak_memory_mb(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=30)
    return {
        "sessions": n,
        "server_cpu_per_student_s": round(cpu / n, 3),
        "wall_s": round(wall, 1),
        "open_p50_s": round(quantile([r["open"] for r in results], 0.5), 2),
        "open_p95_s": round(quantile([r["open"] for r in results], 0.95), 2),
        "type_p50_s": round(quantile([r["type"] for r in results], 0.5), 2),
        "type_p95_s": round(quantile([r["type"] for r in results], 0.95), 2),
        "errors": [r["error"] for r in results if r["error"]],
        "peak_memory_mb": round(memory, 0),
        "memory_after_one_student_mb": round(memory0, 0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 10, 30])
    parser.add_argument("--page", choices=list(PAGES), default="Sentence_explorer")
    parser.add_argument("--model", default="shipped")
    parser.add_argument("--timeout", type=int, default=180, help="seconds a step may take before it counts as an error")
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument(
        "--server-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="e.g. STREAMLIT_RUNNER_POST_SCRIPT_GC=true",
    )
    args = parser.parse_args()
    rows = []
    for n in args.sessions:
        row = measure(n, args)
        rows.append(row)
        print(
            f"{n:>3} sessions on {args.page}: server CPU {row['server_cpu_per_student_s']:.2f} s per student; "
            f"open p50 {row['open_p50_s']} s p95 {row['open_p95_s']} s; type p50 {row['type_p50_s']} s "
            f"p95 {row['type_p95_s']} s; errors {len(row['errors'])}; peak memory {row['peak_memory_mb']:.0f} MB "
            f"(one student: {row['memory_after_one_student_mb']:.0f} MB)",
            flush=True,
        )
        for error in row["errors"][:3]:
            print(f"    {error}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    print(
        "median of what matters:", statistics.median(r["server_cpu_per_student_s"] for r in rows), "s CPU per student"
    )


if __name__ == "__main__":
    main()
