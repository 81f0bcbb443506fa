"""Static (context-free) word vectors: word2vec trained on the lab's LM corpus, the probes' baseline.

``train_word2vec`` (needs gensim) writes a vectors folder; ``StaticVectors.load`` reads it (numpy and
safetensors only); ``StaticEncoder`` gives the probes and ``extract_features`` one layer of them."""

from .vectors import StaticEncoder, StaticVectors
from .word2vec import train_word2vec

__all__ = ["StaticEncoder", "StaticVectors", "train_word2vec"]
