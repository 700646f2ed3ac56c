"""The settings of `collective serve` and `collective mcp`: where they listen, who may call, limits.

These are the servers' own options (command-line options, `COLLECTIVE_SERVE_API_KEY` for the
key), not council settings: a council's settings stay in the configuration file
(`collective.config`), and each named council (`--council NAME=FILE`) is one such file.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from collective.question import MAX_QUESTION_CHARS

__all__ = ["API_KEY_ENV", "COUNCIL_NAME", "DEFAULT_PORT", "ServeSettings", "THREAD_HEADER"]

API_KEY_ENV = "COLLECTIVE_SERVE_API_KEY"
"""The environment variable that holds the API key (so that it is not in `ps`)."""

DEFAULT_PORT = 8750
"""`collective serve`'s port unless `--port` names another."""

THREAD_HEADER = "X-Collective-Thread"
"""The request header naming the conversation thread (else the body's `user`)."""

COUNCIL_NAME = re.compile(r"^[a-z0-9][a-z0-9._]{0,47}$")
"""A named council's model id: lower case, digits, `.` and `_` (a `-` starts the mode)."""


class ServeSettings(BaseModel):
    """Where a server listens, the key it asks for, and the limits that keep it safe.

    Attributes:
        host: The address to bind (127.0.0.1 unless told otherwise).
        port: The TCP port (0: any free one; the server prints the one it got).
        api_key: The key every request must carry as `Authorization: Bearer KEY` (none: open).
        max_body_bytes: The largest request body (413 above it).
        max_messages: The most messages one chat request may carry (413 above it).
        max_question_chars: The longest question (the last user message; 400 above it).
        max_concurrent: Councils run at once; one more is refused with 429 (no queue).
        retry_after_s: The `Retry-After` a 429 gives.
        councils: Named councils: model id -> its configuration file.
        kb_add: Whether MCP's `kb_add` tool may change the knowledge base.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = "127.0.0.1"
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535)
    api_key: SecretStr | None = None
    max_body_bytes: int = Field(default=1 << 20, ge=1024)
    max_messages: int = Field(default=256, ge=1)
    max_question_chars: int = Field(default=MAX_QUESTION_CHARS, ge=1)
    max_concurrent: int = Field(default=2, ge=1)
    retry_after_s: int = Field(default=5, ge=1)
    councils: dict[str, Path] = Field(default_factory=dict)
    kb_add: bool = False

    @field_validator("councils")
    @classmethod
    def _council_names(cls, value: dict[str, Path]) -> dict[str, Path]:
        for name in value:
            if not COUNCIL_NAME.match(name) or name == "collective":
                raise ValueError(
                    f"council name {name!r}: use lower-case letters, digits, '.' or '_' "
                    "(not 'collective', the configured council's own name)"
                )
        return value

    @property
    def key(self) -> str | None:
        """The API key in clear, or None when requests need none."""
        return self.api_key.get_secret_value() if self.api_key is not None else None
