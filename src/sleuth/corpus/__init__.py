"""Documents, readers and chunking."""

from sleuth.corpus.models import Chunk, Document, chunk_id, doc_id_of

__all__ = ["Chunk", "Document", "chunk_id", "doc_id_of"]
