"""Which failures LangGraph retries: transient backend errors only."""

from __future__ import annotations

from langgraph.types import RetryPolicy

from collective.errors import BackendTimeout, BackendUnavailable

__all__ = ["TRANSIENT_RETRY", "is_transient"]


def is_transient(error: BaseException) -> bool:
    """A server that is down, loading, or slow may answer a second time; nothing else will."""
    return isinstance(error, BackendUnavailable | BackendTimeout)


TRANSIENT_RETRY = RetryPolicy(max_attempts=2, initial_interval=1.0, retry_on=is_transient)
"""The retry policy of every model-calling node."""
