"""Prompts of the LLM stages. Plain ``str.format`` templates; the domain adds its own paragraph.

The obfuscation rules follow the report (§3.1): clues name nothing, give no exact year or date
and reuse no phrase rare enough to find with one keyword search, so a solver must reason its way
through several documents.
"""

OBFUSCATION_RULES = """\
How to write clues and the question:
- No proper nouns at all: no people, places, organisations, brands, titles of works or products.
  Describe instead ("a river port in the north of a European country", "a mid-sized insurer").
- No exact years, dates or figures that pin a fact down on their own. Blur them in words
  ("in the last years of a century", "a little over a third of its revenue"). Never write a
  four-digit year.
- Do not copy distinctive wording from the documents; paraphrase, so that no single keyword
  search finds the answer.
- Every clue must be true according to its document alone; no outside knowledge is needed.
- The answer must not appear in any clue or in the question, not even in part."""

EXPLORE_SYSTEM = """\
You write search puzzles from a private document collection, for training a search agent.

Explore the collection with the tools, then choose three documents, each holding a different,
specific fact, that together lead to one answer. Write:
- three clues, one per supporting document, each restating that document's fact indirectly;
- one question that combines the clues and asks for a single answer of type: {truth_type};
- the answer, copied exactly as it is written in at least one supporting document, and any other
  spellings of it (abbreviations, full forms) as aliases;
- for each supporting document, the fact it contributes.

{rules}

{guidance}

Work in about 8 to 15 tool calls. Read every document you submit. Then call submit_task once;
if it is rejected, fix what it says and call it again."""

EXPLORE_USER = """\
Answer type for this puzzle: {truth_type}.

Starting points:
{opening}"""

EXTRACT_SYSTEM = """\
You check a search puzzle against one of its supporting documents. From the document, copy the
passages that back up the clues, character for character, and say which clues each supports.

Rules:
- A quote is one continuous passage of the document, copied exactly (keep its punctuation,
  numbers and spelling). Never paraphrase, shorten inside, or join two places with "...".
- Keep each quote short: the sentence or clause that carries the fact.
- clue_indices are the 0-based numbers of the clues a quote supports; clue_spans are the exact
  words of those clues that it supports.
- If the document states the answer, quote that passage too (its clue_indices may be empty).
- If the document supports no clue, return an empty list of quotes.
Reply with JSON only."""

EXTRACT_USER = """\
Clues:
{clues}

Question: {question}
Answer: {answer}

Document {doc_id}:
<document>
{text}
</document>"""

DISTRACT_SYSTEM = """\
You collect distractors for a search puzzle: documents of the collection that a searcher would
find while chasing the clues, that look relevant, but that do not lead to the answer.

A good distractor shares topic words or matches one or two clues, but concerns a different
{truth_type} than the answer. Never pick a document that mentions the answer in any form, and
never pick one of the supporting documents.

Search with the tools, then call submit_distractors with up to {count} document ids and a short
reason for each."""

DISTRACT_USER = """\
Clues:
{clues}

Question: {question}
Answer (must NOT be in any distractor): {answer}
Supporting documents (not allowed): {gold}"""

JUDGE_SYSTEM = """\
You decide whether a document gives away the answer of a puzzle. Say yes if it states the answer
in any form: exact, abbreviated, translated, paraphrased, or as an unambiguous reference to the
same thing. Copy the passage that does so as evidence. Reply with JSON only."""

JUDGE_USER = """\
Answer: {answer}
Other accepted forms: {aliases}

Document {doc_id}:
<document>
{text}
</document>"""

EXTEND_SYSTEM = """\
You add one hop to a solved search puzzle, so that solving it takes one more step.

The earlier hop ends in an answer, found in the earlier documents shown below. Find a bridging
document, not among the earlier documents, that shares one specific fact with the earlier answer
or with one of those documents: the same person, place, date, figure or event. From the bridge,
find two more documents that lead to a new answer of type: {truth_type}.

Write:
- bridging_clue: points to the bridging document through the shared fact, referring to the
  earlier answer only indirectly ("in the city where that person was born", "on the same day");
- two clues for the two supporting documents;
- a new question, a new answer copied exactly from one of the three new documents, and aliases;
- shared_fact: the exact words of the shared fact as they appear in the bridging document; they
  must also appear in the earlier document you name as from_doc_id.

{rules}
Also: the earlier answer and the shared fact must not appear in the new clues or question.

{guidance}

Read every document you submit, then call submit_hop."""

EXTEND_USER = """\
Earlier clues:
{clues}

Earlier answer: {answer}

Earlier documents:
{documents}"""
