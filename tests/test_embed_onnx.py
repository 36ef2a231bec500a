"""The ONNX paths of the shipped MiniLM: a reproducible export from the installed
weights, vectors that agree with sentence-transformers', one vector space per index, and the
ingest progress log when no terminal watches."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys

import numpy as np
import pytest
from rich.console import Console

from sleuth.corpus.models import Document
from sleuth.embed import HashEmbedder, make_embedder, minilm_path, vector_space
from sleuth.embed.onnx import _read_checksums, cache_dir, ensure_onnx, export
from sleuth.errors import InputError
from sleuth.index import Index
from sleuth.progress import ProgressLog

QUERIES = ["Who directed the film?", "capital of France", "When was the bridge built?"]


def test_export_is_reproducible_from_the_installed_weights(tmp_path):
    """Two exports (here and the cache's, maybe made by another process) give the same bytes;
    the quantiser's notices are quieted for the export only, not for the user's warnings after."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.WARNING)
    try:
        sums = export(minilm_path(), tmp_path / "a")
        assert root.level == logging.WARNING
    finally:
        root.setLevel(level)
    assert set(sums) == {"fp32.onnx", "int8.onnx"}
    ensure_onnx(minilm_path(), "int8")
    assert _read_checksums(cache_dir(minilm_path())) == sums
    assert json.loads((tmp_path / "a" / "checksums.json").read_text()) == sums


def test_a_torn_cached_file_is_exported_again(tmp_path):
    folder = tmp_path / "cache"
    sums = export(minilm_path(), folder)
    (folder / "int8.onnx").write_bytes(b"torn")
    path = ensure_onnx(minilm_path(), "int8", folder)
    import hashlib

    assert hashlib.sha256(path.read_bytes()).hexdigest() == sums["int8.onnx"]


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.mark.parametrize("spec", ["minilm-onnx", "minilm-onnx-int8"])
def test_onnx_vectors_agree_with_sentence_transformers(spec, wiki_docs):
    texts = [f"{d.title}\n{d.text}" for d in wiki_docs[:48]]
    torch_path, onnx_path = make_embedder("minilm"), make_embedder(spec)
    docs = _cosines(torch_path.embed_documents(texts), onnx_path.embed_documents(texts))
    assert docs.min() >= 0.99, (spec, docs.min())
    odd = ["", "x" * 5000]  # no words; one token repeated past the 256-token cut (int8: 0.985)
    assert _cosines(torch_path.embed_documents(odd), onnx_path.embed_documents(odd)).min() > 0.98
    queries = np.stack([onnx_path.embed_query(q) for q in QUERIES])
    reference = np.stack([torch_path.embed_query(q) for q in QUERIES])
    assert _cosines(queries, reference).min() >= 0.99
    assert np.allclose(np.linalg.norm(queries, axis=1), 1.0, atol=1e-4)


def test_bf16_documents_share_the_fp32_space(wiki_docs, tmp_path):
    """``minilm-bf16`` embeds documents with the torch model in bfloat16 (vectors agree with
    fp32's) and queries with the int8 ONNX path, so a search never waits for torch."""
    texts = [f"{d.title}\n{d.text}" for d in wiki_docs[:48]]
    bf16, int8 = make_embedder("minilm-bf16"), make_embedder("minilm-onnx-int8")
    assert (bf16.spec, vector_space("minilm-bf16")) == ("minilm-bf16", vector_space("minilm"))
    fp32 = make_embedder("minilm").embed_documents(texts)
    docs = bf16.embed_documents(texts)
    assert _cosines(fp32, docs).min() >= 0.995
    assert not np.allclose(fp32, docs, atol=1e-6)  # bfloat16 really ran
    assert all(np.array_equal(bf16.embed_query(q), int8.embed_query(q)) for q in QUERIES)
    Index.create(tmp_path / "ix", embedder="minilm-bf16").ingest(DOCS)
    index = Index.open(tmp_path / "ix")
    query = index.embedder.embed_query("Which city is the capital of France?")
    assert index.dense_search(query, 1)[0][0] == "paris_0"


def test_batching_does_not_change_a_vector(wiki_docs):
    """Sorting by length and padding per batch: a text's vector is the same in any batch."""
    onnx = make_embedder("minilm-onnx")
    texts = [d.text for d in wiki_docs[:20]]
    alone = np.stack([onnx.embed_documents([t])[0] for t in texts])
    assert _cosines(alone, onnx.embed_documents(texts, batch_size=7)).min() > 0.9999


def test_one_text_gets_the_vector_of_a_batch_of_one(wiki_docs):
    """A query (one text, tokenised without the batch tokeniser's thread pool): bit for bit
    the vector of the batch path, also from threads at once (an agent's parallel searches)."""
    from concurrent.futures import ThreadPoolExecutor

    onnx = make_embedder("minilm-onnx-int8")
    texts = [*QUERIES, "", *(d.text for d in wiki_docs[:12])]
    pool = [onnx._run([onnx.tokenizer.encode_batch([t])[0].ids])[0] for t in texts]
    alone = [onnx.embed_documents([t])[0] for t in texts]
    assert all(np.array_equal(a, b) for a, b in zip(alone, pool, strict=True))
    with ThreadPoolExecutor(4) as threads:
        together = list(threads.map(lambda t: onnx.embed_documents([t])[0], texts * 3))
    assert all(np.array_equal(a, b) for a, b in zip(together, pool * 3, strict=True))


def test_batches_on_worker_threads_give_the_vectors_of_one_thread(wiki_docs):
    """Documents run batch by batch on the caller's threads (the session itself has one): the
    same vectors bit for bit as in turn, in input order, each batch's progress reported once."""
    from sleuth.embed.onnx import OnnxMiniLM

    texts = [d.text for d in wiki_docs[:40]] + QUERIES
    steps: dict[int, list[int]] = {1: [], 3: []}
    vectors = {
        t: OnnxMiniLM(minilm_path(), "int8", "t", threads=t).embed_documents(
            texts, progress=steps[t].append
        )
        for t in steps
    }
    assert np.array_equal(vectors[1], vectors[3])
    assert steps[1] == steps[3] and sum(steps[3]) == len(texts) and len(steps[3]) > 3


DOCS = [
    Document(id="paris", text="Paris is the capital of France.", title="Paris"),
    Document(id="tea", text="Green tea is made from Camellia sinensis leaves.", title="Tea"),
]


def test_minilm_paths_share_an_index(tmp_path):
    """Built with torch, extended and searched with ONNX int8: one vector space."""
    assert vector_space("minilm") == vector_space("minilm-onnx-int8") != vector_space("hash:384")
    Index.create(tmp_path / "ix", embedder="minilm").ingest(DOCS[:1])
    Index.create(tmp_path / "ix", embedder="minilm-onnx-int8").ingest(DOCS)
    index = Index.open(tmp_path / "ix", embedder=make_embedder("minilm-onnx-int8"))
    query = index.embedder.embed_query("Which city is the capital of France?")
    assert index.dense_search(query, 1)[0][0] == "paris_0"


def test_an_index_of_another_vector_space_is_refused_in_one_line(tmp_path):
    """hash:384 has MiniLM's dimension, so only the space tells them apart."""
    Index.create(tmp_path / "ix", embedder="hash:384").ingest(DOCS)
    with pytest.raises(InputError, match="built with embedder 'hash:384'") as err:
        Index.create(tmp_path / "ix", embedder="minilm-onnx-int8")
    assert "\n" not in str(err.value)
    opened = Index.open(tmp_path / "ix", embedder=make_embedder("minilm-onnx"))
    with pytest.raises(InputError, match="cannot search") as err:
        opened.embedder  # noqa: B018
    assert "\n" not in str(err.value)
    Index.open(tmp_path / "ix", embedder=HashEmbedder(384)).embedder  # noqa: B018 - same space


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_log_without_a_terminal():
    out, clock = io.StringIO(), Clock()
    console = Console(file=out, force_terminal=False, width=200)
    log = ProgressLog(console, "embedding chunks", "chunks", every=10, clock=clock)
    log.update(200, 1200)  # resumed work: not counted in the rate
    for done in range(250, 1201, 50):
        clock.now += 1
        log.update(done, 1200)
    log.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 3  # at 0 s, at 10 s, and the last at 20 s
    assert lines[1] == "embedding chunks: 700/1,200 (58%), 50.0 chunks/s, ETA 0m10s"
    assert lines[-1].startswith("embedding chunks: 1,200/1,200 (100%), 50.0 chunks/s")


def test_ingest_logs_progress_lines_when_piped(tmp_path):
    docs = tmp_path / "docs.jsonl"
    docs.write_text("\n".join(json.dumps(d.model_dump(include={"id", "text"})) for d in DOCS))
    run = subprocess.run(
        [sys.executable, "-m", "sleuth.cli", "ingest", str(docs), "-i", str(tmp_path / "ix")]
        + ["--embedder", "hash", "--progress-every", "0.1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert "embedding chunks: 2/2 (100%)" in run.stderr and "chunks/s, ETA" in run.stderr
