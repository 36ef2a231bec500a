"""The LLM-free task generator: bridge and comparison tasks from a corpus's link structure, each
verified against its quotes (:mod:`sleuth.datagen.evidence`)."""

from sleuth.datagen.offline.config import OFFLINE_GENERATOR, OfflineConfig
from sleuth.datagen.offline.generator import generate_offline

__all__ = ["OFFLINE_GENERATOR", "OfflineConfig", "generate_offline"]
