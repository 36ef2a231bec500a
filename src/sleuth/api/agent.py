"""The subagent from Python: :class:`Agent` (a policy bound to an index, built once),
:func:`search`/:func:`asearch` (one query) and :func:`evaluate` (a task set).

``sleuth run``, ``sleuth eval`` and the MCP server's ``search`` tool go through these, so the
command line, MCP and Python run the same code.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sleuth.api.index import Index
from sleuth.errors import ConfigError
from sleuth.harness.loop import HarnessConfig
from sleuth.harness.run import RunResult, run_query
from sleuth.index.store import Index as StoreIndex
from sleuth.policies.spec import (
    DEFAULT_POLICY,
    BuiltPolicy,
    PolicyFactory,
    PolicyOptions,
    PolicySpec,
    build_policy,
)
from sleuth.tasks.schema import Task, load_tasks
from sleuth.tools.base import Tools
from sleuth.tools.rerank import make_reranker
from sleuth.tools.toolbox import Toolbox

if TYPE_CHECKING:
    from sleuth.eval.records import EvalSummary
    from sleuth.eval.runner import EvalConfig

IndexLike = StoreIndex | str | os.PathLike[str] | Tools
"""An index (opened), an index folder, or retrieval tools already built (e.g. a ``Toolbox``)."""
PolicyLike = str | PolicySpec | BuiltPolicy | PolicyFactory
"""A policy spec (``heuristic``, ``local``, ``openai:MODEL@URL``...; see
:mod:`sleuth.policies.spec`), a built one, or a seed -> fresh policy function."""


def open_tools(index: IndexLike, reranker: str | None = None) -> Tools:
    """The retrieval tools over ``index`` (opened when it is a folder).

    Raises:
        InputError: the folder is not a finished index, or a bad reranker spec.
    """
    if isinstance(index, str | os.PathLike):
        index = Index.open(Path(index))
    if isinstance(index, Index):
        return index.tools(reranker)
    if isinstance(index, StoreIndex):
        return Toolbox(index, reranker=make_reranker(reranker))
    if reranker not in (None, "none"):
        raise ConfigError("a reranker needs an index, not tools already built")
    return index


def _built(policy: PolicyLike, options: PolicyOptions | None) -> BuiltPolicy | PolicyFactory:
    if isinstance(policy, str | PolicySpec):
        return build_policy(policy, options)
    if options is not None:
        raise ConfigError("policy options apply to a spec; this policy is already built")
    return policy


class Agent:
    """The search subagent over one index with one policy, built once (weights load here) and
    reused: every :meth:`search` gets a fresh policy, so concurrent searches are independent.

    Example::

        agent = sleuth.Agent(sleuth.Index.open("my-index"), policy="heuristic")
        result = agent.search("who founded the company that makes X?")
    """

    def __init__(
        self,
        index: IndexLike,
        policy: PolicyLike = DEFAULT_POLICY,
        *,
        options: PolicyOptions | None = None,
        harness: HarnessConfig | None = None,
        budget: int | None = None,
        reranker: str | None = None,
    ):
        """
        Args:
            index: what to search (see :data:`IndexLike`).
            policy: who drives the search (see :data:`PolicyLike`); default ``heuristic``,
                which needs no model.
            options: API key, adapter, engine, ranker... of a spec (:class:`PolicyOptions`).
            harness: loop settings; a policy adds what it needs (a trained adapter's budget).
            budget: token budget T; overrides the harness's when given.
            reranker: a reranker spec for ``search_corpus``.

        Raises:
            InputError: a bad spec, option, index or reranker, found before any search.
        """
        built = _built(policy, options)
        tools = open_tools(index, reranker)
        if isinstance(built, BuiltPolicy):
            self.tools, self.make_policy = built.for_tools(tools)
            self.harness = built.harness(harness)
        else:
            self.tools, self.make_policy = tools, built
            self.harness = harness or HarnessConfig()
        self.policy = built
        self.budget = budget

    def search(
        self, query: str, *, trajectory: str | Path | None = None, seed: int = 0
    ) -> RunResult:
        """Run the subagent on ``query``.

        Args:
            query: the question to find supporting documents for.
            trajectory: where to write the trajectory JSONL (default
                ``$SLEUTH_HOME/runs/<id>.jsonl``).
            seed: the policy's seed (sampling policies).

        Returns:
            a :class:`RunResult`: ``documents`` (id, rank, justification), ``trajectory``,
            ``turns``, ``tool_calls``, ``stop_reason``, ``error``, ``timings``.

        Raises:
            InputError: a blank query or a budget out of range. A policy that fails (an endpoint
                down) does not raise: ``result.error`` says why.
        """
        return run_query(
            self.tools,
            query,
            policy=self.make_policy(seed),
            budget=self.budget,
            trajectory=trajectory,
            config=self.harness,
        )

    async def asearch(
        self, query: str, *, trajectory: str | Path | None = None, seed: int = 0
    ) -> RunResult:
        """:meth:`search` on a worker thread, so an event loop serving many users keeps running
        while the subagent searches; concurrent calls run in parallel."""
        return await asyncio.to_thread(self.search, query, trajectory=trajectory, seed=seed)


def search(
    query: str,
    *,
    index: IndexLike,
    policy: PolicyLike = DEFAULT_POLICY,
    budget: int | None = None,
    trajectory: str | Path | None = None,
    options: PolicyOptions | None = None,
) -> RunResult:
    """Run the subagent once: ``Agent(index, policy, ...).search(query)``. For many queries,
    build an :class:`Agent` once (a policy's weights and an index folder load per call here).

    Raises:
        InputError: a bad spec, index, query or budget.
    """
    agent = Agent(index, policy, options=options, budget=budget)
    return agent.search(query, trajectory=trajectory)


async def asearch(
    query: str,
    *,
    index: IndexLike,
    policy: PolicyLike = DEFAULT_POLICY,
    budget: int | None = None,
    trajectory: str | Path | None = None,
    options: PolicyOptions | None = None,
) -> RunResult:
    """:func:`search` on a worker thread, for ``asyncio`` applications."""
    return await asyncio.to_thread(
        search,
        query,
        index=index,
        policy=policy,
        budget=budget,
        trajectory=trajectory,
        options=options,
    )


def evaluate(
    tasks: Sequence[Task] | str | os.PathLike[str],
    *,
    index: IndexLike,
    out: str | os.PathLike[str],
    policy: PolicyLike = DEFAULT_POLICY,
    config: EvalConfig | None = None,
    options: PolicyOptions | None = None,
) -> EvalSummary:
    """Evaluate ``policy`` on a task set: concurrent, resumable (call again with the same
    ``out``); writes per-query records, ``summary.json``, plots and ``report.html`` there.

    Args:
        tasks: tasks, or a task JSONL file (SPEC §8).
        index: what to search (see :data:`IndexLike`).
        out: the output folder.
        policy: who drives the search (see :data:`PolicyLike`); also ``bm25``/``dense``.
        config: concurrency, rollouts, fusion, harness settings, β (:class:`EvalConfig`).
        options: a spec's options (:class:`PolicyOptions`).

    Returns:
        the summary (also in ``out/summary.json``): metrics overall and by hop level, domain,
        source.

    Raises:
        InputError: bad tasks, settings or index, or ``out`` holds a run with other settings.
    """
    from sleuth.eval.runner import run_eval  # its reports load matplotlib: only when evaluating

    task_list = load_tasks(Path(tasks)) if isinstance(tasks, str | os.PathLike) else list(tasks)
    return run_eval(task_list, _built(policy, options), open_tools(index), Path(out), config)
