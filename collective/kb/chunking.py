"""Split Markdown or plain text into chunks on headings and paragraphs.

Rules, in the order they apply:

* A fenced code block (``` or ~~~) is never split and its `#` lines are not headings.
* ATX headings (`#` .. `######`) open sections; a chunk keeps the heading path it sits under,
  e.g. `PETG > Drying`. Hashtags at the end of a heading (`## Editorial note #meta`) become
  tags of that section and are removed from the heading text.
* A line `tags: a, b` on its own (outside code) tags the section it is in and its subsections;
  before the first heading (optionally inside a `---` front-matter block) it tags the whole file.
* Within a section, paragraphs (blank-line separated) are merged until a chunk reaches
  `target_chars`; a paragraph longer than `max_chars` is split at sentence ends.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["TextChunk", "split_text"]

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_HASHTAG = re.compile(r"(?:^|\s)#([A-Za-z][\w-]*)")
_TAGS_LINE = re.compile(r"^\s*tags\s*:\s*(.*)$", re.IGNORECASE)
_FENCE = re.compile(r"^\s*(```|~~~)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")

HEADING_SEPARATOR = " > "


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
    return tuple(dict.fromkeys(i for i in items if i))


def _split_long(paragraph: str, max_chars: int) -> list[str]:
    if len(paragraph) <= max_chars:
        return [paragraph]
    pieces: list[str] = []
    current = ""
    for sentence in _SENTENCE_END.split(paragraph):
        if current and len(current) + 1 + len(sentence) > max_chars:
            pieces.append(current)
            current = sentence
        else:
            current = f"{current} {sentence}" if current else sentence
    if current:
        pieces.append(current)
    return pieces


def split_text(text: str, *, target_chars: int = 700, max_chars: int = 1200) -> list[TextChunk]:
    """Split a Markdown or plain-text document into chunks (see the module docstring).

    Args:
        text: The document.
        target_chars: Merge paragraphs of a section until a chunk reaches about this size.
        max_chars: Split a longer paragraph at sentence ends.

    Returns:
        The chunks in document order (empty sections give none).
    """
    file_tags: list[str] = []
    stack: list[tuple[int, str, list[str]]] = []  # (level, title, section tags)
    chunks: list[TextChunk] = []
    paragraphs: list[str] = []
    block: list[str] = []
    in_fence = False
    seen_heading = False

    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    # Front matter: a leading `---` block whose `tags:` line tags the whole file.
    if lines and lines[0].strip() == "---":
        for end in range(1, len(lines)):
            if lines[end].strip() == "---":
                for line in lines[1:end]:
                    match = _TAGS_LINE.match(line)
                    if match:
                        file_tags += _parse_tags(match.group(1))
                lines = lines[end + 1 :]
                break

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
            title = _HASHTAG.sub("", title).strip()
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
