"""ELMo Probing Lab: a full ELMo biLM, per-layer activations, probes and an app to look inside."""

__version__ = "0.1.0"
