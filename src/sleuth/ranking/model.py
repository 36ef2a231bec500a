"""The learned ranker: two heads over hand-built features, stored as JSON.

Each head is linear (logistic regression: trains in seconds, scores in microseconds, ships as a
few hundred bytes of readable weights) or gradient-boosted trees (:mod:`.trees`: LambdaRank
trees, stored as LightGBM's model text). Either names the feature columns it reads and picks
them by name from the full feature table, so a model trained before a feature existed still
loads and scores; a model that needs a column this version does not compute is refused.
``benchmarks/ranker_ablation.py`` compares the two learners and each feature group.

``search`` reranks one ``search_corpus`` call's candidates; ``selection`` orders the documents
a trajectory has seen, for pruning and for the final list. The file also records what the
heads were trained on (settings and the id of every training question) so an evaluation can
prove it never scores a question the ranker saw.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, Discriminator, Field, Tag

from sleuth.errors import InputError
from sleuth.io import atomic_write_text
from sleuth.ranking.features import SEARCH_COLUMNS, SELECTION_COLUMNS, pick_columns
from sleuth.ranking.trees import TreeHead

# 2: heads carry a ``kind`` (linear | trees); version-1 files (linear heads only) still load.
RANKER_SCHEMA_VERSION = 2
SHIPPED = "data/ranker/ranker.json"
LEARNERS = ("linear", "gbdt")


class LinearHead(BaseModel):
    """``score(x) = w · (x − mean) / scale + b``: the log-odds that a candidate is gold."""

    kind: Literal["linear"] = "linear"
    columns: list[str]
    mean: list[float]
    scale: list[float]
    weights: list[float]
    bias: float

    def score(self, features: np.ndarray, columns: Sequence[str] | None = None) -> np.ndarray:
        """Log-odds per row; ``columns`` names the table's columns (None: already the head's)."""
        x = (pick_columns(features, self.columns, columns) - np.asarray(self.mean)) / np.asarray(
            self.scale
        )
        scores: np.ndarray = x @ np.asarray(self.weights) + self.bias
        return scores


def _head_kind(value: Any) -> str:
    """A head's ``kind``; version-1 heads have none and are linear."""
    if isinstance(value, dict):
        return str(value.get("kind", "linear"))
    return str(getattr(value, "kind", "linear"))


Head = Annotated[
    Annotated[LinearHead, Tag("linear")] | Annotated[TreeHead, Tag("trees")],
    Discriminator(_head_kind),
]


class RankerModel(BaseModel):
    """Both heads plus their provenance; the JSON written by ``sleuth train ranker``."""

    schema_version: int = RANKER_SCHEMA_VERSION
    search: Head
    selection: Head
    trained_on: dict[str, Any] = Field(default_factory=dict)  # settings, sources, counts
    question_ids: list[str] = Field(default_factory=list)  # every question the heads saw

    def score_search(self, features: np.ndarray) -> np.ndarray:
        """The search head over a :func:`search_features` table."""
        return self.search.score(features, SEARCH_COLUMNS)

    def score_selection(self, features: np.ndarray) -> np.ndarray:
        """The selection head over a :func:`selection_features` table."""
        return self.selection.score(features, SELECTION_COLUMNS)

    def check_columns(self) -> None:
        """Refuse a head that reads a column this version does not compute."""
        for head, columns in ((self.search, SEARCH_COLUMNS), (self.selection, SELECTION_COLUMNS)):
            missing = [c for c in head.columns if c not in columns]
            if missing:
                raise InputError(
                    f"ranker features {missing} are not computed by this version "
                    f"(it has {list(columns)}); retrain it with `sleuth train ranker`"
                )

    def save(self, path: str | Path) -> None:
        atomic_write_text(path, self.model_dump_json(indent=1))


def fit_head(
    features: np.ndarray,
    labels: np.ndarray | Sequence[int],
    columns: Sequence[str],
    c: float = 1.0,
) -> LinearHead:
    """Fit one head by L2-regularised logistic regression on standardised features."""
    from sklearn.linear_model import LogisticRegression

    y = np.asarray(labels)
    if len(set(y.tolist())) < 2:
        raise InputError("ranker training needs both gold and non-gold candidates")
    mean = features.mean(axis=0)
    scale = features.std(axis=0)
    scale[scale == 0] = 1.0
    fitted = LogisticRegression(C=c, max_iter=2000).fit((features - mean) / scale, y)
    return LinearHead(
        columns=list(columns),
        mean=mean.tolist(),
        scale=scale.tolist(),
        weights=fitted.coef_[0].tolist(),
        bias=float(fitted.intercept_[0]),
    )


def load_ranker(path: str | Path | None = None) -> RankerModel:
    """A ranker file, or the one shipped in the package when ``path`` is None."""
    try:
        if path is None:
            text = resources.files("sleuth").joinpath(SHIPPED).read_text(encoding="utf-8")
        else:
            text = Path(path).read_text(encoding="utf-8")
        model = RankerModel.model_validate(json.loads(text))
    except (OSError, ValueError) as e:
        raise InputError(f"cannot load ranker ({e})", source=str(path or SHIPPED)) from e
    model.check_columns()
    return model
