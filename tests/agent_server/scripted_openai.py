"""A real HTTP model server of fixed latency for the Agent Server tests and bench.

It speaks the OpenAI chat protocol the `openai:` backend uses (`GET /v1/models` with
`max_model_len`, streamed `POST /v1/chat/completions`), so the council inside the Agent Server
calls it over real HTTP like any model server, while the answers are scripted (the faults are the
point, not the answers). Each answer streams its words over `latency_s` in total (per model:
`latency`); a `failing` model answers with a server error. The server records what it was asked
(`prompts`: model and the whole prompt text), how many calls are open now (`in_flight`, an open
call is a held model slot) and how many each model got; a call whose client hangs up stops at
once (as llama-server frees a slot on a closed connection) and counts in `dropped`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

REPLIES = {
    "planner": "Specialist 1: heat. Specialist 2: sunlight. Specialist 3: cost.",
    "specialist": "ASA keeps its shape in a hot car; PLA softens near 60 C.",
    "quick-specialist": "PETG is marginal on a dashboard; ASA is safer.",
    "judge": "Use ASA: it keeps its shape in a hot car, where PLA softens.",
}


class ScriptedOpenAIServer:
    """`start()` serves on 127.0.0.1 in a thread; `url`; `stop()`.

    Args:
        latency_s: Seconds each answer takes (its words spread over it).
        n_ctx: The window `/v1/models` reports.
        replies: Answers by model, each a text or a function of the prompt (default
            `REPLIES`).
        latency: Seconds per model, over `latency_s` (default: `quick-specialist` answers in a
            tenth of it).
        failing: Models that answer every request with HTTP 500 (a server fault).
    """

    def __init__(
        self,
        latency_s: float = 0.5,
        n_ctx: int = 32_768,
        replies: Mapping[str, str | Callable[[str], str]] | None = None,
        latency: Mapping[str, float] | None = None,
        failing: tuple[str, ...] = (),
    ) -> None:
        self.latency_s = latency_s
        self.n_ctx = n_ctx
        self.replies = dict(REPLIES if replies is None else replies)
        self.latency = dict({"quick-specialist": latency_s / 10} if latency is None else latency)
        self.failing = failing
        self.lock = threading.Lock()
        self.prompts: list[tuple[str, str]] = []
        self.calls: dict[str, int] = {}
        self.in_flight = 0
        self.max_in_flight = 0
        self.dropped = 0
        self.answered: list[tuple[str, str]] = []
        """(model, prompt) of every answer sent whole."""
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def spec(self, model: str) -> str:
        """The backend spec that names `model` on this server."""
        return f"openai:{model}@{self.url}?tokenizer=cl100k_base"

    def start(self) -> ScriptedOpenAIServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def asked(self, needle: str) -> list[str]:
        """The models whose prompts contained `needle`, one per call."""
        with self.lock:
            return [model for model, prompt in self.prompts if needle in prompt]

    def finished(self, needle: str) -> list[str]:
        """The models that answered a prompt containing `needle` in full, one per answer."""
        with self.lock:
            return [model for model, prompt in self.answered if needle in prompt]


def _handler(server: ScriptedOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _json(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.startswith("/v1/models"):
                models = [
                    {"id": m, "object": "model", "max_model_len": server.n_ctx}
                    for m in (*server.replies, *server.failing)
                ]
                self._json(200, {"object": "list", "data": models})
            elif self.path.startswith("/health"):
                self._json(200, {})
            else:
                self._json(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if not self.path.startswith("/v1/chat/completions"):
                self._json(404, {"error": {"message": "not found"}})
                return
            model = str(body.get("model", ""))
            if model in server.failing:
                self._json(500, {"error": {"message": f"{model} is out of order"}})
                return
            prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
            with server.lock:
                server.prompts.append((model, prompt))
                server.calls[model] = server.calls.get(model, 0) + 1
                server.in_flight += 1
                server.max_in_flight = max(server.max_in_flight, server.in_flight)
            try:
                self._answer(body, model, prompt)
                with server.lock:
                    server.answered.append((model, prompt))
            except (BrokenPipeError, ConnectionResetError):
                with server.lock:
                    server.dropped += 1
            finally:
                with server.lock:
                    server.in_flight -= 1

        def _answer(self, body: dict[str, Any], model: str, prompt: str) -> None:
            reply = server.replies.get(model, "ok")
            words = (reply(prompt) if callable(reply) else reply).split(" ")
            latency = server.latency.get(model, server.latency_s)
            pause = latency / len(words)
            usage = {"prompt_tokens": len(prompt) // 4, "completion_tokens": len(words)}
            if not body.get("stream"):
                time.sleep(latency)
                message = {"role": "assistant", "content": " ".join(words)}
                choice = {"index": 0, "message": message, "finish_reason": "stop"}
                self._json(200, {"choices": [choice], "usage": usage, "model": model})
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            for i, word in enumerate(words):
                time.sleep(pause)
                delta = {"content": (" " if i else "") + word}
                chunk = {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
                self._event(chunk)
            self._event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            self._event({"choices": [], "usage": usage})
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

        def _event(self, chunk: dict[str, Any]) -> None:
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()

    return Handler
