"""The scale benchmark's corpus (staged paragraphs, repeated with perturbation) and its
measuring helpers; ``scale.py`` and ``_scale_lexical.py`` share them."""

from __future__ import annotations

import os
import random
import re
import resource
import time

import numpy as np

_NUM = re.compile(r"\d")
_SENT = re.compile(r"(?<=[.!?])\s+")


def rss_peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_now_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def base_documents():
    """Every unique staged paragraph, round-robin from the three samples (as embed_speed.py)."""
    from embed_speed import SHARED
    from sleuth.tasks import read_2wiki, read_hotpotqa, read_musique

    pools = [
        read_hotpotqa(SHARED / "hotpotqa_distractor_dev")[0],
        read_musique(SHARED / "musique_ans_dev")[0],
        read_2wiki(SHARED / "2wikimultihopqa_dev")[0],
    ]
    seen: dict = {}
    for i in range(max(map(len, pools))):
        for pool in pools:
            if i < len(pool):
                seen.setdefault(pool[i].id, pool[i])
    return list(seen.values())


def perturb(text: str, rng: random.Random, pool: list[str]) -> str:
    """Seeded variant of a paragraph: numbers redrawn, words dropped/replaced, sentences rotated."""
    sents = _SENT.split(text)
    shift = rng.randrange(len(sents))
    words = []
    for w in " ".join(sents[shift:] + sents[:shift]).split():
        r = rng.random()
        if r < 0.1:
            continue
        if r < 0.2:
            w = rng.choice(pool)
        elif any(c.isdigit() for c in w):
            w = _NUM.sub(lambda _: str(rng.randrange(10)), w)
        words.append(w)
    return " ".join(words) or text


def corpus(n: int):
    """``n`` (id, title, text) of one chunk each: the staged paragraphs, then perturbed copies."""
    base = base_documents()
    rng = random.Random(26)
    pool = [w for d in rng.sample(base, min(len(base), 3000)) for w in d.text.split()]
    for i in range(n):
        b, j = base[i % len(base)], i // len(base)
        if j == 0:
            yield b.id, b.title or "", b.text
        else:
            rng.seed(i)
            yield f"{b.id}-r{j}", b.title or "", perturb(b.text, rng, pool)


def pcts(seconds: list[float]) -> dict[str, float]:
    return {
        "n": len(seconds),
        "p50_ms": round(float(np.percentile(seconds, 50)) * 1000, 1),
        "p95_ms": round(float(np.percentile(seconds, 95)) * 1000, 1),
    }


def timed(fn, args_list) -> dict[str, float]:
    out = []
    for args in args_list:
        t0 = time.perf_counter()
        fn(*args)
        out.append(time.perf_counter() - t0)
    return pcts(out)
