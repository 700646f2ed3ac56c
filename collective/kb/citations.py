"""Citation tags: how chunks are shown to models, and how their citations are read back.

A chunk is shown as `[KB#mem_3f2a] [Score: 0.85] Heading > Path: text`. Models cite it by tag.

Look-alikes: all untrusted text is first normalised (`normalise`): invisible characters such
as zero-width spaces, soft hyphens and tag characters are removed, and every character whose
NFKC form is a character of tag syntax is folded to it (full-width `［ＫＢ＃x］` becomes
`[KB#x]`; the rest of the text keeps its characters, `m²` stays `m²`). The tag patterns also
accept the Cyrillic and Greek letters that look like `K`, `B` (`КВ`) and the bracket
look-alikes `【〔⟦〖`. Neutralising and parsing see the same text, so nothing that looks like a
tag escapes either.

Forgery: chunk text is untrusted (anyone can ingest a file), so before a chunk is shown,
anything in it that the citation parser would read as a tag is rewritten: `[KB#x]` becomes
`[KB-ref x]` and `[Score: 0.9]` becomes `[Score-ref: 0.9]`. The rewrite matches exactly the
openings the parser accepts (case-insensitive, spaces allowed: `[ kb # x]`), so
`parse_citations(neutralise(text)) == []` for every text. The same holds for model output quoted
into another model's prompt (proposals and the plan in the judge's), except a proposal's own
citations that resolved to chunks the specialist was shown (`neutralise(text, keep=...)`): the
judge sees those tags intact and may carry them into its verdict.

Grouped citations: a model may write `[KB#mem_1, mem_2]` or `[KB#mem_1, KB#mem_2]`; both are
read as two citations. Ids are returned in first-appearance order, deduplicated.

Checking (`check_citations`): a cited id counts only if it is among the chunks the model was
actually shown (kept after trimming, tag intact); every other tag-like string the model wrote
(`[KB#unknown]`, `[KB#has space]`, `[KB mem_1]`) is reported as unknown. A tag written without
its brackets or in odd case (`kb#mem_1`, `KB#MEM_1`) that names a shown chunk is read as a
citation of it; one that names no shown chunk stays unknown. Untrusted text cannot use this to
cite an unsupplied chunk: only shown ids resolve, and `neutralise` rewrites bare `KB#` openings
(`KB-ref x`) as it does bracketed ones.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Protocol

from collective.kb.store import Chunk

__all__ = [
    "SHOWN_SCORE",
    "check_citations",
    "format_chunk",
    "neutralise",
    "normalise",
    "parse_citations",
    "resolve",
    "split_citations",
    "tag",
    "visible_chunks",
    "without_tags",
]

# Characters that render as nothing: format characters (zero-width, bidi controls, soft
# hyphen, word joiners, BOM, tag characters), fillers and variation selectors.
_INVISIBLE = re.compile(
    "[\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u08e2\u115f\u1160\u17b4\u17b5"
    "\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f"
    "\ufeff\uffa0\ufff0-\ufffb\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e0fff]"
)
_OPEN = "[\\[\u3010\u3014\u27e6\u3016]"  # [ 【 〔 ⟦ 〖
_CLOSE = "[\\]\u3011\u3015\u27e7\u3017]"
_NOT_BRACKET = "[^\\[\\]\u3010\u3011\u3014\u3015\u27e6\u27e7\u3016\u3017]"
_KB = "[K\u041a\u039a]\\s*[B\u0412\u0392\u03b2\u0432]"  # K/К/Κ, B/В/Β/β/в
_SCORE = "[S\u0405][c\u0441][o\u043e\u03bf]r[e\u0435]"
_TAG_OPEN = re.compile(f"{_OPEN}\\s*{_KB}\\s*#", re.IGNORECASE)
_SCORE_OPEN = re.compile(f"{_OPEN}\\s*{_SCORE}\\s*:", re.IGNORECASE)
_CITATION = re.compile(f"{_OPEN}\\s*{_KB}\\s*#({_NOT_BRACKET}*){_CLOSE}", re.IGNORECASE)
# Anything a reader would take for a citation attempt: a bracketed `KB` tag of any shape, or a
# bare `KB#x`.
_BRACKETED = re.compile(f"{_OPEN}\\s*{_KB}(?![a-z0-9]){_NOT_BRACKET}*{_CLOSE}", re.IGNORECASE)
_BARE = re.compile(f"(?<![A-Za-z0-9]){_KB}\\s*#\\s*[^\\s\\[\\],;)]+", re.IGNORECASE)
_BARE_OPEN = re.compile(f"(?<![A-Za-z0-9\\[]){_KB}\\s*#", re.IGNORECASE)
_ITEM_PREFIX = re.compile(f"^{_KB}\\s*#\\s*", re.IGNORECASE)
_ID = re.compile(r"^[A-Za-z0-9_.:\-]+$")


def normalise(text: str) -> str:
    """`text` without invisible characters, look-alikes of tag syntax folded (see module doc)."""
    return _NON_ASCII.sub(_fold, _INVISIBLE.sub("", text))


_TAG_SYNTAX = frozenset("[]#:KkBbSsCcOoRrEe")
_NON_ASCII = re.compile(r"[^\x00-\x7f]")


@functools.lru_cache(maxsize=4096)
def _fold_char(char: str) -> str:
    folded = unicodedata.normalize("NFKC", char)
    return folded if folded in _TAG_SYNTAX else char


def _fold(match: re.Match[str]) -> str:
    return _fold_char(match.group(0))


def without_tags(text: str, bare: bool = False) -> str:
    """`text` with its bracketed citation tags (`[KB#mem_7b1f...]`, any spelling) removed.

    With `bare`, unbracketed ones (`KB#mem_7b1f`) too.
    """
    text = _BRACKETED.sub("", text)
    return _BARE.sub("", text) if bare else text


def tag(chunk_id: str) -> str:
    """The tag a chunk is shown and cited with: `[KB#id]`."""
    return f"[KB#{chunk_id}]"


def neutralise(text: str, keep: Iterable[str] = ()) -> str:
    """Normalise `text` and rewrite citation- and score-shaped text so it never parses as a tag.

    Args:
        text: Untrusted text (a chunk, or model output quoted into another prompt).
        keep: Ids whose exact tag `[KB#id]` stays as it is: citations already checked against
            the chunks supplied (a specialist's verified citations, shown to the judge). Every
            other tag-like text is rewritten, so `parse_citations` finds only `keep` ids.
    """
    text = normalise(text)
    tags = sorted({tag(i) for i in keep}, key=len, reverse=True)
    if not tags:
        text = _SCORE_OPEN.sub("[Score-ref:", _TAG_OPEN.sub("[KB-ref ", text))
        return _BARE_OPEN.sub("KB-ref ", text)
    pieces = re.split(f"({'|'.join(map(re.escape, tags))})", text)
    # odd pieces are kept tags; the text between them is rewritten piece by piece
    return "".join(p if n % 2 else neutralise(p) for n, p in enumerate(pieces))


SHOWN_SCORE = r"\[Score: [0-9.]+\]"
"""The score as `format_chunk` shows it, a pattern for text that copies a chunk's shown form."""


@functools.lru_cache(maxsize=1024)
def format_chunk(chunk: Chunk) -> str:
    """`[KB#id] [Score: 0.85] heading: text`, with the chunk's own text neutralised.

    Cached: every role of a run shows the same chunks.
    """
    body = neutralise(chunk.text)
    if chunk.heading:
        body = f"{neutralise(chunk.heading)}: {body}"
    return f"{tag(chunk.id)} [Score: {chunk.score:.2f}] {body}"


def _read(text: str, shown: Collection[str] = ()) -> tuple[list[str], list[str]]:
    """Ids cited in `text` and the tag-like strings that name no id, first-appearance order.

    A bare tag (`kb#mem_1`, no brackets) is an id only when it names one of `shown`; an id in
    odd case becomes the shown id it matches (case-insensitively, when only one does).
    """
    text = normalise(text)
    folded: dict[str, list[str]] = {}
    for i in shown:
        folded.setdefault(i.casefold(), []).append(i)

    def known(item: str) -> str | None:
        if item in shown:
            return item
        same = folded.get(item.casefold(), [])
        return same[0] if len(same) == 1 else None

    ids: dict[str, None] = {}
    malformed: dict[str, None] = {}
    for match in _BRACKETED.finditer(text):
        citation = _CITATION.fullmatch(match.group(0))
        items = citation.group(1).split(",") if citation else []
        found = False
        for item in items:
            item = _ITEM_PREFIX.sub("", item.strip()).strip()
            if item and _ID.match(item):
                ids.setdefault(known(item) or item, None)
                found = True
        if not found:
            malformed.setdefault(match.group(0), None)
    for match in _BARE.finditer(_BRACKETED.sub(" ", text)):
        item = _ITEM_PREFIX.sub("", match.group(0)).rstrip(".:!?'\"")
        if (cid := known(item)) is not None:
            ids.setdefault(cid, None)
        else:
            malformed.setdefault(match.group(0), None)
    return list(ids), list(malformed)


def parse_citations(text: str) -> list[str]:
    """The chunk ids cited in `text` (`[KB#id]`, or grouped `[KB#a, b]`), first-appearance order.

    The text is normalised first (see `normalise`). Items that are not id-shaped (spaces inside,
    empty) are not ids; `check_citations` reports them.
    """
    return _read(text)[0]


def resolve(
    ids: Iterable[str], supplied: Mapping[str, Chunk]
) -> tuple[list[dict[str, str]], list[str]]:
    """Check cited ids against the chunks actually supplied to the model.

    Args:
        ids: Cited ids (duplicates are ignored).
        supplied: The chunks shown, by id.

    Returns:
        `(citations, unknown)`: `{id, source}` for each supplied id in order, and the ids that
        were cited but never supplied (hallucinated or forged).
    """
    citations: list[dict[str, str]] = []
    unknown: list[str] = []
    for cid in dict.fromkeys(ids):
        chunk = supplied.get(cid)
        if chunk is None:
            unknown.append(cid)
        else:
            citations.append({"id": cid, "source": chunk.source})
    return citations, unknown


class _Sourced(Protocol):
    @property
    def source(self) -> str: ...


def check_citations(
    text: str, supplied: Mapping[str, _Sourced]
) -> tuple[list[dict[str, str]], list[str]]:
    """Read the citations in a model's `text` and check them against the chunks it was shown.

    Args:
        text: The model's answer.
        supplied: The chunks the model received (kept after trimming, tag intact), by id.

    Returns:
        `(citations, unknown)`: `{id, source}` per resolved id, and everything else the model
        wrote that looks like a tag: ids never shown, then malformed tags as written
        (normalised), e.g. `[KB#has space]` or a bare `KB#mem_1`.
    """
    ids, unknown = split_citations(text, supplied)
    return [{"id": i, "source": supplied[i].source} for i in ids], unknown


def split_citations(text: str, shown: Collection[str]) -> tuple[list[str], list[str]]:
    """The ids cited in `text` that are in `shown`, and everything else tag-like it holds.

    See `check_citations`; this is the same check for callers that only hold the shown ids.
    """
    ids, malformed = _read(text, shown)
    return [i for i in ids if i in shown], [*(i for i in ids if i not in shown), *malformed]


def visible_chunks(chunks: Sequence[Chunk], hidden_tags: Iterable[str]) -> list[Chunk]:
    """The chunks a role may see: those carrying none of `hidden_tags` (case-insensitive).

    Proposers get `hidden_tags` from their role config (e.g. `{"meta"}`); the judge passes none.
    """
    hidden = {t.lower() for t in hidden_tags}
    return [c for c in chunks if not hidden.intersection(t.lower() for t in c.tags)]
