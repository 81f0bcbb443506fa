"""Looking at token vectors: 2-D projections, cosine geometry, sense separation of a polysemous word.

No Streamlit here: the app, notebooks and scripts all call the same functions.
"""

from ..features.activations import Activations, embed_activations, layer_keys, layer_label
from .geometry import (
    cosine_matrix,
    linear_cv_accuracy,
    loo_nn_accuracy,
    nearest_contexts,
    random_pair_cosine,
    self_similarity,
    sense_similarities,
    separation,
    silhouette_cosine,
    supervised_2d,
)
from .polysemy import (
    Occurrences,
    collect,
    find_target,
    inflections,
    labelled_positions,
    locate,
    parse_lines,
    parse_marked,
    sense_baselines,
    sense_verdict,
)
from .projections import METHODS, project, umap_is_warm, warm_up_umap
from .similarity import cka_matrix, corpus_geometry, linear_cka

__all__ = [
    "METHODS",
    "cka_matrix",
    "corpus_geometry",
    "linear_cka",
    "linear_cv_accuracy",
    "Occurrences",
    "Activations",
    "collect",
    "cosine_matrix",
    "embed_activations",
    "find_target",
    "inflections",
    "labelled_positions",
    "layer_keys",
    "layer_label",
    "locate",
    "loo_nn_accuracy",
    "nearest_contexts",
    "parse_lines",
    "parse_marked",
    "project",
    "random_pair_cosine",
    "self_similarity",
    "sense_similarities",
    "sense_baselines",
    "sense_verdict",
    "separation",
    "silhouette_cosine",
    "supervised_2d",
    "umap_is_warm",
    "warm_up_umap",
]
