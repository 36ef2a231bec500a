"""The distill-then-RL recipe's settings: one typed :class:`RecipeConfig` and its presets.

Every field defaults to the library's own default for that setting (``SFTConfig``, ``RLConfig``,
``StudentConfig``, the harness budget, ``ToolConfig``, the heuristic agent), read from those
classes, so a setting has one default. A preset overrides only what it must, each override with
its reason; the sizes (how many questions, steps and workers) have no library default and every
preset states them. Only time differs between presets, not the method.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sleuth.harness.budget import BUDGET_TOKENS, MAX_TURNS, PER_CALL_TOKENS, BudgetConfig
from sleuth.harness.loop import HarnessConfig
from sleuth.harness.prompt import MAX_DOCUMENTS
from sleuth.policies.heuristic import HeuristicAgent
from sleuth.reward import RewardConfig
from sleuth.tools.spec import ORIGINAL_TOOLS
from sleuth.tools.toolbox import ToolConfig
from sleuth.train.model import StudentConfig
from sleuth.train.rl_types import RLConfig
from sleuth.train.sft import SFTConfig

SMALL_PROMPT = """\
You are a search subagent. Another agent will read the documents you find and answer the query; \
do not answer it yourself. Search the corpus with search_corpus, read a promising document with \
read_document, and drop chunks you do not need with prune_chunks. When you have the evidence, \
reply without any tool call and list up to {n} documents, most relevant first, each as:
<Document id="DOC_ID"><Justification>One sentence on what it shows.</Justification></Document>"""
"""The compact system prompt: a 135M model cannot follow the full Context-1 prompt."""


@dataclass(frozen=True)
class RecipeConfig:
    """Teacher runs, SFT, CISPO and the held-out evaluations of one recipe run."""

    # ---- sizes (the recipe's own: no library default)
    heldout_per_dataset: int
    """Held-out questions evaluated, from each of the three datasets."""
    sft_per_source: int
    """Teacher runs per source (three datasets + the offline generator's synthetic tasks)."""
    rl_pool: int
    """Most training questions RL draws from (disjoint from SFT's)."""
    rl_steps: int
    """CISPO steps."""
    workers: int
    """Concurrent teacher runs and RL rollouts."""
    eval_steps: tuple[int, ...] = ()
    """RL steps evaluated on the held-out set besides the last."""
    embedder: str = "minilm"
    """Embedder of the pooled index (``Index.create``'s)."""

    # ---- harness and tools: the teacher's, the student's and what ships in the manifest
    budget: int = BUDGET_TOKENS
    """T, the context budget."""
    per_call: int = PER_CALL_TOKENS
    """Most tokens one tool call may return."""
    max_turns: int = MAX_TURNS
    """Policy calls per run (``BudgetConfig.max_turns``)."""
    max_reply_tokens: int | None = None
    """Cap on one reply (None: T - X, the report's)."""
    final_docs: int = MAX_DOCUMENTS
    """Length of the final list asked for."""
    chunks_per_search: int = ToolConfig.search_max_chunks
    """Chunks one search returns (``ToolConfig.search_max_chunks``)."""
    teacher_queries: int = HeuristicAgent.max_queries
    """The heuristic teacher's first-turn searches (``HeuristicAgent.max_queries``)."""
    teacher_hops: int = HeuristicAgent.max_hops
    """The teacher's bridge rounds (``HeuristicAgent.max_hops``)."""
    teacher_bridge_entities: int = HeuristicAgent.bridge_entities
    """The teacher's searches per bridge round (``HeuristicAgent.bridge_entities``)."""

    # ---- student
    device: str = StudentConfig.device
    """``cpu`` or ``cuda`` (``StudentConfig.device``; on cpu RL samples with CTranslate2)."""
    dtype: str = StudentConfig.dtype
    """Weights dtype (``StudentConfig.dtype``)."""
    lora_r: int = StudentConfig.lora_r
    """LoRA rank (``StudentConfig.lora_r``)."""
    lora_alpha: int = StudentConfig.lora_alpha
    """LoRA scale numerator (``StudentConfig.lora_alpha``)."""

    # ---- SFT
    sft_epochs: int = SFTConfig.epochs
    """``SFTConfig.epochs``."""
    sft_batch: int = SFTConfig.batch_size
    """``SFTConfig.batch_size``."""
    sft_lr: float = SFTConfig.lr
    """``SFTConfig.lr``."""

    # ---- CISPO
    queries_per_step: int = RLConfig.queries_per_step
    """``RLConfig.queries_per_step``."""
    rollouts_per_query: int = RLConfig.rollouts_per_query
    """G (``RLConfig.rollouts_per_query``)."""
    substeps: int = RLConfig.substeps
    """``RLConfig.substeps``."""
    rl_lr: float = RLConfig.lr
    """``RLConfig.lr``."""
    rollout_compute_type: str = RLConfig.rollout_compute_type
    """CTranslate2 rollouts' compute type (``RLConfig.rollout_compute_type``)."""
    autocast_bf16: bool = RLConfig.autocast_bf16
    """The update under bfloat16 autocast (``RLConfig.autocast_bf16``)."""
    credit_malformed_list: bool = RewardConfig.model_fields["credit_malformed_list"].default
    """RL reward: score a malformed answer's salvaged list (SPEC)."""

    def harness(self) -> HarnessConfig:
        """The harness every phase runs under: the compact prompt and this budget."""
        reply = self.max_reply_tokens
        budget = BudgetConfig(
            total=self.budget,
            per_call_tokens=self.per_call,
            reply_reserve=max(reply, 256) if reply else BudgetConfig.reply_reserve,
            max_turns=self.max_turns,
        )
        return HarnessConfig(
            budget=budget,
            max_reply_tokens=reply,
            max_documents=self.final_docs,
            system_prompt=SMALL_PROMPT.format(n=self.final_docs),
            tools=ORIGINAL_TOOLS,  # the small prompt explains these four; the manifest records them
        )

    def teacher(self) -> dict[str, int]:
        """The heuristic teacher's knobs."""
        return {
            "max_queries": self.teacher_queries,
            "bridge_entities": self.teacher_bridge_entities,
            "max_hops": self.teacher_hops,
        }


CPU_SMALL = RecipeConfig(
    # 2 CPU cores, hours; every phase and every RL step resumes.
    heldout_per_dataset=22,  # 66 held-out questions: intervals of about ±6 points of R@5
    sft_per_source=80,  # 320 teacher runs: SFT in about an hour on 2 cores
    rl_pool=160,
    rl_steps=15,  # 10-13 min a step on 2 cores
    workers=8,  # concurrent rollouts share CTranslate2 decode batches
    eval_steps=(8,),  # the middle of the run, besides the last
    budget=2304,  # a 135M model cannot use the report's 32k; 2 turns of 2 chunks fit
    per_call=640,  # two chunks of a search
    max_turns=3,  # search, maybe search again, answer
    max_reply_tokens=160,  # a 5-document list with one-line justifications
    final_docs=5,  # what R@5 reads; a 135M model does not write 30 entries reliably
    chunks_per_search=2,  # keeps a search result within per_call
    teacher_queries=2,  # the teacher's runs must fit the student's 2.3k budget
    teacher_hops=1,  # one bridge round: a second does not fit 2.3k tokens
    teacher_bridge_entities=2,  # two searches a round, as the first turn
    lora_r=16,  # enough for 320 short runs (alpha stays 32: a scale of 2)
    sft_epochs=1,  # one pass: the teacher's format is learned within it (loss flat after)
    sft_lr=5e-4,  # a 135M model with LoRA r 16 in one epoch needs a larger step than 1e-4
    queries_per_step=4,  # 4 x 8 rollouts a step: about 10 min on 2 cores
    substeps=2,  # 32 rollouts make two minibatches
    # At 5e-5, 15 steps moved the adapter 6% as far as SFT had (drift at step 15: 0.063)
    # and held-out R@5 did not move beyond its interval; 4x lets RL move it about 25%.
    rl_lr=2e-4,  # see above: 5e-5 left held-out R@5 where SFT put it
    rollout_compute_type="int8",  # ~1.6x the float32 rollouts; mismatch logged per step
    autocast_bf16=True,  # ~1.45x the float32 update on 2 cores
)

CUDA = RecipeConfig(
    # One GPU (an H100/H200 class card): bigger budget, more turns, 16 x 8 rollouts a step.
    heldout_per_dataset=22,  # the same held-out questions as cpu-small
    sft_per_source=100,
    rl_pool=200,
    rl_steps=20,
    workers=16,
    eval_steps=(5, 10, 15),  # a quarter, half and three quarters of the run
    budget=8192,  # still a small model: a quarter of the report's T
    per_call=1536,  # four chunks of a search
    max_turns=6,  # room for two bridge rounds and a read
    max_reply_tokens=256,  # a 10-document list with one-line justifications
    final_docs=10,  # R@5 and R@10 both read from it
    chunks_per_search=4,  # keeps a search result within per_call
    teacher_queries=3,  # the teacher's runs must fit 8k
    teacher_hops=2,  # two bridge rounds fit 8k
    device="cuda",  # the recipe's point
    dtype="bfloat16",  # the GPU's training type
    lora_alpha=64,  # a scale of 2, as cpu-small
    sft_lr=5e-4,  # as cpu-small
    queries_per_step=16,  # a GPU step samples 128 rollouts in the time 2 cores take for 32
    rl_lr=2e-5,  # 4x the queries per step: a smaller step than cpu-small's
)

SMOKE = replace(
    CPU_SMALL,
    # Minutes: does every phase of cpu-small run; the numbers mean nothing.
    heldout_per_dataset=1,
    sft_per_source=1,
    rl_pool=4,
    rl_steps=2,
    workers=1,
    eval_steps=(1,),  # a point between SFT and the last step
    max_reply_tokens=48,  # short replies: minutes, not hours
    sft_batch=2,  # a batch from the few kept runs
    queries_per_step=2,  # 2 x 2 rollouts a step
    rollouts_per_query=2,  # the fewest a group can compare
    substeps=1,  # 4 rollouts make one minibatch
)

RECIPES: dict[str, RecipeConfig] = {"cpu-small": CPU_SMALL, "cuda": CUDA, "smoke": SMOKE}
"""The recipes ``sleuth train recipe NAME`` runs."""
