"""``Recent`` keeps at most its size, answers what ``compute`` gave, and computes a key again
only after it was dropped as the least recently used."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sleuth.recent import Recent


@given(st.integers(1, 5), st.lists(st.integers(0, 9), max_size=60))
def test_recent_is_bounded_and_computes_only_what_it_no_longer_keeps(size, keys):
    recent: Recent[int, int] = Recent(size)
    computed: list[int] = []
    lru: list[int] = []  # the model: least recently used first
    for key in keys:
        before = len(computed)
        assert recent.get(key, lambda k=key: computed.append(k) or k * k) == key * key
        assert len(computed) - before == (0 if key in lru else 1)
        lru = [*(k for k in lru if k != key), key][-size:]
        assert len(recent) == len(lru) <= size
    recent.clear()
    assert len(recent) == 0
