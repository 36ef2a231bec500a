"""Learned selection: features of candidate documents and the linear ranker that weighs them."""

from sleuth.ranking.features import (
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

__all__ = [
    "SEARCH_COLUMNS",
    "SELECTION_COLUMNS",
    "Candidate",
    "LinearHead",
    "QuestionEvidence",
    "RankerModel",
    "Search",
    "SeenDoc",
    "fit_head",
    "load_ranker",
    "search_features",
    "selection_features",
]
