"""The user's own file in the app: the summary a form shows (``probing_lab.datasets.summary``), the Probes
page's "Probe your own file" form (a path or an upload, the format and label column, the label table
before the run, the run with its progress bar, the finished run listed like the shipped ones and read
back by ``probing-lab report``), the Polysemy page on a ``wic`` file, and bad input as a message that
names the problem, never an exception.

Tiny files written by each test and the random-init ``cpu-tiny`` model keep it fast (as in test_app.py)."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from conftest import markdown_table, ok, texts, widget  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from probing_lab.datasets.records import DatasetFormatError  # noqa: E402
from probing_lab.datasets.summary import guess_format, summarise_file  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app"
PROBES = APP / "pages" / "3_Probes.py"
POLYSEMY = APP / "pages" / "1_Polysemy.py"
TIMEOUT = 300
sys.path.insert(0, str(APP))

NOUNS = ["cat", "dog", "bird", "child", "man", "tree"]
VERBS = ["sat", "slept", "stood", "jumped"]


@pytest.fixture(autouse=True)
def tiny_model_and_folders(monkeypatch, tmp_path):
    monkeypatch.setenv("PROBING_LAB_MODEL", "random:cpu-tiny")
    monkeypatch.setenv("PROBING_LAB_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("PROBING_LAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PROBING_LAB_ALLOWED_ROOTS", raising=False)
    monkeypatch.delenv("PROBING_LAB_NO_RUNS", raising=False)


def tokens_text(n: int = 40, seed: int = 0) -> str:
    """``n`` sentences "DET NOUN VERB ." (the full stop unlabelled), a comment on top."""
    r = random.Random(seed)
    lines = ["# made by the test"]
    for _ in range(n):
        lines += [f"{r.choice(['the', 'a'])}\tDET", f"{r.choice(NOUNS)}\tNOUN", f"{r.choice(VERBS)}\tVERB", ".\t_", ""]
    return "\n".join(lines)


def conllu_text(n: int = 8) -> str:
    """``n`` sentences with FEATS (Number on the noun, Tense on the verb) and MISC."""
    out = []
    for i in range(n):
        noun, number = (NOUNS[i % len(NOUNS)], "Sing") if i % 3 else (NOUNS[i % len(NOUNS)] + "s", "Plur")
        out.append(
            f"# sent_id = s{i}\n"
            f"1\tThe\tthe\tDET\tDT\tDefinite=Def|PronType=Art\t2\tdet\t_\t_\n"
            f"2\t{noun}\t{noun}\tNOUN\tNN\tNumber={number}\t3\tnsubj\t_\t_\n"
            f"3\tsat\tsit\tVERB\tVBD\tTense=Past\t0\troot\t_\tSpaceAfter=No\n"
            f"4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_\n"
        )
    return "\n".join(out)


def wic_text() -> str:
    money = ["I paid the bank .", "The bank lent money .", "Our bank closed early .", "A bank loan helps ."]
    river = ["We sat on the bank .", "The river bank flooded .", "Fish swam by the bank .", "The muddy bank gave way ."]
    lines = ["# sentence, target, sense, word"]
    for sentence in money * 2:
        lines.append(f"{sentence}\t{sentence.split().index('bank')}\tmoney\tbank")
    for sentence in river * 2:
        lines.append(f"{sentence}\t{sentence.split().index('bank')}\triver\tbank")
    lines += ["He plays the bass .\t3\tmusic", "The bass sounds deep .\t1\tmusic"]  # one sense only
    return "\n".join(lines) + "\n"


def probes() -> AppTest:
    at = AppTest.from_file(str(PROBES), default_timeout=TIMEOUT)
    at.run()
    return ok(at)


def open_path(at: AppTest, path) -> AppTest:
    at.text_input(key="own_path").input(str(path)).run()
    return ok(at)


def table(at: AppTest, i: int = 0) -> dict:
    frame = at.dataframe[i].value
    return dict(zip(frame["label"], frame["count"]))


# --- the summary a form shows ------------------------------------------------------------------


def test_summary_of_each_format_and_its_errors(tmp_path):
    conllu = tmp_path / "a.conllu"
    conllu.write_text(conllu_text(), encoding="utf-8")
    found = summarise_file(conllu, "conllu")
    assert found.label == "upos" and found.sentences == 8 and found.tokens == 32
    assert found.labels == {"DET": 8, "NOUN": 8, "PUNCT": 8, "VERB": 8} and found.problem is None
    assert list(found.columns) == [
        "upos",
        "xpos",
        "deprel",
        "feats:Definite",
        "feats:Number",
        "feats:PronType",
        "feats:Tense",
        "misc:SpaceAfter",
    ]
    assert found.columns["feats:Number"] == 8
    number = summarise_file(conllu, "conllu", "feats:Number")
    assert number.labels == {"Sing": 5, "Plur": 3} and number.unlabelled == 24 and number.labelled == 8
    assert number.rows()[0] == {"label": "Sing", "count": 5, "share": 0.625}
    missing = summarise_file(conllu, "conllu", "feats:Gender")
    assert "no token has feats:Gender" in missing.problem
    with pytest.raises(DatasetFormatError, match="choose another label column"):
        missing.check()

    tokens = tmp_path / "pos.tsv"
    tokens.write_text(tokens_text(5), encoding="utf-8")
    found = summarise_file(tokens, "tokens")
    assert found.sentences == 5 and found.unlabelled == 5 and found.labels == {"DET": 5, "NOUN": 5, "VERB": 5}

    wic = tmp_path / "senses.tsv"
    wic.write_text(wic_text(), encoding="utf-8")
    found = summarise_file(wic, "wic")
    assert found.labels == {"money": 8, "river": 8, "music": 2} and found.what == "target"
    assert found.groups == {"bank": {"money": 8, "river": 8}, "bass": {"music": 2}} and found.problem is None

    sentences = tmp_path / "s.tsv"
    sentences.write_text("a b c\tyes\nd e\tno\nf g h\tyes\n", encoding="utf-8")
    assert summarise_file(sentences, "sentences").labels == {"yes": 2, "no": 1}

    spans = tmp_path / "s.jsonl"
    rows = [
        {"tokens": ["New", "York", "is", "big"], "span1": [0, 2], "label": "LOC"},
        {"tokens": ["New", "York", "is", "big"], "span1": [3, 4], "label": "O"},
        {"tokens": ["Ann", "ran"], "span1": [0, 1], "label": "PER"},
    ]
    spans.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    found = summarise_file(spans, "spans")
    assert (found.sentences, found.examples, found.labels) == (2, 3, {"LOC": 1, "O": 1, "PER": 1})
    assert found.problem.endswith("needs at least 3")  # two sentences cannot be split three ways

    one = tmp_path / "one.tsv"
    one.write_text("\n\n".join("a\tX\nb\tX" for _ in range(4)), encoding="utf-8")
    assert "every labelled token has the label 'X': nothing to probe" in summarise_file(one, "tokens").problem
    empty = tmp_path / "empty.tsv"
    empty.write_text("# only a comment\n\n", encoding="utf-8")
    with pytest.raises(DatasetFormatError, match="empty.tsv: no sentences"):
        summarise_file(empty, "tokens")
    bad = tmp_path / "bad.tsv"
    bad.write_bytes(b"a\tX\nb\xff\tY\n")
    with pytest.raises(DatasetFormatError, match=r"bad.tsv:2: not UTF-8"):
        summarise_file(bad, "tokens")
    bad.write_text("a\tX\nb c d\n", encoding="utf-8")
    with pytest.raises(DatasetFormatError, match=r"bad.tsv:2: expected token<TAB>label"):
        summarise_file(bad, "tokens")
    with pytest.raises(ValueError, match="unknown format"):
        summarise_file(tokens, "csv")
    with pytest.raises(ValueError, match="conllu files only"):
        summarise_file(tokens, "tokens", "upos")
    assert [guess_format(n) for n in ("a.conllu", "B.CONLLU", "x.jsonl", "x.tsv", "x.txt")] == [
        "conllu",
        "conllu",
        "spans",
        None,
        None,
    ]


# --- the Probes page ---------------------------------------------------------------------------


def test_probes_label_table_for_a_conllu_file_with_feats(tmp_path):
    path = tmp_path / "mine.conllu"
    path.write_text(conllu_text(), encoding="utf-8")
    at = open_path(probes(), path)
    assert at.selectbox(key="own_format").value == "conllu"  # guessed from the extension
    assert at.selectbox(key="own_task").value == "token_label"
    columns = at.selectbox(key="own_label").options
    assert columns[:3] == ["upos (32 tokens)", "xpos (32 tokens)", "deprel (32 tokens)"]
    assert "feats:Number (8 tokens)" in columns and "misc:SpaceAfter (8 tokens)" in columns
    assert table(at) == {"DET": 8, "NOUN": 8, "PUNCT": 8, "VERB": 8}
    at.selectbox(key="own_label").set_value("feats:Number").run()
    assert table(ok(at)) == {"Sing": 5, "Plur": 3}
    assert "24 token(s) without a label (skipped)" in texts(at.caption)
    assert at.button(key="own_run") and not at.error
    at.selectbox(key="own_label").set_value("feats:Tense").run()  # one label: the table, an error, no Run
    assert table(ok(at)) == {"Past": 8}
    assert "every labelled token has the label 'Past': nothing to probe" in texts(at.error)
    assert "choose another label column" in texts(at.error)
    assert not [b for b in at.button if b.key == "own_run"]


def test_probes_run_on_an_uploaded_tokens_file_is_listed_and_reported(tmp_path, capsys):
    runs = tmp_path / "runs"
    at = probes()
    at.radio(key="own_how").set_value("Upload a file").run()
    at.file_uploader(key="own_upload").upload("my pos.tsv", tokens_text(40).encode(), "text/tab-separated-values").run()
    ok(at)
    assert at.selectbox(key="own_format").value is None and "Choose the format of my pos.tsv" in texts(at.info)
    at.selectbox(key="own_format").set_value("tokens").run()
    assert table(ok(at)) == {"DET": 40, "NOUN": 40, "VERB": 40}
    assert not list(runs.glob("*"))  # nothing is written before the run
    at.checkbox(key="own_baselines").uncheck()
    at.button(key="own_run").click().run()
    ok(at)
    assert "Wrote" in texts(at.success), texts(at.error)
    (run_dir,) = runs.glob("my_pos-*")
    assert (run_dir / "data" / "my_pos.tsv").read_text(encoding="utf-8") == tokens_text(40)  # kept with the run
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["task"] == "token_label" and metrics["experiment"] == "my_pos"
    assert metrics["files"][0]["path"] == str((run_dir / "data" / "my_pos.tsv").resolve())
    assert metrics["split"]["sentences"] == {"train": 32, "dev": 4, "test": 4}
    assert set(metrics["layers"]) == {"0", "1", "2", "mix"} and "random_init" not in metrics["baselines"]
    # listed and drawn like the shipped runs: the results switch to "Your runs" on this experiment
    assert at.radio(key="results_source").value == "Your runs (started here)"
    assert at.selectbox(key="experiment").value == "my_pos"
    assert widget(at, "multiselect", "Runs to compare").value == [run_dir.name]
    assert len(at.get("plotly_chart")) == 2  # the layer curves and the confusion matrix
    assert "token_label on tokens file my_pos.tsv" in texts(at.caption)
    # and `probing-lab report` reads it like a shipped run
    from probing_lab.cli import main

    assert main(["report", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "| my_pos (token_label) | random:cpu-tiny (seed 0) |" in out
    # a second run of the same upload gets its own folder and its own copy
    at.button(key="own_run").click().run()
    assert "Wrote" in texts(ok(at).success)
    assert len(list(runs.glob("my_pos-*/data/my_pos.tsv"))) == 2


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("empty.tsv", b"# nothing but a comment\n\n", "empty.tsv: no sentences (the file is empty"),
        ("one.tsv", b"a\tX\nb\tX\n\nc\tX\n\nd\tX\n", "every labelled token has the label 'X': nothing to probe"),
        ("bad.tsv", b"a\tX\nb c d\n", "bad.tsv:2: expected token<TAB>label (2 tab-separated columns), got 1"),
        ("latin.tsv", b"a\tX\ncaf\xe9\tY\n", "latin.tsv:2: not UTF-8"),
        ("tiny.tsv", b"a\tX\nb\tY\n", "1 sentence(s); splitting it into train/dev/test needs at least 3"),
    ],
)
def test_probes_bad_files_give_a_message(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    at = open_path(probes(), path)
    at.selectbox(key="own_format").set_value("tokens").run()
    assert message in texts(ok(at).error), texts(at.error)
    assert not [b for b in at.button if b.key == "own_run"]
    assert not (tmp_path / "runs").exists()


def test_probes_own_file_paths_are_confined_and_checked(tmp_path, monkeypatch):
    allowed, outside = tmp_path / "allowed", tmp_path / "elsewhere"
    allowed.mkdir()
    outside.mkdir()
    (outside / "pos.tsv").write_text(tokens_text(5), encoding="utf-8")
    (allowed / "pos.tsv").write_text(tokens_text(5), encoding="utf-8")
    (allowed / "escape").symlink_to(outside)
    monkeypatch.setenv("PROBING_LAB_ALLOWED_ROOTS", str(allowed))
    at = probes()
    for path in (outside / "pos.tsv", allowed / "escape" / "pos.tsv", allowed / ".." / "elsewhere" / "pos.tsv"):
        open_path(at, path)
        assert "outside the folders this server allows" in texts(at.error), path
        assert not at.dataframe or "label" not in at.dataframe[0].value.columns
    open_path(at, allowed / "missing.tsv")
    assert "missing.tsv: no such file" in texts(at.error)
    open_path(at, allowed)
    assert "(it is a folder)" in texts(at.error)
    open_path(at, allowed / "pos.tsv")
    at.selectbox(key="own_format").set_value("tokens").run()
    assert table(ok(at)) == {"DET": 5, "NOUN": 5, "VERB": 5} and not at.error


def test_probes_own_file_form_is_off_without_runs(monkeypatch):
    monkeypatch.setenv("PROBING_LAB_NO_RUNS", "1")
    at = probes()
    assert not [w for w in at.text_input if w.key == "own_path"] and not at.file_uploader


# --- the Polysemy page -------------------------------------------------------------------------


def polysemy_on_wic(at: AppTest) -> AppTest:
    at.radio(key="source").set_value("A wic file").run()
    return ok(at)


def test_polysemy_on_a_wic_file_by_path_and_by_upload(tmp_path):
    path = tmp_path / "senses.tsv"
    path.write_text(wic_text(), encoding="utf-8")
    at = AppTest.from_file(str(POLYSEMY), default_timeout=TIMEOUT)
    at.run()
    polysemy_on_wic(at)
    assert "Type the path of your wic file" in texts(at.info) and not at.get("plotly_chart")
    at.text_input(key="poly_wic_path").input(str(path)).run()
    ok(at)
    assert at.selectbox(key="wic_group").value == "bank"  # the first word with two senses
    assert "16 occurrences, 2 senses" in texts(at.subheader)
    frame = markdown_table(at)
    assert list(frame["layer"]) == ["L0", "L1", "L2", "mean"] and frame.iloc[0]["self-similarity"] == "1.000"
    assert len(at.get("plotly_chart")) == 2  # maps and heatmaps; the supervised view when its toggle is on
    assert "senses.tsv: 18 line(s), 2 word(s)" in texts(at.caption)
    at.slider(key="wic_per_sense").set_value(3).run()
    assert "6 occurrences, 2 senses" in texts(ok(at).subheader)
    at.selectbox(key="wic_group").set_value("bass").run()  # one sense: only self-similarity
    assert "2 occurrences" in texts(ok(at).subheader) and "Without at least two sense labels" in texts(at.info)

    at.radio(key="poly_wic_how").set_value("Upload a file").run()
    at.file_uploader(key="poly_wic_upload").upload("up.tsv", wic_text().encode()).run()
    ok(at)
    assert "up.tsv: 18 line(s)" in texts(at.caption) and len(at.get("plotly_chart")) >= 2


def test_polysemy_wic_file_errors(tmp_path, monkeypatch):
    at = AppTest.from_file(str(POLYSEMY), default_timeout=TIMEOUT)
    at.run()
    polysemy_on_wic(at)
    bad = tmp_path / "bad.tsv"
    bad.write_text("The bank closed .\t7\tmoney\n", encoding="utf-8")
    at.text_input(key="poly_wic_path").input(str(bad)).run()
    assert "bad.tsv:1: target index 7 is outside the sentence's 4 tokens" in texts(ok(at).error)
    assert not at.get("plotly_chart")
    empty = tmp_path / "empty.tsv"
    empty.write_text("", encoding="utf-8")
    at.text_input(key="poly_wic_path").input(str(empty)).run()
    assert "empty.tsv: no sentences" in texts(ok(at).error)
    at.radio(key="poly_wic_how").set_value("Upload a file").run()
    at.file_uploader(key="poly_wic_upload").upload("latin.tsv", b"caf\xe9 bank .\t1\tmoney\n").run()
    error = texts(ok(at).error)
    assert "latin.tsv:1: not UTF-8" in error and "probing-lab-upload" not in error  # the upload's own name
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    monkeypatch.setenv("PROBING_LAB_ALLOWED_ROOTS", str(allowed))
    at.radio(key="poly_wic_how").set_value("A path on the server").run()
    at.text_input(key="poly_wic_path").input(str(bad)).run()
    assert "outside the folders this server allows" in texts(ok(at).error)
