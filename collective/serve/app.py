"""`collective serve`'s HTTP application (Starlette): the OpenAI API, the run events, the page.

Routes:

* `GET /v1/models`, `GET /v1/models/{id}`: every council in every answer mode;
* `POST /v1/chat/completions`: a question to a council, streamed or not (`openai_shapes`);
* `POST /collective/v1/runs`: a question, answered as the run's own events (server-sent events,
  one JSON object per `data:` line: the events the CLI's live view reads, then `result` or
  `error`): what the page reads; `DELETE /collective/v1/runs/{id}` cancels a run;
  `GET /collective/v1/threads/{thread}` gives a thread's turns;
* `GET /health`;
* `/`: the page, when the package ships one (`PAGE_DIR/index.html`; docs/page.md).

Every `/v1/` and `/collective/` request needs the API key when one is set
(`Authorization: Bearer KEY`, else 401). A body over `max_body_bytes` is refused with 413, too
many messages with 413, a question over `max_question_chars` with 400, one council more than
`max_concurrent` with 429 and `Retry-After`; a client that goes away cancels its run. Every
error is OpenAI's error shape.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from collective.errors import (
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    CollectiveError,
    ConfigError,
    QuorumError,
)
from collective.kb.profile_names import Profile
from collective.serve import openai_shapes as shapes
from collective.serve.runs import Ask, Busy, Cancelled, Councils, Run, ThreadBusy
from collective.serve.settings import THREAD_HEADER, ServeSettings
from collective.verdict.marks import verdict_lines

__all__ = [
    "API_PREFIXES",
    "PAGE_DIR",
    "RUNS_PATH",
    "THREADS_PATH",
    "create_app",
    "error_response",
    "guard",
]

log = logging.getLogger(__name__)

PAGE_DIR = Path(__file__).parent / "page"
"""The page's files (plain HTML and script, shipped in the package): served at `/`."""

RUNS_PATH = "/collective/v1/runs"
"""Where the page starts a run and reads its events (`DELETE RUNS_PATH/{id}` cancels it)."""

THREADS_PATH = "/collective/v1/threads"
"""`GET THREADS_PATH/{thread}`: a thread's turns as its memory holds them."""

API_PREFIXES = ("/v1/", "/collective/")
"""Paths that need the API key and whose bodies are bounded."""


class TooLarge(Exception):
    """A request over a size limit (413)."""


class BadRequest(Exception):
    """A request the server cannot read (400)."""


def error_response(exc: BaseException) -> JSONResponse:
    """OpenAI's error shape and status for anything a request may end with."""
    headers: dict[str, str] = {}
    if isinstance(exc, Busy):
        status, kind, code = 429, "rate_limit_error", "concurrency_limit"
        headers["Retry-After"] = str(exc.retry_after_s)
    elif isinstance(exc, ThreadBusy):
        status, kind, code = 409, "invalid_request_error", "thread_busy"
    elif isinstance(exc, Cancelled):
        status, kind, code = 499, "cancelled", "cancelled"
    elif isinstance(exc, TooLarge):
        status, kind, code = 413, "invalid_request_error", "request_too_large"
    elif isinstance(exc, BadRequest):
        status, kind, code = 400, "invalid_request_error", None
    elif isinstance(exc, KeyError):
        status, kind, code = 404, "invalid_request_error", "model_not_found"
    elif isinstance(exc, ConfigError):
        status, kind, code = 400, "invalid_request_error", None
    elif isinstance(exc, BackendUnavailable):
        status, kind, code = 503, "backend_unavailable", "backend_unavailable"
    elif isinstance(exc, BackendTimeout):
        status, kind, code = 504, "backend_timeout", "backend_timeout"
    elif isinstance(exc, QuorumError | BackendError):
        status, kind, code = 502, "backend_error", type(exc).__name__
    elif isinstance(exc, CollectiveError):
        status, kind, code = 500, "server_error", type(exc).__name__
    else:
        log.exception("internal error", exc_info=exc)
        status, kind, code = 500, "server_error", "internal_error"
        exc = RuntimeError(f"internal error {type(exc).__name__}: {exc}")
    message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
    return JSONResponse(shapes.error_body(message, kind, code), status, headers=headers)


def guard(
    app: ASGIApp, settings: ServeSettings, prefixes: tuple[str, ...] = API_PREFIXES
) -> ASGIApp:
    """`app` behind the API key and the body's size limit on the paths under `prefixes`."""
    return _Guard(app, settings, prefixes)


class _Guard:
    """ASGI middleware: the API key and the body's size for the API's paths (401, 413)."""

    def __init__(self, app: ASGIApp, settings: ServeSettings, prefixes: tuple[str, ...]) -> None:
        self.app = app
        self.settings = settings
        self.prefixes = prefixes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith(self.prefixes):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        key = self.settings.key
        if key is not None:
            given = headers.get("authorization", "")
            scheme, _, token = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                token.strip().encode(), key.encode()
            ):
                body = shapes.error_body(
                    "missing or wrong API key: send Authorization: Bearer KEY with the key the "
                    "server was started with",
                    "invalid_request_error",
                    "invalid_api_key",
                )
                await JSONResponse(body, 401)(scope, receive, send)
                return
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > self.settings.max_body_bytes:
            await error_response(TooLarge(self._too_large(int(length))))(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _too_large(self, size: int) -> str:
        return (
            f"the request body is {size:,} bytes, over this server's limit of "
            f"{self.settings.max_body_bytes:,} (--max-body-bytes)"
        )


async def _read_json(request: Request, settings: ServeSettings) -> Any:
    """The body as JSON, read no further than `max_body_bytes` (413 past it; 400 not JSON)."""
    body = bytearray()
    async for part in request.stream():
        body += part
        if len(body) > settings.max_body_bytes:
            raise TooLarge(
                f"the request body is over this server's limit of {settings.max_body_bytes:,} "
                "bytes (--max-body-bytes)"
            )
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"the request body is not JSON: {exc}") from None


def _invalid(exc: ValidationError) -> BadRequest:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()
    )
    return BadRequest(f"invalid request: {problems}")


def _chat_ask(request: Request, body: Any, settings: ServeSettings) -> tuple[Ask, bool, bool]:
    """The question a chat request asks, whether it streams, and whether it wants `usage`."""
    if isinstance(body, dict) and len(body.get("messages") or []) > settings.max_messages:
        raise TooLarge(
            f"{len(body['messages'])} messages, over this server's limit of "
            f"{settings.max_messages} (--max-messages)"
        )
    try:
        chat = shapes.ChatRequest.model_validate(body)
        question = chat.question()
        earlier = chat.earlier()
    except ValidationError as exc:
        raise _invalid(exc) from None
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    _check_question(question, settings)
    thread = request.headers.get(THREAD_HEADER) or chat.collective.thread or chat.user
    ask = Ask(question, chat.model, thread, earlier, chat.collective.k, chat.collective.retrieval)
    usage = chat.stream_options is not None and chat.stream_options.include_usage
    return ask, chat.stream, usage


def _check_question(question: str, settings: ServeSettings) -> None:
    from collective.question import is_blank

    if is_blank(question):
        raise BadRequest("the question (the last user message) is empty; ask something")
    if len(question) > settings.max_question_chars:
        raise BadRequest(
            f"the question is {len(question):,} characters, over this server's limit of "
            f"{settings.max_question_chars:,} (--max-question-chars); shorten it"
        )


async def _until_done(request: Request, run: Run) -> dict[str, Any] | None:
    """The run's result, or None when the client went away first (the run is cancelled)."""
    outcome = asyncio.ensure_future(run.outcome())
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({outcome, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not outcome.done():  # the client went away, or this request was cancelled
            run.cancel()
            outcome.cancel()
    return None if outcome.cancelled() else outcome.result()


async def _disconnected(request: Request) -> None:
    """Return when the client disconnects (the body was read: only that message is left)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


class _RunStream(StreamingResponse):
    """A streamed answer that cancels its run however the response ends.

    The stream's own generator cannot: when the client is gone before the first piece is
    sent, the generator never starts, and its `finally` never runs.
    """

    def __init__(self, run: Run, content: AsyncIterator[str], headers: dict[str, str]) -> None:
        headers = {**headers, "Cache-Control": "no-cache"}
        super().__init__(content, media_type="text/event-stream", headers=headers)
        self.run = run

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.run.cancel()  # ended: nothing to stop; else the client went away


def _sse(data: Any) -> str:
    return f"data: {json.dumps(data, default=str, ensure_ascii=False)}\n\n"


class RunRequest(BaseModel):
    """A `POST /collective/v1/runs` body: the page's question."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1)
    model: str = "collective"
    thread: str | None = Field(default=None, min_length=1, max_length=200)
    earlier: list[tuple[str, str]] = Field(default_factory=list)
    k: int | None = Field(default=None, ge=1, le=64)
    retrieval: Profile | None = None


def create_app(councils: Councils, settings: ServeSettings) -> Starlette:
    """The application serving `councils` under `settings` (see the module's docstring).

    Long: each route is a short closure over `councils` and `settings`, declared beside the
    others so the whole HTTP surface reads in one place.
    """

    async def list_models(request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [_model(e) for e in councils.models()]})

    async def get_model(request: Request) -> Response:
        try:
            entry = councils.model(request.path_params["model"])
        except KeyError as exc:
            return error_response(exc)
        return JSONResponse(_model(entry))

    def _model(entry: Any) -> dict[str, Any]:
        config = councils.configs[entry.council]
        return {
            "id": entry.id,
            "object": "model",
            "created": councils.created,
            "owned_by": "collective",
            shapes.COLLECTIVE_FIELD: {
                "council": entry.council,
                "mode": entry.mode.value,
                "members": config.members,
                "threads": entry.threaded,
            },
        }

    async def chat_completions(request: Request) -> Response:
        try:
            body = await _read_json(request, settings)
            ask, stream, usage = _chat_ask(request, body, settings)
            run = councils.start(ask)
        except Exception as exc:
            return error_response(exc)
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        headers = {THREAD_HEADER: run.thread} if run.thread else {}
        if stream:
            return _RunStream(run, _chat_stream(run, completion_id, ask.model, usage), headers)
        try:
            result = await _until_done(request, run)
        except Exception as exc:
            return error_response(exc)
        if result is None:  # the client is gone: nobody reads this
            return Response(status_code=499)
        content = result.get("answer", "") + shapes.appendix(result)
        ext = shapes.extension(result, run.thread, run.entry.mode.value)
        reason = "length" if result.get("answer_cut") else "stop"
        answer = shapes.completion(completion_id, ask.model, content, result["usage"], ext, reason)
        return JSONResponse(answer, headers=headers)

    async def _chat_stream(
        run: Run, completion_id: str, model: str, include_usage: bool
    ) -> AsyncIterator[str]:
        yield _sse(shapes.chunk(completion_id, model, {"role": "assistant", "content": ""}))
        while True:
            event = await run.events.get()
            if event["type"] == "result":
                break
            if event["type"] == "error":
                response = error_response(event["exception"])
                yield _sse(json.loads(bytes(response.body)))
                yield "data: [DONE]\n\n"
                return
            line = shapes.progress_line(event)
            if line:
                delta = {shapes.REASONING_FIELD: line + "\n"}
                yield _sse(shapes.chunk(completion_id, model, delta))
        result = event["result"]
        # The verdict is streamed once its claims were checked: no line of it is taken back.
        for piece in shapes.verdict_pieces(result.get("answer", "")):
            yield _sse(shapes.chunk(completion_id, model, {"content": piece}))
        ext = shapes.extension(result, run.thread, run.entry.mode.value)
        reason = "length" if result.get("answer_cut") else "stop"
        last = {"content": shapes.appendix(result)}
        extra = {"usage": result["usage"], shapes.COLLECTIVE_FIELD: ext}
        yield _sse(shapes.chunk(completion_id, model, last, finish_reason=reason, **extra))
        if include_usage:
            yield _sse(shapes.chunk(completion_id, model, None, usage=result["usage"]))
        yield "data: [DONE]\n\n"

    async def start_run(request: Request) -> Response:
        try:
            body = await _read_json(request, settings)
            try:
                asked = RunRequest.model_validate(body)
            except ValidationError as exc:
                raise _invalid(exc) from None
            _check_question(asked.question, settings)
            if any(role not in ("user", "assistant") for role, _ in asked.earlier):
                raise BadRequest('earlier: each turn is ["user"|"assistant", text]')
            run = councils.start(
                Ask(
                    asked.question,
                    asked.model,
                    asked.thread,
                    asked.earlier,
                    asked.k,
                    asked.retrieval,
                )
            )
        except Exception as exc:
            return error_response(exc)
        return _RunStream(run, _run_events(run), {})

    async def _run_events(run: Run) -> AsyncIterator[str]:
        while True:
            event = await run.events.get()
            if event["type"] == "error":
                response = error_response(event["exception"])
                error = json.loads(bytes(response.body))["error"]
                yield _sse({"type": "error", "status": response.status_code, "error": error})
                return
            if event["type"] == "result":  # with the verdict's lines as `ask` marks them
                yield _sse({**event, "lines": verdict_lines(event["result"])})
                return
            yield _sse(event)

    async def cancel_run(request: Request) -> Response:
        run = councils.find(request.path_params["run_id"])
        if run is None:
            return JSONResponse(shapes.error_body("no such run running", code="run_not_found"), 404)
        run.cancel()
        return JSONResponse({"id": run.id, "cancelled": True})

    async def thread_history(request: Request) -> JSONResponse:
        return JSONResponse(await councils.history(request.path_params["thread"]))

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "running": councils.running})

    routes: list[BaseRoute] = [
        Route("/health", health, methods=["GET"]),
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/v1/models/{model:path}", get_model, methods=["GET"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route(RUNS_PATH, start_run, methods=["POST"]),
        Route(RUNS_PATH + "/{run_id}", cancel_run, methods=["DELETE"]),
        Route(THREADS_PATH + "/{thread:path}", thread_history, methods=["GET"]),
    ]
    if (PAGE_DIR / "index.html").is_file():
        from starlette.staticfiles import StaticFiles

        routes.append(Mount("/", StaticFiles(directory=PAGE_DIR, html=True), name="page"))

    async def not_found(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 500)
        detail = getattr(exc, "detail", None) or "not found"
        return JSONResponse(shapes.error_body(f"{request.url.path}: {detail}"), status)

    app = Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})
    app.add_middleware(_Guard, settings=settings, prefixes=API_PREFIXES)
    app.state.councils = councils
    return app
