"""Streamlit's own command line (``streamlit run ...``), with the lab's heavy imports started in a
background thread first: torch, the model loader and plotly take about a second to import, which
would otherwise start only when the first browser tab has loaded and asked for the Tour. Here they
overlap with the server's start and the browser's page load. ``probing-lab app`` runs this file.

    python app/serve.py run app/Tour.py [streamlit options]
"""

from __future__ import annotations

import sys
import threading


def preload() -> None:
    """Once the server runs, import what every page needs; the page scripts import the same modules
    (Python's import lock makes a page wait for a half-done import instead of doing it twice). Not
    earlier: the two would share one interpreter lock and delay the server's start."""
    import time

    from streamlit.runtime import Runtime

    while not Runtime.exists():
        time.sleep(0.05)
    time.sleep(0.3)  # the server's own start-up, after the runtime object exists
    import plotly.graph_objects  # noqa: F401
    import torch  # noqa: F401

    import probing_lab.analysis  # noqa: F401
    import probing_lab.model_loading  # noqa: F401


if __name__ == "__main__":
    threading.Thread(target=preload, name="preload", daemon=True).start()
    from streamlit.web.cli import main

    sys.exit(main())
