"""Heavy optional features are extras, and a missing one says which."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

BLOCKED = {
    "harmony": ("openai_harmony", "import sleuth.policies.harmony"),
    "serve": ("mcp", "import sleuth.serve.mcp_server"),
    "langchain": ("langchain_core", "import sleuth.integrations.langchain"),
    "llamaindex": ("llama_index", "import sleuth.integrations.llamaindex"),
    "train": (
        "transformers",
        "from sleuth.policies.local_hf import LocalHFPolicy\nLocalHFPolicy.load('nowhere')",
    ),
}


@pytest.mark.parametrize("extra", sorted(BLOCKED))
def test_a_missing_extra_is_named(extra):
    module, code = BLOCKED[extra]
    script = f"import sys\nsys.modules[{module!r}] = None\n{code}\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 1
    assert f"pip install 'sleuth[{extra}]'" in done.stderr.strip().splitlines()[-1]


def test_no_exact_torch_pin_and_extras_declared():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if d.replace(" ", "").startswith("torch==")]
    extras = project["optional-dependencies"]
    assert {"train", "serve", "harmony", "langchain", "llamaindex", "dev"} <= set(extras)
    core = " ".join(project["dependencies"])
    assert "mcp" not in core and "openai-harmony" not in core
