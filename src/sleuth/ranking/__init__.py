"""Learned selection: features of candidate documents and the ranker (linear or trees) that weighs them."""

from sleuth.ranking.features import (
    FEATURE_GROUPS,
    SEARCH_COLUMNS,
    SELECTION_COLUMNS,
    Candidate,
    QuestionEvidence,
    Search,
    SeenDoc,
    search_features,
    selection_features,
)
from sleuth.ranking.model import LinearHead, RankerModel, fit_head, load_ranker
from sleuth.ranking.trees import TreeHead, fit_trees

__all__ = [
    "FEATURE_GROUPS",
    "SEARCH_COLUMNS",
    "SELECTION_COLUMNS",
    "Candidate",
    "LinearHead",
    "QuestionEvidence",
    "RankerModel",
    "Search",
    "SeenDoc",
    "TreeHead",
    "fit_head",
    "fit_trees",
    "load_ranker",
    "search_features",
    "selection_features",
]
