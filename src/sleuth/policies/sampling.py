"""How a model the library runs draws each reply: one settings type for every sampler.

The transformers policy (``local_hf``), the CTranslate2 engine (``ct2``) and the training rollout
engines (``train.rollout``: in-process or a vLLM server) all take a :class:`Sampling`, so a knob
has one name, one default and one check. The seed is not here: it is per run, not per sampler.
"""

from __future__ import annotations

from dataclasses import dataclass

from sleuth.errors import ConfigError


@dataclass(frozen=True)
class Sampling:
    """Temperature, nucleus mass and the reply cap of one sampler; checked when built.

    Raises:
        ConfigError: a negative temperature, or ``top_p`` outside (0, 1].
    """

    temperature: float = 1.0
    """0 decodes greedily. RL keeps 1.0: its behaviour log-probs must be the policy's own."""
    top_p: float = 1.0
    """Nucleus mass; 1.0 keeps the sampler equal to the policy being trained."""
    max_new_tokens: int | None = None
    """Cap on each reply, on top of the harness's own limit (None: the harness's alone)."""

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ConfigError(f"temperature ({self.temperature}) must be >= 0")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p ({self.top_p}) must be in (0, 1]")
