"""What a setting may name as a model: a backend spec, a `Backend`, or a LangChain chat model."""

from __future__ import annotations

from typing import Any

from collective.models.base import Backend
from collective.models.registry import backend_from_spec

__all__ = ["resolve_backend"]


def resolve_backend(ref: str | Backend | Any) -> Backend:
    """A backend from a spec (shared per process), as given, or around a LangChain chat model."""
    if isinstance(ref, Backend):
        return ref
    if not isinstance(ref, str):
        from collective.models.langchain_model import LangChainBackend

        return LangChainBackend.wrap(ref)
    return backend_from_spec(ref)
