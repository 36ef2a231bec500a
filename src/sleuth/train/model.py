"""The student model: load it (folder or GGUF), wrap it in LoRA, save it, build its optimiser.

SFT and RL share this, so a model saved by one loads in the other and in ``LocalHFPolicy.load``:
a LoRA run saves only the adapter (load it over the same base path), a full run saves the whole
model with its tokenizer.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from sleuth.errors import ConfigError

TRAIN_EXTRA = 'pip install "sleuth[train]"'
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class StudentConfig:
    """The model being trained and how it is adapted."""

    path: str = ""
    """A Hugging Face model folder or a ``.gguf`` file (dequantised on load), read offline."""
    adapter: str | None = None
    """A LoRA adapter folder to continue training (e.g. the SFT output); None starts fresh."""
    lora: bool = True
    """Train a LoRA adapter (report §4.2) instead of every weight."""
    lora_r: int = 32
    """LoRA rank (Harness-1 uses 32; the report does not say)."""
    lora_alpha: int = 32
    """LoRA scale numerator; the update is scaled by alpha / r."""
    lora_dropout: float = 0.0
    """Dropout on the LoRA input; 0 keeps sampling and training numerically identical."""
    lora_target_modules: str | tuple[str, ...] = "all-linear"
    """Modules that get adapters; peft's ``all-linear`` covers attention and MLP."""
    device: str = "cpu"
    """``cpu``, ``cuda`` or ``cuda:N``."""
    dtype: str = "float32"
    """Weights dtype: ``float32`` on CPU, ``bfloat16`` on GPU."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass: less memory for long sequences, ~30% slower."""

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ConfigError(f"dtype {self.dtype!r} unknown; use one of {sorted(DTYPES)}")
        if self.adapter is not None and not self.lora:
            raise ConfigError("adapter is a LoRA adapter; set lora=True or merge it into the model")
        if self.lora_r < 1:
            raise ConfigError(f"lora_r ({self.lora_r}) must be at least 1")


def _require_train_deps() -> None:
    try:
        import peft  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"training needs transformers and peft: {TRAIN_EXTRA}") from exc


def _from_pretrained_args(path: Path) -> tuple[Path, dict[str, Any]]:
    """Folder and keyword arguments for ``from_pretrained``: offline, GGUF files by name."""
    kwargs: dict[str, Any] = {"local_files_only": True}
    if path.suffix == ".gguf":
        return path.parent, kwargs | {"gguf_file": path.name}
    return path, kwargs


def load_tokenizer(config: StudentConfig) -> Any:
    """The student's tokenizer alone (to count and render before the model is needed)."""
    _require_train_deps()
    from transformers import AutoTokenizer

    folder, kwargs = _from_pretrained_args(Path(config.path))
    return AutoTokenizer.from_pretrained(folder, **kwargs)


def load_student(config: StudentConfig, resume_from: str | Path | None = None) -> tuple[Any, Any]:
    """The trainable model and its tokenizer.

    Args:
        config: where the base model is and how to adapt it.
        resume_from: a folder written by :func:`save_student` (a checkpoint); its weights replace
            ``config.adapter`` (LoRA) or ``config.path`` (full fine-tuning).
    """
    _require_train_deps()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    full_from = Path(resume_from) if resume_from is not None and not config.lora else None
    folder, kwargs = _from_pretrained_args(full_from or Path(config.path))
    tokenizer = AutoTokenizer.from_pretrained(folder, **kwargs)
    model: Any = AutoModelForCausalLM.from_pretrained(folder, dtype=DTYPES[config.dtype], **kwargs)
    model.to(config.device)
    if config.gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.config.use_cache = False
    if config.lora:
        model = _with_lora(model, config, resume_from)
    model.train()
    return model, tokenizer


def _with_lora(model: Any, config: StudentConfig, resume_from: str | Path | None) -> Any:
    from peft import LoraConfig, PeftModel, get_peft_model

    adapter = resume_from if resume_from is not None else config.adapter
    if adapter is not None:
        return PeftModel.from_pretrained(model, str(adapter), is_trainable=True)
    targets = config.lora_target_modules
    lora = LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=targets if isinstance(targets, str) else list(targets),
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, lora)


def save_student(model: Any, tokenizer: Any, folder: str | Path) -> Path:
    """Save the adapter (LoRA) or the whole model, with the tokenizer, into ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def trainable_parameters(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def build_optimizer(
    model: torch.nn.Module, lr: float, weight_decay: float = 0.0
) -> torch.optim.Optimizer:
    """AdamW over the trainable parameters only (the adapter, under LoRA)."""
    params = trainable_parameters(model)
    if not params:
        raise ValueError("the model has no trainable parameters")
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)


def clip_and_step(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, max_norm: float | None
) -> float:
    """Clip the gradient norm (when ``max_norm``), step, zero; return the pre-clip norm."""
    params = trainable_parameters(model)
    limit = max_norm if max_norm is not None else float("inf")
    norm = float(torch.nn.utils.clip_grad_norm_(params, limit))
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return norm
