"""The rule that state follows the user, on every page (AppTest, no browser): change each selector
(selectbox, radio, multiselect) to another choice; every other selector whose options changed with
it must be a new widget (its key names what its options depend on, ``lab_ui.key_on``), so that it
shows only choices among its new options and never one kept from before; and nothing raises.

A selector keeping its key while its options change is the bug class of the Probes page's "Runs to
compare" (it kept pos_ewt's runs after another experiment was chosen)."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from streamlit.proto.WidgetStates_pb2 import WidgetState  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402
from test_app import PAGES, TIMEOUT  # noqa: E402

MAX_CHANGES = 6  # selectors changed per page: the first ones (selectboxes, radios, then multiselects)


@pytest.fixture(autouse=True)
def tiny_model(monkeypatch):
    monkeypatch.setenv("PROBING_LAB_MODEL", "random:cpu-tiny")


def selectors(at: AppTest) -> dict:
    """Every selector on the page: its key (or Streamlit's id when it has none) -> (label, options,
    shown choices; None when a shown choice is not among the options: stale state)."""
    found = {}
    for w in (*at.selectbox, *at.radio, *at.multiselect):
        try:
            shown = list(w.indices) if w.type == "multiselect" else [w.index]
        except ValueError:  # a value kept from before that the new options do not hold
            shown = None
        found[w.key or w.id] = (w.label, list(w.options), shown)
    return found


def choose(widget) -> None:
    """Another choice, made as the browser does (by the options' shown text: the raw values behind a
    ``format_func`` are not known here): the next option of a selectbox or radio; for a multiselect,
    one chosen option fewer, or one more when a single one is chosen."""
    if widget.type == "multiselect":
        shown = [widget.options[i] for i in widget.indices]
        more = [o for o in widget.options if o not in shown]
        shown = shown[:-1] if len(shown) > 1 or not more else shown + more[:1]
        state = WidgetState(id=widget.id)
        state.string_array_value.data[:] = shown
    else:
        state = WidgetState(id=widget.id, string_value=widget.options[(widget.index + 1) % len(widget.options)])
    widget.__class__ = type(f"Chosen{type(widget).__name__}", (type(widget),), {"_widget_state": state})


def page_problems(page: str) -> tuple[list[str], list[str]]:
    """(the rule's violations, the selectors changed) on one page."""
    at = AppTest.from_file(str(PAGES[page]), default_timeout=TIMEOUT).run()
    assert not at.exception, [e.value for e in at.exception]
    targets = [
        (w.type, i, w.label)
        for kind in ("selectbox", "radio", "multiselect")
        for i, w in enumerate(getattr(at, kind))
        if len(w.options) > 1 and not w.disabled and not w.form_id
    ][:MAX_CHANGES]
    problems, changed = [], []
    for kind, i, label in targets:
        fresh = AppTest.from_file(str(PAGES[page]), default_timeout=TIMEOUT).run()
        w = getattr(fresh, kind)[i]
        before = selectors(fresh)
        choose(w)
        fresh.run()
        changed.append(label)
        if fresh.exception:
            problems.append(f"{page}: choosing another {label!r} raised {[e.value for e in fresh.exception]}")
            continue
        for ident, (other, options, shown) in selectors(fresh).items():
            if shown is None:
                problems.append(f"{page}: after {label!r}, {other!r} shows a choice its options do not hold")
            elif ident in before and before[ident][1] != options and other != label:
                problems.append(
                    f"{page}: after {label!r}, {other!r} offers other options under the same key {ident!r}: "
                    "key it on what its options depend on (lab_ui.key_on)"
                )
    return problems, changed


@pytest.mark.parametrize("page", sorted(PAGES))
def test_dependent_selectors_follow_every_choice(page):
    problems, changed = page_problems(page)
    assert not problems, problems
