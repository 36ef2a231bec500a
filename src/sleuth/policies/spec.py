"""Policy specs: the one grammar, and the one builder, behind every way of choosing a policy
(``sleuth run``/``eval``/``demo``/``serve mcp``, the SFT teacher, the Python API).

Grammar::

    heuristic | single-pass | bm25 | dense   scripted policies (:data:`SCRIPTED`, extensible)
    local[:PATH]                             a transformers model in-process (HF folder or .gguf)
    openai:MODEL@URL                         an OpenAI-compatible chat endpoint with tool calling
    harmony:MODEL@URL                        a gpt-oss model over /v1/completions (harmony)

``local`` alone is the shipped SmolLM2-135M with the shipped SFT adapter, decoded greedily under
the settings it was trained with; ``local:PATH`` is that model untouched (an adapter comes from
:class:`PolicyOptions`). A spec builds a :class:`BuiltPolicy`: a :data:`PolicyFactory` (seed in,
fresh policy out, since policies keep per-run state) plus the tool and harness settings the policy
needs (one retriever for ``bm25``/``dense``, the adapter's prompt and budget for ``local``).
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from sleuth.errors import InputError
from sleuth.harness.loop import HarnessConfig
from sleuth.harness.policy import Policy
from sleuth.harness.prompt import MAX_DOCUMENTS
from sleuth.policies.manifest import (
    FINAL_LISTS,
    MANIFEST,
    PolicyManifest,
    ToolSettings,
    read_manifest,
)
from sleuth.policies.sampling import Sampling
from sleuth.tools.base import Tools
from sleuth.tools.spec import TOOL_NAMES

if TYPE_CHECKING:
    from sleuth.policies.scripted import ScriptedPolicy
    from sleuth.ranking.model import RankerModel

PolicyFactory = Callable[[int], Policy]
"""Builds the policy of one run from its seed (policies keep per-run state)."""

DEFAULT_POLICY = "heuristic"
"""The policy of ``sleuth run``, ``sleuth eval`` and the MCP ``search`` tool when none is given."""

SHIPPED_ADAPTER = "data/adapters/smollm2-sleuth"
ADAPTER_SETTINGS = MANIFEST  # the harness and tool settings an adapter trained under
_SERVED = re.compile(r"(?P<model>.+?)@(?P<url>https?://\S+)")
_PREFIXES = ("local", "openai", "harmony")
LOCAL_ENGINES = ("transformers", "ct2")
"""What runs a local model: transformers' sampling loop, or CTranslate2 (several times faster
on CPU; :mod:`sleuth.policies.ct2`)."""
AUTO_ENGINE = "auto"
"""CTranslate2 when it is installed, else transformers."""


@dataclass(frozen=True)
class PolicySpec:
    """A parsed spec: ``kind`` is a scripted name or one of ``local``, ``openai``, ``harmony``;
    ``model`` is the served model name (or the local path); ``base_url`` the server."""

    kind: str
    model: str | None = None
    base_url: str | None = None

    def __str__(self) -> str:
        if self.base_url:
            return f"{self.kind}:{self.model}@{self.base_url}"
        return f"{self.kind}:{self.model}" if self.model else self.kind


@dataclass(frozen=True)
class PolicyOptions:
    """What a spec does not say: credentials, sampling, limits, the heuristic agent's knobs."""

    api_key: str = "EMPTY"
    adapter: str | None = None
    """LoRA adapter folder for ``local``/``local:PATH``; its manifest (``sleuth_policy.json``,
    :class:`~sleuth.policies.manifest.PolicyManifest`), when present, sets the harness and tool
    settings it was trained under."""
    temperature: float | None = None
    """None: greedy for local models, the server's default for endpoints."""
    engine: str = AUTO_ENGINE
    """What runs ``local`` models: one of :data:`LOCAL_ENGINES`, or ``auto``."""
    timeout_s: float = 600.0
    max_retries: int = 4
    agent: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments of the heuristic agent."""
    ranker: str | RankerModel | None = None
    """The learned ranker of ``heuristic``: a ``sleuth train ranker`` file, a model in memory, or
    ``shipped``; None: the searched index's adapted one (``sleuth adapt``), else the shipped one."""
    text_stage: str | None = None
    """The text stage folder of ``heuristic-text`` (:mod:`sleuth.ranking.textstage`; trained by
    ``benchmarks/text_stage.py``, not shipped)."""
    final_list: str | None = None
    """Who orders a ``local`` model's final list: ``model`` (its own reply) or ``selector`` (the
    learned selector over every document in view; :mod:`sleuth.policies.selecting`). None: the
    adapter's ``final_list`` setting, else ``model``."""

    def __post_init__(self) -> None:
        if self.engine not in (*LOCAL_ENGINES, AUTO_ENGINE):
            raise InputError(
                f"unknown engine {self.engine!r}; use one of {(*LOCAL_ENGINES, AUTO_ENGINE)}"
            )
        if self.final_list not in (None, *FINAL_LISTS):
            raise InputError(f"unknown final list {self.final_list!r}; use one of {FINAL_LISTS}")


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class BuiltPolicy:
    """A spec made runnable: fresh policies, and the tools and harness settings they need."""

    spec: PolicySpec
    factory: PolicyFactory
    wrap_tools: Callable[[Tools], Tools] = _same
    configure: Callable[[HarnessConfig], HarnessConfig] = _same
    bind: Callable[[Tools], PolicyFactory] | None = None
    """For a policy that consults the index it searches (the heuristic agent's learned
    selector): its factory for runs against these (already wrapped) tools."""

    @property
    def label(self) -> str:
        return str(self.spec)

    def tools(self, tools: Tools) -> Tools:
        """The tools this policy runs against (e.g. a one-retriever toolbox for ``bm25``)."""
        return self.wrap_tools(tools)

    def for_tools(self, tools: Tools) -> tuple[Tools, PolicyFactory]:
        """The tools this policy runs against, and its fresh-policy factory for them."""
        wrapped = self.wrap_tools(tools)
        return wrapped, (self.bind(wrapped) if self.bind else self.factory)

    def harness(self, base: HarnessConfig | None = None) -> HarnessConfig:
        """``base`` with what this policy needs (an adapter's trained settings, reasoning echo)."""
        return self.configure(base or HarnessConfig())


Builder = Callable[[PolicySpec, PolicyOptions], BuiltPolicy]


def parse_policy_spec(text: str) -> PolicySpec:
    """Parse a spec (grammar in the module docstring).

    Raises:
        InputError: an unknown name, or a malformed ``local:``/``openai:``/``harmony:`` spec.
    """
    text = text.strip()
    if text in SCRIPTED or text == "local":
        return PolicySpec(text)
    kind, sep, rest = text.partition(":")
    if not sep or kind not in _PREFIXES:
        raise InputError(f"unknown policy {text!r}; choose one of {', '.join(policy_grammar())}")
    if kind == "local":
        if not rest:
            raise InputError(f"policy {text!r}: write local, or local:PATH (HF folder or .gguf)")
        return PolicySpec(kind, rest)
    served = _SERVED.fullmatch(rest)
    if served is None:
        raise InputError(
            f"policy {text!r}: write it as {kind}:MODEL@BASE_URL (http:// or https://)"
        )
    return PolicySpec(kind, served["model"], served["url"])


def policy_grammar() -> list[str]:
    """Every form a spec can take, for help texts and error messages."""
    return [*SCRIPTED, "local[:PATH]", "openai:MODEL@BASE_URL", "harmony:MODEL@BASE_URL"]


def build_policy(spec: str | PolicySpec, options: PolicyOptions | None = None) -> BuiltPolicy:
    """The one policy builder. Loads weights and checks the spec now, so a bad choice fails before
    any run starts.

    Raises:
        InputError: a bad spec, or a local path or adapter that does not exist.
    """
    parsed = spec if isinstance(spec, PolicySpec) else parse_policy_spec(spec)
    builder = SCRIPTED.get(parsed.kind) or _SERVED_BUILDERS[parsed.kind]
    return builder(parsed, options or PolicyOptions())


def spec_from_options(
    policy: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    fmt: str = "chat",
) -> str:
    """The spec that the older options name: ``--model M --base-url U`` is ``openai:M@U``
    (``harmony:M@U`` with ``--format harmony``), ``--model PATH`` alone is ``local:PATH``.

    Raises:
        InputError: options that contradict each other or name no policy.
    """
    if fmt not in ("chat", "harmony"):
        raise InputError(f"unknown --format {fmt!r}; use chat or harmony")
    if base_url and not model:
        raise InputError("--base-url needs --model (the served model name)")
    if model and policy:
        raise InputError("give --model (with --base-url) or --policy, not both")
    if fmt == "harmony" and not base_url:
        raise InputError("--format harmony needs --model and --base-url")
    if model and base_url:
        return f"{'harmony' if fmt == 'harmony' else 'openai'}:{model}@{base_url}"
    if model:
        return f"local:{model}"
    return policy or DEFAULT_POLICY


def make_policy(spec: str, seed: int = 0, **options: Any) -> Policy:
    """One fresh policy from a spec (``options`` are :class:`PolicyOptions` fields)."""
    return build_policy(spec, PolicyOptions(**options)).factory(seed)


# ---------------------------------------------------------------- scripted


def _named(policy: ScriptedPolicy, name: str) -> ScriptedPolicy:
    policy.name = name  # recorded in the trajectory header
    return policy


def _single_pass(spec: PolicySpec, options: PolicyOptions) -> BuiltPolicy:
    from sleuth.policies.baselines import one_retriever, single_pass_script
    from sleuth.policies.scripted import ScriptedPolicy

    def factory(seed: int) -> Policy:
        return _named(ScriptedPolicy(single_pass_script), spec.kind)

    retrievers: dict[str, Literal["lexical", "dense"]] = {"bm25": "lexical", "dense": "dense"}
    retriever = retrievers.get(spec.kind)
    if retriever is None:
        return BuiltPolicy(spec, factory)
    return BuiltPolicy(spec, factory, wrap_tools=lambda tools: one_retriever(tools, retriever))


def _heuristic(spec: PolicySpec, options: PolicyOptions) -> BuiltPolicy:
    """``heuristic``: the agent with the learned ranker (search rerank, pruning, final list);
    ``heuristic-plain``: the same agent ordering by RRF, for comparison; ``heuristic-text``: the
    default plus the learned text stage on its final list (``options.text_stage``)."""
    from sleuth.policies.heuristic import HeuristicAgent
    from sleuth.policies.scripted import ScriptedPolicy

    HeuristicAgent(**options.agent)  # bad knobs fail now, not in a worker thread

    def factory(seed: int) -> Policy:
        return _named(ScriptedPolicy(HeuristicAgent(**options.agent)), spec.kind)

    if spec.kind == "heuristic-plain":
        return BuiltPolicy(spec, factory)
    stage = _text_stage(spec, options)
    from sleuth.ranking.adapted import index_ranker, resolve_ranker
    from sleuth.ranking.model import RankerModel
    from sleuth.ranking.selector import Selector
    from sleuth.tools.toolbox import Toolbox

    ranker = options.ranker
    # A file or "shipped" loads now (a bad file fails before any run); None is the searched
    # index's adapted ranker (`sleuth adapt`), else the shipped one, found when bound to tools.
    fixed = ranker if isinstance(ranker, RankerModel) else resolve_ranker(ranker, None)

    def wrap(tools: Tools) -> Tools:
        if not isinstance(tools, Toolbox):
            return tools
        adapted = index_ranker(getattr(tools.index, "path", None)) if ranker is None else None
        return tools.with_ranker(adapted or fixed)

    def bind(tools: Tools) -> PolicyFactory:
        if not isinstance(tools, Toolbox):
            return factory
        selector = Selector(tools.index, tools.ranker or fixed)

        def selecting(seed: int) -> Policy:
            agent = HeuristicAgent(selector=selector, text_stage=stage, **options.agent)
            return _named(ScriptedPolicy(agent), spec.kind)

        return selecting

    return BuiltPolicy(spec, factory, wrap_tools=wrap, bind=bind)


def _text_stage(spec: PolicySpec, options: PolicyOptions) -> Any:
    """``heuristic-text``'s stage, loaded now (a bad folder fails before any run); else None."""
    if spec.kind != "heuristic-text":
        return None
    if not options.text_stage:
        raise InputError(
            "heuristic-text needs a text stage folder (train one: benchmarks/text_stage.py)"
        )
    from sleuth.ranking.textstage import load_text_stage

    return load_text_stage(options.text_stage)


SCRIPTED: dict[str, Builder] = {
    "heuristic": _heuristic,
    "single-pass": _single_pass,
    "bm25": _single_pass,
    "dense": _single_pass,
    "heuristic-plain": _heuristic,
    "heuristic-text": _heuristic,
}
"""Scripted (model-free) policies by name; add an entry to offer a new one."""


# ---------------------------------------------------------------- models


def _openai_chat(spec: PolicySpec, options: PolicyOptions) -> BuiltPolicy:
    from sleuth.policies.openai_chat import OpenAIChatPolicy

    def factory(seed: int) -> Policy:
        return OpenAIChatPolicy(
            spec.model or "",
            base_url=spec.base_url,
            api_key=options.api_key,
            temperature=options.temperature,
            timeout_s=options.timeout_s,
            max_retries=options.max_retries,
        )

    return BuiltPolicy(spec, factory)


def _harmony(spec: PolicySpec, options: PolicyOptions) -> BuiltPolicy:
    from sleuth.policies.harmony import HarmonyPolicy

    temperature = 1.0 if options.temperature is None else options.temperature

    def factory(seed: int) -> Policy:
        return HarmonyPolicy(
            model=spec.model or "",
            base_url=spec.base_url,
            api_key=options.api_key,
            temperature=temperature,
            timeout_s=options.timeout_s,
            max_retries=options.max_retries,
        )

    return BuiltPolicy(spec, factory, configure=lambda config: replace(config, echo_reasoning=True))


def shipped_adapter() -> Path | None:
    """The SFT adapter that ships with sleuth, when this install has one."""
    folder = Path(str(resources.files("sleuth").joinpath(SHIPPED_ADAPTER)))
    return folder if (folder / "adapter_config.json").is_file() else None


def adapter_manifest(adapter: str | Path | None) -> PolicyManifest | None:
    """An adapter's manifest (training settings and task ids); None when it has none."""
    return read_manifest(adapter)


def _local(spec: PolicySpec, options: PolicyOptions) -> BuiltPolicy:
    from sleuth.policies.local_hf import LocalHFPolicy, smollm2_gguf_path

    adapter = options.adapter or (None if spec.model else shipped_adapter())
    path = spec.model or str(smollm2_gguf_path())
    for needed in (path, adapter):
        if needed is not None and not Path(needed).exists():
            raise InputError(f"policy {spec}: {needed} does not exist")
    manifest = read_manifest(adapter)  # checked before the weights load
    if manifest and manifest.unknown_tools():
        raise InputError(
            f"{adapter}: trained with the tools {manifest.tool_names}, this sleuth has "
            f"{TOOL_NAMES}; retrain it (sleuth train sft) or use the sleuth it was trained with"
        )
    final_list = options.final_list or (manifest.final_list if manifest else "model")
    loaded = LocalHFPolicy.load(path, adapter=adapter)
    name = Path(str(adapter or path)).name
    factory = _local_factory(loaded, options.engine, options.temperature or 0.0, name)
    final_docs = manifest.harness.max_documents if manifest else MAX_DOCUMENTS
    bind = _selected_final_list(factory, final_docs) if final_list == "selector" else None
    if manifest is None:
        return BuiltPolicy(spec, factory, bind=bind)
    trained = manifest
    return BuiltPolicy(
        spec,
        factory,
        wrap_tools=lambda tools: _with_tool_settings(tools, trained.tools),
        configure=trained.apply,
        bind=bind,
    )


def _selected_final_list(
    factory: PolicyFactory, final_docs: int
) -> Callable[[Tools], PolicyFactory]:
    """Binds a model's factory to the tools it searches: the selector over their index (and
    their ranker, else the shipped one) writes the final list, ``final_docs`` long."""

    def bind(tools: Tools) -> PolicyFactory:
        from sleuth.policies.selecting import SelectedFinalList
        from sleuth.ranking.adapted import index_ranker
        from sleuth.ranking.model import load_ranker
        from sleuth.ranking.selector import Selector
        from sleuth.tools.toolbox import Toolbox

        if not isinstance(tools, Toolbox):
            return factory
        ranker = tools.ranker or index_ranker(getattr(tools.index, "path", None))
        selector = Selector(tools.index, ranker or load_ranker(None))

        def selecting(seed: int) -> Policy:
            return SelectedFinalList(factory(seed), selector, final_docs)

        return selecting

    return bind


def _local_factory(loaded: Any, engine: str, temperature: float, name: str) -> PolicyFactory:
    """Fresh policies over the loaded weights, sampled by ``engine``."""
    if engine == "ct2" or (engine == AUTO_ENGINE and _has_ct2()):
        from sleuth.policies.ct2 import CT2RolloutEngine

        ct2 = CT2RolloutEngine(loaded.model, loaded.tokenizer, Sampling(temperature))
        ct2.sync(loaded.model, step=0)
        return lambda seed: ct2.policy(seed, name=name)
    sampling = replace(loaded.sampling, temperature=temperature)
    return lambda seed: loaded.fresh(sampling=sampling, seed=seed, name=name)


def _has_ct2() -> bool:
    return importlib.util.find_spec("ctranslate2") is not None


def _with_tool_settings(tools: Tools, settings: ToolSettings) -> Tools:
    from sleuth.tools.toolbox import Toolbox, ToolConfig

    if not isinstance(tools, Toolbox):
        return tools
    ranker = tools.ranker
    if settings.ranker and ranker is None:  # trained on the shipped ranker's search order
        from sleuth.ranking.model import load_ranker

        ranker = load_ranker(None)
    config = ToolConfig(search_max_chunks=settings.search_max_chunks)
    return Toolbox(tools.index, config, tools.reranker, tools.counter, ranker=ranker)


_SERVED_BUILDERS: dict[str, Builder] = {
    "local": _local,
    "openai": _openai_chat,
    "harmony": _harmony,
}
