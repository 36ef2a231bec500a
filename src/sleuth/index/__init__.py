"""Chunk storage and search primitives (Chroma + bm25s)."""

from sleuth.index.store import Index

__all__ = ["Index"]
