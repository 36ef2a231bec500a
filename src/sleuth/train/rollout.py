"""Rollouts: tasks run through the harness by a sampling policy, many at once.

A rollout engine says where the policy's tokens come from; the trainer needs each turn's prompt
ids, sampled ids and behaviour log-probs, which every engine here records.

* :class:`LocalRolloutEngine` samples the model being trained in-process with ``LocalHFPolicy``
  (CPU or GPU). It shares the trainer's weights, so syncing after a step costs nothing.
* :class:`OpenAICompletionsEngine` is the seam for scale: an OpenAI-compatible completions server
  that returns token ids and log-probs (vLLM). Prompts are rendered here with the student's chat
  template and sent as token ids, so the server samples on exactly the tokens the trainer sees;
  after each step the LoRA adapter is saved and loaded into the server at runtime.
* :func:`collect_rollouts_ray` spreads rollouts over Ray workers (other cores or machines), each
  with its own tools and engine; Ray is optional.

Rollouts of one call run concurrently on threads: retrieval is I/O- and native-bound, and a
server engine spends its time waiting on HTTP.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from sleuth.harness.loop import Harness, HarnessConfig
from sleuth.harness.policy import Policy
from sleuth.harness.trajectory import Trajectory
from sleuth.policies.local_hf import LocalHFPolicy
from sleuth.policies.openai_completions import OpenAICompletionsPolicy
from sleuth.policies.sampling import Sampling
from sleuth.policies.spec import PolicyFactory
from sleuth.tasks.schema import Task
from sleuth.tools.base import Tools

RAY_INSTALL = "pip install 'ray[default]'"


@dataclass(frozen=True)
class RolloutJob:
    """One rollout to run: a task, the seed of its sampler, where to write its trajectory."""

    task: Task
    seed: int
    trajectory_path: Path | None = None


class RolloutEngine(Protocol):
    """Where RL rollouts sample from."""

    def policy(self, seed: int) -> Policy:
        """A sampling policy that records prompt ids, sampled ids and behaviour log-probs."""
        ...

    def sync(self, model: Any, step: int) -> None:
        """Make later policies sample from ``model``'s current weights."""
        ...


def run_rollout(
    make_policy: PolicyFactory, tools: Tools, config: HarnessConfig, job: RolloutJob
) -> Trajectory:
    """One task through the harness; policy and tool failures are recorded, not raised."""
    harness = Harness(tools, make_policy(job.seed), config)
    return harness.run(job.task.query, trajectory_path=job.trajectory_path)


def collect_rollouts(
    make_policy: PolicyFactory,
    tools: Tools,
    config: HarnessConfig,
    jobs: Sequence[RolloutJob],
    workers: int = 1,
) -> list[Trajectory]:
    """Run ``jobs`` on ``workers`` threads; trajectories come back in job order."""
    if workers <= 1 or len(jobs) < 2:
        return [run_rollout(make_policy, tools, config, job) for job in jobs]
    with ThreadPoolExecutor(workers, thread_name_prefix="sleuth-rollout") as pool:
        return list(pool.map(lambda job: run_rollout(make_policy, tools, config, job), jobs))


class LocalRolloutEngine:
    """Samples the trainer's own model in-process (transformers, CPU or GPU).

    Args:
        model / tokenizer: the model being trained (LoRA-wrapped or not) and its tokenizer.
        sampling: behaviour log-probs are always taken at temperature 1
            (``LocalHFPolicy.generate``), so RL keeps the default :class:`Sampling`.
    """

    def __init__(self, model: Any, tokenizer: Any, sampling: Sampling | None = None):
        self.model = model
        self.tokenizer = tokenizer
        self.sampling = sampling or Sampling()

    def policy(self, seed: int) -> LocalHFPolicy:
        return LocalHFPolicy(
            self.model, self.tokenizer, self.sampling, seed=seed, name="local-hf-rl"
        )

    def sync(self, model: Any, step: int) -> None:
        """Same weights object; only switch to eval mode so concurrent samplers agree on it."""
        self.model = model
        model.eval()


class OpenAICompletionsEngine:
    """Rollouts from a vLLM server; after each step the new LoRA adapter is loaded into it.

    Start vLLM with LoRA and runtime loading on, e.g.
    ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True vllm serve BASE --enable-lora --max-lora-rank 32``,
    and give an ``adapter_root`` the server can read (a shared filesystem across machines).

    Args:
        base_url: the server's ``.../v1`` address.
        base_model: the served base model name (used until the first sync).
        tokenizer: the student's tokenizer (prompts are rendered here).
        adapter_root: where each step's adapter is saved for the server to load.
    """

    def __init__(
        self,
        base_url: str,
        base_model: str,
        tokenizer: Any,
        adapter_root: str | Path,
        api_key: str = "EMPTY",
        sampling: Sampling | None = None,
        timeout_s: float = 300.0,
    ):
        import openai

        self.base_url = base_url.rstrip("/")
        self.client = openai.OpenAI(base_url=self.base_url, api_key=api_key, timeout=timeout_s)
        self.served = base_model
        self.base_model = base_model
        self.tokenizer = tokenizer
        self.adapter_root = Path(adapter_root)
        self.sampling = sampling or Sampling()

    def policy(self, seed: int) -> OpenAICompletionsPolicy:
        return OpenAICompletionsPolicy(
            self.client, self.served, self.tokenizer, self.sampling, seed
        )

    def sync(self, model: Any, step: int) -> None:
        """Save the adapter and load it into the server under a per-step name."""
        if not hasattr(model, "peft_config"):
            raise NotImplementedError(
                "OpenAICompletionsEngine syncs LoRA adapters only; full fine-tuning needs a "
                "weight-broadcast engine (e.g. verl or SkyRL with vLLM)"
            )
        folder = self.adapter_root / f"step_{step:06d}"
        model.save_pretrained(folder)
        name = f"{self.base_model}-step{step}"
        self._post("/load_lora_adapter", {"lora_name": name, "lora_path": str(folder.resolve())})
        if self.served != self.base_model:
            self._post("/unload_lora_adapter", {"lora_name": self.served})
        self.served = name

    def _post(self, path: str, body: dict[str, Any]) -> None:
        import httpx

        response = httpx.post(self.base_url + path, json=body, timeout=120.0)
        if response.status_code >= 400:
            raise RuntimeError(f"{path} failed ({response.status_code}): {response.text[:300]}")


def _require_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ImportError(f"Ray rollout workers need Ray: {RAY_INSTALL}") from exc
    return ray


def collect_rollouts_ray(
    make_policy_factory: Callable[[], PolicyFactory],
    make_tools: Callable[[], Tools],
    config: HarnessConfig,
    jobs: Sequence[RolloutJob],
    num_workers: int,
) -> list[Trajectory]:
    """Run ``jobs`` on ``num_workers`` Ray actors (``ray.init`` first, e.g. ``address="auto"``).

    Each actor builds its own tools (open the index by path) and policy factory (typically an
    :class:`OpenAICompletionsEngine`'s ``policy`` pointing at a shared vLLM server), since
    neither a loaded index nor a client crosses process boundaries. Trajectories come back in
    job order.
    """
    ray = _require_ray()

    @ray.remote
    class RolloutWorker:
        def __init__(self) -> None:
            self.make_policy = make_policy_factory()
            self.tools = make_tools()

        def run(self, job: RolloutJob) -> dict[str, Any]:
            trajectory = run_rollout(self.make_policy, self.tools, config, job)
            dumped: dict[str, Any] = trajectory.model_dump(mode="json")
            return dumped

    workers = [RolloutWorker.remote() for _ in range(max(num_workers, 1))]  # type: ignore[attr-defined]  # ray adds .remote
    refs = [workers[i % len(workers)].run.remote(job) for i, job in enumerate(jobs)]
    return [Trajectory.model_validate(d) for d in ray.get(refs)]
