"""A common title is a phrase, not a name: naming it is no link (``features.COMMON_TITLE``).

E-mail subjects ("Thanks", "RE:") and the titles of a themed patent sample ("Neural network")
are words most documents use; counting every document that uses them as one that *names* them
pushed such documents into the selector's top two on the Enron and patent dev sets.
"""

from __future__ import annotations

from sleuth.corpus import Document
from sleuth.index import Index
from sleuth.index.lexical import ChunkRow, LexicalIndex
from sleuth.ranking import SELECTION_COLUMNS, QuestionEvidence, Search, SeenDoc, selection_features
from sleuth.ranking.evidence import question_evidence
from sleuth.ranking.features import COMMON_TITLE


def _mail(i: int) -> str:
    return f"Thanks for the note {i}; the pipeline report follows."


def test_word_share_is_the_share_of_chunks_holding_the_rarest_word():
    rows = [ChunkRow(f"m{i}_0", f"m{i}", 0, _mail(i), 10, title=f"Note {i}") for i in range(39)]
    rows.append(ChunkRow("z_0", "z", 0, "Zilkha availability is down.", 5, title="Zilkha"))
    lexical = LexicalIndex.build(rows, stamp={})
    assert lexical.word_share("Thanks") == 39 / 40
    assert lexical.word_share("Zilkha report") == 1 / 40  # the rarest word decides
    assert lexical.word_share("the of") == 0.0  # no indexed word: not judged common
    assert lexical.word_share("Thanks") > COMMON_TITLE > lexical.word_share("Zilkha")


def _case(common: set[str]) -> dict[str, list[float]]:
    question = "Which breaker did Mark Walker ask about at Zilkha?"
    docs = [
        SeenDoc(
            "z", "Zilkha Availability", "Mark Walker asked about Zilkha. Thanks, Mark", [(0, 1)]
        ),
        SeenDoc("t", "Thanks", "Thanks for lunch.", [(1, 1)]),
        SeenDoc("m", "Mark", "Mark is out today.", [(1, 2)]),
    ]
    evidence = QuestionEvidence(
        bm25={"z": 5.0, "t": 0.5, "m": 1.0}, bm25_rank={"z": 1}, dense={}, common=common
    )
    x = selection_features(question, docs, [Search(question, 0), Search("Mark", 1)], evidence)
    return {c: x[:, SELECTION_COLUMNS.index(c)].tolist() for c in ("link_in", "link_out")}


def test_a_common_title_links_nothing():
    plain = _case(set())
    assert plain["link_in"][1] > 0 and plain["link_in"][2] > 0  # named by the relevant mail
    gated = _case({"t", "m"})
    assert gated["link_in"] == [0.0, 0.0, 0.0]
    assert gated["link_out"][0] == 0.0  # the mail names no document any more
    assert plain["link_out"][0] > 0


def test_question_evidence_marks_documents_whose_title_is_common(tmp_path):
    docs = [Document(id=f"m{i}", text=_mail(i), title=f"Unit{i}") for i in range(30)]
    docs.append(Document(id="thanks", text="Thanks for lunch.", title="Thanks"))
    docs.append(Document(id="zilkha", text="Zilkha is down.", title="Zilkha"))
    index = Index.create(tmp_path / "ix", embedder="hash")
    index.ingest(docs)
    evidence = question_evidence(index, "Is Zilkha down?", ["thanks", "zilkha", "m1"])
    assert evidence.common == {"thanks"}
