"""The report's training constants, defined once and free of torch, so that the CLI can show them
as its defaults without loading torch (``sleuth --help`` stays fast)."""

CISPO_W_MIN = 0.0
"""SPEC §6: no lower bound on the CISPO importance weight (absolute)."""
CISPO_W_MAX = 5.0
"""SPEC §6, ScaleRL ε_max: absolute cap on the CISPO importance weight."""
