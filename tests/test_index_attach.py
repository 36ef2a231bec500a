"""Bring your own Chroma collection: ``sleuth index attach`` / ``sync`` over a
collection made by plain chromadb code, in a folder and on a real ``chroma run`` server.

The collections embed with chromadb's own SentenceTransformerEmbeddingFunction over the shipped
MiniLM folder (never a download), which Chroma persists in the collection's configuration.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sleuth.api import Index
from sleuth.cli import app
from sleuth.embed import minilm_path
from sleuth.errors import InputError
from sleuth.index import attach as attaching
from sleuth.tools.rrf import rrf
from sleuth.tools.toolbox import ToolConfig
from tests.conftest import wiki_documents

QUERIES = [
    "Who directed the film?",
    "born in a village in England",
    "American football player",
    "capital city river",
]


def _ef():
    from chromadb.utils.embedding_functions import SentenceTransformerEmbeddingFunction

    return SentenceTransformerEmbeddingFunction(model_name=minilm_path())


def _records(n: int = 60):
    docs = wiki_documents()[:n]
    return (
        [d.id for d in docs],
        [d.text for d in docs],
        [{"title": d.title or "", "bucket": i % 3} for i, d in enumerate(docs)],
    )


def _user_collection(client):
    """What a user's own code does: a collection with an embedding function, documents added."""
    col = client.create_collection("my_notes", embedding_function=_ef())
    ids, texts, metas = _records()
    col.add(ids=ids, documents=texts, metadatas=metas)
    return col


def _folder_collection(path: Path):
    import chromadb

    return _user_collection(chromadb.PersistentClient(path=str(path)))


def _checksums(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def user_folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("user") / "chroma"
    col = _folder_collection(path)
    return path, col


@pytest.fixture(scope="module")
def attached(user_folder, tmp_path_factory):
    path, _ = user_folder
    before = _checksums(path)
    index = Index.attach(tmp_path_factory.mktemp("ix") / "ix", "my_notes", chroma_path=path)
    return index, before


def _by_hand(index: Index, user_col, query: str) -> list[str]:
    """The user's collection searched directly (its own query path and embedding function),
    fused by RRF with sleuth's lexical side: the top 10 chunk ids."""
    cfg = ToolConfig()
    dense = user_col.query(query_texts=[query], n_results=cfg.dense_k)["ids"][0]
    lexical = [cid for cid, _ in index.lexical_search(query, cfg.bm25_k)]
    fused = rrf([lexical, [f"{rid}_0" for rid in dense]], k=cfg.rrf_k)
    return [cid for cid, _ in fused[:10]]


def test_attach_returns_dense_plus_lexical_top10(attached, user_folder):
    index, _ = attached
    _, user_col = user_folder
    assert index.manifest.source is not None and index.manifest.source.space == "cosine"
    assert index.embedder.spec == "collection:sentence_transformer"
    assert len(index) == 60 and index.manifest.documents == 60
    for query in QUERIES:
        got = [c.id for c in index.search(query, k=10).chunks]
        assert got == _by_hand(index, user_col, query), query
        assert all(c.endswith("_0") for c in got)


def test_attached_tools_read_grep_describe_and_where(attached):
    index, _ = attached
    first = next(iter(index.documents))
    read = index.read(first)
    assert [c.id for c in read.chunks] == [f"{first}_0"] and read.error is None
    word = index.chunk(f"{first}_0").text.split()[0]
    assert f"{first}_0" in {c.id for c in index.grep(f"\\b{word}\\b", k=100).chunks}
    fields = index.describe()["fields"]
    assert fields["bucket"] == {"type": "int", "documents": 60, "min": 0, "max": 2}
    hits = index.search("film director", k=10, where={"bucket": 1})
    assert hits.chunks and hits.error is None
    ids = {c.doc_id for c in hits.chunks}
    assert all(index.lexical.doc_meta[d]["bucket"] == 1 for d in ids)
    import sleuth

    run = sleuth.search("Who directed the film?", index=index)  # the whole default agent
    assert run.documents and {d.id for d in run.documents} <= set(index.documents)


def test_attach_and_search_write_nothing_to_the_users_folder(attached, user_folder):
    index, before = attached
    path, _ = user_folder
    index.search("film", k=5)
    index.sync()
    Index.open(index.path).search("river", k=5)
    assert _checksums(path) == before


def test_sync_picks_up_an_add_a_change_and_a_delete(tmp_path):
    user = tmp_path / "user"
    col = _folder_collection(user)
    index = Index.attach(tmp_path / "ix", "my_notes", chroma_path=user)
    ids = list(index.documents)
    col.add(ids=["brand-new"], documents=["A zyzzyva beetle lives in the marsh."])
    col.update(ids=[ids[0]], documents=["Completely rewritten: the quokka smiles."])
    col.delete(ids=[ids[1]])
    result = index.sync()
    assert (result.records, result.added, result.changed, result.deleted) == (60, 1, 1, 1)
    assert [c.id for c in index.grep("zyzzyva").chunks] == ["brand-new_0"]
    assert [c.id for c in index.grep("quokka").chunks] == [f"{ids[0]}_0"]
    assert index.read(ids[1]).error is not None
    assert index.search("zyzzyva beetle marsh", k=1).chunks[0].id == "brand-new_0"
    again = Index.open(index.path).sync()
    assert (again.added, again.changed, again.deleted) == (0, 0, 0)


def test_cli_attach_then_sync(tmp_path):
    user = tmp_path / "user"
    col = _folder_collection(user)
    out = tmp_path / "ix"
    argv = ["index", "attach", "--chroma-path", str(user), "--collection", "my_notes"]
    result = CliRunner().invoke(app, [*argv, "--index", str(out)])
    assert result.exit_code == 0, result.stderr
    assert "attached 60 records" in result.stderr
    col.delete(ids=[col.get(limit=1)["ids"][0]])
    result = CliRunner().invoke(app, ["index", "sync", "--index", str(out), "--json"])
    assert result.exit_code == 0, result.stderr
    assert '"deleted":1' in result.stdout and '"records":59' in result.stdout


def test_an_attached_index_refuses_ingest(attached):
    index, _ = attached
    with pytest.raises(InputError, match="mirrors Chroma collection 'my_notes'"):
        Index.create(index.path)
    with pytest.raises(InputError, match="index sync"):
        index.ingest([{"id": "x", "text": "y"}])


def _one_line_error(argv: list[str]) -> str:
    result = CliRunner().invoke(app, argv)
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert result.exit_code == 2, (result.stdout, result.stderr, result.exception)
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--collection", "nope"], "no Chroma collection 'nope'"),
        (
            ["--collection", "my_notes", "--embedder", "hash:16"],
            "holds 384-dimensional vectors but embedder 'hash:16' makes 16",
        ),
        (["--collection", "my_notes", "--chroma-url", "http://x:1"], "give one of"),
    ],
)
def test_bad_attach_is_one_line_and_writes_nothing(user_folder, tmp_path, extra, message):
    path, _ = user_folder
    before = _checksums(path)
    out = tmp_path / "ix"
    argv = ["index", "attach", "--chroma-path", str(path), "--index", str(out), *extra]
    assert message in _one_line_error(argv)
    assert not out.exists()
    assert _checksums(path) == before


def test_a_folder_that_is_not_chroma_is_refused(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("hello")
    for folder in (plain, tmp_path / "missing"):
        argv = ["index", "attach", "--chroma-path", str(folder), "--collection", "c"]
        line = _one_line_error([*argv, "--index", str(tmp_path / "ix")])
        assert "not a Chroma folder" in line
    for url, message in [
        ("ftp://host", "give http://HOST:PORT"),
        (_dead_url(), "no Chroma server"),
    ]:
        argv = ["index", "attach", "--chroma-url", url, "--collection", "c"]
        assert message in _one_line_error([*argv, "--index", str(tmp_path / "ix")])
    assert not (tmp_path / "missing").exists() and not (tmp_path / "ix").exists()
    assert [p.name for p in plain.iterdir()] == ["notes.txt"]


def _dead_url() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_a_collection_that_changes_during_sync_is_refused(tmp_path, monkeypatch):
    user = tmp_path / "user"
    col = _folder_collection(user)
    index = Index.attach(tmp_path / "ix", "my_notes", chroma_path=user)
    before = _checksums(index.path)
    real = attaching.read_records

    def read_while_user_writes(collection):
        records = real(collection)
        col.add(ids=["late"], documents=["added while sleuth was reading"])
        return records

    monkeypatch.setattr(attaching, "read_records", read_while_user_writes)
    line = _one_line_error(["index", "sync", "--index", str(index.path)])
    assert "changed while it was read" in line and "rerun" in line
    assert _checksums(index.path) == before
    monkeypatch.setattr(attaching, "read_records", real)
    assert index.sync().added == 1


def _chroma_binary() -> str | None:
    exe = shutil.which("chroma") or str(Path(sys.executable).parent / "chroma")
    return exe if Path(exe).exists() else None


def test_attach_to_a_real_chroma_server(request, tmp_path, monkeypatch):
    if _chroma_binary() is None:
        pytest.skip("the `chroma` binary (installed with chromadb) is missing")
    import chromadb

    url = request.getfixturevalue("chroma_server")
    host, port = url.rsplit(":", 1)
    client = chromadb.HttpClient(host=host.removeprefix("http://"), port=int(port))
    col = _user_collection(client)
    index = Index.attach(tmp_path / "ix", "my_notes", chroma_url=url)
    count_before = col.count()
    for query in QUERIES[:2]:
        got = [c.id for c in index.search(query, k=10).chunks]
        assert got == _by_hand(index, col, query), query
    col.add(ids=["server-new"], documents=["The okapi is a giraffid of the Congo."])
    assert index.sync().added == 1
    assert [c.id for c in index.grep("okapi").chunks] == ["server-new_0"]
    assert col.count() == count_before + 1  # only the user's own add

    real = attaching.read_records

    def read_while_user_deletes(collection):
        records = real(collection)
        col.delete(ids=["server-new"])
        return records

    monkeypatch.setattr(attaching, "read_records", read_while_user_deletes)
    with pytest.raises(InputError, match="changed while it was read"):
        index.sync()
    client.delete_collection("my_notes")


def test_chromadbs_default_function_is_served_by_the_shipped_minilm(tmp_path):
    """A collection made without an embedding function persists chromadb's ``default`` (ONNX
    all-MiniLM-L6-v2, downloaded on use): sleuth embeds with its own offline copy of that model.
    A record without a document is skipped; an empty collection attaches and finds nothing."""
    import chromadb

    from sleuth.embed import make_embedder

    minilm = make_embedder("minilm")
    client = chromadb.PersistentClient(path=str(tmp_path / "user"))
    col = client.create_collection("plain")  # the user never named an embedding function
    ids, texts, metas = _records(30)
    col.add(ids=ids, documents=texts, metadatas=metas, embeddings=minilm.embed_documents(texts))
    col.add(ids=["vectors-only"], embeddings=minilm.embed_documents(["no text kept"]))
    client.create_collection("empty")
    index = Index.attach(tmp_path / "ix", "plain", chroma_path=tmp_path / "user")
    assert index.embedder.spec == "minilm" and len(index) == 30
    assert index.manifest.source is not None and index.manifest.source.space == "l2"
    last = index.manifest.source.last_sync
    assert last is not None and (last.records, last.skipped) == (30, 1)
    cfg = ToolConfig()
    for query in QUERIES[:2]:
        vec = minilm.embed_query(query).tolist()
        dense = col.query(query_embeddings=[vec], n_results=cfg.dense_k)["ids"][0]
        lexical = [cid for cid, _ in index.lexical_search(query, cfg.bm25_k)]
        fused = rrf([lexical, [f"{rid}_0" for rid in dense if rid in ids]], k=cfg.rrf_k)
        assert [c.id for c in index.search(query, k=10).chunks] == [c for c, _ in fused[:10]]
    empty = Index.attach(tmp_path / "ix-empty", "empty", chroma_path=tmp_path / "user")
    result = empty.search("anything", k=5)
    assert result.chunks == [] and result.error is None


def test_a_lost_lexical_side_asks_for_a_sync_which_restores_it(tmp_path, small_index):
    user = tmp_path / "user"
    _folder_collection(user)
    out = tmp_path / "ix"
    Index.attach(out, "my_notes", chroma_path=user)
    shutil.rmtree(out / "lexical")
    line = _one_line_error(["tools", "search", "film", "--index", str(out)])
    assert "run `sleuth index sync" in line
    result = CliRunner().invoke(app, ["index", "sync", "--index", str(out)])
    assert result.exit_code == 0, result.stderr
    said = " ".join(result.stderr.split())  # the console wraps long lines
    assert "synced 60 records" in said and "0 added, 0 changed, 0 deleted" in said
    result = CliRunner().invoke(app, ["tools", "search", "film", "--index", str(out), "--json"])
    assert result.exit_code == 0 and '"id"' in result.stdout
    assert "not an attached index" in _one_line_error(
        ["index", "sync", "--index", str(small_index)]
    )
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"id": "x", "text": "y"}\n')
    assert "mirrors Chroma collection" in _one_line_error(
        ["ingest", str(docs), "--index", str(out)]
    )


_POOL = [f"r{i}" for i in range(6)]
_OPS = st.lists(
    st.tuples(
        st.sampled_from(["upsert", "delete"]),
        st.sampled_from(_POOL),
        st.sampled_from(["alpha beta", "gamma delta", "epsilon", "alpha gamma zeta"]),
    ),
    max_size=8,
)


@settings(max_examples=12, deadline=None)
@given(ops=_OPS)
def test_sync_reports_and_mirrors_any_edit_sequence(ops):
    """After any adds, changes and deletes, a sync reports them against the previous state and the
    lexical side holds exactly the collection's records (the hash embedder: no model load)."""
    import tempfile

    import chromadb

    from sleuth.embed import HashEmbedder

    vec = HashEmbedder(8)
    with tempfile.TemporaryDirectory() as tmp:
        client = chromadb.PersistentClient(path=f"{tmp}/user")
        col = client.create_collection("edits", embedding_function=None)
        model = {rid: f"start {rid}" for rid in _POOL[:3]}
        col.add(
            ids=list(model),
            documents=list(model.values()),
            embeddings=vec.embed_documents(list(model.values())),
        )
        index = Index.attach(f"{tmp}/ix", "edits", chroma_path=f"{tmp}/user", embedder="hash:8")
        before = dict(model)
        for kind, rid, text in ops:
            if kind == "upsert":
                col.upsert(ids=[rid], documents=[text], embeddings=vec.embed_documents([text]))
                model[rid] = text
            else:
                col.delete(ids=[rid])
                model.pop(rid, None)
        result = index.sync()
        rows = {r.doc_id: r.text for r in index.lexical.rows}
        client.close()
    assert result.added == len(model.keys() - before.keys())
    assert result.deleted == len(before.keys() - model.keys())
    assert result.changed == sum(model[r] != before[r] for r in model.keys() & before.keys())
    assert rows == model
