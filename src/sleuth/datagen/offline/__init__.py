"""The LLM-free task generator: bridge, comparison and 3-4-hop chain tasks from a corpus's link
structure, each verified against its quotes (:mod:`sleuth.datagen.evidence`)."""

from sleuth.datagen.offline.config import OFFLINE_GENERATOR, OfflineConfig
from sleuth.datagen.offline.generator import generate_chains, generate_offline

__all__ = ["OFFLINE_GENERATOR", "OfflineConfig", "generate_chains", "generate_offline"]
