"""Training checkpoints that survive a crash at any moment, and resuming from the last one.

Layout under ``<out_dir>/checkpoints``::

    step_000004/
        model/            adapter (LoRA) or whole model, plus tokenizer (``save_student``) and,
                          from RL, its manifest (``sleuth_policy.json``)
        optimizer.pt      optimiser state
        rng.pt            python, numpy and torch RNG states
        state.json        completed steps, the run's config, anything the loop adds
    LATEST                name of the newest complete checkpoint, written last

A checkpoint is built in a temporary folder and renamed into place, then ``LATEST`` is replaced
atomically, so a crash leaves either the old checkpoint or the new one, never half of one.
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sleuth.errors import InputError
from sleuth.io import atomic_write_text, read_json
from sleuth.policies.manifest import PolicyManifest, write_manifest
from sleuth.train.model import save_student

LATEST = "LATEST"


@dataclass(frozen=True)
class Checkpoint:
    """A complete checkpoint on disk."""

    folder: Path
    step: int
    """Training steps completed when it was written."""
    state: dict[str, Any]

    @property
    def model_dir(self) -> Path:
        return self.folder / "model"


def rng_state() -> dict[str, Any]:
    state = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(
    root: str | Path,
    step: int,
    model: Any,
    tokenizer: Any,
    optimizer: torch.optim.Optimizer,
    state: dict[str, Any],
    keep_last: int = 2,
    manifest: PolicyManifest | None = None,
) -> Checkpoint:
    """Write checkpoint ``step`` atomically and drop all but the newest ``keep_last``;
    ``manifest`` goes beside the model, so the checkpoint runs as ``--adapter`` as it trained."""
    root = Path(root)
    name = f"step_{step:06d}"
    tmp = root / f".{name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    save_student(model, tokenizer, tmp / "model")
    if manifest is not None:
        write_manifest(tmp / "model", manifest)
    torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    torch.save(rng_state(), tmp / "rng.pt")
    full_state = {**state, "step": step}
    (tmp / "state.json").write_text(json.dumps(full_state, indent=2, default=str), "utf-8")
    final = root / name
    shutil.rmtree(final, ignore_errors=True)  # a leftover from a crash after the rename
    tmp.rename(final)
    atomic_write_text(root / LATEST, name + "\n")
    _prune(root, keep_last)
    return Checkpoint(final, step, full_state)


def latest_checkpoint(root: str | Path) -> Checkpoint | None:
    """The checkpoint ``LATEST`` names, or None when there is none yet."""
    root = Path(root)
    pointer = root / LATEST
    if not pointer.exists():
        return None
    folder = root / pointer.read_text("utf-8").strip()
    state = read_json(folder / "state.json", fix=f"repair or delete {pointer} to start over")
    if not isinstance(state, dict) or not isinstance(state.get("step"), int):
        raise InputError(f"no training step in it; repair or delete {pointer}", source=str(folder))
    return Checkpoint(folder, state["step"], state)


def restore_training_state(checkpoint: Checkpoint, optimizer: torch.optim.Optimizer) -> None:
    """Load the optimiser state and the RNG states (the weights are loaded with the model)."""
    device = next(iter(optimizer.param_groups[0]["params"])).device
    optimizer.load_state_dict(
        torch.load(checkpoint.folder / "optimizer.pt", map_location=device, weights_only=False)
    )
    set_rng_state(torch.load(checkpoint.folder / "rng.pt", weights_only=False))


def _prune(root: Path, keep_last: int) -> None:
    folders = sorted(p for p in root.glob("step_*") if p.is_dir())
    for old in folders[: max(len(folders) - keep_last, 0)]:
        shutil.rmtree(old, ignore_errors=True)
