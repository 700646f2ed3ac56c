"""The README and the guides under docs/, read as their tests need them (issue 55).

One place for what the docs tests share: which pages there are, their fenced blocks, the
commands of their `sh` blocks, and their links.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

GUIDES = (
    "configuration.md",
    "servers.md",
    "kb.md",
    "verdicts.md",
    "memory.md",
    "extending.md",
    "operations.md",
    "troubleshooting.md",
    "embedding.md",
    "eval.md",
)
"""The guides the docs helper keeps (docs/design.md and other helpers' pages are theirs)."""

PAGES = (REPO / "README.md", *(REPO / "docs" / name for name in GUIDES))
"""Every page whose commands, configs and links the tests check."""

EVERY_PAGE = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))
"""Every page of the docs: each is linked from the README, and its links resolve."""


def blocks(page: Path, lang: str) -> list[str]:
    """The fenced blocks of `page` in language `lang`, in order."""
    return re.findall(rf"^```{lang}\n(.*?)^```", page.read_text(encoding="utf-8"), re.S | re.M)


def section(page: Path, heading: str) -> str:
    """The text of `page` under `## heading`, up to the next `## `."""
    text = page.read_text(encoding="utf-8")
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def commands(pages: tuple[Path, ...] = PAGES) -> list[list[str]]:
    """The argv of every command in the pages' `sh` blocks, in order, each once."""
    seen: dict[str, list[str]] = {}
    for page in pages:
        for block in blocks(page, "sh"):
            for line in block.replace("\\\n", " ").splitlines():
                for part in line.split("&&"):
                    argv = shlex.split(part, comments=True)
                    if argv:
                        seen.setdefault(shlex.join(argv), argv)
    return list(seen.values())


def inline_commands(pages: tuple[Path, ...] = EVERY_PAGE) -> list[list[str]]:
    """The argv of every `collective ...` and `make ...` the pages name in their text (code
    spans outside fenced blocks), each once, with its placeholders filled in: an upper-case
    word (`ID`, `FILE`, `PATH...`) is a value, `[--opt X]` an option, `a|b` its first choice."""
    seen: dict[str, list[str]] = {}
    for page in pages:
        text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
        for shown in re.findall(r"`((?:collective|make) [^`]+)`", text):
            argv = [
                "x" if re.fullmatch(r"[A-Z][A-Z_]*(?:\.\.\.)?", a) else a.split("|")[0]
                for a in shlex.split(shown.replace("[", "").replace("]", ""))
            ]
            seen.setdefault(shlex.join(argv), argv)
    return list(seen.values())


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of `page`'s headings (outside fenced blocks)."""
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    return {slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def links(page: Path) -> list[str]:
    """The relative link targets of `page` (`path`, `path#anchor`, `#anchor`), code aside."""
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    text = re.sub(r"`[^`]*`", "", text)
    found = re.findall(r"\]\(([^)\s]+)\)", text)
    return [t for t in found if not re.match(r"[a-z]+:", t)]
