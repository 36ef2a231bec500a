"""``python -m sleuth.cli``."""

from sleuth.cli import app

app()
