"""Backends named by the strings users type in config, created once per process.

Each backend module registers its kind (`register(BackendKind(...))` at its end): the prefix
before the first `:`, the form shown to users, how to parse the rest and how to create the
backend. The registry keeps no list of backends beyond `BUILTIN_MODULES`, which it imports on
first use; adding a backend here is one new file plus its line there. A package outside this
repository adds one without editing it: an entry point in the group `collective.backends`
(`ENTRY_POINT_GROUP`) names a module that registers its kinds when imported, or a
`BackendKind` itself:

    [project.entry-points."collective.backends"]
    mine = "my_package.backend"

The built-in forms (see `valid_forms()`):

* `llama-server:http://127.0.0.1:8083`: a llama.cpp server;
* `openai:MODEL@http://HOST:PORT`: any server with OpenAI's `/v1/chat/completions` (vLLM,
  SGLang, LM Studio, llama-server, TGI);
* `ollama:MODEL@http://127.0.0.1:11434`: a model on an Ollama server (`@URL` may be omitted:
  `$OLLAMA_HOST`, else `http://127.0.0.1:11434`);
* `llamacpp:/path/model.gguf`: a GGUF loaded in this process;
* `embedded:NAME`: a bundled GGUF in this process (n_ctx 32,768), NAME one of
  `collective.models.embedded.EMBEDDED_MODELS`; `embedded` alone is the Qwen2.5-Coder 0.5B.

Backends are cached by their normalised spec, so every role that names the same model shares
one backend: K specialists and the judge on `embedded` share one loaded model (and its lock),
and `llamacpp:` naming the embedded file is the same backend as `embedded`.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from collective.errors import ConfigError
from collective.models.base import Backend

__all__ = [
    "BUILTIN_MODULES",
    "ENTRY_POINT_GROUP",
    "BackendKind",
    "BackendSpec",
    "backend_from_spec",
    "checked_url",
    "check_spec",
    "close_all",
    "parse_spec",
    "refuse",
    "register",
    "url_problem",
    "valid_forms",
]

BUILTIN_MODULES = (
    "collective.models.llama_server",
    "collective.models.openai_api",
    "collective.models.ollama_api",
    "collective.models.llamacpp_in_process",
)
"""The modules whose import registers collective's own backend kinds."""

ENTRY_POINT_GROUP = "collective.backends"
"""The entry-point group where other packages declare their backends (loaded with ours)."""


@dataclass(frozen=True)
class BackendSpec:
    """A parsed backend spec: its kind and whichever of url, model and path the kind uses."""

    kind: str
    url: str = ""
    model: str = ""
    path: str = ""

    @property
    def key(self) -> str:
        """The normalised spec: equal keys mean one shared backend."""
        if self.path:
            return f"{self.kind}:{self.path}"
        return f"{self.kind}:{self.model}@{self.url}" if self.model else f"{self.kind}:{self.url}"


@dataclass(frozen=True)
class BackendKind:
    """One kind of backend, as its module registers it."""

    name: str
    """The spec's prefix, e.g. `llama-server`."""
    form: str
    """The spec's form as shown to users, e.g. `llama-server:http://HOST:PORT`."""
    parse: Callable[[str, str], BackendSpec]
    """(the whole spec, the text after `NAME:`) -> the parsed spec; raises `refuse(...)`."""
    create: Callable[[BackendSpec], Backend]
    """Makes the backend (nothing connects or loads until it is used)."""
    check: Callable[[str], None] | None = None
    """A cheaper check of the whole spec than `parse`, for config validation (e.g. the
    embedded model's name without assembling its file); None: `parse` is the check."""


log = logging.getLogger(__name__)

_kinds: dict[str, BackendKind] = {}
_loaded = False
_lock = threading.RLock()


def register(kind: BackendKind) -> None:
    """Add a backend kind (a module calls this once, at import).

    Raises:
        ConfigError: Another kind already has that name (a plugin cannot replace one).
    """
    if _kinds.get(kind.name, kind) is not kind:
        raise ConfigError(f"two backends register the spec prefix {kind.name!r}")
    _kinds[kind.name] = kind


def _all_kinds() -> dict[str, BackendKind]:
    global _loaded
    if not _loaded:
        with _lock:
            if not _loaded:
                for module in BUILTIN_MODULES:
                    importlib.import_module(module)
                for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
                    _load_plugin(entry)
                _loaded = True
    return _kinds


def _load_plugin(entry: importlib.metadata.EntryPoint) -> None:
    """Register the backends an entry point names; a broken one is logged and left out."""
    where = f"{entry.name} = {entry.value!r}" + (f" of {entry.dist.name}" if entry.dist else "")
    try:
        loaded = entry.load()  # a module registers its kinds as it is imported
        if isinstance(loaded, BackendKind):
            register(loaded)
    except Exception as exc:  # a plugin's bug must not stop the built-in backends
        log.warning("the backend plugin %s failed to load and is left out: %s", where, exc)


def valid_forms() -> list[str]:
    """The spec forms of every registered kind, as shown when a spec is refused."""
    return [form for kind in _all_kinds().values() for form in kind.form.split("\n")]


def refuse(spec: str, why: str) -> ConfigError:
    """The error for a spec that has none of the valid forms (it lists them)."""
    forms = "\n  ".join(valid_forms())
    return ConfigError(f"invalid backend spec {spec!r}: {why}. Valid forms:\n  {forms}")


def checked_url(spec: str, url: str) -> str:
    """The server's base URL, or `refuse` unless http(s) with a host and a usable port.

    A trailing `/` goes, and so does a trailing `/v1`: the OpenAI client's and vLLM's docs write
    the base URL with it, while a backend adds its API's own routes (`/v1/models`, `/props`).
    """
    problem = url_problem(url)
    if problem:
        raise refuse(spec, problem)
    parts = urlsplit(url)
    path = parts.path.rstrip("/").removesuffix("/v1").rstrip("/")
    return urlunsplit(parts._replace(path=path))


def url_problem(url: str) -> str:
    """Why `url` is no http(s) URL with a host and a port from 1 to 65535 ("": it is one)."""
    if any(c.isspace() or not c.isprintable() for c in url):
        return f"{url!r} holds spaces or control characters"
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # e.g. an unclosed `[` of an IPv6 host
        return f"{url!r} is not a valid URL ({exc})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{url!r} is not an http(s) URL with a host"
    try:
        port = parts.port
    except ValueError:  # not a number, or past 65535
        port = -1
    if port is not None and not 1 <= port <= 65535:
        return f"{url!r} has no valid port; give one from 1 to 65535"
    return ""


def parse_spec(spec: str) -> BackendSpec:
    """Parse a backend spec string.

    Raises:
        ConfigError: The spec has none of the valid forms (the message lists them).
    """
    text = spec.strip()
    kinds = _all_kinds()
    name, sep, rest = text.partition(":")
    if name in kinds and (name == "embedded" or (sep and rest)):
        return kinds[name].parse(spec, rest)
    if name in kinds or not sep or not rest:
        raise refuse(spec, "expected KIND:TARGET or `embedded`")
    raise refuse(spec, f"unknown backend kind {name!r}")


def check_spec(spec: str) -> str:
    """`spec` normalised (stripped, replicas joined by ` | `), checked without loading anything.

    Raises:
        ConfigError: A spec (or a replica's) has none of the valid forms.
    """
    from collective.models.replicas import REPLICA_SEP, split_replicas

    parts = split_replicas(spec)
    if len(parts) > 1:
        return REPLICA_SEP.join(check_spec(part) for part in parts)
    text = spec.strip()
    kind = _all_kinds().get(text.partition(":")[0])
    if kind is not None and kind.check is not None:
        kind.check(text)
    else:
        parse_spec(text)
    return text


_cache: dict[str, Backend] = {}


def backend_from_spec(spec: str) -> Backend:
    """The process-wide backend for `spec`, created on first use (nothing loads until used).

    Specs joined by ` | ` name a replica set (`collective.models.replicas`).

    Raises:
        ConfigError: An invalid spec (the message lists the valid forms), or a `llamacpp:`
            path that does not exist.
    """
    from collective.models.replicas import REPLICA_SEP, ReplicaSet, split_replicas

    members = split_replicas(spec)
    if len(members) > 1:  # a replica set: its members are shared like any backend
        backends = [backend_from_spec(member) for member in members]
        key = REPLICA_SEP.join(b.spec for b in backends)
        with _lock:
            replicas = _cache.get(key) or ReplicaSet(backends)
            _cache[key] = replicas
            return replicas
    parsed = parse_spec(spec)
    with _lock:
        backend = _cache.get(parsed.key)
        if backend is None:
            backend = _cache[parsed.key] = _all_kinds()[parsed.kind].create(parsed)
        return backend


async def close_all() -> None:
    """Close every cached backend (connections, loaded models) and empty the cache."""
    with _lock:
        backends = list(_cache.values())
        _cache.clear()
    for backend in backends:
        await backend.aclose()
