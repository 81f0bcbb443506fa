"""Building the LM corpus: reading sources (registry packages, archives, text files), keeping prose
only, removing the probes' evaluation sentences, and writing shards, heldout text, the vocabulary and
``stats.json`` (``probing-lab corpus build``). The trainer (``probing_lab.training``) reads what this
writes and imports nothing from here.

- ``build``: :func:`build_corpus`, the whole build, and the readers per source;
- ``sources`` / ``rdata``: readers for registry packages with their own formats;
- ``markup``: wiki, HTML and WordNet text to sentences;
- ``prose``: the prose detector (by name, by bytes, per document);
- ``exclusions``: the evaluation sentences kept out of the corpus.
"""

from .build import build_corpus

__all__ = ["build_corpus"]
