"""Transfer: what ELMo adds to a task model (Peters et al. 2018, sections 5.1-5.5).

A small BiLSTM tagger (:mod:`.tagger`) is trained on a tagging task (:mod:`.data`: chunking,
entity mentions, UPOS) with one of several inputs per token: a static word embedding learned with
the task, or ELMo's layers (a learned scalar mix, the top layer, the type layer, or the mix over a
random-init model) next to it. ELMo stays frozen: its layers come from the activation cache
(``features.cache``), extracted once per dataset. :mod:`.experiment` runs the grid (inputs x
training-data fractions x seeds), resumable per cell, and writes ``metrics.json``; scores are
conlleval span F1 or accuracy (:mod:`.scoring`).
"""
