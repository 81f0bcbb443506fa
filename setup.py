"""The project's metadata is in pyproject.toml; this only makes a built (non-editable) install carry what
the lab needs at run time besides the library: the Streamlit app, the experiment files with their
shipped results (probes/, transfer/, causal/), the shipped model and the agreement test's pairs. They are copied into
``probing_lab/_resources`` of the build, where ``probing_lab.paths`` finds them (an editable install
reads them from the checkout)."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

RESOURCES = ("app", "probes", "transfer", "causal", "data/models", "data/agreement")


class BuildWithResources(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "probing_lab" / "_resources"
        for name in RESOURCES:
            shutil.copytree(
                name, target / name, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
            )


setup(cmdclass={"build_py": BuildWithResources})
