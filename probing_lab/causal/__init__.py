"""Causal analysis: does the model use what the probes find? INLP and amnesic probing
(``inlp``, ``amnesic``), built on the biLM's interventions (``probing_lab.elmo.interventions``)."""
