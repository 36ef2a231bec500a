"""What attaching an existing Chroma collection costs, next to re-ingesting the same documents.

A collection is made by plain chromadb code (SentenceTransformerEmbeddingFunction over the
shipped MiniLM) from the packaged 2WikiMultihopQA paragraphs; then, in one run, side by side:
``sleuth index attach`` (no embedding: the collection's vectors are used), ``sleuth ingest`` of
the same documents into a new index (embeds everything again), ``sync`` with nothing changed and
after 1% of the records changed (a full lexical rebuild), and opening the attached index (it
copies the Chroma folder: Chroma writes to the folder it opens) plus one search.

    python benchmarks/attach_cost.py --docs 500
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from importlib import resources
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

PACKAGED_2WIKI = "data/benchmarks/2wikimultihopqa/2wikimultihopqa_dev_200.jsonl"


def _timed(what: str, fn, rows: list[tuple[str, float]]):
    start = time.perf_counter()
    out = fn()
    rows.append((what, time.perf_counter() - start))
    return out


def main() -> None:
    import chromadb
    from chromadb.utils.embedding_functions import SentenceTransformerEmbeddingFunction

    import sleuth
    from sleuth.embed import minilm_path
    from sleuth.tasks import read_2wiki

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=500)
    args = parser.parse_args()
    docs = read_2wiki(str(resources.files("sleuth").joinpath(PACKAGED_2WIKI)))[0][: args.docs]
    rows: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        client = chromadb.PersistentClient(path=str(work / "user"))
        ef = SentenceTransformerEmbeddingFunction(model_name=minilm_path())
        col = client.create_collection("wiki", embedding_function=ef)
        _timed(
            "user's own chromadb add (embeds; already paid)",
            lambda: col.add(
                ids=[d.id for d in docs],
                documents=[d.text for d in docs],
                metadatas=[{"title": d.title or ""} for d in docs],
            ),
            rows,
        )
        user = work / "user"
        _timed(
            "sleuth index attach",
            lambda: sleuth.Index.attach(work / "ix", "wiki", chroma_path=user),
            rows,
        )
        fresh = sleuth.Index.create(work / "ingested", embedder="minilm")
        _timed("sleuth ingest of the same documents", lambda: fresh.ingest(docs), rows)
        index = _timed("open the attached index", lambda: sleuth.Index.open(work / "ix"), rows)
        _timed("one search (k=10)", lambda: index.search("Who directed the film?", k=10), rows)
        _timed("sync, nothing changed", index.sync, rows)
        changed = [d.id for d in docs[: max(1, len(docs) // 100)]]
        col.update(ids=changed, documents=[f"Rewritten paragraph {i}." for i in changed])
        result = _timed("sync after 1% changed", index.sync, rows)
        assert result.changed == len(changed), result
    print(f"{len(docs)} documents; seconds, measured in one run:")
    for what, seconds in rows:
        print(f"  {what:<48} {seconds:8.2f}")


if __name__ == "__main__":
    main()
