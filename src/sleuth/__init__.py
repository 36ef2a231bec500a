"""sleuth: an offline-capable self-editing agentic search subagent."""

__version__ = "0.1.0"
