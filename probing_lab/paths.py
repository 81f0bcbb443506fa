"""Where things are: the one place that knows the repository layout and the data directory.

- ``REPO_ROOT``: what holds ``data/models``, ``probes/`` and ``app/``: the checkout, or in a built
  (non-editable) install the package's ``_resources`` folder;
- ``SHIPPED_MODEL_DIR`` / ``EARLY_MODEL_DIR``: the lab's own model and its early snapshot;
  ``WORD2VEC_DIR``: word2vec vectors trained on the same corpus (``--model word2vec``);
  ``CANDIDATE_MODEL_DIR``: the committed state of the next model, in training (it has a softmax);
- ``AGREEMENT_PAIRS_FILE``: the subject-verb agreement minimal pairs of the language-model test;
- ``data_dir()``: where the datasets a user brings live (``--data-dir``, ``$PROBING_LAB_DATA``, or the
  team layout's ``../shared/datasets`` next to the repository), and how it was chosen;
- ``PACKAGE_DIRS``: where registry packages (``.deb``, ``.tgz``, wheels) are looked for;
- ``SYSTEM_WORDNET``: Debian's installed WordNet.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

_PACKAGE = Path(__file__).resolve().parent
# A built install carries the app, probes/ and the shipped model in probing_lab/_resources (setup.py);
# a checkout (or an editable install) has them next to the package.
INSTALLED = (_PACKAGE / "_resources").is_dir()
REPO_ROOT = _PACKAGE / "_resources" if INSTALLED else _PACKAGE.parent
SHIPPED_MODEL_DIR = REPO_ROOT / "data" / "models" / "elmo-lab"
EARLY_MODEL_DIR = REPO_ROOT / "data" / "models" / "elmo-lab-early"
# the next model, still in training: a warm-start state (biLM, softmax and its vocab.txt) that loads as a model
CANDIDATE_MODEL_DIR = REPO_ROOT / "data" / "warm-start" / "campaign"
WORD2VEC_DIR = REPO_ROOT / "data" / "models" / "word2vec-lab"  # static vectors on the LM corpus (context-free)
PROBES_DIR = REPO_ROOT / "probes"
CAUSAL_RESULTS_DIR = REPO_ROOT / "causal" / "results"  # the shipped model's committed causal runs
LM_RESULTS_DIR = REPO_ROOT / "lm" / "results"  # the shipped model's committed language-model runs (BLiMP)
AGREEMENT_PAIRS_FILE = REPO_ROOT / "data" / "agreement" / "subject_verb.jsonl"  # the LM's minimal pairs
APP_DIR = REPO_ROOT / "app"
SYSTEM_WORDNET = Path("/usr/share/wordnet")
# what the lab writes: in the checkout, or in the working directory of an installed lab
WORK_DIR = Path.cwd() if INSTALLED else REPO_ROOT

RUNS_ENV = "PROBING_LAB_RUNS"  # where probe runs go when no --out is given: the CLI's and the app's


def probe_runs_dir(default: Optional[Path] = None) -> Path:
    """Where a probe run goes when no folder is given, one rule for the command line and the app:
    ``$PROBING_LAB_RUNS`` when set; else ``default``, or ``runs/probes`` under the working directory
    (the command line, like ``git`` or ``make``, writes where the user works)."""
    if os.environ.get(RUNS_ENV):
        return Path(os.environ[RUNS_ENV]).expanduser()
    return default if default is not None else Path("runs") / "probes"


def app_runs_dir() -> Path:
    """Where the app writes the probe runs a user starts from it: :func:`probe_runs_dir`, whose
    default for the app is the user's data folder (platformdirs: ``~/.local/share/probing-lab/runs/probes``
    on Linux), never the folder the app happened to be started from. Created on first use by the run."""
    import platformdirs

    return probe_runs_dir(platformdirs.user_data_path("probing-lab") / "runs" / "probes")


DATA_ENV = "PROBING_LAB_DATA"
TEAM_DATA_DIR = REPO_ROOT.parent / "shared" / "datasets"  # the team layout: ../shared/datasets
TEAM_PACKAGE_DIR = REPO_ROOT.parent / "registry"  # registry packages fetched next to the repository


def data_dir(explicit: Optional[str | Path] = None) -> tuple[Optional[Path], str]:
    """(folder, how it was chosen): ``explicit`` (``--data-dir``), ``$PROBING_LAB_DATA``, or the
    team layout's ``../shared/datasets``; ``(None, "none")`` when there is none."""
    if explicit:
        return Path(explicit).expanduser(), "--data-dir"
    if os.environ.get(DATA_ENV):
        return Path(os.environ[DATA_ENV]).expanduser(), f"${DATA_ENV}"
    if TEAM_DATA_DIR.is_dir():
        return TEAM_DATA_DIR, "default ../shared/datasets"
    return None, "none"


def package_dirs(root: Optional[Path]) -> list[Path]:
    """Folders searched for registry packages: the data directory, its ``registry/``, and ``../registry``."""
    dirs = [root, root / "registry"] if root is not None else []
    return dirs + [TEAM_PACKAGE_DIR]
