"""ELMo Probing Lab: a full ELMo biLM, per-layer activations, probes and an app to look inside."""

import os

# torch backs its large CPU buffers (2 MB and up) with transparent huge pages when this is set
# before it allocates them: a fresh 200 MB tensor (a standardised layer of EWT) costs 512x fewer
# page faults, (X - mean) / std 0.29 -> 0.08 s on a 2-core VM. The values are the same.
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

__version__ = "0.1.0"
