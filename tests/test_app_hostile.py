"""Hostile text in every text field of every page (issue 27 item 7): an empty box, 3,000 words pasted,
emoji and non-Latin script, HTML and script tags. Each gives a message or a correct result: never a
Streamlit exception box, and never HTML rendered from what was typed.

The fields are found on the page as it is drawn (after the choices that reveal them), so a new field
is covered without a new test."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from test_app import _tiny_lm_dir, run  # noqa: E402

HOSTILE = {
    "empty": "",
    "3,000 words": " ".join(["the bank of the river"] * 600),
    "emoji and non-Latin": "🏦 банк 銀行 بنك bank 🌊 ñ",
    "HTML and script": '<script>alert("x")</script><b>bank</b> <img src=x onerror=alert(1)>',
}
MARKERS = ("<script", "onerror", "<b>bank</b>")  # what would show that typed HTML reached the page as HTML

# (page, the choices that reveal its text fields: (widget kind, key, value), ...)
SETUPS = [
    ("home", ()),
    ("polysemy", (("radio", "source", "Type your own"),)),
    ("polysemy", (("radio", "source", "A wic file"),)),
    ("probes", ()),  # the own-file path field (in its tab)
    ("probes", (("radio", "results_source", "Another folder"),)),
    ("explorer", ()),
    ("lm", ()),
    ("compare", (("radio", "cmp_source", "Your text"),)),
    ("training", ()),
    ("model", (("radio", "kind", "Released ELMo (options.json + weights.hdf5)"),)),
    ("model", (("radio", "kind", "Another checkpoint directory"),)),
    ("causal", (("radio", "source", "Type a pair"),)),
]


def text_fields(at) -> list[tuple[str, str]]:
    return [("text_input", w.key) for w in at.text_input] + [("text_area", w.key) for w in at.text_area]


def rendered_html(at) -> list[str]:
    """Bodies of elements that render HTML (``unsafe_allow_html``) and contain something typed."""
    found = []
    for kind in ("markdown", "caption", "latex"):
        for element in at.get(kind):
            proto = element.proto
            if getattr(proto, "allow_html", False) and any(m in proto.body for m in MARKERS):
                found.append(proto.body[:200])
    found += [e.proto.body[:200] for e in at.get("html") if any(m in e.proto.body for m in MARKERS)]
    return found


@pytest.mark.parametrize(
    "page, setup", SETUPS, ids=[f"{p}-{'-'.join(s[1] for s in setup) or 'default'}" for p, setup in SETUPS]
)
def test_hostile_text_in_every_field(page, setup, tmp_path, monkeypatch):
    if page in ("lm", "causal"):  # pages that need a language model's softmax
        monkeypatch.setenv("PROBING_LAB_MODEL", str(_tiny_lm_dir(tmp_path / "lm")))
    at = run(page)
    for kind, key, value in setup:
        getattr(at, kind)(key=key).set_value(value).run()
    assert not at.exception, (page, setup, [e.value for e in at.exception])
    fields = text_fields(at)
    if page != "home":
        assert fields, f"{page} {setup}: no text field found to test"
    for kind, key in fields:
        for name, value in HOSTILE.items():
            widget = [w for w in getattr(at, kind) if w.key == key]
            if not widget:  # an earlier value hid the field (e.g. a refused path): that is a message too
                continue
            widget[0].set_value(value).run()
            where = f"{page} {setup} field {key!r} with {name}"
            assert not at.exception, (where, [e.value for e in at.exception])
            assert not rendered_html(at), (where, rendered_html(at))
