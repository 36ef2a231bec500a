"""Settings and provenance of the offline generator: ``OfflineConfig``, its name and templates."""

from __future__ import annotations

from dataclasses import dataclass

from sleuth.errors import ConfigError

OFFLINE_GENERATOR = "offline-link-v1"
DOMAIN = "wiki"
TEMPLATES = ("single", "bridge", "comparison")


@dataclass(frozen=True)
class OfflineConfig:
    """Knobs of the offline generator; the defaults suit a pooled Wikipedia-paragraph corpus."""

    mix: tuple[float, float, float] = (0.4, 0.4, 0.2)
    """Target shares of ``single``, ``bridge`` and ``comparison`` tasks; a template that runs
    out of candidates leaves its share to the others."""
    distractors: int = 5
    """Distractors kept per task."""
    min_distractors: int = 3
    """A task with fewer clean distractors is dropped."""
    distractor_depth: int = 30
    """BM25 hits of the clues examined when mining distractors."""
    min_clue_words: int = 5
    """Searchable words (see :func:`~sleuth.datagen.offline.masking.content_words`) a clue must keep
    after masking; fewer in a small corpus (see
    :func:`~sleuth.datagen.offline.corpus.min_clue_words`)."""
    min_rare_words: int = 2
    """Of those, how many must be rare in the corpus, so the clue singles out one entity
    ("was an American actor" does not)."""
    rare_df: float = 0.01
    """A word is rare when at most this share of documents contain it; a small corpus allows
    more (see :func:`~sleuth.datagen.offline.corpus.rare_limit`)."""
    window_words: int = 4
    """Words kept on each side of the mention in a bridge's second clue."""
    min_window_words: int = 2
    """Searchable words the second clue of a bridge must keep after masking."""
    max_clue_chars: int = 400
    """Longer sentences make clues that read as documents, not clues."""
    min_name_chars: int = 4
    """Shorter titles ("Up", "It") are ordinary words, not links."""
    max_name_df: int = 10
    """A name found (case-insensitively) in more documents than this is too common to link."""
    facts: bool = True
    """When the link templates (which need titled, Wikipedia-like documents) make fewer than
    ``n`` tasks, fill the rest with one-hop ``fact`` tasks (:mod:`~sleuth.datagen.offline.facts`),
    which any corpus can give: e-mails, notes, short templated records."""

    def __post_init__(self) -> None:
        if len(self.mix) != 3 or any(m < 0 for m in self.mix) or sum(self.mix) <= 0:
            raise ConfigError(f"mix {self.mix} needs three non-negative shares, e.g. (4, 4, 2)")
        if self.min_distractors > self.distractors:
            raise ConfigError(
                f"min_distractors ({self.min_distractors}) exceeds distractors "
                f"({self.distractors}); lower min_distractors"
            )
