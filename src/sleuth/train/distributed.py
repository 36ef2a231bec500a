"""Data-parallel training seam: Hugging Face accelerate, launched by ``accelerate launch`` or
``torchrun`` (DDP; FSDP through an accelerate config file).

Every process runs the whole RL loop on its own queries (its rank offsets the seeds); the
wrapped model all-reduces gradients in ``backward``, so every rank takes the same optimiser step;
only the main process writes logs and checkpoints. Off by default; accelerate is an optional
dependency (``pip install "sleuth[train]"``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

ACCELERATE_INSTALL = 'pip install "sleuth[train]"  (or: pip install accelerate)'


@dataclass
class DataParallel:
    """This process's place in the data-parallel group (a single process when off)."""

    rank: int = 0
    world_size: int = 1
    accelerator: Any = None

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def backward(self, loss: torch.Tensor) -> None:
        if self.accelerator is None:
            loss.backward()  # type: ignore[no-untyped-call]  # torch leaves it unannotated
        else:
            self.accelerator.backward(loss)

    def unwrap(self, model: Any) -> Any:
        """The bare model (for sampling and saving) under any DDP/FSDP wrapper."""
        return model if self.accelerator is None else self.accelerator.unwrap_model(model)


def setup_data_parallel(
    model: Any, optimizer: torch.optim.Optimizer, enabled: bool
) -> tuple[Any, torch.optim.Optimizer, DataParallel]:
    """Wrap model and optimiser for data parallelism when ``enabled``; no-op otherwise."""
    if not enabled:
        return model, optimizer, DataParallel()
    try:
        from accelerate import Accelerator
    except ImportError as exc:
        raise ImportError(f"data-parallel training needs accelerate: {ACCELERATE_INSTALL}") from exc
    accelerator = Accelerator()
    model, optimizer = accelerator.prepare(model, optimizer)
    return (
        model,
        optimizer,
        DataParallel(accelerator.process_index, accelerator.num_processes, accelerator),
    )
