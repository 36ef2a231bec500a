"""SEC filing and patent readers, on the real staged files and on broken inputs."""

from __future__ import annotations

import datetime as dt

import pytest

from sleuth.corpus.patents import patent_id, read_patent_xml, read_patents, read_patents_csv
from sleuth.corpus.sec import read_sec, read_sec_filing
from sleuth.errors import InputError
from tests.conftest import SHARED_DATA

SEC = SHARED_DATA / "sec_edgar_filings"
PATENTS = SHARED_DATA / "uspto_patents"
needs_data = pytest.mark.skipif(not SHARED_DATA.exists(), reason=f"{SHARED_DATA} is absent")


@needs_data
def test_every_staged_filing_reads_with_its_cover_page_metadata():
    docs = {d.id: d for d in read_sec(SEC)}
    assert len(docs) == 11  # NOTICE.md is skipped
    expected = {
        # id: (company, form, date, date kind)
        "0000950153-99-001234": ("MEDICIS PHARMACEUTICAL CORPORATION", "10-K", "1999-06-30",
                                 "period_end"),
        "0000928385-01-500187": ("AEGON N.V.", "20-F", "2000-12-31", "period_end"),
        # a combined filing with no "exact name of registrant" line
        "0001104659-03-004925": ("Louisville Gas and Electric Company", "8-K", "2003-03-25",
                                 "report_date"),
        # the report date precedes its label
        "0001437749-16-028287": ("Sophiris Bio Inc.", "8-K", "2016-03-23", "report_date"),
        "Apple.10-Q": ("Apple Inc.", "10-Q", "2024-06-29", "period_end"),
    }  # fmt: skip
    for doc_id, (company, form, date, kind) in expected.items():
        meta = docs[doc_id].metadata
        assert (meta["company"], meta["form"], str(meta["date"]), meta["date_kind"]) == (
            company, form, date, kind,
        ), doc_id  # fmt: skip
    assert docs["0000887919-21-000012"].metadata["ticker"] == "PFBI"
    assert docs["Apple.10-K"].metadata["ticker"] == "AAPL"
    assert all(d.metadata["domain"] == "sec" and len(d.text) > 2000 for d in docs.values())


@needs_data
def test_filing_text_is_clean():
    premier = read_sec_filing(SEC / "8-K" / "0000887919-21-000012.html")
    assert not premier.text.startswith("false0000887919")  # the hidden XBRL header is dropped
    apple = read_sec_filing(SEC / "markdown" / "Apple.10-K.md")
    assert "<div" not in apple.text and "|  |" not in apple.text
    assert "| Total net sales | | $ | 391,035 |" in apple.text


@needs_data
def test_patents_csv_and_xml_read_with_citations():
    docs = {d.id: d for d in read_patents(PATENTS)}
    assert len(docs) == 3522 + 8
    barometer = docs["US5535303"]
    assert barometer.title == '"Barometer" neuron for a neural network'
    assert barometer.text.startswith('Patent US5535303 (1996-07-09): "Barometer" neuron')
    assert 'The "Barometer" Neuron functions' in barometer.text
    grant = docs["US8930553"]
    assert grant.metadata["date"] == dt.date(2015, 1, 6)  # typed: a date, stored as epoch seconds
    assert grant.metadata["application_number"] == "13648029"
    cited = grant.metadata["cited_patents"].split()
    assert cited[:3] == ["US7844851", "US7995466", "US8078737"]
    assert "US20070140112" in cited  # "US2007/0140112" normalised
    assert grant.metadata["cited_other"] > 0
    assert "Claims:\n\n1. A system for processing mid-dialog SIP messages" in grant.text
    old = docs["US6859910"]  # DTD v4.0: <references-cited>/<citation>
    assert old.metadata["cited_by_examiner"] == 8
    assert docs["US20050004437"].metadata["cited_patents"] == ""


def test_patent_ids_match_citation_numbers():
    assert patent_id("06859910") == patent_id("US6859910") == "US6859910"
    assert patent_id("US2007/0140112") == "US20070140112"


@pytest.mark.parametrize(
    "content, message",
    [
        ("patent_number,patent_date\n1,2000-01-01\n", "missing CSV columns: patent_title"),
        (
            "patent_abstract,patent_date,patent_number,patent_title\n"
            "An abstract,2000-01-01,123,A title\n,2001-01-01,456,Other\n",
            r"record line 3 \(456\): empty patent_abstract",
        ),
        (
            "patent_abstract,patent_date,patent_number,patent_title\nText,01/02/2000,789,T\n",
            r"record line 2 \(789\): bad patent_date",
        ),
    ],
)
def test_bad_csv_names_file_and_record(tmp_path, content, message):
    path = tmp_path / "bad.csv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError, match=message) as err:
        list(read_patents_csv(path))
    assert str(path) in str(err.value)


def test_bad_xml_names_the_file(tmp_path):
    broken = tmp_path / "broken.xml"
    broken.write_text("<us-patent-grant><abstract>unclosed", encoding="utf-8")
    with pytest.raises(InputError, match="broken.xml: invalid patent XML"):
        read_patent_xml(broken)
    other = tmp_path / "other.xml"
    other.write_text("<catalog/>", encoding="utf-8")
    with pytest.raises(InputError, match="not a USPTO patent document"):
        read_patent_xml(other)


def test_html_without_a_cover_page_is_rejected(tmp_path):
    page = tmp_path / "page.html"
    page.write_text("<html><body><p>Just a page about cats.</p></body></html>", encoding="utf-8")
    with pytest.raises(InputError, match="page.html: no SEC cover page"):
        read_sec_filing(page)
    empty = tmp_path / "empty.html"
    empty.write_text("<html><script>x()</script></html>", encoding="utf-8")
    with pytest.raises(InputError, match="filing has no text"):
        read_sec_filing(empty)
