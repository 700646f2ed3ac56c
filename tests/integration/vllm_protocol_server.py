"""An HTTP server that speaks vLLM's OpenAI-compatible API, backed by the real gemma model.

No vLLM runs on the test machines (it needs a GPU), so the `openai:` backend is tested against
this server, which answers as vLLM's source defines (vllm/entrypoints/openai/protocol.py,
serving_tokenization.py, serving_engine.py `_validate_input`):

* `GET /v1/models`: `{"object": "list", "data": [{"id", "object": "model", "owned_by": "vllm",
  "root", "max_model_len", ...}]}`; `GET /health`: 200, empty.
* `POST /tokenize`: the chat form (`messages`, `tools`, `add_generation_prompt` default true,
  `add_special_tokens` default false) renders the chat template and tokenizes it; the
  completion form (`prompt`, `add_special_tokens` default true). Both answer `{"count",
  "max_model_len", "tokens", "token_strs"}`. `POST /detokenize` answers `{"prompt"}`.
* `POST /v1/chat/completions`: the same rendering and tokenization as `/tokenize` (so its
  `count` equals `usage.prompt_tokens`), streamed as server-sent events (`data: {...}`, a usage
  chunk with `choices: []` under `stream_options.include_usage`, `data: [DONE]`) or whole;
  `response_format` `json_schema` constrains the answer (a grammar). A prompt with
  `max_tokens` that does not fit is HTTP 400 `{"error": {"message": "This model's maximum
  context length is N tokens. However, you requested M tokens (P in the messages, O in the
  completion). Please reduce the length of the messages or completion.", "type":
  "BadRequestError", "param": null, "code": 400}}`; a prompt alone of N tokens or more is
  "However, your request has P input tokens. Please reduce the length of the input messages."
* `--bare`: no `max_model_len` in `/v1/models` and no `/tokenize` (a server such as LM Studio).
* `--api-key KEY`: as vLLM's, every route but `/health` answers HTTP 401 without
  `Authorization: Bearer KEY`.
* `tools` without a tool parser are refused (HTTP 400), as vLLM refuses `auto` tool choice
  unless started with `--enable-auto-tool-choice`.

The chat template is the gemma family's (collective/data/templates/gemma.jinja, the one the
embedded gemma uses), rendered with Jinja as `transformers` renders chat templates; the rendered
text is tokenized with special-token parsing on, as a Hugging Face tokenizer does.

Usage: python tests/integration/vllm_protocol_server.py --port N --model PATH --model-name NAME
       --max-model-len N
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

TEMPLATE = (_ROOT / "collective" / "data" / "templates" / "gemma.jinja").read_text()


class Model:
    """The gemma model, its chat template and tokenizer."""

    def __init__(self, path: str, max_model_len: int) -> None:
        import jinja2
        from llama_cpp import Llama

        self.path = path
        self.max_model_len = max_model_len
        self.llama = Llama(
            model_path=path,
            n_ctx=max_model_len,
            n_threads=os.cpu_count() or 1,
            n_threads_batch=os.cpu_count() or 1,
            verbose=False,
        )
        self.template = jinja2.Environment().from_string(TEMPLATE)
        self.lock = threading.Lock()

    def render(self, messages: list[dict[str, Any]], add_generation_prompt: bool) -> str:
        return self.template.render(
            messages=messages, add_generation_prompt=add_generation_prompt, bos_token="<bos>"
        )

    def tokenize(self, text: str, add_special_tokens: bool) -> list[int]:
        return self.llama.tokenize(text.encode(), add_bos=add_special_tokens, special=True)

    def chat_ids(self, body: dict[str, Any]) -> list[int]:
        text = self.render(body.get("messages") or [], body.get("add_generation_prompt", True))
        return self.tokenize(text, bool(body.get("add_special_tokens", False)))


def _error(message: str, status: int = 400) -> dict[str, Any]:
    kind = "BadRequestError" if status == 400 else "NotFoundError"
    return {"error": {"message": message, "type": kind, "param": None, "code": status}}


def too_long(max_model_len: int, n_prompt: int, max_tokens: int) -> str | None:
    """vLLM's refusal text for a request that does not fit, or None."""
    if n_prompt >= max_model_len:
        return (
            f"This model's maximum context length is {max_model_len} tokens. However, your "
            f"request has {n_prompt} input tokens. Please reduce the length of the input "
            "messages."
        )
    if n_prompt + max_tokens > max_model_len:
        return (
            f"This model's maximum context length is {max_model_len} tokens. However, you "
            f"requested {n_prompt + max_tokens} tokens ({n_prompt} in the messages, "
            f"{max_tokens} in the completion). Please reduce the length of the messages or "
            "completion."
        )
    return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: VllmProtocolServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send_json(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _refused(self) -> bool:
        """vLLM's `--api-key`: every route but `/health` wants `Authorization: Bearer KEY`."""
        key = self.server.api_key
        if not key or self.path == "/health":
            return False
        if self.headers.get("Authorization") == f"Bearer {key}":
            return False
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        self._send_json(401, {"error": "Unauthorized"})
        return True

    def do_GET(self) -> None:
        srv = self.server
        if self._refused():
            return
        if self.path == "/v1/models":
            entry = {
                "id": srv.model_name,
                "object": "model",
                "created": int(time.time()),
                "owned_by": "vllm",
                "root": srv.model.path,
                "parent": None,
                "max_model_len": srv.model.max_model_len,
                "permission": [],
            }
            if srv.bare:
                del entry["max_model_len"]
            self._send_json(200, {"object": "list", "data": [entry]})
        elif self.path == "/health":
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self._send_json(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        if self._refused():
            return
        n = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(n) or b"{}")
        except json.JSONDecodeError as exc:
            self._send_json(400, _error(f"invalid JSON: {exc}"))
            return
        model = self.server.model
        if body.get("model") not in (None, self.server.model_name):
            name = body.get("model")
            self._send_json(404, _error(f"The model `{name}` does not exist.", 404))
        elif self.server.bare and self.path in ("/tokenize", "/detokenize"):
            self._send_json(404, {"detail": "Not Found"})
        elif self.path == "/tokenize":
            if "messages" in body:
                ids = model.chat_ids(body)
            else:
                ids = model.tokenize(body["prompt"], body.get("add_special_tokens", True))
            answer = {"count": len(ids), "max_model_len": model.max_model_len, "tokens": ids}
            self._send_json(200, answer | {"token_strs": None})
        elif self.path == "/detokenize":
            text = model.llama.detokenize(body["tokens"]).decode("utf-8", errors="replace")
            self._send_json(200, {"prompt": text})
        elif self.path == "/v1/chat/completions":
            self._chat(body)
        else:
            self._send_json(404, {"detail": "Not Found"})

    def _chat(self, body: dict[str, Any]) -> None:
        model = self.server.model
        if body.get("tools") and body.get("tool_choice") != "none":
            message = (
                '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser '
                "to be set"
            )
            self._send_json(400, _error(message))
            return
        ids = model.chat_ids(body)
        max_tokens = int(body.get("max_completion_tokens") or body.get("max_tokens") or 16)
        refusal = too_long(model.max_model_len, len(ids), max_tokens)
        if refusal:
            self._send_json(400, _error(refusal))
            return
        kwargs: dict[str, Any] = {
            "prompt": ids,
            "max_tokens": max_tokens,
            "temperature": float(body.get("temperature", 1.0)),
            "stop": list(body.get("stop") or []) + ["<end_of_turn>"],
        }
        schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema")
        if schema is not None:
            from llama_cpp import LlamaGrammar

            kwargs["grammar"] = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
        rid = f"chatcmpl-{uuid.uuid4().hex}"
        with model.lock:
            if body.get("stream"):
                self._stream(rid, kwargs, len(ids), body)
            else:
                out: Any = model.llama.create_completion(**kwargs)
                choice = out["choices"][0]
                message = {"role": "assistant", "content": choice["text"], "tool_calls": []}
                usage = _usage(len(ids), out["usage"]["completion_tokens"])
                self._send_json(
                    200,
                    {
                        "id": rid,
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": self.server.model_name,
                        "choices": [
                            {"index": 0, "message": message, "finish_reason": _finish(choice)}
                        ],
                        "usage": usage,
                    },
                )

    def _stream(self, rid: str, kwargs: dict[str, Any], n_prompt: int, body: dict) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def event(obj: Any) -> None:
            data = b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode())
            data += b"\n\n"
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        head = {
            "id": rid,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": self.server.model_name,
        }
        event(head | {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
        n_out = 0
        for part in self.server.model.llama.create_completion(stream=True, **kwargs):
            choice = part["choices"][0]  # type: ignore[index]
            n_out += bool(choice["text"])
            delta = {"content": choice["text"]} if choice["text"] else {}
            finish = _finish(choice) if choice.get("finish_reason") else None
            event(head | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        if (body.get("stream_options") or {}).get("include_usage"):
            event(head | {"choices": [], "usage": _usage(n_prompt, n_out)})
        event(b"[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def _finish(choice: dict[str, Any]) -> str:
    return "length" if choice.get("finish_reason") == "length" else "stop"


def _usage(n_prompt: int, n_out: int) -> dict[str, Any]:
    total = n_prompt + n_out
    return {"prompt_tokens": n_prompt, "completion_tokens": n_out, "total_tokens": total}


class VllmProtocolServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, port: int, model_name: str, model: Model, *, bare: bool = False, api_key: str = ""
    ) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.model_name = model_name
        self.model = model
        self.api_key = api_key
        self.bare = bare
        """No `max_model_len` in `/v1/models` and no `/tokenize` (as LM Studio, say)."""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--model-name", required=True)
    parser.add_argument("--max-model-len", type=int, required=True)
    parser.add_argument("--bare", action="store_true", help="no max_model_len, no /tokenize")
    parser.add_argument("--api-key", default="", help="as vLLM's --api-key")
    args = parser.parse_args()
    model = Model(args.model, args.max_model_len)
    server = VllmProtocolServer(
        args.port, args.model_name, model, bare=args.bare, api_key=args.api_key
    )
    server.serve_forever()


if __name__ == "__main__":
    main()
