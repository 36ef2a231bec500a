"""Which learned ranker a search uses: an explicit file, the shipped one, or the one that
``sleuth adapt`` stored inside the index (``DIR/ranker.json``, a :class:`RankerModel` file whose
``trained_on["adapted"]`` says what it was trained on).

The adapted ranker lives in the index folder so that every way of searching that index (``sleuth
run``/``eval``, ``sleuth serve``, ``sleuth.Agent``, ``sleuth.search``) picks it up with no flag.
"""

from __future__ import annotations

from pathlib import Path

from sleuth.ranking.model import RankerModel, load_ranker

ADAPTED_RANKER = "ranker.json"
"""The adapted ranker's file name inside an index folder."""
SHIPPED = "shipped"
"""The ranker choice that forces the shipped ranker even where the index has an adapted one."""


def adapted_path(index_path: str | Path) -> Path:
    """Where ``sleuth adapt`` stores the index's ranker."""
    return Path(index_path) / ADAPTED_RANKER


def index_ranker(index_path: str | Path | None) -> RankerModel | None:
    """The index's adapted ranker, None when it has none (or ``index_path`` is None).

    Raises:
        InputError: the file is there but is not a ranker of this version.
    """
    if index_path is None:
        return None
    path = adapted_path(index_path)
    return load_ranker(path) if path.is_file() else None


def resolve_ranker(choice: str | Path | None, index_path: str | Path | None) -> RankerModel:
    """The ranker for a search of the index at ``index_path``: ``choice`` when it names a file,
    the shipped one for ``"shipped"``, else the index's adapted one, else the shipped one."""
    if choice is not None and str(choice) != SHIPPED:
        return load_ranker(choice)
    adapted = None if choice is not None else index_ranker(index_path)
    return adapted or load_ranker(None)
