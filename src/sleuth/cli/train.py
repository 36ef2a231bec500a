"""``sleuth train ranker|sft|rl|recipe``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

import sleuth.cli.common as common
from sleuth.cli.common import IndexOpt, JsonOpt, cli_errors, console, progress_bar, train_app
from sleuth.errors import InputError
from sleuth.train.constants import CISPO_W_MAX, CISPO_W_MIN

if TYPE_CHECKING:
    from sleuth.train.model import StudentConfig
    from sleuth.train.rl import EngineFactory
    from sleuth.train.rl_types import RLConfig
    from sleuth.train.rollout import OpenAICompletionsEngine

StudentOpt = Annotated[
    str | None, typer.Option("--model", help="Student: HF folder or .gguf (default SmolLM2).")
]
DeviceOpt = Annotated[
    str | None, typer.Option(help="cpu | mps | cuda | cuda:N (default: StudentConfig's).")
]
SeedOpt = Annotated[int | None, typer.Option(help="Random seed (default: the config's).")]
LoraROpt = Annotated[int | None, typer.Option(help="LoRA rank (default: StudentConfig's).")]
LoraAlphaOpt = Annotated[
    int | None,
    typer.Option(help="LoRA alpha; updates scale by alpha / r (default: StudentConfig's)."),
]


def _student(
    model: str | None,
    adapter: str | None,
    device: str | None,
    full: bool,
    lora_r: int | None = None,
    lora_alpha: int | None = None,
) -> StudentConfig:
    """The student of a training command; the device, LoRA rank and alpha not given are
    StudentConfig's."""
    from sleuth.train.model import StudentConfig

    device = device or StudentConfig.device
    if not re.fullmatch(r"cpu|mps|cuda(:\d+)?", device):
        raise InputError(f"unknown --device {device!r}; use cpu, mps, cuda or cuda:N")
    if model is None:
        from sleuth.policies.local_hf import smollm2_gguf_path

        model = str(smollm2_gguf_path())
    dtype = "bfloat16" if device.startswith("cuda") else "float32"
    return StudentConfig(
        path=model,
        adapter=adapter,
        lora=not full,
        device=device,
        dtype=dtype,
        **_given(lora_r=lora_r, lora_alpha=lora_alpha),
    )


def _set_threads(threads: int | None) -> None:
    """On a shared CPU, one torch thread per process is often fastest (see train/rl.py notes)."""
    if threads:
        import torch

        torch.set_num_threads(threads)


@train_app.command("ranker")
@cli_errors
def train_ranker_cmd(
    index: IndexOpt,
    tasks: Annotated[
        list[Path], typer.Option(help="Task JSONL (repeatable): generated or benchmark tasks.")
    ],
    out: Annotated[Path, typer.Option(help="Where to write the ranker JSON.")],
    regularization: Annotated[
        float | None, typer.Option(help="Inverse L2 strength C (default: RankerTrainConfig's).")
    ] = None,
    refit_passes: Annotated[
        int | None,
        typer.Option(
            help="Agent passes that refit selection with the search head (default: the config's)."
        ),
    ] = None,
    learner: Annotated[
        str | None,
        typer.Option(
            help="Selection head: linear (logistic) | gbdt (LambdaRank trees); default: the config's."
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Fit the learned ranker (search rerank + document selection) on the agent's trajectories."""
    from sleuth.index import Index
    from sleuth.tasks import load_tasks
    from sleuth.tools.toolbox import Toolbox
    from sleuth.train.ranker import RankerTrainConfig, train_ranker

    config = RankerTrainConfig(
        **_given(regularization=regularization, refit_passes=refit_passes, learner=learner)
    )
    loaded = [task for path in tasks for task in load_tasks(path)]
    if len({t.id for t in loaded}) != len(loaded):
        raise InputError("task ids must be unique across --tasks files")
    toolbox = Toolbox(Index.open(index))
    if out.is_dir():
        raise InputError("--out is a folder; give a file path for the ranker JSON", source=str(out))
    with progress_bar() as bar:
        task = bar.add_task("trajectories", total=len(loaded))

        def report(phase: str, done: int, total: int) -> None:
            bar.update(task, description=phase, completed=done, total=total)

        model = train_ranker([(toolbox, loaded)], config, progress=report)
    out.parent.mkdir(parents=True, exist_ok=True)
    model.save(out)
    if as_json:
        print(json.dumps({"out": str(out), **model.trained_on}))
    else:
        console.print(f"ranker trained on {len(model.question_ids)} tasks → {out}")


@train_app.command("sft")
@cli_errors
def train_sft(
    index: IndexOpt,
    tasks: Annotated[Path, typer.Option(help="Task JSONL.")],
    out: Annotated[Path, typer.Option(help="Output folder (teacher runs, checkpoints, model).")],
    model: StudentOpt = None,
    teacher: Annotated[
        str, typer.Option(help="Policy spec: heuristic | openai:MODEL@URL | local:PATH | ...")
    ] = "heuristic",
    rollouts_per_task: Annotated[
        int | None, typer.Option(help="Teacher rollouts per task (default: SFTConfig's).")
    ] = None,
    epochs: Annotated[
        int | None, typer.Option(help="Passes over kept sequences (default: SFTConfig's).")
    ] = None,
    lr: Annotated[float | None, typer.Option(help="Learning rate (default: SFTConfig's).")] = None,
    batch_size: Annotated[
        int | None, typer.Option(help="Sequences per optimiser step (default: SFTConfig's).")
    ] = None,
    max_seq_len: Annotated[
        int | None, typer.Option(help="Longest training sequence (default: SFTConfig's).")
    ] = None,
    full: Annotated[bool, typer.Option(help="Full fine-tune instead of LoRA.")] = False,
    lora_r: LoraROpt = None,
    lora_alpha: LoraAlphaOpt = None,
    device: DeviceOpt = None,
    budget: Annotated[
        int, typer.Option(help="Token budget T of teacher runs (the student's context).")
    ] = 8192,
    max_turns: Annotated[int, typer.Option(help="Maximum turns of teacher runs.")] = 8,
    limit: Annotated[int | None, typer.Option(help="Only the first N tasks.")] = None,
    seed: SeedOpt = None,
    threads: Annotated[int | None, typer.Option(help="torch threads.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Teacher trajectories through the harness, the report's filter, then LoRA/full fine-tuning.

    The model folder gets a manifest (``sleuth_policy.json``) of the teacher's harness and
    tools, so ``--policy local:BASE --adapter OUT/model`` runs under them unflagged.
    """
    from sleuth.harness import BudgetConfig, HarnessConfig
    from sleuth.tasks import load_tasks
    from sleuth.train.sft import SFTConfig, build_teacher, run_sft

    _set_threads(threads)
    given = _given(
        epochs=epochs,
        lr=lr,
        batch_size=batch_size,
        max_seq_len=max_seq_len,
        seed=seed,
        rollouts_per_task=rollouts_per_task,
    )
    config = SFTConfig(
        student=_student(model, None, device, full, lora_r, lora_alpha),
        out_dir=str(out),
        harness=HarnessConfig(
            budget=BudgetConfig(total=budget, max_turns=max_turns), max_reply_tokens=512
        ),
        **given,
    )
    tools, make_teacher = build_teacher(teacher, common.open_toolbox(index))
    report = run_sft(config, load_tasks(tasks)[:limit], tools, make_teacher)
    print(report.model_dump_json(indent=None if as_json else 2))


def _given(**options: Any) -> dict[str, Any]:
    """The options given on the command line (None: the config class's default)."""
    return {k: v for k, v in options.items() if v is not None}


def _rl_config(
    preset: str, student: StudentConfig, out: Path, overrides: dict[str, Any]
) -> RLConfig:
    """``--preset``'s RLConfig with the options given."""
    from sleuth.train.rl_types import RLConfig

    if preset == "cpu-small":
        return RLConfig.cpu_small(student.path, out_dir=str(out), student=student, **overrides)
    if preset == "report":
        return RLConfig(student=student, out_dir=str(out), **overrides)
    raise InputError(f"unknown --preset {preset!r}; use report or cpu-small")


def _vllm_engine(vllm_url: str | None, served_model: str | None, out: Path) -> EngineFactory | None:
    """The rollout engine factory of ``--vllm-url`` (None: the in-process one)."""
    if not vllm_url:
        return None
    from sleuth.train.rollout import OpenAICompletionsEngine

    if not served_model:
        raise InputError("--vllm-url needs --served-model")

    def make_engine(model: Any, tokenizer: Any) -> OpenAICompletionsEngine:
        return OpenAICompletionsEngine(
            vllm_url, served_model, tokenizer, adapter_root=out / "adapters"
        )

    return make_engine


@train_app.command("rl")
@cli_errors
def train_rl(
    index: IndexOpt,
    tasks: Annotated[Path, typer.Option(help="Task JSONL.")],
    out: Annotated[
        Path, typer.Option(help="Output folder (metrics, checkpoints); rerun to resume.")
    ],
    model: StudentOpt = None,
    adapter: Annotated[
        str | None, typer.Option(help="Start from this LoRA adapter (the SFT output).")
    ] = None,
    preset: Annotated[
        str, typer.Option(help="report (128×8, 4 substeps) | cpu-small (4×4)")
    ] = "cpu-small",
    queries_per_step: Annotated[int | None, typer.Option(help="Queries per step.")] = None,
    rollouts: Annotated[int | None, typer.Option(help="Rollouts per query (G).")] = None,
    substeps: Annotated[int | None, typer.Option(help="Gradient substeps per step.")] = None,
    max_steps: Annotated[int | None, typer.Option(help="Stop after this many steps.")] = None,
    lr: Annotated[float | None, typer.Option(help="Learning rate.")] = None,
    w_min: Annotated[
        float, typer.Option(help="CISPO lower bound on the IS weight (absolute).")
    ] = CISPO_W_MIN,
    w_max: Annotated[
        float, typer.Option(help="CISPO upper bound on the IS weight (absolute).")
    ] = CISPO_W_MAX,
    aggregation: Annotated[
        str | None, typer.Option(help="token_mean (default) | token_sum | prompt_mean")
    ] = None,
    kl_coef: Annotated[float | None, typer.Option(help="KL to the reference (0: none).")] = None,
    credit_malformed: Annotated[
        bool | None,
        typer.Option(
            "--credit-malformed/--no-credit-malformed",
            help="Score a malformed answer's salvaged list (SPEC, the default); "
            "--no-credit-malformed gives it no F-beta and no answer bonus, so format drift "
            "costs the list's value.",
        ),
    ] = None,
    device: DeviceOpt = None,
    vllm_url: Annotated[
        str | None, typer.Option(help="Sample rollouts from a vLLM server at this URL.")
    ] = None,
    served_model: Annotated[str | None, typer.Option(help="Model name on the vLLM server.")] = None,
    engine: Annotated[
        str | None,
        typer.Option(help="In-process rollout sampler: transformers (default) | ct2."),
    ] = None,
    seed: SeedOpt = None,
    threads: Annotated[int | None, typer.Option(help="torch threads.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """CISPO: G rollouts per query, group-normalised advantages, K substeps; resumable.

    Each checkpoint's model gets a manifest (``sleuth_policy.json``) of the rollouts' harness.
    """
    from sleuth.reward import RewardConfig
    from sleuth.tasks import load_tasks
    from sleuth.train.cispo import AGGREGATIONS
    from sleuth.train.rl import run_rl

    if aggregation is not None and aggregation not in AGGREGATIONS:
        raise InputError(f"unknown --aggregation {aggregation!r}; use {', '.join(AGGREGATIONS)}")
    _set_threads(threads)
    reward = RewardConfig(**_given(credit_malformed_list=credit_malformed))
    overrides = _given(
        queries_per_step=queries_per_step,
        rollouts_per_query=rollouts,
        substeps=substeps,
        max_steps=max_steps,
        lr=lr,
        aggregation=aggregation,
        kl_coef=kl_coef,
        seed=seed,
        rollout_engine=engine,
    ) | {"w_min": w_min, "w_max": w_max, "reward": reward}
    config = _rl_config(preset, _student(model, adapter, device, False), out, overrides)
    make_engine = _vllm_engine(vllm_url, served_model, out)
    log = run_rl(config, load_tasks(tasks), common.open_toolbox(index), make_engine=make_engine)
    print(json.dumps(log[-1] if log else {}, indent=None if as_json else 2, default=str))


@train_app.command("recipe")
@cli_errors
def train_recipe(
    name: Annotated[str, typer.Argument(help="cpu-small | cuda | smoke (sleuth.train.recipes).")],
    index: Annotated[
        Path, typer.Option(help="The pooled corpus's index folder (built there when missing).")
    ],
    out: Annotated[Path, typer.Option(help="Output folder; rerun the same command to resume.")],
    data: Annotated[
        Path,
        typer.Option(help="Folder of the staged HotpotQA, MuSiQue and 2Wiki samples."),
    ],
    model: StudentOpt = None,
    device: Annotated[str | None, typer.Option(help="cpu | cuda (default: the recipe's).")] = None,
    seed: Annotated[
        int | None, typer.Option(help="Seed of the task pools (default: run_recipe's).")
    ] = None,
    stop_after: Annotated[str | None, typer.Option(help="sft | rl")] = None,
    report_now: Annotated[
        bool, typer.Option(help="Report RL as far as it got, without training further.")
    ] = False,
    selector: Annotated[
        bool, typer.Option(help="Also evaluate the student with the selector writing its list.")
    ] = True,
    threads: Annotated[int | None, typer.Option(help="torch threads.")] = None,
) -> None:
    """The distill-then-RL recipe: teacher runs, SFT, CISPO, held-out evaluations, report.

    Every trained model gets its manifest (``sleuth_policy.json``): ``--policy local:BASE
    --adapter OUT/sft/model`` runs it as it trained.
    """
    import shlex
    import sys
    from dataclasses import replace

    from sleuth.policies.local_hf import smollm2_gguf_path
    from sleuth.train.recipes import RECIPES, run_recipe
    from sleuth.train.recipes.run import STOP_AFTER

    if name not in RECIPES:
        raise InputError(f"unknown recipe {name!r}; use one of {', '.join(RECIPES)}")
    if stop_after not in (None, *STOP_AFTER):
        raise InputError(f"unknown --stop-after {stop_after!r}; use one of {STOP_AFTER}")
    config = RECIPES[name] if device is None else replace(RECIPES[name], device=device)
    _set_threads(threads)
    command = "sleuth " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    text, _ = run_recipe(
        config,
        index,
        out,
        data,
        Path(model) if model else smollm2_gguf_path(),
        **_given(seed=seed),
        stop_after=stop_after,
        report_now=report_now,
        selector=selector,
        command=command,
        echo=lambda line: print(line, flush=True),  # the table holds [...]: not rich markup
    )
    print(text)
