"""The data sets the pages read, loaded once per process; a missing one becomes
:class:`DataUnavailable` with the reader's own message (where it looked, how to get the files)."""

from __future__ import annotations

import streamlit as st


@st.cache_resource(show_spinner="Reading the data set…", max_entries=32)
def _load_dataset(name: str, split: str):
    from probing_lab.datasets import load_dataset

    return load_dataset(name, split)  # data dir: $PROBING_LAB_DATA, else ../shared/datasets


def dataset(name: str, split: str):
    """Sentence records, or raises :class:`DataUnavailable` with a message fit to show (the
    readers' own messages say where they looked and how to get the files)."""
    try:
        return _load_dataset(name, split)
    except ImportError as e:
        raise DataUnavailable(f"the data set readers (probing_lab.datasets) are not available: {e}") from None
    except Exception as e:  # noqa: BLE001 - missing files, bad split names
        raise DataUnavailable(str(e)) from None


class DataUnavailable(RuntimeError):
    pass
