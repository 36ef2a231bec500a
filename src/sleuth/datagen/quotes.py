"""Strict quote matching: is a quote really in its source, up to harmless formatting?

The public Context-1 pipeline deletes punctuation before matching (so ``5.2`` matched ``52``) and
falls back to "five long words in order, any gap". Neither is done here: after :func:`normalize`
a quote must be an exact substring of the source.

What :func:`normalize` treats as formatting, on both sides alike:

* Unicode compatibility forms (NFKC: NBSP → space, ``…`` → ``...``, full-width letters) and case
  (``casefold``).
* Curly and angle quotes → ``'`` / ``"``; hyphen, dash and minus variants → ``-``.
* Invisible characters (soft hyphen, zero-width space/joiners, BOM) are removed.
* Whitespace runs become one space, and whitespace touching a bracket, a quote mark or a dash is
  removed: corpora disagree on ``Washburn( 1860- 1929)`` versus ``Washburn (1860-1929)``.

Everything else is kept as it is, in particular ``.``, ``,``, ``$`` and ``%``: ``3.5`` never
matches ``35`` and ``1,000`` never matches ``1000``. A quote needs at least one letter or digit,
since a quote of bare punctuation supports nothing.
"""

from __future__ import annotations

import re
import unicodedata

_SINGLE_QUOTES = "\u2018\u2019\u201a\u201b\u2032\u2035\u02bc\u2039\u203a`"
_DOUBLE_QUOTES = "\u201c\u201d\u201e\u201f\u2033\u2036\u00ab\u00bb"
_DASHES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2043\u2212\ufe58\ufe63"
_INVISIBLE = "\u00ad\u200b\u200c\u200d\u2060\ufeff"

_UNIFY = str.maketrans(
    {c: "'" for c in _SINGLE_QUOTES}
    | {c: '"' for c in _DOUBLE_QUOTES}
    | {c: "-" for c in _DASHES}
    | {c: None for c in _INVISIBLE}
    | {"\u22ef": "..."}
)
_WHITESPACE = re.compile(r"\s+")
# Spacing next to these is inconsistent across corpora and carries no meaning.
_LOOSE_SPACING = re.compile(r" ?([()\[\]{}\"'\-]) ?")
_HAS_WORD = re.compile(r"\w")


def normalize(text: str) -> str:
    """Canonical form for quote matching (see the module docstring for what is folded).

    Example::

        >>> normalize("Alice Washburn( 1860\u2013 1929) \u201cactress\u201d")
        'alice washburn(1860-1929)"actress"'
    """
    text = unicodedata.normalize("NFKC", text)
    # casefold can leave non-NFKC sequences (e.g. from U+0345), so normalise once more.
    text = unicodedata.normalize("NFKC", text.casefold()).translate(_UNIFY)
    text = _WHITESPACE.sub(" ", text)
    return _LOOSE_SPACING.sub(r"\1", text).strip()


def quote_in_source(quote: str, source: str) -> bool:
    """True when the normalised quote is an exact substring of the normalised source.

    An empty quote, or one with no letter or digit, never matches.

    Example::

        >>> quote_in_source("costing $3.5 million", "It was built, costing $3.5\u00a0million.")
        True
        >>> quote_in_source("costing $35 million", "It was built, costing $3.5 million.")
        False
    """
    needle = normalize(quote)
    return bool(_HAS_WORD.search(needle)) and needle in normalize(source)
