"""Synthetic task generation: strict quote matching, deterministic verification, the LLM-free
offline generator and the quality report of a run."""

from sleuth.datagen.evidence import (
    FailReason,
    QuoteEvidence,
    VerifyResult,
    answer_in_text,
    verify_extraction,
)
from sleuth.datagen.offline.config import OFFLINE_GENERATOR, OfflineConfig
from sleuth.datagen.offline.generator import generate_chains, generate_offline
from sleuth.datagen.quality import QualityReport, render_markdown
from sleuth.datagen.quotes import normalize, quote_in_source

__all__ = [
    "OFFLINE_GENERATOR",
    "FailReason",
    "OfflineConfig",
    "QualityReport",
    "QuoteEvidence",
    "VerifyResult",
    "answer_in_text",
    "generate_chains",
    "generate_offline",
    "normalize",
    "quote_in_source",
    "render_markdown",
    "verify_extraction",
]
