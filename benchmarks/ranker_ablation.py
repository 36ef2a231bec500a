"""Which learner and which feature groups the selector needs: an ablation on the dev benchmarks.

Training data (cached in OUT): the agent's runs on the training-side questions (all, ``--train-limit``
each, or ``--train-ids``' ones; :mod:`sleuth.tasks.split`) of the QA samples in ``--rows``
(``pooled/X``: on the pooled corpus; ``X``: on its own), collected as ``sleuth train ranker`` does;
``--generated`` adds the tasks generated over their training-side paragraphs (``chain_tasks.py``).
The default agent (shipped ranker) runs once per dev question (held-out side; Enron/patents: the dev
split, never test) and every variant reorders the documents that run saw: paired deltas of the
selection head alone. Variants: linear and gbdt heads on all feature groups and without each group
(``FEATURE_GROUPS``). ``--end-to-end gbdt`` also runs the whole agent with that model (its selector
then picks the hops too), paired with the shipped agent; ``--ship L`` writes learner L's model.
Commands: docs/RESULTS.md ("Bridge names")."""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from sleuth.eval.aggregate import bootstrap_interval, paired_bootstrap_difference
from sleuth.harness.loop import Harness
from sleuth.policies.heuristic import trail
from sleuth.policies.spec import PolicyOptions, build_policy
from sleuth.policies.transcript import observations
from sleuth.ranking.features import FEATURE_GROUPS, SEARCH_COLUMNS, SELECTION_COLUMNS
from sleuth.ranking.model import LEARNERS, RankerModel, fit_head, load_ranker
from sleuth.ranking.selector import document_title, seen_features
from sleuth.tasks import Task
from sleuth.tasks.split import split_tasks
from sleuth.tools.toolbox import Toolbox
from sleuth.train.ranker import RankerTrainConfig, collect_examples, fit_selection
from sleuth.train.recipes.data import generated_tasks, open_index

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _datasets import DATASETS, HANDWRITTEN, load_corpus  # noqa: E402
from ranker_latency import selector_latency  # noqa: E402

SHIPPED = Path(__file__).resolve().parents[1] / "src" / "sleuth" / "data" / "ranker" / "ranker.json"
RESULTS = Path(__file__).resolve().parent / "results" / "ranker_ablation.json"
METRICS = {"r2": "R@2", "r5": "R@5", "all5": "all gold@5"}
console = Console(width=200)


def cached(path: Path, make: Callable[[], Any]) -> Any:
    """``make()``, pickled at ``path`` so a rerun reuses it (a benchmark cache in OUT only)."""
    if path.exists():
        return pickle.loads(path.read_bytes())
    value = make()
    path.write_bytes(pickle.dumps(value))
    return value


def run_agent(toolbox: Toolbox, model: RankerModel, task: Task) -> dict:
    """One agent run: its final list and the trajectory's selection features (all columns)."""
    built = build_policy("heuristic", PolicyOptions(ranker=model))
    tools, factory = built.for_tools(toolbox)
    policy = factory(0)
    with tempfile.TemporaryDirectory() as tmp:
        run = Harness(tools, policy).run(task.query, Path(tmp) / "run.jsonl")
    docs, searches = trail(
        observations(policy.requests[-1]), lambda d: document_title(toolbox.index, d)
    )
    final = [d.doc_id for d in run.answer.documents] if run.answer else []
    return {
        "id": task.id,
        "gold": sorted(task.gold_doc_ids),
        "final": list(dict.fromkeys(final)),
        "doc_ids": [d.doc_id for d in docs],
        "x": seen_features(toolbox.index, task.query, docs, searches),
        "trail": (task.query, docs, searches),
    }


def metrics(order: list[str], gold: list[str]) -> dict[str, float]:
    hits = [len(set(order[:k]) & set(gold)) / len(gold) for k in (2, 5)]
    return {"r2": hits[0], "r5": hits[1], "all5": float(hits[1] == 1.0)}


def reorder(head: Any, item: dict) -> list[str]:
    scores = head.score(item["x"], SELECTION_COLUMNS)
    ids = item["doc_ids"]
    return [ids[i] for i in sorted(range(len(ids)), key=lambda i: (-scores[i], ids[i]))]


def corpus_tools(args: argparse.Namespace, name: str) -> tuple[Toolbox, dict[str, list[Task]]]:
    """Tools over a corpus (``pooled``, a QA sample or a hand-written set) and its questions."""
    if name not in args.opened:
        corpus = load_corpus(name)
        path = args.out / "index" / f"{name}-{args.embedder}"
        args.opened[name] = (Toolbox(open_index(path, corpus.docs, args.embedder)), corpus.tasks)
    return args.opened[name]


def dev_sets(args: argparse.Namespace) -> dict[str, tuple[Toolbox, list[Task]]]:
    """Dev questions per ``--rows`` name: ``pooled/X`` or ``X`` (a QA sample's own corpus): the
    held-out side; ``enron``/``patents``: the dev split (test is never read)."""
    sets: dict[str, tuple[Toolbox, list[Task]]] = {}
    for row in args.rows:
        corpus, _, dataset = row.rpartition("/")
        tools, tasks = corpus_tools(args, corpus or dataset)
        wanted = tasks[dataset] if dataset in HANDWRITTEN else split_tasks(tasks[dataset])[1]
        sets[row] = (tools, wanted[: args.limit])
    return sets


def training_sources(args: argparse.Namespace) -> list[tuple[Toolbox, list[Task]]]:
    """Training-side questions of the QA samples in ``--rows`` on their corpora, and (with
    ``--generated``) the tasks generated over each sample's training-side paragraphs."""
    sources = []
    for row in args.rows:
        corpus, _, dataset = row.rpartition("/")
        if dataset in DATASETS:
            tools, tasks = corpus_tools(args, corpus or dataset)
            train = split_tasks(tasks[dataset])[0]
            if args.train_ids is not None:  # exactly a ranker file's questions
                train = [t for t in train if t.id in args.train_ids]
            source = DATASETS[dataset][2]
            extra = [t for t in generated_tasks() if t.source == source] if args.generated else []
            sources.append((tools, train[: args.train_limit] + extra))
    return sources


def collect(args: argparse.Namespace) -> dict[str, Any]:
    """Pass-1 search examples and pass-2 selection examples (as ``train_ranker`` collects them)."""
    sources = training_sources(args)
    ids = sorted(t.id for _, ts in sources for t in ts if t.gold_doc_ids)
    started = time.perf_counter()
    search, first = collect_examples(sources, None, "pass 1", None)
    linear = RankerTrainConfig()
    search_head = fit_head(*search.stacked(), SEARCH_COLUMNS)
    base = RankerModel(search=search_head, selection=fit_selection(first, linear))
    _, second = collect_examples(sources, base, "pass 2", None)
    took = time.perf_counter() - started
    order = [t.id for _, ts in sources for t in ts if t.gold_doc_ids]  # one group each, in order
    return {"search": search_head, "selection": second, "ids": ids, "seconds": took, "order": order}


def refeature(args: argparse.Namespace, data: dict[str, Any]) -> None:
    """Today's selection columns from the cached trails: a column added since the collection
    needs no agent rerun (the trails are pass 2's, whose hops a head without it chose)."""
    tools = [tb for tb, tasks in training_sources(args) for t in tasks if t.gold_doc_ids]
    pairs = zip(tools, getattr(data["selection"], "trails", ()), strict=True)  # old caches: none
    data["selection"].features = [seen_features(tb.index, *trail) for tb, trail in pairs]


def variants(data: dict[str, Any]) -> dict[str, Any]:
    """Selection heads: each learner on all columns and without each feature group."""
    heads: dict[str, Any] = {}
    for learner in LEARNERS:
        config = RankerTrainConfig(learner=learner)
        for drop in (None, *FEATURE_GROUPS):
            gone = FEATURE_GROUPS.get(drop or "", ())
            columns = [c for c in SELECTION_COLUMNS if c not in gone]
            name = learner + (f" −{drop}" if drop else "")
            heads[name] = fit_selection(data["selection"], config, columns)
    return heads


def summarise(per_q: dict[str, list[dict[str, float]]], ref: dict[str, str]) -> list[dict]:
    """Means with 95% intervals and the paired delta against each variant's reference."""
    rows = []
    for name, values in per_q.items():
        row: dict[str, Any] = {"variant": name, "n": len(values), "ref": ref.get(name)}
        for key in METRICS:
            mine = [v[key] for v in values]
            row[key], row[f"{key}_ci"] = float(np.mean(mine)), list(bootstrap_interval(mine))
            if ref.get(name) in per_q:
                other = [v[key] for v in per_q[ref[name]]]
                diff, (low, high) = paired_bootstrap_difference(mine, other)
                row[f"{key}_delta"] = [diff, low, high]
        rows.append(row)
    return rows


def reference(name: str) -> str | None:
    """Full models are compared with the shipped one, ablations with their learner's full model."""
    return None if name == "shipped" else name.split(" ")[0] if " " in name else "shipped"


def end_to_end(sets: dict, models: dict[str, RankerModel], items: dict) -> dict[str, Any]:
    """The whole agent with each model (its selector also picks the hops), paired with shipped."""
    found: dict[str, Any] = {}
    for row, (tools, tasks) in sets.items():
        shipped = [metrics(it["final"], it["gold"]) for it in items[row]]
        for name, model in models.items():
            runs = [run_agent(tools, model, t)["final"] for t in tasks]
            pair = {name: [metrics(f, it["gold"]) for f, it in zip(runs, items[row], strict=True)]}
            found[f"{row} {name}"] = summarise(pair | {"shipped": shipped}, {name: "shipped"})[0]
    return found


def fmt(row: dict, key: str) -> str:
    value, ci, delta = row.get(key), row.get(f"{key}_ci"), row.get(f"{key}_delta")
    text = "–" if value is None else f"{100 * value:.1f} [{100 * ci[0]:.0f}, {100 * ci[1]:.0f}]"
    if delta:
        text += f" Δ{100 * delta[0]:+.1f} [{100 * delta[1]:+.1f}, {100 * delta[2]:+.1f}]"
    return text


def line(name: str, r: dict) -> str:
    return f"{name:36s} n={r['n']:3d}  " + "  ".join(f"{METRICS[k]} {fmt(r, k)}" for k in METRICS)


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/sleuth-ablation"))
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--limit", type=int, default=60, help="dev questions per row")
    parser.add_argument("--train-limit", type=int, default=None, help="training questions each")
    parser.add_argument("--latency-calls", type=int, default=40)
    parser.add_argument("--end-to-end", default="", help="learners whose whole agent also runs")
    parser.add_argument("--ship", choices=LEARNERS, default=None, help="write this learner's model")
    parser.add_argument("--json", type=Path, default=RESULTS)
    parser.add_argument("--prepare", choices=("dev", "train"), help="only build that cache")
    parser.add_argument(
        "--rows", default=",".join([*(f"pooled/{n}" for n in DATASETS), *HANDWRITTEN])
    )
    parser.add_argument("--train-ids", type=Path, help="train on exactly this ranker's questions")
    parser.add_argument("--generated", action="store_true", help="add generated_tasks()")
    parser.add_argument("--refeature", action="store_true", help="columns from cached trails")
    args = parser.parse_args()
    args.rows, args.opened = args.rows.split(","), {}
    args.base = None  # with --train-ids: that ranker, whose search head the written models keep
    if args.train_ids is not None:
        args.base = load_ranker(args.train_ids)
        args.train_ids = set(args.base.question_ids)
    return args


def main() -> None:
    args = parse()
    args.out.mkdir(parents=True, exist_ok=True)
    sets, shipped = dev_sets(args), load_ranker(SHIPPED)
    items = {}
    for row, (tools, tasks) in sets.items():
        if args.prepare != "train":
            make = lambda tools=tools, tasks=tasks: [run_agent(tools, shipped, t) for t in tasks]  # noqa: E731
            items[row] = cached(args.out / f"dev-{row.replace('/', '-')}-{args.limit}.pkl", make)
            if args.refeature:  # the dev runs' columns too, from their trails
                for item in items[row]:
                    item["x"] = seen_features(tools.index, *item["trail"])
    if args.prepare == "dev":
        return
    data = cached(
        args.out / f"train-{'ids' if args.train_ids else args.train_limit}"
        f"{'-generated' if args.generated else ''}.pkl",
        lambda: collect(args),
    )
    console.print(f"training: {len(data['ids'])} tasks, {data['seconds']:.0f} s to collect")
    if args.refeature:
        refeature(args, data)
    if args.prepare == "train":
        return
    heads = {"shipped": shipped.selection, **variants(data)}
    report = {}
    for row, row_items in items.items():
        per_q = {
            n: [metrics(reorder(h, it), it["gold"]) for it in row_items] for n, h in heads.items()
        }
        report[row] = summarise(per_q, {n: r for n in heads if (r := reference(n))})
        for r in report[row]:
            console.print(line(f"{row} {r['variant']}", r))
    row0 = args.rows[0]
    search_head = args.base.search if args.base else data["search"]
    timing = selector_latency(items[row0], search_head, heads, sets[row0][0], args.latency_calls)
    console.print(f"selector call latency: {timing}")
    about = dict(args.base.trained_on) if args.base else {"config": RankerTrainConfig().__dict__}
    about |= {"tasks": len(data["ids"]), "command": "python " + " ".join(sys.argv)}  # adapt: config
    about["selection_examples"] = int(sum(len(y) for y in data["selection"].labels))
    models = {
        n: RankerModel(search=search_head, selection=heads[n], question_ids=data["ids"])
        for n in LEARNERS
    }
    models = {
        n: m.model_copy(update={"trained_on": about | {"learner": n}}) for n, m in models.items()
    }
    chosen = {n: m for n, m in models.items() if n in args.end_to_end.split(",")}
    e2e = end_to_end(sets, chosen, items)
    for name, r in e2e.items():
        console.print(line(f"end to end {name}", r))
    if args.ship:
        models[args.ship].save(SHIPPED)
        console.print(f"wrote {SHIPPED} ({args.ship})")
    result = {"command": "python " + " ".join(sys.argv), "train_tasks": len(data["ids"])}
    result |= {"rows": report, "latency": timing, "end_to_end": e2e}
    args.json.write_text(json.dumps(result, indent=1), encoding="utf-8")
    console.print(f"JSON: {args.json}")


if __name__ == "__main__":
    main()
