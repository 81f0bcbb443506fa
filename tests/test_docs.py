"""The README and the guides in docs/: the README links the five guides and fits on one screen with its two
pictures, every relative link (and #anchor) of README.md, app/README.md and docs/*.md points to something
that exists, and the guides' quick commands run.

A command of a guide is quick when it sits in a ```bash block and its comment starts with ``# quick``; this
test runs each of them from the checkout's root and expects exit status 0. The other commands are slow
(training, probe runs) and the guides say how long they take.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
GUIDES = ["exploring.md", "scripted-experiments.md", "teaching.md", "training.md", "contributing.md"]
PICTURES = ["docs/img/polysemy.png", "docs/img/probes.png"]
MARKDOWN = [README, ROOT / "app" / "README.md", *sorted(DOCS.glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)|<img[^>]*\ssrc=\"([^\"]+)\"")
QUICK = re.compile(r"\s+#\s*quick\b.*$")


def links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)  # not inside code blocks
    return [a or b for a, b in LINK.findall(text)]


def anchors(path: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings."""
    out = set()
    for line in re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S).splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


def bash_commands(path: Path) -> list[tuple[str, bool]]:
    """(command, quick) for each command of the file's ```bash blocks; continuation lines are joined."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S):
        pending = ""
        for line in block.splitlines():
            if pending:
                line = pending + " " + line.strip()
                pending = ""
            if line.rstrip().endswith("\\"):
                pending = line.rstrip()[:-1].rstrip()
                continue
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            out.append((QUICK.sub("", line).strip(), bool(QUICK.search(line))))
    return out


def quick_commands() -> list[str]:
    seen = []
    for guide in GUIDES:
        path = DOCS / guide
        if path.is_file():
            for command, quick in bash_commands(path):
                if quick and command not in seen:
                    seen.append(command)
    return seen


def test_the_readme_links_the_five_guides_and_its_pictures():
    targets = links(README)
    for guide in GUIDES:
        assert f"docs/{guide}" in targets, guide
        assert (DOCS / guide).is_file(), guide
    for picture in PICTURES:
        assert picture in targets, picture
        size = (ROOT / picture).stat().st_size
        assert 10_000 < size < 400_000, (picture, size)


def test_the_readme_top_fits_on_one_screen():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 50
    assert max(len(line) for line in text.splitlines()) <= 120
    # the two set-up commands CI runs, and the page line tests/test_app.py reads
    first_block = re.search(r"```bash\n(.*?)```", text, flags=re.S).group(1)
    assert "pip install torch==2.13.0 -e '.[test]'" in first_block and "python -m pytest" in first_block
    assert "Pages: Tour, " in text


def test_the_readme_latency_numbers_are_the_committed_benchmark_run():
    """The README quotes benchmarks/results/app_latency.json (written by ``app_latency.py --json``)."""
    run = json.loads((ROOT / "benchmarks" / "results" / "app_latency.json").read_text(encoding="utf-8"))
    before, after = run["seconds"]["before"], run["seconds"]["after"]
    text = " ".join(README.read_text(encoding="utf-8").split())
    assert f"drawn {after['Tour']:.1f} s after the server starts ({before['Tour']:.1f} s before" in text
    assert run["repeats"] == 3 and "median of 3 cold starts" in text
    first_draws = {page: s for page, s in after.items() if page not in ("Tour", "server up")}
    assert len(first_draws) >= 10 and max(first_draws.values()) < 3.0  # "every page's first draw takes under 3 s"
    assert "every page's first draw takes under 3 s" in text


def test_every_relative_link_points_to_a_file_that_exists():
    bad = []
    for path in MARKDOWN:
        for target in links(path):
            if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path
            if not dest.exists():
                bad.append(f"{path.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                bad.append(f"{path.relative_to(ROOT)}: {target} (no such heading)")
    assert not bad, "\n".join(bad)


def test_the_guides_mark_some_commands_quick():
    commands = quick_commands()
    assert len(commands) >= 5, commands
    assert any(c.startswith("probing-lab demo") for c in commands)
    assert any(c.startswith("probing-lab report probes/results") for c in commands)


@pytest.mark.parametrize("command", quick_commands())
def test_a_quick_command_of_the_guides_runs(command):
    if shutil.which("probing-lab") is None:
        pytest.skip("the probing-lab command is not installed (pip install -e .)")
    if "shared/datasets" in command and not (ROOT.parent / "shared" / "datasets").is_dir():
        pytest.skip("needs ../shared/datasets")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("PROBING_LAB_MODEL", None)  # the guides describe the shipped model
    done = subprocess.run(["bash", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    assert done.stdout.strip(), command


def test_the_results_tables_are_generated_from_the_committed_runs():
    """docs/results.md's tables are written by scripts/results_tables.py from probes/results/*/metrics.json."""
    done = subprocess.run(
        [sys.executable, "scripts/results_tables.py", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
