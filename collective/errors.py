"""The errors collective raises, each with a message that says what went wrong and what to do.

Backend failures are translated into these once, at the edge (the backend modules); everything
above the backends sees only these types. The CLI prints `CollectiveError` messages without a
traceback and exits with `exit_code`.
"""

from __future__ import annotations

__all__ = [
    "BackendError",
    "BackendTimeout",
    "BackendUnavailable",
    "BudgetError",
    "CollectiveError",
    "ConfigError",
    "ContextOverflow",
    "InvalidResponse",
    "PoolExhausted",
    "QuorumError",
    "ToolCallCut",
]


class CollectiveError(Exception):
    """An error meant for the user: its message says what was wrong and what to do."""

    exit_code = 1


class ConfigError(CollectiveError):
    """Bad configuration or usage (unknown backend spec, invalid file, bad option value)."""

    exit_code = 2


class BudgetError(CollectiveError, ValueError):
    """An invalid token budget plan, or content that cannot be made to fit."""

    exit_code = 2


class BackendError(CollectiveError):
    """Base class for failures of a model backend."""

    exit_code = 3


class BackendUnavailable(BackendError):
    """The backend is down, still loading, or refused the connection."""


class BackendTimeout(BackendError):
    """The backend did not answer within the configured time."""


class InvalidResponse(BackendError):
    """The backend answered with something collective cannot interpret."""


class ToolCallCut(InvalidResponse):
    """A tool call stopped at its output cap before it closed, or the cap cannot hold one.

    Attributes:
        cap: The call's output cap in tokens.
        setting: The setting that raises it (`output_caps.judge`), where the caller knows it.
    """

    def __init__(self, what: str, *, cap: int, setting: str | None = None) -> None:
        super().__init__(f"{what}: raise {setting or 'the output cap of the call'}")
        self.what, self.cap, self.setting = what, cap, setting

    def naming(self, setting: str) -> ToolCallCut:
        """This error, saying which setting raises the cap (unless it says so already)."""
        return self if self.setting else ToolCallCut(self.what, cap=self.cap, setting=setting)


class ContextOverflow(BackendError):
    """The prompt does not fit the backend's context window.

    Attributes:
        n_prompt_tokens: Prompt tokens as counted by the server (or by us before sending).
        n_ctx: The context window the server really has.
    """

    def __init__(self, message: str, *, n_prompt_tokens: int, n_ctx: int) -> None:
        super().__init__(message)
        self.n_prompt_tokens = n_prompt_tokens
        self.n_ctx = n_ctx


class PoolExhausted(BackendError):
    """A server's shared KV pool ran out under concurrent requests; all of them failed.

    llama-server answers HTTP 500 `Context size has been exceeded.` to every active slot. Not
    transient in the retry sense: the same requests sent again fail again. The caller
    re-reads the server's pool and sends once more through admission control.
    """


class QuorumError(CollectiveError):
    """Too few specialists answered for the judge to rule.

    Attributes:
        proposals: The proposals that did arrive (as plain dicts), preserved for the caller.
    """

    def __init__(self, message: str, *, proposals: list[dict] | None = None) -> None:
        super().__init__(message)
        self.proposals = proposals or []
