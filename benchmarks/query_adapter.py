"""A linear query adapter on the frozen MiniLM vectors (not shipped: measured, see RESULTS.md).

``fit``: learns ``W = I + A`` for query vectors only (documents keep their stored vectors, so no
re-embedding) on the training-side questions of the pooled corpus (the shipped ranker's
``question_ids``), with a softmax over every chunk (the gold documents' chunks positive),
temperature 0.05 and an L2 pull of ``A`` towards zero; prints dense-only document Recall@5/@2
on the held-out questions before and after, with a paired bootstrap interval, and saves ``A``.
``quality``: runs ``quality.py`` with every query vector passed through the adapter.

    python benchmarks/query_adapter.py fit --index OUT/index/pooled-minilm-onnx-int8 --lam 0.1 \
        --save A.npy
    python benchmarks/query_adapter.py quality --adapter A.npy -- --datasets pooled \
        --policies single-pass,heuristic --embedder minilm-onnx-int8 --out DIR
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

RANKER = Path(__file__).resolve().parents[1] / "src/sleuth/data/ranker/ranker.json"


def chunk_vectors(index_path: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Unit chunk vectors, each chunk's document number, and the document ids."""
    from sleuth.index import Index

    collection = Index.open(index_path).collection
    vectors, owners = [], []
    for offset in range(0, collection.count(), 5000):
        got = collection.get(include=["embeddings", "metadatas"], limit=5000, offset=offset)
        vectors.append(np.asarray(got["embeddings"], np.float32))
        owners += [m["doc_id"] for m in got["metadatas"]]
    v = np.concatenate(vectors)
    doc_ids = sorted(set(owners))
    number = {d: i for i, d in enumerate(doc_ids)}
    return (
        v / np.linalg.norm(v, axis=1, keepdims=True),
        np.array([number[d] for d in owners]),
        doc_ids,
    )


def adapt(q: np.ndarray, a: np.ndarray) -> np.ndarray:
    q = q + q @ a
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def recall(q, golds, v, owner, k):
    """Per question: share of its gold documents among the top ``k`` (a document scores its
    best chunk)."""
    order = np.argsort(owner, kind="stable")
    starts = np.concatenate([[0], np.flatnonzero(np.diff(owner[order])) + 1])
    best = np.maximum.reduceat((q @ v.T)[:, order], starts, axis=1)
    top = np.argsort(-best, axis=1)[:, :k]
    return np.array(
        [len(g & set(row.tolist())) / max(1, len(g)) for g, row in zip(golds, top, strict=True)]
    )


def fit(q, golds, v, owner, lam, steps=300, tau=0.05):
    import torch

    qt, vt, own = torch.tensor(q), torch.tensor(v), torch.tensor(owner)
    pos = torch.stack([torch.isin(own, torch.tensor(sorted(g))) for g in golds])
    a = torch.zeros(v.shape[1], v.shape[1], requires_grad=True)
    opt = torch.optim.Adam([a], lr=1e-2)
    for _ in range(steps):
        x = qt + qt @ a
        logits = (x / x.norm(dim=1, keepdim=True)) @ vt.T / tau
        kept = torch.logsumexp(logits.masked_fill(~pos, -1e9), 1) - torch.logsumexp(logits, 1)
        loss = -kept.mean() + lam * (a**2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return a.detach().numpy()


def run_fit(args: argparse.Namespace) -> None:
    from _datasets import load_corpus
    from sleuth.embed import make_embedder
    from sleuth.eval.aggregate import paired_bootstrap_difference

    v, owner, doc_ids = chunk_vectors(args.index)
    number = {d: i for i, d in enumerate(doc_ids)}
    trained = set(json.loads(RANKER.read_text())["question_ids"])
    embedder = make_embedder("minilm-onnx-int8")
    sides: dict[str, dict[str, tuple[np.ndarray, list[set[int]]]]] = {}
    for ds, tasks in load_corpus("pooled").tasks.items():
        for side in ("train", "held-out"):
            ts = [t for t in tasks if (t.id in trained) == (side == "train")]
            q = np.stack([embedder.embed_query(t.query) for t in ts]).astype(np.float32)
            gold = [{number[g] for g in t.gold_doc_ids if g in number} for t in ts]
            sides.setdefault(ds, {})[side] = (q, gold)
    q_train = np.concatenate([s["train"][0] for s in sides.values()])
    g_train = [g for s in sides.values() for g in s["train"][1]]
    if args.tasks:  # generated tasks over the same corpus, beside (or instead of) the questions
        from sleuth.tasks.schema import load_tasks

        extra = [t for t in load_tasks(args.tasks) if t.gold_doc_ids]
        q_extra = embedder.embed_documents([t.query for t in extra])
        g_extra = [{number[g] for g in t.gold_doc_ids if g in number} for t in extra]
        keep = args.questions
        q_train = np.concatenate([q_train, q_extra]) if keep else q_extra
        g_train = (g_train if keep else []) + g_extra
    print(f"fitted on {len(g_train)} tasks")
    for lam in args.lam:
        started = time.perf_counter()
        a = fit(q_train, g_train, v, owner, lam)
        print(f"lambda {lam}: |A| {np.linalg.norm(a):.2f}, {time.perf_counter() - started:.0f} s")
        for ds, s in sides.items():
            q, gold = s["held-out"]
            before, after = (recall(x, gold, v, owner, 5) for x in (q, adapt(q, a)))
            r2 = [100 * recall(x, gold, v, owner, 2).mean() for x in (q, adapt(q, a))]
            gain, (lo, hi) = paired_bootstrap_difference(after, before)
            print(
                f"  {ds} ({len(gold)} held out): dense R@5 {100 * before.mean():.1f} -> "
                f"{100 * after.mean():.1f} ({100 * gain:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]), "
                f"R@2 {r2[0]:.1f} -> {r2[1]:.1f}"
            )
        if args.save:
            np.save(args.save, a)


def run_quality(args: argparse.Namespace) -> int:
    """``quality.py`` with the adapter applied wherever a query is embedded."""
    from sleuth.embed import onnx as onnx_embed

    a = np.load(args.adapter).astype(np.float32)
    plain = onnx_embed.OnnxMiniLM.embed_query

    def embed_query(self: onnx_embed.OnnxMiniLM, text: str) -> np.ndarray:
        return adapt(plain(self, text), a).astype(np.float32)

    onnx_embed.OnnxMiniLM.embed_query = embed_query  # type: ignore[method-assign]
    import quality

    return quality.main(args.rest)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fit")
    f.add_argument("--index", required=True, help="the pooled index quality.py built")
    f.add_argument("--lam", type=float, nargs="+", default=[0.1])
    f.add_argument("--save", type=Path)
    f.add_argument("--tasks", type=Path, help="generated tasks (sleuth datagen offline) to fit on")
    f.add_argument(
        "--no-questions", dest="questions", action="store_false", help="with --tasks: only those"
    )
    q = sub.add_parser("quality")
    q.add_argument("--adapter", type=Path, required=True)
    q.add_argument("rest", nargs=argparse.REMAINDER, help="quality.py's arguments, after --")
    args = ap.parse_args()
    if args.command == "fit":
        run_fit(args)
        return 0
    args.rest = [a for a in args.rest if a != "--"]
    return run_quality(args)


if __name__ == "__main__":
    raise SystemExit(main())
