"""Task records (SPEC §8) and readers that turn QA benchmarks into a corpus plus tasks."""

from sleuth.tasks.benchmarks import (
    read_2wiki,
    read_benchmark,
    read_hotpotqa,
    read_musique,
    title_doc_id,
)
from sleuth.tasks.schema import TASK_SCHEMA_VERSION, Task, load_tasks, save_tasks

__all__ = [
    "TASK_SCHEMA_VERSION",
    "Task",
    "load_tasks",
    "read_2wiki",
    "read_benchmark",
    "read_hotpotqa",
    "read_musique",
    "save_tasks",
    "title_doc_id",
]
