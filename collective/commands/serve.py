"""`collective serve` (an OpenAI-compatible HTTP server) and `collective mcp` (an MCP server).

Both answer with the configured council (and any `--council NAME=FILE`), bind 127.0.0.1 unless
`--host` says otherwise, and take the key from `$COLLECTIVE_SERVE_API_KEY` or `--api-key`. The
servers themselves are `collective.serve`; this module reads the options (docs/serving.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from collective.commands.errors import user_errors
from collective.commands.options import ConfigOption, KbOption, missing_kb
from collective.question import MAX_QUESTION_CHARS
from collective.serve.settings import API_KEY_ENV, DEFAULT_PORT

if TYPE_CHECKING:
    from collective.config import CollectiveConfig
    from collective.serve.settings import ServeSettings

__all__ = ["mcp", "serve"]

HostOption = Annotated[
    str, typer.Option("--host", help="Address to bind (another than 127.0.0.1 exposes it).")
]
ApiKeyOption = Annotated[
    str | None,
    typer.Option(
        "--api-key",
        envvar=API_KEY_ENV,
        show_envvar=True,
        help="Requests must send Authorization: Bearer KEY (prefer the variable: not in ps).",
    ),
]
CouncilOption = Annotated[
    list[str] | None,
    typer.Option(
        "--council",
        help="A further council NAME=FILE (its TOML config): models NAME, NAME-single, ...",
    ),
]
MaxConcurrentOption = Annotated[
    int,
    typer.Option(
        "--max-concurrent", min=1, help="Councils run at once; one more gets 429 (no queue)."
    ),
]


def _settings(**values: Any) -> ServeSettings:
    """The server's settings; a value it refuses is a usage error naming the option."""
    from pydantic import ValidationError

    from collective.errors import ConfigError
    from collective.serve.settings import ServeSettings

    try:
        return ServeSettings(**{k: v for k, v in values.items() if v is not None})
    except ValidationError as exc:
        problems = "; ".join(
            f"--{'-'.join(str(p) for p in e['loc'][:1]).replace('_', '-')}: "
            f"{e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors()
        )
        raise ConfigError(problems) from None


def _councils(specs: list[str] | None) -> dict[str, Path]:
    from collective.errors import ConfigError

    named: dict[str, Path] = {}
    for spec in specs or []:
        name, sep, file = spec.partition("=")
        if not sep or not name or not file:
            raise ConfigError(f"--council {spec!r}: give NAME=FILE (a TOML config)")
        if name in named:
            raise ConfigError(f"--council {name} is given twice")
        named[name] = Path(file)
    return named


def _load(
    config: Path | None, kb: Path | None, settings: ServeSettings
) -> tuple[CollectiveConfig, dict[str, CollectiveConfig]]:
    from collective.errors import ConfigError
    from collective.serve.runs import config_files
    from collective.session import load_settings

    if no_kb := missing_kb(kb):
        raise ConfigError(no_kb)
    main = load_settings(config, {"kb": str(kb) if kb else None}).config
    return main, config_files(settings.councils)


def _note(message: str) -> None:
    typer.echo(f"note: {message}", err=True)


def _open_warning(settings: ServeSettings, what: str) -> None:
    if settings.host not in ("127.0.0.1", "localhost", "::1") and settings.key is None:
        _note(
            f"{what} listens on {settings.host} with no API key: anyone who reaches it can run "
            f"the council; set {API_KEY_ENV}"
        )


def serve(
    host: HostOption = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="TCP port (0: any free one).")
    ] = DEFAULT_PORT,
    api_key: ApiKeyOption = None,
    config: ConfigOption = None,
    kb: KbOption = None,
    council: CouncilOption = None,
    max_concurrent: MaxConcurrentOption = 2,
    max_body_bytes: Annotated[
        int, typer.Option("--max-body-bytes", min=1024, help="Largest request body (413).")
    ] = 1 << 20,
    max_messages: Annotated[
        int, typer.Option("--max-messages", min=1, help="Most messages in one request (413).")
    ] = 256,
    max_question_chars: Annotated[
        int, typer.Option("--max-question-chars", min=1, help="Longest question (400).")
    ] = MAX_QUESTION_CHARS,
    retry_after: Annotated[
        int, typer.Option("--retry-after", min=1, help="Seconds a 429 tells the client to wait.")
    ] = 5,
) -> None:
    """Serve the council as an OpenAI-compatible API (/v1/chat/completions, /v1/models)."""
    from collective.serve.server import serve as run_server

    with user_errors():
        settings = _settings(
            host=host,
            port=port,
            api_key=api_key,
            max_concurrent=max_concurrent,
            max_body_bytes=max_body_bytes,
            max_messages=max_messages,
            max_question_chars=max_question_chars,
            retry_after_s=retry_after,
            councils=_councils(council),
        )
        main, named = _load(config, kb, settings)
        _open_warning(settings, "collective serve")
        try:
            run_server(
                main,
                settings,
                named=named,
                on_ready=lambda url: typer.echo(
                    f"collective serve: {url}/v1 (OpenAI API), models: {url}/v1/models",
                    err=True,
                ),
                on_note=_note,
            )
        except KeyboardInterrupt:
            typer.echo("collective serve: stopped", err=True)


def mcp(
    transport: Annotated[
        str,
        typer.Option(
            "--transport", help="stdio (an MCP host starts it) or http (streamable HTTP)."
        ),
    ] = "stdio",
    host: HostOption = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="TCP port for http (0: any free).")
    ] = DEFAULT_PORT + 1,
    api_key: ApiKeyOption = None,
    config: ConfigOption = None,
    kb: KbOption = None,
    council: CouncilOption = None,
    max_concurrent: MaxConcurrentOption = 2,
    kb_add: Annotated[
        bool, typer.Option("--kb-add", help="Offer the kb_add tool (it changes the KB).")
    ] = False,
) -> None:
    """Serve the council as MCP tools (ask, recall, kb_add) over stdio or streamable HTTP."""
    from collective.errors import ConfigError
    from collective.serve.mcp_server import run_mcp

    with user_errors():
        if transport not in ("stdio", "http"):
            raise ConfigError(f"--transport {transport!r}: use stdio or http")
        settings = _settings(
            host=host,
            port=port,
            api_key=api_key,
            max_concurrent=max_concurrent,
            councils=_councils(council),
            kb_add=kb_add,
        )
        main, named = _load(config, kb, settings)
        if transport == "http":
            _open_warning(settings, "collective mcp")
        try:
            run_mcp(
                main,
                settings,
                transport=transport,
                named=named,
                on_ready=lambda url: typer.echo(f"collective mcp: {url}/mcp", err=True),
                on_note=_note,
            )
        except KeyboardInterrupt:
            typer.echo("collective mcp: stopped", err=True)
