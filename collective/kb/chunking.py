"""Split Markdown or plain text into chunks on headings and paragraphs.

Rules, in the order they apply:

* A fenced code block (``` or ~~~) is kept whole up to `max_chars`, and its `#` lines are not
  headings.
* ATX headings (`#` .. `######`) open sections; a chunk keeps the heading path it sits under,
  e.g. `PETG > Drying`. Hashtags at the end of a heading (`## Editorial note #meta`) become
  tags of that section and are removed from the heading text.
* A line `tags: a, b` on its own (outside code) tags the section it is in and its subsections;
  before the first heading (optionally inside a `---` front-matter block) it tags the whole file.
* Within a section, paragraphs (blank-line separated) are merged until a chunk reaches
  `target_chars`; a paragraph longer than `max_chars` is split at sentence ends.
* No chunk is ever longer than `max_chars`, whatever the file: a sentence, a code block or a
  file with no breaks at all that is longer is split at the last line break, else the last
  space, in the second half of the window, else cut at `max_chars` (never before a combining
  mark). A heading title is cut to `MAX_TITLE_CHARS`, and a chunk keeps at most `MAX_TAGS` tags
  of at most `MAX_TAG_CHARS` characters, so one hostile line cannot grow every chunk of a file.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

__all__ = ["HEADING_SEPARATOR", "MAX_CHUNK_CHARS", "TextChunk", "heading_root", "split_text"]

MAX_CHUNK_CHARS = 1200
"""The longest chunk `split_text` makes by default (its `max_chars`)."""
MAX_TITLE_CHARS = 200
"""A heading title longer than this is cut (with `…`)."""
MAX_TAGS = 32
"""Tags kept per chunk (file, section and hashtag tags, first ones first)."""
MAX_TAG_CHARS = 64
"""A longer tag is dropped (it is no tag a role would name)."""

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_HASHTAG = re.compile(r"(?:^|\s)#([A-Za-z][\w-]*)")
_TAGS_LINE = re.compile(r"^\s*tags\s*:\s*(.*)$", re.IGNORECASE)
_FENCE = re.compile(r"^\s*(```|~~~)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_UP_TO_LAST_BREAK = re.compile(r".*\n", re.DOTALL)
_UP_TO_LAST_SPACE = re.compile(r".*\s", re.DOTALL)
_MAX_MARKS = 16
"""A hard cut moves back at most this far to keep combining marks with their letter."""

HEADING_SEPARATOR = " > "


def heading_root(heading: str) -> str:
    """A heading path's first part, the document's title: `PA6 nylon` of `PA6 nylon > Print`."""
    return heading.split(HEADING_SEPARATOR)[0].strip()


@dataclass(frozen=True)
class TextChunk:
    """A chunk before it has an id: heading path, body and tags."""

    heading: str
    text: str
    tags: tuple[str, ...]


def _parse_tags(raw: str) -> list[str]:
    raw = raw.strip().strip("[]")
    return [t.strip().strip("'\"").lower() for t in re.split(r"[,\s]+", raw) if t.strip("'\" ")]


def _dedupe(items: list[str]) -> tuple[str, ...]:
    kept = (i for i in items if i and len(i) <= MAX_TAG_CHARS)
    return tuple(dict.fromkeys(kept))[:MAX_TAGS]


def _title(text: str) -> str:
    return text if len(text) <= MAX_TITLE_CHARS else text[: MAX_TITLE_CHARS - 1].rstrip() + "…"


def _split_hard(text: str, max_chars: int) -> list[str]:
    """`text` in pieces of at most `max_chars`: at a line break, else a space, else anywhere.

    Linear in `len(text)` (positions, no copies of the rest), so any size is fine.
    """
    pieces: list[str] = []
    start = 0
    while len(text) - start > max_chars:
        stop = cut = start + max_chars
        for last in (_UP_TO_LAST_BREAK, _UP_TO_LAST_SPACE):
            found = last.match(text, start, stop)
            if found is not None and found.end() - start > max_chars // 2:
                cut = found.end()
                break
        else:  # no break or space late enough: cut anywhere, but not before a combining mark
            back = cut
            while back > stop - _MAX_MARKS and unicodedata.combining(text[back]):
                back -= 1
            cut = back if not unicodedata.combining(text[back]) else cut
        pieces.append(text[start:cut].strip())
        start = cut
    pieces.append(text[start:].strip())
    return [p for p in pieces if p]


def _split_long(paragraph: str, max_chars: int) -> list[str]:
    if len(paragraph) <= max_chars:
        return [paragraph]
    pieces: list[str] = []
    current = ""
    sentences = (p for s in _SENTENCE_END.split(paragraph) for p in _split_hard(s, max_chars))
    for sentence in sentences:
        if current and len(current) + 1 + len(sentence) > max_chars:
            pieces.append(current)
            current = sentence
        else:
            current = f"{current} {sentence}" if current else sentence
    if current:
        pieces.append(current)
    return pieces


def _front_matter(lines: list[str]) -> tuple[list[str], list[str]]:
    """Front matter: a leading `---` block whose `tags:` line tags the whole file.

    Returns:
        The file's tags and the lines after the block (all of them when there is none).
    """
    if lines and lines[0].strip() == "---":
        for end in range(1, len(lines)):
            if lines[end].strip() == "---":
                tags: list[str] = []
                for line in lines[1:end]:
                    match = _TAGS_LINE.match(line)
                    if match:
                        tags += _parse_tags(match.group(1))
                return tags, lines[end + 1 :]
    return [], lines


def split_text(
    text: str, *, target_chars: int = 700, max_chars: int = MAX_CHUNK_CHARS
) -> list[TextChunk]:
    """Split a Markdown or plain-text document into chunks (see the module docstring).

    Args:
        text: The document.
        target_chars: Merge paragraphs of a section until a chunk reaches about this size.
        max_chars: Split a longer paragraph at sentence ends; no chunk is longer.

    Returns:
        The chunks in document order (empty sections give none).
    """
    stack: list[tuple[int, str, list[str]]] = []  # (level, title, section tags)
    chunks: list[TextChunk] = []
    paragraphs: list[str] = []
    block: list[str] = []
    in_fence = False
    seen_heading = False
    file_tags, lines = _front_matter(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))

    def end_block() -> None:
        if block:
            paragraphs.append("\n".join(block).strip())
            block.clear()

    def flush_section() -> None:
        end_block()
        heading = HEADING_SEPARATOR.join(title for _, title, _ in stack)
        tags = _dedupe(file_tags + [t for _, _, section in stack for t in section])
        current = ""
        for paragraph in paragraphs:
            for piece in _split_long(paragraph, max_chars):
                if current and len(current) + 2 + len(piece) > target_chars:
                    chunks.append(TextChunk(heading, current, tags))
                    current = piece
                else:
                    current = f"{current}\n\n{piece}" if current else piece
        if current:
            chunks.append(TextChunk(heading, current, tags))
        paragraphs.clear()

    for line in lines:
        if _FENCE.match(line):
            in_fence = not in_fence
            block.append(line)
            continue
        if in_fence:
            block.append(line)
            continue
        heading = _HEADING.match(line)
        if heading:
            flush_section()
            seen_heading = True
            level = len(heading.group(1))
            title = heading.group(2)
            section_tags = [t.lower() for t in _HASHTAG.findall(title)]
            title = _title(_HASHTAG.sub("", title).strip())
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title, section_tags))
            continue
        tags_line = _TAGS_LINE.match(line)
        if tags_line and not block:
            if seen_heading and stack:
                stack[-1][2].extend(_parse_tags(tags_line.group(1)))
            else:
                file_tags.extend(_parse_tags(tags_line.group(1)))
            continue
        if line.strip():
            block.append(line.rstrip())
        else:
            end_block()
    flush_section()
    return chunks
