"""An HTTP server that speaks Ollama's API, backed by the real gemma model in process.

No Ollama can be installed on the test machines, so the Ollama backend is tested against this
server, which reproduces the behaviour of Ollama that collective must survive:

* `/api/chat` streaming (NDJSON, the default) and not (`"stream": false`), `/api/show`,
  `/api/tags`, `/api/version`, with Ollama's field names and `{"error": ...}` bodies;
* `num_ctx` defaults to a small value (`--default-num-ctx`, Ollama's 4096) unless the request
  sets it, and is capped at the model's context length;
* an over-long prompt is truncated silently, as Ollama does: `chatPrompt` keeps the system
  messages and the newest messages that fit (the last one always), then the runner cuts tokens
  after the first `num_keep` (default 4) so that `num_ctx` tokens remain;
* `prompt_eval_count`/`eval_count` are reported after the fact (post-truncation), and
  `prompt_eval_cached_count` (the prefix reused from the last prompt's KV) when not 0;
* like current Ollama, `"truncate": false` turns an over-long prompt into HTTP 400 `the input
  length exceeds the context length` (here with both counts) instead of a silent cut, and
  `"shift": false` stops generation at `num_ctx` (`done_reason` `length`) instead of shifting;
  `--old-server` ignores both fields, as Ollama before them did;
* `/api/ps` lists the loaded model with the `context_length` it was last loaded with;
* the prompt is rendered with Ollama's own gemma3 Go template (not the GGUF's Jinja template),
  so a client's count from the GGUF vocabulary differs by a few template tokens, as it would;
* `tools` and `think` are refused for this model (HTTP 400), as Ollama refuses them for models
  without those capabilities.

Usage: python tests/integration/ollama_protocol_server.py --port N --model-name NAME
       --context-length N [--default-num-ctx 4096] [--modelfile-num-ctx N] [--blob PATH]
       [--old-server]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

VERSION = "0.12.6"

# Ollama's template for gemma3 models (library/gemma3), as Go text; rendered by `render`.
GEMMA3_TEMPLATE = """{{- range $i, $_ := .Messages }}
{{- $last := eq (len (slice $.Messages $i)) 1 }}
{{- if or (eq .Role "user") (eq .Role "system") }}<start_of_turn>user
{{ .Content }}<end_of_turn>
{{ if $last }}<start_of_turn>model
{{ end }}
{{- else if eq .Role "assistant" }}<start_of_turn>model
{{ .Content }}{{ if not $last }}<end_of_turn>
{{ end }}
{{- end }}
{{- end }}"""

GENERATION_HEADROOM = 256
"""Tokens the model may generate past `num_ctx` (Ollama would shift the window instead)."""


def render(messages: list[dict[str, Any]]) -> str:
    """`GEMMA3_TEMPLATE` applied to `messages`."""
    out = []
    for i, m in enumerate(messages):
        last = i == len(messages) - 1
        content = m.get("content") or ""
        if m.get("role") in ("user", "system"):
            out.append(f"<start_of_turn>user\n{content}<end_of_turn>\n")
            if last:
                out.append("<start_of_turn>model\n")
        elif m.get("role") == "assistant":
            out.append(f"<start_of_turn>model\n{content}")
            if not last:
                out.append("<end_of_turn>\n")
    return "".join(out)


class Model:
    """The gemma model, its tokenizer and Ollama's prompt handling."""

    def __init__(self, path: str, context_length: int) -> None:
        from llama_cpp import Llama

        self.path = path
        self.context_length = context_length
        self.llama = Llama(
            model_path=path,
            n_ctx=context_length + GENERATION_HEADROOM,
            n_threads=os.cpu_count() or 1,
            n_threads_batch=os.cpu_count() or 1,
            verbose=False,
        )
        self.lock = threading.Lock()

    def cached(self, ids: list[int]) -> int:
        """Tokens of `ids` the next completion reuses from the KV (`Llama.generate`'s prefix
        match with what it evaluated last).

        A prompt identical to the last one is read again whole (the KV is reset): with repacked
        weights, its last token re-read alone after the reused prefix can differ in the last bits
        from the same token read in a batch, and a greedy answer then drifts, while the streaming
        tests compare a stream with the whole answer to the same prompt.
        """
        n = 0
        for a, b in zip(self.llama._input_ids.tolist(), ids, strict=False):
            if a != b:
                break
            n += 1
        if n == len(ids):
            self.llama.reset()
            return 0
        return n

    def tokenize(self, text: str) -> list[int]:
        return self.llama.tokenize(text.encode(), add_bos=True, special=True)

    def chat_prompt(self, messages: list[dict[str, Any]], num_ctx: int) -> list[int]:
        """Ollama's `chatPrompt`: the newest messages that fit, system messages kept."""
        n = len(messages) - 1
        for i in range(n - 1, -1, -1):
            system = [m for m in messages[:i] if m.get("role") == "system"]
            if len(self.tokenize(render(system + messages[i:]))) > num_ctx:
                break
            n = i
        system = [m for m in messages[:n] if m.get("role") == "system"]
        return self.tokenize(render(system + messages[n:]))

    @staticmethod
    def runner_truncate(ids: list[int], num_ctx: int, num_keep: int) -> list[int]:
        """The runner's cut: keep `num_keep` tokens, drop what follows until `num_ctx` fit."""
        if len(ids) <= num_ctx:
            return ids
        num_keep = min(num_keep, num_ctx - 1)
        discard = len(ids) - num_ctx
        return ids[:num_keep] + ids[num_keep + discard :]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: OllamaProtocolServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send_json(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict[str, Any]:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b"{}"
        data = json.loads(raw or b"{}")
        if not isinstance(data, dict):
            raise ValueError("body must be a JSON object")
        return data

    def do_GET(self) -> None:
        if self.path == "/api/version":
            self._send_json(200, {"version": VERSION})
        elif self.path == "/api/tags":
            self._send_json(200, {"models": [self.server.model_entry()]})
        elif self.path == "/api/ps":
            loaded = self.server.loaded_num_ctx
            entries = []
            if loaded is not None:
                extra = {"expires_at": _now(), "size_vram": 0, "context_length": loaded}
                entries.append(self.server.model_entry() | extra)
            self._send_json(200, {"models": entries})
        elif self.path == "/":
            data = b"Ollama is running"
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        else:
            self._send_json(404, {"error": "404 page not found"})

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        try:
            body = self._body()
        except ValueError as exc:
            self._send_json(400, {"error": f"invalid request body: {exc}"})
            return
        if self.path == "/api/show":
            name = body.get("model") or body.get("name")
            if name != self.server.model_name:
                self._send_json(404, {"error": f"model '{name}' not found"})
            else:
                self._send_json(200, self.server.show())
        elif self.path == "/api/chat":
            self._chat(body)
        else:
            self._send_json(404, {"error": "404 page not found"})

    def _chat(self, body: dict[str, Any]) -> None:
        srv = self.server
        name = body.get("model")
        if name != srv.model_name:
            self._send_json(404, {"error": f"model '{name}' not found, try pulling it first"})
            return
        if body.get("tools"):
            self._send_json(
                400, {"error": f"registry.ollama.ai/library/{name} does not support tools"}
            )
            return
        if body.get("think"):
            self._send_json(400, {"error": f'"{name}" does not support thinking'})
            return
        options = body.get("options") or {}
        num_ctx = min(int(options.get("num_ctx") or srv.default_num_ctx), srv.context_length)
        num_predict = int(options.get("num_predict", -1))
        messages = body.get("messages") or []
        started = time.monotonic_ns()
        model = srv.model
        # Current Ollama honours these; an old server ignores them (and truncates silently).
        truncate = srv.old_server or body.get("truncate", True) is not False
        shift = srv.old_server or body.get("shift", True) is not False
        with model.lock:
            srv.loaded_num_ctx = num_ctx
            if truncate:
                ids = model.chat_prompt(messages, num_ctx)
                ids = model.runner_truncate(ids, num_ctx, int(options.get("num_keep", 4)))
            else:
                ids = model.tokenize(render(messages))
                if len(ids) > num_ctx:
                    self._send_json(
                        400,
                        {
                            "error": f"the input length ({len(ids)} tokens) exceeds the "
                            f"context length ({num_ctx} tokens)"
                        },
                    )
                    return
            room = num_ctx - len(ids) + (GENERATION_HEADROOM if shift else 0)
            max_tokens = room if num_predict < 0 else min(num_predict, room)
            kwargs: dict[str, Any] = {
                "prompt": ids,
                "max_tokens": max(max_tokens, 1),
                "temperature": float(options.get("temperature", 0.8)),
                "stop": list(options.get("stop") or []) + ["<end_of_turn>"],
            }
            if "seed" in options:
                kwargs["seed"] = int(options["seed"])
            fmt = body.get("format")
            if fmt:
                from llama_cpp import LlamaGrammar
                from llama_cpp.llama_grammar import JSON_GBNF

                kwargs["grammar"] = (
                    LlamaGrammar.from_string(JSON_GBNF, verbose=False)
                    if fmt == "json"
                    else LlamaGrammar.from_json_schema(json.dumps(fmt), verbose=False)
                )
            stream = body.get("stream", True)
            cached = model.cached(ids)
            t0 = time.monotonic_ns()
            if stream:
                self._stream(name, kwargs, len(ids), started, t0, cached)
            else:
                out: Any = model.llama.create_completion(**kwargs)
                t1 = time.monotonic_ns()
                choice = out["choices"][0]
                done = {
                    "model": name,
                    "created_at": _now(),
                    "message": {"role": "assistant", "content": choice["text"]},
                    "done_reason": "length" if choice["finish_reason"] == "length" else "stop",
                    "done": True,
                    **_stats(started, t0, t1, len(ids), out["usage"]["completion_tokens"], cached),
                }
                self._send_json(200, done)

    def _stream(
        self,
        name: str,
        kwargs: dict[str, Any],
        n_prompt: int,
        started: int,
        t0: int,
        cached: int,
    ) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def chunk(obj: dict[str, Any]) -> None:
            data = json.dumps(obj).encode() + b"\n"
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        n_out, reason = 0, "stop"
        for part in self.server.model.llama.create_completion(stream=True, **kwargs):
            choice = part["choices"][0]  # type: ignore[index]
            if choice["text"]:
                n_out += 1
                chunk(
                    {
                        "model": name,
                        "created_at": _now(),
                        "message": {"role": "assistant", "content": choice["text"]},
                        "done": False,
                    }
                )
            if choice.get("finish_reason") == "length":
                reason = "length"
        t1 = time.monotonic_ns()
        chunk(
            {
                "model": name,
                "created_at": _now(),
                "message": {"role": "assistant", "content": ""},
                "done_reason": reason,
                "done": True,
                **_stats(started, t0, t1, n_prompt, n_out, cached),
            }
        )
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _stats(
    started: int, t0: int, t1: int, n_prompt: int, n_out: int, cached: int
) -> dict[str, int]:
    # The model is not separable into prompt and eval phases here; split wall time by tokens.
    total = max(t1 - t0, 1)
    share = n_prompt / max(n_prompt + n_out * 8, 1)
    # Current Ollama: prompt_eval_count is the whole prompt, the cached part beside it.
    extra = {"prompt_eval_cached_count": cached} if cached else {}
    return {
        **extra,
        "total_duration": time.monotonic_ns() - started,
        "load_duration": t0 - started,
        "prompt_eval_count": n_prompt,
        "prompt_eval_duration": int(total * share),
        "eval_count": n_out,
        "eval_duration": int(total * (1 - share)) or 1,
    }


class OllamaProtocolServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        port: int,
        model_name: str,
        model: Model,
        *,
        default_num_ctx: int,
        modelfile_num_ctx: int | None,
        blob: str,
        old_server: bool = False,
    ) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.model_name = model_name
        self.model = model
        self.context_length = model.context_length
        self.default_num_ctx = default_num_ctx
        self.modelfile_num_ctx = modelfile_num_ctx
        self.blob = blob
        self.old_server = old_server
        self.loaded_num_ctx: int | None = None
        """`num_ctx` of the last request: what `/api/ps` reports as loaded."""

    def details(self) -> dict[str, Any]:
        return {
            "parent_model": "",
            "format": "gguf",
            "family": "gemma3",
            "families": ["gemma3"],
            "parameter_size": "268.10M",
            "quantization_level": "Q4_K_M",
        }

    def model_entry(self) -> dict[str, Any]:
        return {
            "name": self.model_name,
            "model": self.model_name,
            "modified_at": _now(),
            "size": os.path.getsize(self.model.path),
            "digest": "0" * 64,
            "details": self.details(),
        }

    def show(self) -> dict[str, Any]:
        params = ['stop "<end_of_turn>"', "temperature 1", "top_k 64", "top_p 0.95"]
        if self.modelfile_num_ctx:
            params.insert(0, f"num_ctx {self.modelfile_num_ctx}")
        modelfile = (
            '# Modelfile generated by "ollama show"\n'
            f"FROM {self.blob}\n"
            f'TEMPLATE """{GEMMA3_TEMPLATE}"""\n' + "".join(f"PARAMETER {p}\n" for p in params)
        )
        return {
            "license": "Gemma Terms of Use",
            "modelfile": modelfile,
            "parameters": "\n".join(params),
            "template": GEMMA3_TEMPLATE,
            "details": self.details(),
            "model_info": {
                "general.architecture": "gemma3",
                "general.file_type": 15,
                "general.parameter_count": 268098176,
                "gemma3.context_length": self.context_length,
                "gemma3.embedding_length": 640,
                "gemma3.block_count": 18,
            },
            "capabilities": ["completion"],
            "modified_at": _now(),
        }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model-name", default="gemma3:270m")
    parser.add_argument(
        "--context-length",
        type=int,
        default=8192,
        help="the model context /api/show reports (and the most num_ctx can be)",
    )
    parser.add_argument(
        "--default-num-ctx",
        type=int,
        default=4096,
        help="num_ctx when a request sets none (Ollama's default)",
    )
    parser.add_argument(
        "--modelfile-num-ctx",
        type=int,
        default=None,
        help="PARAMETER num_ctx in the Modelfile, if any",
    )
    parser.add_argument("--model", default=None, help="GGUF to serve (default: the embedded gemma)")
    parser.add_argument(
        "--blob",
        default=None,
        help="the FROM path /api/show reports (default: the GGUF itself, i.e. "
        "a blob on this host; give a missing path to act as a remote host)",
    )
    parser.add_argument(
        "--old-server",
        action="store_true",
        help="ignore `truncate` and `shift` (Ollama before they existed: always truncates)",
    )
    args = parser.parse_args(argv)
    if args.model is None:
        from collective.models.embedded import embedded_model_path

        args.model = str(embedded_model_path())
    model = Model(args.model, args.context_length)
    server = OllamaProtocolServer(
        args.port,
        args.model_name,
        model,
        default_num_ctx=args.default_num_ctx,
        modelfile_num_ctx=args.modelfile_num_ctx,
        blob=args.blob or args.model,
        old_server=args.old_server,
    )
    print(
        f"ollama-protocol server on http://127.0.0.1:{args.port} serving {args.model_name}",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
