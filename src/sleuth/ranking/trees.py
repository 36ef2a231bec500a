"""The ranker's gradient-boosted tree head: LightGBM trees stored as their model text.

Why trees next to the linear head: the multi-hop signals interact (a document named by a
relevant one matters only when the question has a hop left; a high BM25 rank means less once
the document was found by a bridge search), which a weighted sum cannot express. The trees are
fitted with a listwise objective (LambdaRank, one group per question or per search call), so
they learn the order within a question rather than a probability across questions; a Platt
scaling fitted afterwards turns their score back into log-odds, which pruning compares with a
probability threshold.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, PrivateAttr

from sleuth.errors import InputError
from sleuth.ranking.features import pick_columns

# Small data (hundreds of questions): shallow trees, a slow rate, row and column sampling.
TREE_PARAMS: dict[str, Any] = {
    "objective": "lambdarank",
    "learning_rate": 0.05,
    "num_leaves": 15,
    "min_data_in_leaf": 20,
    "feature_fraction": 0.9,
    "bagging_fraction": 0.8,
    "bagging_freq": 1,
    "lambda_l2": 1.0,
    "lambdarank_truncation_level": 20,
    "eval_at": [5],
    "deterministic": True,
    "force_row_wise": True,
    "num_threads": 1,
    "seed": 24,
    "verbose": -1,
}
TREE_ROUNDS = 150


class TreeHead(BaseModel):
    """``score(x) = a · trees(x) + b``: the trees' ranking score as calibrated log-odds."""

    kind: Literal["trees"] = "trees"
    columns: list[str]
    trees: str  # LightGBM's model text
    platt: tuple[float, float] = (1.0, 0.0)
    _booster: Any = PrivateAttr(default=None)

    def booster(self) -> Any:
        """The trees, parsed once per head."""
        if self._booster is None:
            import lightgbm

            self._booster = lightgbm.Booster(model_str=self.trees)
        return self._booster

    def raw(self, features: np.ndarray, columns: Sequence[str] | None = None) -> np.ndarray:
        x = pick_columns(features, self.columns, columns)
        if not len(x):
            return np.zeros(0)
        return np.asarray(self.booster().predict(x, num_threads=1), dtype=np.float64)

    def score(self, features: np.ndarray, columns: Sequence[str] | None = None) -> np.ndarray:
        a, b = self.platt
        return a * self.raw(features, columns) + b


def fit_trees(
    features: np.ndarray,
    labels: np.ndarray | Sequence[int],
    groups: Sequence[int],
    columns: Sequence[str],
    rounds: int = TREE_ROUNDS,
) -> TreeHead:
    """LambdaRank trees over ``groups`` (row counts, in order), then Platt-scaled on the same rows."""
    import lightgbm
    from sklearn.linear_model import LogisticRegression

    y = np.asarray(labels)
    if len(set(y.tolist())) < 2:
        raise InputError("ranker training needs both gold and non-gold candidates")
    if sum(groups) != len(y):
        raise ValueError(f"groups cover {sum(groups)} rows, not {len(y)}")
    data = lightgbm.Dataset(features, label=y, group=list(groups), feature_name=list(columns))
    booster = lightgbm.train(TREE_PARAMS, data, num_boost_round=rounds)
    head = TreeHead(columns=list(columns), trees=booster.model_to_string())
    raw = head.raw(features).reshape(-1, 1)
    platt = LogisticRegression(C=1.0, max_iter=1000).fit(raw, y)
    return head.model_copy(update={"platt": (float(platt.coef_[0][0]), float(platt.intercept_[0]))})
