"""What a verdict is made of: the model's direct answer, then the chunks' own sentences."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from collective.kb.store import Chunk

_QUOTE = re.compile(r"^- (?:(?P<title>[^:\[]{1,80}): )?(?P<sentence>.+?) \[KB#(?P<id>[^\]]+)\]$")


def direct(out: Mapping[str, Any]) -> str:
    """The verdict's direct answer: its first line."""
    return out["answer"].splitlines()[0]


def quoted(out: Mapping[str, Any], chunks: Iterable[Chunk]) -> list[str]:
    """The verdict's lines after its direct answer, each asserted to be its chunk's sentence."""
    by_id = {c.id: c for c in chunks}
    lines = out["answer"].splitlines()[1:]
    for line in lines:
        m = _QUOTE.match(line)
        assert m, f"not a quoted line: {line!r}"
        chunk = by_id[m["id"]]
        whole = f"{m['title']}: {m['sentence']}" if m["title"] else m["sentence"]
        assert m["sentence"] in chunk.text or whole in chunk.text, (line, chunk.text)
    return lines
