"""Backends named by the strings users type in config, created once per process.

Valid forms (see `VALID_FORMS`):

* `llama-server:http://127.0.0.1:8083`: a llama.cpp server;
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

import threading
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from collective import environment
from collective.errors import ConfigError
from collective.models.base import Backend

__all__ = [
    "DEFAULT_OLLAMA_URL",
    "EMBEDDED_N_CTX",
    "VALID_FORMS",
    "BackendSpec",
    "backend_from_spec",
    "close_all",
    "parse_spec",
]

VALID_FORMS = (
    "llama-server:http://HOST:PORT",
    "ollama:MODEL@http://HOST:PORT",
    "llamacpp:/path/to/model.gguf",
    "embedded",
    "embedded:NAME (qwen2.5-coder-0.5b, qwen2.5-coder-1.5b, gemma-3-270m)",
)
"""The backend spec forms, as shown to users when a spec is refused."""

DEFAULT_OLLAMA_URL = "http://127.0.0.1:11434"
EMBEDDED_N_CTX = 32768
"""Context of the embedded model in process: its full training context."""


@dataclass(frozen=True)
class BackendSpec:
    """A parsed backend spec."""

    kind: Literal["llama-server", "ollama", "llamacpp"]
    url: str = ""
    model: str = ""
    path: str = ""

    @property
    def key(self) -> str:
        """The normalised spec: equal keys mean one shared backend."""
        if self.kind == "llama-server":
            return f"llama-server:{self.url}"
        if self.kind == "ollama":
            return f"ollama:{self.model}@{self.url}"
        return f"llamacpp:{self.path}"


def _refuse(spec: str, why: str) -> ConfigError:
    forms = "\n  ".join(VALID_FORMS)
    return ConfigError(f"invalid backend spec {spec!r}: {why}. Valid forms:\n  {forms}")


def _url(spec: str, url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _refuse(spec, f"{url!r} is not an http(s) URL with a host")
    return url.rstrip("/")


def ollama_host_url(host: str) -> str:
    """The URL `$OLLAMA_HOST` names, read as Ollama reads it.

    Empty: `DEFAULT_OLLAMA_URL`. Without a scheme, http and port 11434 unless given
    (`127.0.0.1` -> `http://127.0.0.1:11434`); with one, the scheme's own default port.
    """
    host = host.strip()
    if not host:
        return DEFAULT_OLLAMA_URL
    if "://" in host:
        return host
    url = f"http://{host}"
    try:
        port = urlsplit(url).port
    except ValueError:
        return url  # not a host[:port]: `_url` refuses it with the valid forms
    return url if port is not None else f"{url.rstrip('/')}:11434"


def parse_spec(spec: str) -> BackendSpec:
    """Parse a backend spec string.

    Raises:
        ConfigError: The spec has none of the valid forms (the message lists them).
    """
    text = spec.strip()
    if text == "embedded" or text.startswith("embedded:"):
        from collective.models.embedded import embedded_model, embedded_model_path

        return BackendSpec("llamacpp", path=str(embedded_model_path(embedded_model(text).key)))
    kind, sep, rest = text.partition(":")
    if not sep or not rest:
        raise _refuse(spec, "expected KIND:TARGET or `embedded`")
    if kind == "llama-server":
        return BackendSpec("llama-server", url=_url(spec, rest))
    if kind == "ollama":
        model, at, url = rest.rpartition("@")
        if not at:
            model, url = rest, ollama_host_url(environment.ollama_host())
        if not model:
            raise _refuse(spec, "no model name before `@`")
        return BackendSpec("ollama", url=_url(spec, url), model=model)
    if kind == "llamacpp":
        path = Path(rest).expanduser()
        if path.suffix != ".gguf":
            raise _refuse(spec, f"{rest!r} is not a .gguf file path")
        return BackendSpec("llamacpp", path=str(path.resolve()))
    raise _refuse(spec, f"unknown backend kind {kind!r}")


_cache: dict[str, Backend] = {}
_lock = threading.Lock()


def backend_from_spec(spec: str) -> Backend:
    """The process-wide backend for `spec`, created on first use (nothing loads until used).

    Raises:
        ConfigError: An invalid spec (the message lists the valid forms), or a `llamacpp:`
            path that does not exist.
    """
    parsed = parse_spec(spec)
    with _lock:
        backend = _cache.get(parsed.key)
        if backend is None:
            backend = _cache[parsed.key] = _create(parsed)
        return backend


def _create(parsed: BackendSpec) -> Backend:
    if parsed.kind == "llama-server":
        from collective.models.llama_server import LlamaServerBackend

        return LlamaServerBackend(parsed.url)
    if parsed.kind == "ollama":
        from collective.models.ollama_api import OllamaBackend

        return OllamaBackend(parsed.model, parsed.url)
    from collective.models.embedded import embedded_model_by_path
    from collective.models.llamacpp_in_process import LlamaCppBackend

    if not Path(parsed.path).is_file():
        raise ConfigError(f"llamacpp: no GGUF file at {parsed.path}; check the path in config")
    # The one place the embedded model is recognised; its backend declares what it can do.
    embedded = embedded_model_by_path(parsed.path)
    template = None
    if embedded and embedded.turn_template:
        template = resources.files("collective") / "data/templates" / embedded.turn_template
    backend = LlamaCppBackend(
        parsed.path,
        n_ctx=EMBEDDED_N_CTX,
        name=embedded.name if embedded else None,
        chat_template=template.read_text() if template else None,
        repeat_penalty=embedded.repeat_penalty if embedded else 1.0,
    )
    if embedded:
        backend.output_cap = embedded.output_cap
    return backend


async def close_all() -> None:
    """Close every cached backend (connections, loaded models) and empty the cache."""
    with _lock:
        backends = list(_cache.values())
        _cache.clear()
    for backend in backends:
        await backend.aclose()
