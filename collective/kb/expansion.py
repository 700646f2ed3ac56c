"""Document expansion: the questions and words a person might use to reach a chunk.

At ingest (`collective kb add`, or `kb reindex --expansions` for a KB built without them) a
local chat model reads each chunk, with its contextual header (the document and section titles),
and writes a few short questions and everyday keywords it answers (doc2query). The store indexes
them lexically and densely beside the chunk (`collective.kb.sqlite_store`), so a query in a
person's words ("drooped on the dashboard in July") can find the chunk that says "glass
transition about 60 °C". They only route: the prompts show and cite the chunk's own text, never
its expansion.

What a model writes from untrusted chunk text is cleaned (`clean_expansion`) before it is kept:
letters, digits and plain punctuation only, so no control token, citation tag or markup can get
into the index, and a few short lines at most, so no chunk can stuff itself into every query.

In the same pass a model named by `$COLLECTIVE_KB_NAMES` (none by default: the bundled small
models write wrong names, bench/README.md) is asked, once per document, what else the document's
thing is called (trade names, acronyms, everyday names: "Teflon" for PTFE); the store keeps each
name that names no other document better (`collective.kb.names`).

Generated expansions can be kept in a JSON cache keyed by the chunk's content
(`content_key`): the demo KB ships one (`collective/data/demo_kb_expansions.json`), so building
it needs no model; `bench/expansions.py` writes them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from collective import environment
from collective.errors import BackendTimeout, ConfigError
from collective.kb.chunking import HEADING_SEPARATOR, heading_root

if TYPE_CHECKING:
    from collective.kb.sqlite_store import Progress, SqliteKnowledgeStore
    from collective.models.base import Backend

__all__ = [
    "BackendExpander",
    "BackendNamer",
    "DEFAULT_EXPANSION_MODEL",
    "EXPANSION_BATCH",
    "ExpansionStats",
    "Expander",
    "Namer",
    "backend_expander",
    "backend_namer",
    "clean_expansion",
    "configured_expander",
    "configured_namer",
    "content_key",
    "contextual_header",
    "expand_missing",
    "load_cache",
    "model_names",
    "prompt",
]

DEFAULT_EXPANSION_MODEL = "embedded:qwen2.5-coder-0.5b"
"""The model that writes expansions unless the `kb_expansion` setting names another (or none)."""

Expander = Callable[[str, str], str]
"""`(contextual header, chunk text) -> expansion text` (cleaned by the caller)."""
Namer = Callable[[str, str], str]
"""`(document title, its opening text) -> other names, comma-separated` (cleaned by the store)."""

MAX_LINES = 8
MAX_LINE_CHARS = 120
MAX_CHARS = 600
"""An expansion is at most this many lines, characters a line, and characters in all."""

PROMPT = (
    "Write 3 short questions a beginner would ask whose answer is in the passage below, in "
    "everyday words (their problem, what they saw, what they want to make), not the "
    "passage's technical terms. Then a line 'Keywords:' with everyday words for it.\n\n"
    "Passage from a knowledge base ({header}):\n{text}\n\n"
    "The 3 questions, then the Keywords line:\n1."
)
"""The request for a chunk's expansion. The instruction comes first: the chunks asked for
together share it as a prefix, computed once (1.4x faster than after the passage, measured)."""
NAMES_EXAMPLES = (
    ("polystyrene", "PS, Styrofoam"),
    ("polyvinyl butyral", "PVB, Butvar"),
    ("neoprene", "polychloroprene, CR rubber"),
    ("sodium bicarbonate", "baking soda, bicarb"),
)
"""The form a model is shown (things no KB of this project holds; a name it copies is dropped)."""
NAMES_PROMPT = (
    "Other names a material goes by: abbreviations, chemical names, trade names, everyday "
    "names.\n"
    + "".join(f"{thing}: {names}\n" for thing, names in NAMES_EXAMPLES)
    + "Complete the last line in the same form, nothing else.\n{title}:"
)
NAMES_MAX_TOKENS = 40
_PASSAGE_CHARS = 900
MAX_TOKENS = 72
"""Tokens a model may write for one expansion (three questions and a keyword line)."""


def prompt(header: str, text: str) -> str:
    """The request for one chunk's expansion (the chunk's text is the user's content)."""
    return PROMPT.format(header=header, text=" ".join(text.split())[:_PASSAGE_CHARS])


_KEEP = re.compile(r"[^\w\s?!.,;:'’()/%°+-]", re.UNICODE)
"""What an expansion may not contain: anything but word characters, spaces and plain punctuation
(no `<`, `>`, `[`, `]`, `|`, `#`, `{`, `}`, `*`, `` ` ``: no control token, tag or markup)."""
_LEAD = re.compile(r"^\s*(?:[-•*]+|\d+[.)]|q\d*[:.)]|question\s*\d*[:.)])\s*", re.IGNORECASE)


def content_key(heading: str, text: str) -> str:
    """The cache key of a chunk's content: its heading path and text, whoever stored them."""
    return hashlib.sha256(f"{heading}\n{text}".encode()).hexdigest()[:24]


def contextual_header(source: str, heading: str) -> str:
    """The document and section titles a chunk sits under (`document > section > ...`).

    The heading path starts at the document's own title when the file has one; otherwise the
    file name stands for it.
    """
    document = Path(source).stem.replace("_", " ").replace("-", " ")
    if not heading:
        return document
    if set(heading_root(heading).lower().split()) & set(document.lower().split()):
        return heading
    return f"{document}{HEADING_SEPARATOR}{heading}"


def clean_expansion(text: str) -> str:
    """What may be kept of a model's expansion: short plain lines, no tags or control tokens."""
    lines: list[str] = []
    for raw in text.replace("\r", "\n").split("\n"):
        line = _KEEP.sub(" ", raw)
        line = _LEAD.sub("", " ".join(line.split()))
        line = line[:MAX_LINE_CHARS].strip()
        if len(line) >= 3 and line.lower() not in (x.lower() for x in lines):
            lines.append(line)
        if len(lines) == MAX_LINES:
            break
    return "\n".join(lines)[:MAX_CHARS].strip()


EXPANSION_BATCH = 8
"""Chunks expanded at once when the model serves concurrent requests together (the in-process
model's batch engine, a server's slots); each batch is committed as it finishes."""


class _BackendAsker:
    """Asks a backend (greedy decoding) one prompt per `(a, b)` pair; `many` asks at once.

    On the in-process model the prompts are decoded together in one batch, on a server in its
    slots. A subclass says what it asks (`_prompt`), how it reads a reply (`_read`) and what one
    prompt is for (`what`, for the timeout's message).
    """

    what = ""

    def __init__(self, backend: Backend, *, max_tokens: int, timeout: float = 120.0):
        """An asker on `backend`; `timeout` bounds each prompt."""
        self.backend = backend
        self.max_tokens = max_tokens
        self.timeout = timeout

    def __call__(self, a: str, b: str) -> str:
        """The reply to one pair, read."""
        return self.many([(a, b)])[0]

    def many(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        """The replies to several pairs, asked for together, read."""

        async def all_of() -> list[str]:
            results = await asyncio.gather(
                *(
                    self.backend.chat(
                        [{"role": "user", "content": self._prompt(a, b)}],
                        max_tokens=self.max_tokens,
                        temperature=0.0,
                    )
                    for a, b in pairs
                )
            )
            return [r.text for r in results]

        limit = self.timeout * max(1, len(pairs))
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            try:
                written = pool.submit(asyncio.run, all_of()).result(limit)
            except concurrent.futures.TimeoutError as exc:
                raise BackendTimeout(
                    f"the model took over {limit:g} s to {self.what} ({len(pairs)} at once)"
                ) from exc
        return [self._read(a, w) for (a, _), w in zip(pairs, written, strict=True)]

    def _prompt(self, a: str, b: str) -> str:
        raise NotImplementedError

    def _read(self, a: str, written: str) -> str:
        return written


class BackendExpander(_BackendAsker):
    """An `Expander` that asks a backend (greedy decoding) for a chunk's expansion.

    `many` asks for several chunks' at once. The chunk's text is the user's content, which every
    backend keeps from becoming control tokens (escaped over HTTP, tokenized as plain text in
    process).
    """

    what = "expand a chunk"

    def __init__(self, backend: Backend, *, max_tokens: int = MAX_TOKENS, timeout: float = 120.0):
        """An expander on `backend`; `timeout` bounds each chunk's expansion."""
        super().__init__(backend, max_tokens=max_tokens, timeout=timeout)

    def _prompt(self, header: str, text: str) -> str:
        return prompt(header, text)


def backend_expander(
    backend: Backend, *, max_tokens: int = MAX_TOKENS, timeout: float = 120.0
) -> BackendExpander:
    """An expander that asks `backend` (greedy decoding) to write chunks' expansions."""
    return BackendExpander(backend, max_tokens=max_tokens, timeout=timeout)


class BackendNamer(_BackendAsker):
    """A `Namer` that asks a backend (greedy decoding) what else a document's thing is called.

    Only the title is shown (a passage made the small models copy its sentences); `many`
    names several documents at once.
    """

    what = "name a document"

    def __init__(
        self, backend: Backend, *, max_tokens: int = NAMES_MAX_TOKENS, timeout: float = 120.0
    ):
        """A namer on `backend`; `timeout` bounds each document's names."""
        super().__init__(backend, max_tokens=max_tokens, timeout=timeout)

    def _prompt(self, title: str, text: str) -> str:
        return NAMES_PROMPT.format(title=title)

    def _read(self, title: str, written: str) -> str:
        return model_names(title, written)


def backend_namer(
    backend: Backend, *, max_tokens: int = NAMES_MAX_TOKENS, timeout: float = 120.0
) -> BackendNamer:
    """A namer that asks `backend` (greedy decoding) what else a document's thing is called."""
    return BackendNamer(backend, max_tokens=max_tokens, timeout=timeout)


def model_names(title: str, written: str) -> str:
    """The names of a model's line that may be a document's: comma-separated.

    Its first line, split at commas and colons; a name of the prompt's examples, the title
    itself, one of two characters or of more than four words is dropped.
    """
    line = written.strip().split("\n")[0].replace(":", ",")  # "title: names" or "name: title"
    shown = {n.strip().lower() for _, names in NAMES_EXAMPLES for n in names.split(",")}
    shown |= {thing for thing, _ in NAMES_EXAMPLES}
    kept = [
        n.strip()
        for n in line.split(",")
        if len(n.strip()) > 2
        and len(n.split()) <= 4
        and n.strip().lower() not in shown | {title.lower()}
    ]
    return ", ".join(kept)


def configured_namer(spec: str | None = None) -> tuple[Namer | None, str]:
    """The namer the `kb_names` setting names (None: `none`, the default), and its model.

    Args:
        spec: The setting; None reads `$COLLECTIVE_KB_NAMES`.

    Raises:
        ConfigError: The spec names no known backend.
    """
    spec = spec or environment.kb_names()
    if not spec or spec == "none":
        return None, "none"
    from collective.models.registry import backend_from_spec

    return backend_namer(backend_from_spec(spec)), spec


def configured_expander(spec: str | None = None) -> tuple[Expander | None, str]:
    """The expander the `kb_expansion` setting names (None for `none`), and the model's name.

    Args:
        spec: The setting; None reads `$COLLECTIVE_KB_EXPANSION` (else the default model).

    Raises:
        ConfigError: The spec names no known backend.
    """
    spec = spec or environment.kb_expansion() or DEFAULT_EXPANSION_MODEL
    if spec == "none":
        return None, "none"
    from collective.models.registry import backend_from_spec

    backend = backend_from_spec(spec)
    return backend_expander(backend), spec


def load_cache(path: str | Path) -> dict[str, str]:
    """A JSON cache of expansions: `{"expansions": {content_key: text}}` (missing: empty).

    Raises:
        ConfigError: The file is not such a cache.
    """
    file = Path(path)
    if not file.exists():
        return {}
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        cache = data["expansions"]
        if not isinstance(cache, dict):
            raise TypeError("'expansions' is not an object")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"cannot read expansions from {file}: {exc}; regenerate it with bench/expansions.py"
        ) from exc
    return {str(k): str(v) for k, v in cache.items()}


@dataclass
class ExpansionStats:
    """What an `expand_missing` call did."""

    generated: int = 0
    """Expansions a model wrote."""
    cached: int = 0
    """Expansions taken from the cache."""
    empty: int = 0
    """Chunks whose expansion was empty after cleaning (stored empty: not asked again)."""
    seconds: list[float] = field(default_factory=list)
    """Generation time per written expansion."""
    named: int = 0
    """Documents the model was asked to name."""
    model: str = ""

    def per_chunk_s(self) -> float:
        """Mean seconds per generated expansion (0: none generated)."""
        return sum(self.seconds) / len(self.seconds) if self.seconds else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "model": self.model,
            "generated": self.generated,
            "cached": self.cached,
            "empty": self.empty,
            "named": self.named,
            "per_chunk_s": round(self.per_chunk_s(), 3),
        }


T = TypeVar("T")


def _batches(model: object, items: list[T], batch: int) -> list[list[T]]:
    """`items` in groups of `batch` where `model` is asked for several at once (`many`)."""
    size = max(1, batch) if callable(getattr(model, "many", None)) else 1
    return [items[start : start + size] for start in range(0, len(items), size)]


def _ask(model: Callable[[str, str], str] | None, pairs: list[tuple[str, str]]) -> list[str]:
    """`model`'s replies to `pairs`: together where it can (`many`), else one at a time."""
    many = getattr(model, "many", None)
    if callable(many) and len(pairs) > 1:
        return list(many(pairs))
    return [model(a, b) for a, b in pairs] if model is not None else []


def expand_missing(
    store: SqliteKnowledgeStore,
    expander: Expander | None,
    *,
    model: str,
    cache: Mapping[str, str] | None = None,
    progress: Progress | None = None,
    namer: Namer | None = None,
    namer_model: str = "",
    names_only: bool = False,
    batch: int = EXPANSION_BATCH,
) -> ExpansionStats:
    """Give every chunk without an expansion one: from `cache`, else written by `expander`.

    With a `namer`, each document the model has not named yet is named first. Expansions are
    asked for `batch` chunks at a time; each batch and each document's names are committed as
    they are made, so an interrupted run keeps what it finished and the next run goes on from
    there.

    Args:
        store: The KB.
        expander: What writes an expansion; None: the cache only.
        model: The name recorded with each written expansion.
        cache: Expansions by `content_key`.
        progress: Called with `(done, total)` after each document named and each chunk.
        namer: What names a document (`backend_namer`); None: no names from a model.
        namer_model: The name recorded with a document's names (default: `model`).
        names_only: Name the documents only (no chunk is expanded).
        batch: Chunks asked for at once when the expander can (`BackendExpander.many`); the
            time recorded for each is the batch's share.

    Returns:
        Counts and the time per written expansion.
    """
    stats = ExpansionStats(model=model)
    unnamed = store.unnamed() if namer is not None else []
    todo = [] if names_only else store.unexpanded()
    total = len(unnamed) + len(todo)
    done = 0
    for named in _batches(namer, unnamed, batch):
        documents = [(title, opening) for _, title, opening in named]
        for (source, _, _), written in zip(named, _ask(namer, documents), strict=True):
            store.set_model_names(source, written, namer_model or model)
        stats.named += len(named)
        done += len(named)
        if progress is not None:
            progress(done, total)
    for group in _batches(expander, todo, batch):
        asked = []
        for rowid, source, heading, text in group:
            known = (cache or {}).get(content_key(heading, text))
            if known is not None:
                store.set_expansion(rowid, clean_expansion(known), "cache")
                stats.cached += 1
            elif expander is not None:
                asked.append((rowid, contextual_header(source, heading), text))
        if asked and expander is not None:
            started = time.perf_counter()
            texts = _ask(expander, [(header, text) for _, header, text in asked])
            seconds = (time.perf_counter() - started) / len(asked)
            for (rowid, header, _), raw in zip(asked, texts, strict=True):
                written = clean_expansion(raw)
                # The header's words are indexed with the questions (the chunk's own FTS row
                # has the heading path, but not the file's name when the file has no title).
                expansion = clean_expansion(f"{header}\n{written}") if written else ""
                stats.empty += not written
                store.set_expansion(rowid, expansion, model, seconds)
                stats.generated += 1
                stats.seconds.append(seconds)
        done += len(group)
        if progress is not None:
            progress(done, total)
    return stats
