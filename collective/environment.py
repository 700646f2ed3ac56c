"""Every environment variable and default path collective reads, in one place.

The settings of a run (`COLLECTIVE_<FIELD>`, `.env`, the TOML file) are layered by
`collective.config`; this module holds what lies outside them: where files go by default, the
cache, and the variables that tune one part (a synonym file, the embedded model for tests, an
Ollama server's parallelism). It imports nothing of collective, so every layer may use it.
Each function reads the environment when called, never at import.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "CHECKPOINTS_PATH",
    "COMPLEXITY_SIGNALS_ENV",
    "DEFAULT_CONFIG_FILE",
    "EMBEDDED_MODEL_ENV",
    "ENTAILMENT_ENV",
    "KB_EMBEDDINGS_ENV",
    "KB_EXPANSION_ENV",
    "KB_NAMES_ENV",
    "KB_PATH",
    "RERANK_ENV",
    "STORE_PATH",
    "SYNONYMS_ENV",
    "USAGE_LOG_PATH",
    "cache_dir",
    "complexity_signals_file",
    "config_file",
    "debug",
    "embedded_model_override",
    "entailment",
    "kb_expansion",
    "kb_path",
    "ollama_host",
    "ollama_num_parallel",
    "openmp_wait_set",
    "rerank",
    "synonyms_file",
    "threads",
    "usage_log_path",
    "verbose",
]

DEFAULT_CONFIG_FILE = "collective.toml"
"""The TOML file read from the working directory when neither `--config` nor
`$COLLECTIVE_CONFIG` names one."""
KB_PATH = Path(".collective") / "kb.sqlite"
"""The KB when neither `--kb`, config `kb` nor `$COLLECTIVE_KB` names one."""
CHECKPOINTS_PATH = ".collective/checkpoints.sqlite"
"""The threads' checkpoints (config `checkpoints`) by default."""
STORE_PATH = ".collective/memory.sqlite"
"""L2 long-term memory (config `store`) by default."""
USAGE_LOG_PATH = ".collective/usage.jsonl"
"""The budget usage log (config `usage_log`) by default."""

SYNONYMS_ENV = "COLLECTIVE_SYNONYMS"
"""Names a synonym file that replaces the packaged `data/synonyms.txt` (same format)."""
COMPLEXITY_SIGNALS_ENV = "COLLECTIVE_COMPLEXITY_SIGNALS"
"""Names a TOML file of complexity signals that replaces `data/complexity_signals.toml`."""
EMBEDDED_MODEL_ENV = "COLLECTIVE_EMBEDDED_MODEL"
"""Runs every `embedded` spec on this one embedded model (the tests use the small gemma)."""
ENTAILMENT_ENV = "COLLECTIVE_ENTAILMENT"
"""The claim check's entailment: `none` (default: a claim numbers and names cannot settle is
dropped) or `judge` (the judge's own model, in process, decides it; measured worse with the
1.5B, bench/README.md#claim-check)."""
RERANK_ENV = "COLLECTIVE_RERANK"
"""Deep retrieval's reranker: `embedded` (default: the embedded judge model) or `none`."""
KB_EXPANSION_ENV = "COLLECTIVE_KB_EXPANSION"
"""The chat model that writes chunk expansions at `kb add` (a model spec; default the embedded
Qwen2.5-Coder-0.5B) or `none` (the test suite's default: it loads a model)."""
KB_NAMES_ENV = "COLLECTIVE_KB_NAMES"
"""The chat model that names each document at `kb add` (trade names, acronyms; a model spec) or
`none` (the default: the bundled small models write wrong names, bench/README.md)."""
KB_EMBEDDINGS_ENV = "COLLECTIVE_KB_EMBEDDINGS"
"""The setting `kb_embeddings` as an environment variable (read by `collective.config`), named
in messages."""


def _get(name: str) -> str:
    return os.environ.get(name, "").strip()


def config_file() -> Path | None:
    """`$COLLECTIVE_CONFIG`: the TOML file to read when `--config` names none."""
    return Path(_get("COLLECTIVE_CONFIG")) if _get("COLLECTIVE_CONFIG") else None


def kb_path() -> Path:
    """`$COLLECTIVE_KB` if set, else `.collective/kb.sqlite` (relative to the working dir)."""
    return Path(_get("COLLECTIVE_KB")) if _get("COLLECTIVE_KB") else KB_PATH


def usage_log_path() -> str:
    """`$COLLECTIVE_USAGE_LOG`, else `.collective/usage.jsonl`."""
    return _get("COLLECTIVE_USAGE_LOG") or USAGE_LOG_PATH


def cache_dir() -> Path:
    """Collective's cache (`$COLLECTIVE_CACHE`, else `$XDG_CACHE_HOME/collective` or ~/.cache)."""
    root = _get("COLLECTIVE_CACHE") or os.path.join(
        _get("XDG_CACHE_HOME") or Path.home() / ".cache", "collective"
    )
    return Path(root)


def synonyms_file() -> str:
    """`$COLLECTIVE_SYNONYMS`: a synonym file to use instead of the packaged one ("" for none)."""
    return _get(SYNONYMS_ENV)


def complexity_signals_file() -> str:
    """`$COLLECTIVE_COMPLEXITY_SIGNALS`: a signals file instead of the packaged one ("": none)."""
    return _get(COMPLEXITY_SIGNALS_ENV)


def embedded_model_override() -> str:
    """`$COLLECTIVE_EMBEDDED_MODEL`: the one embedded model every `embedded` spec runs ("")."""
    return _get(EMBEDDED_MODEL_ENV)


def entailment() -> str:
    """`$COLLECTIVE_ENTAILMENT`: the claim check's entailment ("": the default, `none`)."""
    return _get(ENTAILMENT_ENV)


def rerank() -> str:
    """`$COLLECTIVE_RERANK`: deep retrieval's reranker ("": the default, `engine`)."""
    return _get(RERANK_ENV)


def kb_expansion() -> str:
    """`$COLLECTIVE_KB_EXPANSION`: the model spec writing chunk expansions ("": the default)."""
    return _get(KB_EXPANSION_ENV)


def kb_names() -> str:
    """`$COLLECTIVE_KB_NAMES`: the model spec naming documents at ingest ("": none)."""
    return _get(KB_NAMES_ENV)


def threads() -> str:
    """`$COLLECTIVE_THREADS`: CPU threads for llama.cpp in process ("": the usable cores)."""
    return _get("COLLECTIVE_THREADS")


def openmp_wait_set() -> bool:
    """Whether `$OMP_WAIT_POLICY` or `$GOMP_SPINCOUNT` says how llama.cpp's threads wait."""
    return bool(_get("OMP_WAIT_POLICY") or _get("GOMP_SPINCOUNT"))


def ollama_host() -> str:
    """`$OLLAMA_HOST`, as the Ollama CLI reads it ("" when unset)."""
    return _get("OLLAMA_HOST")


def openai_api_key() -> str:
    """`$OPENAI_API_KEY`: the bearer token `openai:` servers started with `--api-key` expect."""
    return _get("OPENAI_API_KEY")


def ollama_num_parallel() -> int:
    """`$OLLAMA_NUM_PARALLEL`: the requests an Ollama server runs at once (default 1)."""
    return int(_get("OLLAMA_NUM_PARALLEL") or 1)


def verbose() -> bool:
    """`$COLLECTIVE_VERBOSE`: show the native llama.cpp logs."""
    return _get("COLLECTIVE_VERBOSE") not in ("", "0")


def debug() -> bool:
    """`$COLLECTIVE_DEBUG`: an internal error shows its traceback."""
    return bool(_get("COLLECTIVE_DEBUG"))
