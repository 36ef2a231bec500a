"""Readers that turn multi-hop QA benchmarks into a corpus plus tasks.

Supported: HotpotQA (distractor setting, original JSON list), MuSiQue (original ``{"data": [...]}``
JSON, a JSON list, or the official JSONL), and 2WikiMultihopQA (original JSON list or FlashRAG
JSONL). Every question's context paragraphs are pooled into one corpus with ONE document per
Wikipedia title, so a title shared by many questions is indexed once and becomes a distractor
for all of them.

Pooling rules (chosen so gold text is never lost):

* A title seen with several different paragraph texts (MuSiQue ships different paragraphs of one
  article) keeps all of them, in first-seen order, joined by a blank line. Texts that differ only in
  case, spacing or punctuation count as the same paragraph and are kept once.
* Document ids are :func:`title_doc_id` slugs: lowercase ASCII words joined by ``-``. They contain
  no ``_``, so a chunk id ``<doc_id>_<idx>`` always maps back with ``doc_id_of``. Titles whose
  slugs collide (``Romeo + Juliet`` / ``Romeo × Juliet``) each get a short hash of the exact title
  appended, so ids are stable for a given set of input files.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sleuth.corpus import Document
from sleuth.errors import InputError, describe_validation_error
from sleuth.io import JsonLineError, json_lines
from sleuth.tasks.schema import Task

Benchmark = tuple[list[Document], list[Task]]
PathLike = str | Path

DOMAIN = "wiki"
_WIKI2_ONLY_TYPES = {"compositional", "inference", "bridge_comparison"}
# bridge_comparison compares two entities each reached through a bridge: four documents.
_WIKI2_HOPS = {"compositional": 2, "inference": 2, "comparison": 2, "bridge_comparison": 4}
_FOLD = str.maketrans(
    {"ł": "l", "Ł": "L", "ø": "o", "Ø": "O", "đ": "d", "Đ": "D", "ı": "i"}
    | {"æ": "ae", "Æ": "AE", "œ": "oe", "Œ": "OE", "ß": "ss", "þ": "th", "Þ": "Th"}
)
_HOPS_PREFIX = re.compile(r"^(\d+)hop")


@dataclass
class _Record:
    """One question as parsed, before titles are mapped to document ids."""

    fields: dict[str, Any]
    gold_titles: list[str]
    paragraphs: list[tuple[str, str]]
    origin: str = ""  # the file it came from, for error messages


@dataclass
class _Pool:
    """Paragraphs grouped by title; remembers which datasets contributed each title."""

    paragraphs: dict[str, list[str]] = field(default_factory=dict)
    keys: dict[str, set[str]] = field(default_factory=dict)
    sources: dict[str, set[str]] = field(default_factory=dict)

    def add(self, title: str, text: str, source: str) -> None:
        paras = self.paragraphs.setdefault(title, [])
        keys = self.keys.setdefault(title, set())
        self.sources.setdefault(title, set()).add(source)
        key = _text_key(text)
        if key and key not in keys:
            keys.add(key)
            paras.append(text)


def title_doc_id(title: str) -> str:
    """A readable, id-safe slug of a title (collisions are resolved by the caller)."""
    folded = unicodedata.normalize("NFKD", title.translate(_FOLD))
    ascii_text = folded.encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    return slug or f"doc-{_short_hash(title)}"


def _short_hash(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:8]


def _text_key(text: str) -> str:
    return re.sub(r"\W+", "", text.casefold())


def _clean_title(title: Any) -> str:
    if not isinstance(title, str) or not title.strip():
        raise ValueError(f"bad title {title!r}")
    return unicodedata.normalize("NFC", title).strip()


def _join_sentences(sentences: Iterable[str]) -> str:
    return " ".join(s.strip() for s in sentences if s.strip())


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


# --- per-format record parsers -------------------------------------------------------------


def _context_record(rec: dict[str, Any], hops: int) -> _Record:
    """HotpotQA and original 2Wiki share this shape: ``context`` and ``supporting_facts`` lists."""
    return _Record(
        fields={
            "id": str(rec["_id"]),
            "query": rec["question"],
            "answer": str(rec["answer"]),
            "hops": hops,
            "question_type": rec.get("type"),
        },
        gold_titles=_unique(_clean_title(title) for title, _ in rec["supporting_facts"]),
        paragraphs=[(_clean_title(t), _join_sentences(s)) for t, s in rec["context"]],
    )


def _hotpot_record(rec: dict[str, Any]) -> _Record:
    return _context_record(rec, hops=2)


def _wiki2_record(rec: dict[str, Any]) -> _Record:
    return _context_record(rec, hops=_wiki2_hops(rec.get("type"), rec["supporting_facts"]))


def _wiki2_hops(qtype: Any, supporting: Sequence[Any]) -> int:
    return _WIKI2_HOPS.get(qtype) or max(1, len(supporting))


def _flashrag_record(rec: dict[str, Any]) -> _Record:
    """FlashRAG keeps the original context and supporting facts as columns under ``metadata``."""
    meta = rec["metadata"]
    context = meta["context"]
    sentences = context.get("content", context.get("sentences"))
    gold = _unique(_clean_title(t) for t in meta["supporting_facts"]["title"])
    answers = [str(a) for a in rec["golden_answers"]]
    return _Record(
        fields={
            "id": str(rec["id"]),
            "query": rec["question"],
            "answer": answers[0],
            "answer_aliases": [a for a in _unique(answers[1:]) if a != answers[0]],
            "hops": _wiki2_hops(meta.get("type"), gold),
            "question_type": meta.get("type"),
        },
        gold_titles=gold,
        paragraphs=[
            (_clean_title(t), _join_sentences(s))
            for t, s in zip(context["title"], sentences, strict=True)
        ],
    )


def _musique_record(rec: dict[str, Any]) -> _Record | None:
    """Gold = ``is_supporting`` paragraphs, ordered by the hop that uses them.

    MuSiQue-Full's unanswerable twins (``answerable: false``) have no gold and are skipped.
    """
    if rec.get("answerable") is False:
        return None
    steps = rec.get("question_decomposition") or []
    hop_of = {step["paragraph_support_idx"]: pos for pos, step in enumerate(steps)}
    paragraphs = rec["paragraphs"]
    supporting = sorted(
        (p for p in paragraphs if p["is_supporting"]),
        key=lambda p: hop_of.get(p["idx"], len(steps)),
    )
    match = _HOPS_PREFIX.match(str(rec["id"]))
    hops = int(match.group(1)) if match else max(1, len(steps))
    return _Record(
        fields={
            "id": str(rec["id"]),
            "query": rec["question"],
            "answer": str(rec["answer"]),
            "answer_aliases": [str(a) for a in rec.get("answer_aliases", [])],
            "hops": hops,
        },
        gold_titles=_unique(_clean_title(p["title"]) for p in supporting),
        paragraphs=[(_clean_title(p["title"]), p["paragraph_text"].strip()) for p in paragraphs],
    )


_PARSERS: dict[str, tuple[str, Callable[[dict[str, Any]], _Record | None]]] = {
    "hotpotqa": ("hotpotqa", _hotpot_record),
    "musique": ("musique", _musique_record),
    "2wiki": ("2wikimultihopqa", _wiki2_record),
    "2wiki_flashrag": ("2wikimultihopqa", _flashrag_record),
}


# --- format detection and file loading -----------------------------------------------------


def detect_format(records: Sequence[dict[str, Any]]) -> str:
    """Name the format of a file's records (a key of the parser table)."""
    first = records[0]
    if "paragraphs" in first:
        return "musique"
    if "metadata" in first and "golden_answers" in first:
        return "2wiki_flashrag"
    if "context" in first and "supporting_facts" in first:
        is_2wiki = any("evidences" in r or r.get("type") in _WIKI2_ONLY_TYPES for r in records)
        return "2wiki" if is_2wiki else "hotpotqa"
    raise ValueError(f"unrecognised benchmark record with keys {sorted(first)[:8]}")


def _load_records(path: Path) -> list[dict[str, Any]]:
    """A JSON list, a ``{"data": [...]}`` object, or JSONL: always a list of record objects."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read benchmark file ({e})", source=str(path)) from e
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = _jsonl_records(text, path)
    if isinstance(data, dict):
        data = data["data"] if isinstance(data.get("data"), list) else [data]
    if not isinstance(data, list) or not data:
        raise InputError("expected a non-empty list of records", source=str(path))
    for i, rec in enumerate(data):
        if not isinstance(rec, dict):
            raise InputError("record is not a JSON object", source=str(path), record=f"#{i}")
    return data


def _jsonl_records(text: str, path: Path) -> list[Any]:
    try:
        return [value for _, value in json_lines(text)]
    except JsonLineError as e:
        raise InputError(f"line {e.lineno}: invalid JSON ({e.msg})", source=str(path)) from e


def _expand(paths: PathLike | Sequence[PathLike]) -> list[Path]:
    """Files named directly, plus the ``*.json``/``*.jsonl`` files of any folder, sorted."""
    items = [paths] if isinstance(paths, str | Path) else list(paths)
    files: list[Path] = []
    for item in map(Path, items):
        if item.is_dir():
            files += sorted(p for p in item.iterdir() if p.suffix in {".json", ".jsonl"})
        else:
            files.append(item)
    if not files:
        raise InputError("no benchmark files found", source=", ".join(map(str, items)))
    return files


# --- assembly ------------------------------------------------------------------------------


def _parse_file(
    path: Path, choose: Callable[[Sequence[dict[str, Any]]], str]
) -> list[tuple[str, _Record]]:
    records = _load_records(path)
    try:
        source, parse = _PARSERS[choose(records)]
    except ValueError as e:
        raise InputError(str(e), source=str(path)) from e
    parsed = []
    for i, rec in enumerate(records):
        try:
            record = parse(rec)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
            rid = rec.get("_id") or rec.get("id") or f"#{i}"
            reason = f"missing field {e}" if isinstance(e, KeyError) else str(e)
            message = f"malformed record ({reason})"
            raise InputError(message, source=str(path), record=str(rid)) from e
        if record is not None:
            record.origin = str(path)
            parsed.append((source, _checked(record)))
    return parsed


def _checked(record: _Record) -> _Record:
    """A task whose gold title is not in its own context could never be solved: reject it."""
    rid = str(record.fields["id"])
    titles = {t for t, _ in record.paragraphs}
    if not record.gold_titles:
        raise InputError("no supporting paragraphs", source=record.origin, record=rid)
    missing = [t for t in record.gold_titles if t not in titles]
    if missing:
        reason = f"gold title {missing[0]!r} is not among the context paragraphs"
        raise InputError(reason, source=record.origin, record=rid)
    return record


def _assign_ids(titles: Iterable[str]) -> dict[str, str]:
    by_slug: dict[str, list[str]] = {}
    for title in titles:
        by_slug.setdefault(title_doc_id(title), []).append(title)
    ids = {}
    for slug, group in by_slug.items():
        for title in group:
            ids[title] = slug if len(group) == 1 else f"{slug}-{_short_hash(title)}"
    return ids


def _documents(pool: _Pool, ids: dict[str, str]) -> list[Document]:
    return [
        Document(
            id=ids[title],
            title=title,
            text="\n\n".join(paras) or title,
            metadata={"source": "+".join(sorted(pool.sources[title])), "domain": DOMAIN},
        )
        for title, paras in pool.paragraphs.items()
    ]


def _task(source: str, record: _Record, ids: dict[str, str]) -> Task:
    gold = [ids[t] for t in record.gold_titles]
    distractors = _unique(ids[t] for t, _ in record.paragraphs if ids[t] not in gold)
    fields = {k: v for k, v in record.fields.items() if v is not None}
    try:
        return Task(
            **fields,
            gold_doc_ids=gold,
            distractor_doc_ids=distractors,
            domain=DOMAIN,
            source=source,
        )
    except ValidationError as e:
        reason = describe_validation_error(e)
        rid = str(fields.get("id"))
        raise InputError(f"invalid task ({reason})", source=record.origin, record=rid) from e


def _assemble(parsed: list[tuple[str, _Record]]) -> Benchmark:
    pool = _Pool()
    for source, record in parsed:
        for title, text in record.paragraphs:
            pool.add(title, text, source)
    ids = _assign_ids(pool.paragraphs)
    tasks: dict[str, Task] = {}
    for source, record in parsed:
        task = _task(source, record, ids)
        if task.id in tasks and tasks[task.id] != task:
            reason = "the same task id appears earlier with different content"
            raise InputError(reason, source=record.origin, record=task.id)
        tasks.setdefault(task.id, task)
    return _documents(pool, ids), list(tasks.values())


def _read(
    paths: PathLike | Sequence[PathLike], choose: Callable[[Sequence[dict[str, Any]]], str]
) -> Benchmark:
    parsed = [item for path in _expand(paths) for item in _parse_file(path, choose)]
    return _assemble(parsed)


# --- public readers ------------------------------------------------------------------------


def read_hotpotqa(paths: PathLike | Sequence[PathLike]) -> Benchmark:
    """HotpotQA distractor-setting JSON; several files are pooled (identical repeats kept once)."""
    return _read(paths, lambda _: "hotpotqa")


def read_musique(paths: PathLike | Sequence[PathLike]) -> Benchmark:
    """MuSiQue JSON or JSONL; records marked ``answerable: false`` are skipped (no gold)."""
    return _read(paths, lambda _: "musique")


def read_2wiki(paths: PathLike | Sequence[PathLike]) -> Benchmark:
    """2WikiMultihopQA, original JSON or FlashRAG JSONL (told apart by the ``metadata`` column)."""
    return _read(paths, lambda recs: "2wiki_flashrag" if "metadata" in recs[0] else "2wiki")


def read_benchmark(paths: PathLike | Sequence[PathLike]) -> Benchmark:
    """Any supported file, folder or mix of them, format detected per file, pooled in one corpus."""
    return _read(paths, detect_format)
