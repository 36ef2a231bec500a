"""Retrieval quality the field recognises: Recall@2/5/10 and all-gold@5 on pooled corpora.

Protocol (HippoRAG, arXiv 2405.14831 §3): every paragraph of a dataset's questions, gold and
distractor, is pooled into one index (one document per Wikipedia title, real all-MiniLM-L6-v2),
and Recall@k is the share of gold documents among the first k of the policy's final ranked list.
Datasets (``_datasets.py``): the staged HotpotQA (both files, 298 questions), MuSiQue and 2Wiki
samples; ``combined``: one index of all three samples' paragraphs, each dataset's questions run
against it; ``pooled``: ``combined`` plus HippoRAG 2's full 2Wiki corpus (rows beside HippoRAG 2's
R@5); ``enron`` and ``patents``: the dev split of the hand-written questions over the shared
Enron and patent samples. Every policy runs through ``sleuth.eval.run_eval`` (harness, runner,
metrics as for any policy). Questions a trained component saw (``--train-ids``, by default the
shipped ranker file, which lists them) are never evaluated; the corpus still holds their paragraphs.
``--docs N`` indexes only the asked questions' gold documents plus N others: a quick check of the
wiring on a big corpus, not a number to compare.

Per row: the means over questions, the 95% bootstrap intervals of R@2, R@5 and found, and, per
dataset, each of them for the policy minus single-pass with a paired-bootstrap 95% interval.
Indexes (``OUT/index``) and eval folders (``OUT/<dataset>/<policy>``) are reused, so a rerun only
runs what is missing. The full ``pooled`` corpus is 12,913 documents (~13.4k MiniLM chunks).

    python benchmarks/quality.py --policies single-pass,heuristic --out /tmp/sleuth-quality
    python benchmarks/quality.py --datasets enron,patents --adapt 300  # + heuristic-adapted rows

``--text-stage DIR`` (``benchmarks/text_stage.py``) is the ``heuristic-text`` row's stage (its
training questions are never evaluated either). ``--adapt N`` first runs ``sleuth adapt`` on each
dataset's index (N tasks generated over its corpus, never its hand-written questions) and adds a
``heuristic-adapted`` row (``--adapt-learners linear,gbdt``: one row per learner; ``--adapt-seed
S``: other generated tasks); the ``heuristic`` row then still uses the shipped ranker.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from sleuth.errors import InputError, SleuthError
from sleuth.eval import EvalConfig, load_results, run_eval
from sleuth.eval.aggregate import bootstrap_interval, mean_defined, paired_bootstrap_difference
from sleuth.eval.records import QueryRecord
from sleuth.index import Index
from sleuth.policies import parse_policy_spec
from sleuth.policies.baselines import POLICY_NAMES
from sleuth.policies.spec import SCRIPTED, BuiltPolicy
from sleuth.tasks import Task
from sleuth.tools.toolbox import Toolbox
from sleuth.train.recipes.data import open_index

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _adapt import (  # noqa: E402
    ADAPTED,  # noqa: F401 (the tests read it here)
    adapt_rows,
    add_adapt_arguments,
    built_policy,
    check_adapt_arguments,
    stage_ids,
    versus_shipped,
)
from _datasets import DATASETS, FINAL, HANDWRITTEN, POOLS, Corpus, load_corpus  # noqa: E402
from _report import (  # noqa: E402
    INTERVAL_KEYS,
    METRICS,
    POOL_SEPARATOR,
    anchor_lines,
    header_line,
    markdown,
    rich_table,
)

TRAIN_IDS = (
    Path(__file__).resolve().parents[1] / "src" / "sleuth" / "data" / "ranker" / "ranker.json"
)
NAMES = [*DATASETS, *POOLS, *HANDWRITTEN, *FINAL]
BASELINE = "single-pass"
console = Console(width=240)  # wide enough for the table when piped to a file


def read_train_ids(path: Path | None) -> set[str]:
    """Task ids a trained component saw (``{"question_ids": [...]}``); none without a file.

    Raises:
        InputError: the file cannot be read or lacks a list of ids.
    """
    if path is None:
        return set()
    try:
        ids = json.loads(path.read_text(encoding="utf-8")).get("question_ids")
    except (OSError, ValueError, AttributeError) as e:
        raise InputError(f"cannot read training ids ({e})", source=str(path)) from e
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise InputError('expected {"question_ids": [list of task ids]}', source=str(path))
    return set(ids)


def held_out(tasks: Sequence[Task], train_ids: set[str], limit: int | None) -> list[Task]:
    """The first ``limit`` tasks that no trained component saw."""
    kept = [t for t in tasks if t.id not in train_ids]
    return kept if limit is None else kept[:limit]


def policy_records(
    tasks: Sequence[Task], policy: BuiltPolicy, toolbox: Toolbox, out: Path, concurrency: int
) -> list[QueryRecord]:
    """Run (or resume) ``policy`` on ``tasks``; their records in task order."""
    run_eval(tasks, policy, toolbox, out, EvalConfig(concurrency=concurrency, progress=False))
    finished = load_results(out / "results.jsonl")
    return [finished[t.id] for t in tasks]


def _values(records: Sequence[QueryRecord], key: str) -> list[float | None]:
    return [getattr(r.metrics, key) for r in records]


def row(dataset: str, policy: str, records: Sequence[QueryRecord]) -> dict[str, Any]:
    """Means over questions, seconds per query and the bootstrap intervals of R@2, R@5, found."""
    out: dict[str, Any] = {"dataset": dataset, "policy": policy, "n": len(records)}
    for key in METRICS:
        out[key] = mean_defined(_values(records, key))
    out["s_per_query"] = mean_defined(_values(records, "wall_time_s"))
    defined = {k: [v for v in _values(records, k) if v is not None] for k in INTERVAL_KEYS}
    out["ci"] = {k: list(bootstrap_interval(v)) for k, v in defined.items() if v}
    return out


PerQuestion = dict[tuple[str, str], list[QueryRecord]]


def add_deltas(rows: list[dict[str, Any]], records: PerQuestion) -> None:
    """``delta[key]``: [policy − single-pass, low, high] (paired bootstrap) per dataset."""
    for r in rows:
        r["delta"] = {}
        base = records.get((r["dataset"], BASELINE))
        if base is None or r["policy"] == BASELINE:
            continue
        mine = records[(r["dataset"], r["policy"])]
        for key in INTERVAL_KEYS:
            pairs = [
                (getattr(m.metrics, key), getattr(b.metrics, key))
                for m, b in zip(mine, base, strict=True)
                if getattr(m.metrics, key) is not None and getattr(b.metrics, key) is not None
            ]
            if pairs:
                diff, (low, high) = paired_bootstrap_difference(*zip(*pairs, strict=True))
                r["delta"][key] = [diff, low, high]


def evaluate(
    corpus: Corpus,
    index: Index,
    policies: Sequence[str],
    out: Path,
    *,
    train_ids: set[str],
    limit: int | None,
    concurrency: int,
    text_stage: Path | None = None,
) -> list[dict[str, Any]]:
    """One row per (dataset of the corpus, policy); a combined corpus names rows ``combined/X``."""
    toolbox = Toolbox(index)
    asked = {ds: held_out(tasks, train_ids, limit) for ds, tasks in corpus.tasks.items()}
    everything = [t for tasks in asked.values() for t in tasks]
    rows: list[dict[str, Any]] = []
    per_question: PerQuestion = {}
    for policy in policies:
        t0 = time.perf_counter()
        built = built_policy(policy, index, out.parent, text_stage)
        records = policy_records(everything, built, toolbox, out / policy, concurrency)
        console.print(f"  {corpus.name} {policy}: {time.perf_counter() - t0:.0f} s")
        by_id = {r.task_id: r for r in records}
        for ds, tasks in asked.items():
            label = f"{corpus.name}{POOL_SEPARATOR}{ds}" if corpus.name in POOLS else ds
            mine = [by_id[t.id] for t in tasks]
            trained = sum(t.id in train_ids for t in corpus.tasks[ds])
            rows.append(row(label, policy, mine) | {"excluded": trained})
            per_question[(label, policy)] = mine
    add_deltas(rows, per_question)
    return rows


def _names(text: str, known: Sequence[str], what: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise InputError(f"unknown {what} {unknown or text!r}; choose from {', '.join(known)}")
    return names


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parsed and checked arguments (checked before anything is written).

    Raises:
        InputError: an unknown dataset or policy, a bad count, or an unreadable ids file.
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", default=",".join([*DATASETS, "combined"]))
    parser.add_argument("--policies", default=",".join(POLICY_NAMES))
    parser.add_argument("--questions", type=int, default=None, help="per dataset (default all)")
    parser.add_argument("--out", type=Path, default=Path("/tmp/sleuth-quality"))
    parser.add_argument("--json", type=Path, default=None, help="default OUT/quality.json")
    parser.add_argument("--train-ids", type=Path, default=TRAIN_IDS if TRAIN_IDS.exists() else None)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--docs", type=int, default=None, help="index gold + N others (a check)")
    add_adapt_arguments(parser)
    args = parser.parse_args(argv)
    args.datasets = _names(args.datasets, NAMES, "dataset")
    args.policies = _names(args.policies, list(SCRIPTED), "policy")
    for policy in args.policies:
        parse_policy_spec(policy)
    if args.questions is not None and args.questions < 1:
        raise InputError(f"--questions ({args.questions}) must be at least 1")
    if args.docs is not None and args.docs < 0:
        raise InputError(f"--docs ({args.docs}) must not be negative")
    check_adapt_arguments(args)
    if args.concurrency < 1:
        raise InputError(f"--concurrency ({args.concurrency}) must be at least 1")
    args.train = read_train_ids(args.train_ids) | stage_ids(args.policies, args.text_stage)
    return args


def subset(corpus: Corpus, tasks: Sequence[Task], others: int) -> Corpus:
    """The corpus cut to the gold documents of ``tasks`` plus the first ``others`` documents."""
    gold = {d for t in tasks for d in t.gold_doc_ids}
    rest = [d.id for d in corpus.docs if d.id not in gold][:others]
    keep = gold | set(rest)
    return Corpus(corpus.name, [d for d in corpus.docs if d.id in keep], corpus.tasks)


def dataset_rows(name: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Build or reuse the dataset's index, then evaluate every policy on it."""
    corpus, suffix = load_corpus(name), ""
    if args.docs is not None:
        asked = [
            t for ts in corpus.tasks.values() for t in held_out(ts, args.train, args.questions)
        ]
        corpus, suffix = subset(corpus, asked, args.docs), f"-docs{args.docs}"
    started = time.perf_counter()
    path = args.out / "index" / f"{name}-{args.embedder}{suffix}"
    index = open_index(path, corpus.docs, args.embedder)
    took = f"{time.perf_counter() - started:.0f} s"
    console.print(f"{name}: {len(corpus.docs)} documents, {len(index)} chunks ({took})")
    if args.adapt is not None:
        adapt_rows(name, index, args, console)
    rows = evaluate(
        corpus,
        index,
        args.policies,
        args.out / f"{name}{suffix}",
        train_ids=args.train,
        limit=args.questions,
        concurrency=args.concurrency,
        text_stage=args.text_stage,
    )
    if args.adapt is not None or args.text_stage is not None:
        versus_shipped(rows, args.out / f"{name}{suffix}", console)
    return rows


def run(args: argparse.Namespace) -> None:
    """Every dataset, then the table on the console, in ``OUT/quality.md`` and in the JSON."""
    command = "python " + " ".join(shlex.quote(a) for a in sys.argv)
    console.print(f"[bold]{command}[/bold]")
    started, rows = time.perf_counter(), []
    for name in args.datasets:
        rows += dataset_rows(name, args)
        console.print(rich_table(rows, "so far"))
    header = header_line(rows)
    console.print(rich_table(rows, "Retrieval quality (%, mean over questions)"))
    console.print(header)
    console.print("\n".join(anchor_lines()))
    minutes = (time.perf_counter() - started) / 60
    note = f"\n`{command}` ({args.embedder}, train ids: {args.train_ids}, {minutes:.1f} min)\n"
    (args.out / "quality.md").write_text(markdown(rows, header) + note, encoding="utf-8")
    json_path = args.json or args.out / "quality.json"
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps({"command": command, "header": header, "rows": rows}, indent=2))
    console.print(f"Markdown: {args.out / 'quality.md'}; JSON: {json_path}; {minutes:.1f} min")


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0, or 2 after one line on stderr for bad input."""
    try:
        run(parse_args(argv))
    except SleuthError as e:
        print(f"error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
