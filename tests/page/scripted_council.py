"""A real HTTP model server whose answers quote the chunks their prompts show.

It speaks the OpenAI chat protocol the `openai:` backend uses (`GET /v1/models` with
`max_model_len`, streamed `POST /v1/chat/completions`). Each answer is the first sentence of a
chunk of its prompt with that chunk's tag (`member-b` takes the second chunk shown, the others
the first), so the verdict cites a chunk that supports it, whatever the KB's scores say, and the
answer streams word by word over `latency_s` (per model: `latency`); a `failing` model answers
with a server error. It counts the calls open
now (`in_flight`) and the ones whose client hung up mid-answer (`dropped`).
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CHUNK = re.compile(r"\[KB#([^\]\s]+)\] \[Score: [\d.]+\] (?:[^\n:]*: )?([^\n]*?[.!?])(?=\s|$)")
"""A chunk as prompts show it (`collective.kb.citations.format_chunk`): its tag, its heading
and the first sentence of its body."""

MODELS = ("member-a", "member-b", "judge")


def reply(model: str, prompt: str) -> str:
    """What `model` answers to `prompt`: a shown chunk's first sentence, cited."""
    found = CHUNK.findall(prompt)
    if not found:
        return "The knowledge base shows nothing on this."
    chunk_id, sentence = found[1] if model == "member-b" and len(found) > 1 else found[0]
    return f"{sentence} [KB#{chunk_id}]"


class ScriptedCouncilServer:
    """`start()` serves on 127.0.0.1 in a thread; `url`, `spec(model)`; `stop()`.

    Args:
        latency_s: Seconds an answer takes (its words spread over it).
        latency: Seconds per model, over `latency_s`.
        n_ctx: The window `/v1/models` reports.
        failing: Models that answer every request with HTTP 500 (a server fault).
    """

    def __init__(
        self,
        latency_s: float = 1.0,
        latency: dict[str, float] | None = None,
        n_ctx: int = 8192,
        failing: tuple[str, ...] = (),
    ) -> None:
        self.latency_s = latency_s
        self.latency = latency or {}
        self.failing = failing
        self.n_ctx = n_ctx
        self.lock = threading.Lock()
        self.in_flight = 0
        self.dropped = 0
        self.calls = 0
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def spec(self, model: str) -> str:
        """The backend spec that names `model` on this server."""
        return f"openai:{model}@{self.url}?tokenizer=cl100k_base"

    def start(self) -> ScriptedCouncilServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _handler(server: ScriptedCouncilServer) -> type[BaseHTTPRequestHandler]:
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
                data = [
                    {"id": m, "object": "model", "max_model_len": server.n_ctx}
                    for m in (*MODELS, *server.failing)
                ]
                self._json(200, {"object": "list", "data": data})
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
                server.calls += 1
                server.in_flight += 1
            try:
                self._answer(body, model, prompt)
            except (BrokenPipeError, ConnectionResetError):
                with server.lock:
                    server.dropped += 1
            finally:
                with server.lock:
                    server.in_flight -= 1

        def _answer(self, body: dict[str, Any], model: str, prompt: str) -> None:
            words = reply(model, prompt).split(" ")
            latency = server.latency.get(model, server.latency_s)
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
                time.sleep(latency / len(words))
                delta = {"content": (" " if i else "") + word}
                self._event({"choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
            self._event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            self._event({"choices": [], "usage": usage})
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

        def _event(self, chunk: dict[str, Any]) -> None:
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()

    return Handler
