"""Offline tokenizers and token-aware chunking."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sleuth.corpus.chunking import chunk_document
from sleuth.corpus.models import Document, doc_id_of
from sleuth.tokens import (
    OFFICIAL_SHA256,
    bpe_file,
    count_tokens,
    get_encoding,
    harmony_encodings_dir,
)


def test_bpe_files_match_official_hashes():
    for name, digest in OFFICIAL_SHA256.items():
        assert hashlib.sha256(bpe_file(name).read_bytes()).hexdigest() == digest


def test_o200k_encodes_known_ids_offline():
    enc = get_encoding("o200k_base")
    # "hello world" is two tokens in o200k_base; round trip must be exact
    ids = enc.encode("hello world")
    assert len(ids) == 2 and enc.decode(ids) == "hello world"
    assert count_tokens("") == 0


def test_harmony_loads_offline():
    from openai_harmony import HarmonyEncodingName, load_harmony_encoding

    harmony_encodings_dir()
    enc = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
    assert enc.encode("hello world", allowed_special=set()) == get_encoding().encode("hello world")


def test_doc_id_of_strips_only_the_chunk_suffix():
    assert doc_id_of("report_2_0") == "report_2"
    assert doc_id_of("a_b_17") == "a_b"
    assert doc_id_of("plain") == "plain"


words = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12
)
texts = st.lists(
    st.one_of(words, st.sampled_from([". ", "\n\n", "\n", " ", "! "])), min_size=1, max_size=300
)


@settings(max_examples=60, deadline=None)
@given(parts=texts, max_tokens=st.integers(8, 64), overlap=st.integers(0, 16))
def test_chunks_are_bounded_verbatim_slices(parts, max_tokens, overlap):
    text = "".join(parts)
    if not text.strip():
        return
    chunks = chunk_document(
        Document(id="d", text=text), max_tokens=max_tokens, overlap_tokens=overlap
    )
    assert chunks, "non-empty text must give at least one chunk"
    for i, c in enumerate(chunks):
        assert c.id == f"d_{i}" and c.idx == i and c.doc_id == "d"
        assert c.text in text  # verbatim slice: quotes found in chunks are found in the document
        assert 0 < c.tokens <= max_tokens
        assert c.tokens == count_tokens(c.text)
    # nothing is lost: the document's non-space characters are a subsequence of the chunks'
    covered = iter("".join("".join(c.text.split()) for c in chunks))
    assert all(ch in covered for ch in "".join(text.split()))


def test_default_chunking_is_about_512_tokens():
    text = " ".join(f"Sentence number {i} talks about topic {i % 7}." for i in range(600))
    chunks = chunk_document(Document(id="doc", text=text))
    assert all(c.tokens <= 512 for c in chunks)
    assert max(c.tokens for c in chunks) > 400
    # consecutive chunks overlap by a little
    assert chunks[0].text[-40:] in chunks[1].text


def test_chunking_rejects_tiny_budget():
    with pytest.raises(ValueError):
        chunk_document(Document(id="d", text="x"), max_tokens=2)
