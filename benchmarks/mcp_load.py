"""The MCP server under load: concurrent streamable-HTTP clients, loopback only, bounded.

Starts ``sleuth serve mcp --http`` on a free 127.0.0.1 port over an index, then runs C clients at
once; each makes N mixed tool calls (search_corpus, grep_corpus, read_document, prune_chunks)
and S whole-agent ``search`` calls, in a fixed interleaved order. Prints p50/p95 per tool, the
error count (every call must succeed: tool error results count too) and the server's RSS
sampled through the run: after warm-up (the first 10% of calls) it must stay flat.

    python benchmarks/mcp_load.py --index DIR                # an existing index
    python benchmarks/mcp_load.py --docs 400                 # builds one (real MiniLM) in a temp dir

Bounded: every call has a timeout and the whole run a deadline (``--deadline-s``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import psutil
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import questions, shared_documents  # noqa: E402

CALL_TIMEOUT_S = 120.0


@dataclass
class Tally:
    """Latencies per tool and errors, shared by all clients (one event loop: no locks)."""

    seconds: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    done: int = 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(index: Path, runs: Path) -> tuple[subprocess.Popen[bytes], str]:
    """The server on a free loopback port; its log goes to a file (a pipe nobody reads fills)."""
    port = free_port()
    cmd = [sys.executable, "-m", "sleuth.cli", "serve", "mcp", "--index", str(index)]
    cmd += ["--http", "--port", str(port), "--trajectory-dir", str(runs)]
    log = runs.parent / "server.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited: {log.read_text()[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"http://127.0.0.1:{port}/mcp"
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("the server did not start in 120 s")


def plan(client: int, n_tools: int, n_search: int, qs: list[str]) -> list[tuple[str, str]]:
    """(kind, query) in a fixed order: tool calls cycle through the four tools, agent searches
    spread evenly among them."""
    kinds = ["search_corpus", "grep_corpus", "read_document", "prune_chunks"]
    calls = [(kinds[i % 4], qs[(client * 37 + i) % len(qs)]) for i in range(n_tools)]
    step = max(1, len(calls) // max(1, n_search))
    for j in range(n_search):
        calls.insert(min(len(calls), j * (step + 1)), ("search", qs[(client * 11 + j) % len(qs)]))
    return calls


def grep_pattern(query: str) -> str:
    words = re.findall(r"[A-Z][a-z]{3,}", query) or re.findall(r"\w{5,}", query)
    return rf"\b{re.escape(words[0] if words else 'the')}\b"


async def one_call(session: ClientSession, kind: str, query: str, seen: list[str]) -> Any:
    if kind == "search_corpus":
        return await session.call_tool(kind, {"query": query})
    if kind == "grep_corpus":
        return await session.call_tool(kind, {"pattern": grep_pattern(query)})
    if kind == "read_document":
        doc = seen[-1].rsplit("_", 1)[0] if seen else "missing"
        return await session.call_tool(kind, {"doc_id": doc, "query": query})
    if kind == "prune_chunks":
        return await session.call_tool(kind, {"chunk_ids": seen[-3:] or ["x_0"]})
    return await session.call_tool("search", {"query": query})


async def run_client(url: str, calls: list[tuple[str, str]], tally: Tally) -> None:
    seen: list[str] = []
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        for kind, query in calls:
            t0 = time.perf_counter()
            try:
                with anyio.fail_after(CALL_TIMEOUT_S):
                    reply = await one_call(s, kind, query, seen)
                if reply.is_error:
                    tally.errors.append(f"{kind}: {reply.content[0].text[:200]}")
                elif kind == "search_corpus":
                    seen += [c["id"] for c in reply.structured_content["result"] if "id" in c]
            except Exception as exc:  # a failed call is counted, never fatal to the run
                tally.errors.append(f"{kind}: {type(exc).__name__}: {exc}"[:300])
            tally.seconds.setdefault(kind, []).append(time.perf_counter() - t0)
            tally.done += 1


def sample_rss(pid: int, out: list[tuple[int, float]], tally: Tally, stop: threading.Event) -> None:
    proc = psutil.Process(pid)
    while not stop.wait(0.5):
        try:
            procs = [proc, *proc.children(recursive=True)]
            out.append((tally.done, sum(p.memory_info().rss for p in procs) / 2**20))
        except psutil.Error:
            return


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def build_index(n_docs: int, root: Path) -> Path:
    from sleuth.index import Index

    path = root / "index"
    Index.create(path, embedder="minilm").ingest(shared_documents()[:n_docs])
    return path


def report(tally: Tally, rss: list[tuple[int, float]], total: int, wall: float) -> dict[str, Any]:
    warm = [mb for done, mb in rss if done >= total // 10]
    per_tool = {
        k: {
            "n": len(v),
            "p50_s": round(statistics.median(v), 4),
            "p95_s": round(percentile(v, 0.95), 4),
        }
        for k, v in sorted(tally.seconds.items())
    }
    return {
        "calls": tally.done,
        "errors": len(tally.errors),
        "error_examples": tally.errors[:5],
        "wall_s": round(wall, 1),
        "per_tool": per_tool,
        "rss_mb_after_warmup_first": round(warm[0], 1) if warm else None,
        "rss_mb_after_warmup_max": round(max(warm), 1) if warm else None,
        "rss_mb_last": round(rss[-1][1], 1) if rss else None,
        "rss_mb_by_tenth": rss_by_tenth(rss, total),
    }


def rss_by_tenth(rss: list[tuple[int, float]], total: int) -> list[float]:
    """The largest RSS seen while each tenth of the calls ran: growth shows as a rising tail."""
    tenths: dict[int, float] = {}
    for done, mb in rss:
        t = min(9, 10 * done // max(1, total))
        tenths[t] = max(tenths.get(t, 0.0), mb)
    return [round(tenths[t], 1) for t in sorted(tenths)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--index", type=Path, help="index folder; default: build one from --docs")
    p.add_argument("--docs", type=int, default=400, help="documents for a built index")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--tool-calls", type=int, default=100, help="mixed tool calls per client")
    p.add_argument("--searches", type=int, default=10, help="whole-agent searches per client")
    p.add_argument("--deadline-s", type=float, default=1800.0)
    p.add_argument("--json", type=Path, help="write the figures here")
    a = p.parse_args()
    if min(a.clients, a.tool_calls, a.searches, a.docs) < 1:
        raise SystemExit("--clients, --tool-calls, --searches and --docs must be at least 1")
    with tempfile.TemporaryDirectory() as tmp:
        index = a.index or build_index(a.docs, Path(tmp))
        proc, url = start_server(index, Path(tmp) / "runs")
        qs = questions(200)
        plans = [plan(c, a.tool_calls, a.searches, qs) for c in range(a.clients)]
        total = sum(map(len, plans))
        tally, rss, stop = Tally(), [], threading.Event()
        sampler = threading.Thread(target=sample_rss, args=(proc.pid, rss, tally, stop))
        sampler.start()
        t0 = time.perf_counter()

        async def everyone() -> None:
            with anyio.move_on_after(a.deadline_s):
                async with anyio.create_task_group() as tg:
                    for calls in plans:
                        tg.start_soon(run_client, url, calls, tally)

        try:
            anyio.run(everyone)
        finally:
            stop.set()
            sampler.join()
            proc.terminate()
            proc.wait(timeout=30)
        out = report(tally, rss, total, time.perf_counter() - t0)
    out |= {"clients": a.clients, "planned_calls": total, "cpus": os.cpu_count()}
    print(json.dumps(out, indent=2))
    if a.json:
        a.json.write_text(json.dumps(out, indent=2) + "\n")
    if out["errors"] or out["calls"] < total:
        raise SystemExit(f"{out['errors']} errors, {out['calls']}/{total} calls made")


if __name__ == "__main__":
    main()
