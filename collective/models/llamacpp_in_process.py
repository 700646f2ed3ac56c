"""llama.cpp in this process, through `llama-cpp-python`.

* The GGUF is loaded lazily, on the first call that needs it (never at import); the registry
  shares one backend per file, so every role on the embedded model shares one loaded model, and
  the weights are loaded once per process and file (`acquire_model`): deep's reranker and any
  other backend on the file share them, each with a context of its own. Weights load with
  llama.cpp's CPU repacking on (the wheel is built for the machine's CPU with AMX off,
  `ops/llama-cpp-python/build-wheel.sh`).
* The prompt is rendered with the chat template stored in the GGUF (`tokenizer.chat_template`,
  through llama-cpp-python's `Jinja2ChatFormatter`, as `Llama.create_chat_completion` does) and
  tokenized by the model's own tokenizer. The token ids that were counted are the ids that are
  evaluated, so `count_prompt` equals `usage.prompt_tokens` by construction.
* Calls run on one `BatchEngine` per model (`collective.models.batch_engine`): concurrent calls
  (the council's members) share their common prompt prefix in the KV and are decoded together
  in one batch, each streamed and cancellable on its own. Tokenization only reads the
  vocabulary, so counting is not held behind a running generation.
* llama.cpp's OpenMP threads spin briefly, then sleep, while they wait (`GOMP_SPINCOUNT=1000`,
  set before the library loads unless the environment says how threads wait): long spinning
  collapses a council beside another busy process, sleeping at once halves it on an idle one.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collective import environment
from collective.budget.counting import ChatMessage, TokenizerCounter
from collective.errors import ConfigError, ContextOverflow, InvalidResponse
from collective.models.admission import ServerPool
from collective.models.base import (
    Backend,
    ChatDelta,
    ChatResult,
    Health,
    Usage,
)
from collective.models.batch_engine import BatchEngine, GenerationRequest, quiet_native
from collective.models.confidence import token_confidence
from collective.models.registry import BackendKind, BackendSpec, refuse, register
from collective.models.special_tokens import escape_messages, escape_tool_calls
from collective.models.tool_calls import parse_tool_calls, tool_call_schema

if TYPE_CHECKING:
    from llama_cpp import LlamaGrammar
    from llama_cpp._internals import LlamaModel

__all__ = [
    "EMBEDDED_N_CTX",
    "GGUFChat",
    "LlamaCppBackend",
    "LlamaCppCounter",
    "acquire_model",
    "default_threads",
    "gguf_vocab_counter",
    "model_holders",
    "release_model",
]

SPIN_COUNT = "1000"
"""How long llama.cpp's OpenMP threads spin at a barrier before they sleep (`GOMP_SPINCOUNT`).

ggml's barriers between ops are OpenMP barriers, so this sets the speed: sleeping at once
(`OMP_WAIT_POLICY=PASSIVE`) cost 37-49% of the generation speed on an idle machine; spinning
long (ACTIVE, or libgomp's default 300,000 spins; 20,000 too) collapsed generation to 2-7
tokens/s beside another busy llama.cpp process; 1,000 spins kept the idle speed and about four
fifths of PASSIVE's beside the busy one (bench/README.md, "Wait policy and threads")."""

# Read by the OpenMP runtime when llama.cpp's library loads (llama_cpp is imported lazily, after
# this), unless the environment already says how threads wait.
if not environment.openmp_wait_set():
    os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT

PROMPT_LOOKUP = 4
"""Tokens a call drafts per step by prompt lookup while it decodes alone (`BatchEngine`): the
1.5B judge's verdict and fix wrote 1.18x as fast idle with 4 (8: 0.94x; bench/README.md, "Judge
speculation")."""

N_SEQ_MAX = 16
"""Sequences one in-process context holds: concurrent calls (K members) plus the prefix cache."""


def default_threads() -> int:
    """CPU threads for llama.cpp: `$COLLECTIVE_THREADS`, else the cores this process may use."""
    configured = environment.threads()
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclass
class _Held:
    model: LlamaModel
    holders: int = 0


_held: dict[tuple[str, bool], _Held] = {}
"""The loaded models by (resolved GGUF path, repacking), with how many hold each."""
_held_lock = threading.Lock()


def acquire_model(path: str | os.PathLike[str], *, repack: bool = True) -> LlamaModel:
    """The GGUF's weights, loaded once per process and (path, repacking); one more holder.

    Every holder makes its own context on the model (the backend's `BatchEngine`, deep's
    reranker): with repacking on, each load copies the weights into memory of its own, so two
    loads of the 1.5B judge model held two copies. Give it back with `release_model`.

    Args:
        path: The `.gguf` file.
        repack: Load weights with llama.cpp's CPU repacking (`use_extra_bufts`).

    Raises:
        ValueError: llama.cpp could not load the file (as `LlamaModel` raises it).
    """
    key = (str(Path(path).resolve()), repack)
    with _held_lock:
        held = _held.get(key)
        if held is None:
            import llama_cpp
            from llama_cpp._internals import LlamaModel
            from llama_cpp._logger import set_verbose

            set_verbose(False)  # as `Llama(verbose=False)`: native logs stay quiet
            params = llama_cpp.llama_model_default_params()
            params.use_extra_bufts = repack
            with quiet_native():  # its load silences stdout, one thread at a time
                held = _Held(LlamaModel(path_model=key[0], params=params, verbose=False))
            _held[key] = held
        held.holders += 1
        return held.model


def release_model(model: LlamaModel) -> None:
    """One holder of `model` fewer (`acquire_model`); the last one frees the weights.

    Each holder releases once, after closing its own context on the model.
    """
    with _held_lock:
        key = next((k for k, held in _held.items() if held.model is model), None)
        if key is None:
            return  # not held here (released already)
        _held[key].holders -= 1
        if _held[key].holders > 0:
            return
        del _held[key]
    model.close()


def model_holders(path: str | os.PathLike[str], *, repack: bool = True) -> int:
    """How many hold the GGUF's loaded model (`acquire_model`); 0: it is not loaded."""
    held = _held.get((str(Path(path).resolve()), repack))
    return held.holders if held is not None else 0


CHATML_TEMPLATE = (
    "{%- for message in messages -%}\n"
    "  {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "  {{- '<|im_start|>assistant\\n' -}}\n"
    "{%- endif -%}"
)
"""llama.cpp's fallback for a GGUF without `tokenizer.chat_template` (common/chat.cpp), so the
in-process backend renders exactly what `llama-server` renders for the same file."""


GEMMA_TEMPLATE = (resources.files("collective") / "data/templates/gemma.jinja").read_text()
"""Gemma's own turn format. The bundled gemma GGUF is the base model and ships no template;
ChatML, llama.cpp's fallback, makes it answer with nothing, so the embedded default uses its
family's format (and `ops/llama-server/launch.sh` passes the same file to llama-server)."""


def _template_message(message: ChatMessage) -> dict[str, Any]:
    """A message as templates expect it: tool-call arguments as objects, not JSON text.

    OpenAI-shaped messages carry `arguments` as a JSON string; llama-server parses them before
    rendering (Qwen's template applies `tojson` to them), and so do we. They are escaped first
    (`escape_tool_calls`): the prompt is tokenized with special tokens parsed outside content.
    """
    out: dict[str, Any] = dict(escape_tool_calls(message))
    calls = out.get("tool_calls")
    if calls:
        fixed = []
        for call in calls:
            function = dict(call.get("function") or {})
            if isinstance(function.get("arguments"), str):
                try:
                    function["arguments"] = json.loads(function["arguments"])
                except json.JSONDecodeError:
                    pass  # rendered as the text it is
            fixed.append({**call, "function": function})
        out["tool_calls"] = fixed
    return out


def template_has_tools(template: str) -> bool:
    """Whether a chat template renders tool schemas and Hermes-style `<tool_call>` turns."""
    return "tools" in template and "<tool_call>" in template


_OPEN, _CLOSE = "\ue000", "\ue001"
"""Private-use sentinels that mark message content in a render (see `GGUFChat._content_spans`)."""
_SPAN = re.compile(f"{_OPEN}(.*?){_CLOSE}", re.DOTALL)


class GGUFChat:
    """A GGUF's tokenizer and chat template, rendering prompts as `llama-server` does.

    The template is the GGUF's `tokenizer.chat_template`, else llama.cpp's ChatML fallback. As
    in llama.cpp's `common_chat_templates_apply`, a BOS (EOS) text the template emits is
    stripped when the vocabulary adds BOS (EOS) itself, and the prompt is tokenized with the
    vocabulary's special tokens added and special-token text parsed in the template's own text
    only: message content is always plain text (`prompt_tokens`).

    Works on llama-cpp-python's `LlamaModel` (what `Llama._model` is, and what a
    vocabulary-only load gives), since tokenizing needs no context.

    Args:
        model: The loaded model (weights or vocabulary only).
        name: The model name used in messages.
    """

    def __init__(self, model: LlamaModel, name: str, template: str | None = None) -> None:
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        self.model = model
        self.name = name
        own = model.metadata().get("tokenizer.chat_template")
        self.template = template or own or CHATML_TEMPLATE
        # Without its own template the model answers in the fallback's turns; stop at them.
        markers = {
            GEMMA_TEMPLATE: ["<end_of_turn>", "<start_of_turn>"],
            CHATML_TEMPLATE: ["<|im_end|>", "<|im_start|>"],
        }
        self.extra_stop = markers.get(self.template, [])
        bos_id, eos_id = model.token_bos(), model.token_eos()
        self.eos_id = eos_id
        self.bos_text = model.token_get_text(bos_id) if bos_id != -1 else ""
        self.eos_text = model.token_get_text(eos_id) if eos_id != -1 else ""
        self.add_bos = bool(model.add_bos_token()) and bos_id != -1
        self.add_eos = bool(model.add_eos_token()) and eos_id != -1
        self.formatter = Jinja2ChatFormatter(
            template=self.template,
            eos_token=self.eos_text,
            bos_token=self.bos_text,
            stop_token_ids=[eos_id],
        )

    def encode(self, text: str) -> list[int]:
        """Token ids of `text` as message content (no BOS; special-token text is plain text)."""
        return self.model.tokenize(text.encode("utf-8"), add_bos=False, special=False)

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids` (an incomplete UTF-8 sequence at the end becomes U+FFFD)."""
        return self.model.detokenize(list(ids)).decode("utf-8", errors="replace")

    def render(
        self, messages: Sequence[ChatMessage], tools: Sequence[dict[str, Any]] | None = None
    ) -> tuple[str, list[str]]:
        """The prompt text as tokenized, and the template's stop strings.

        BOS/EOS text is stripped where the vocabulary adds those tokens itself.

        Raises:
            ConfigError: The template refused the messages (e.g. roles that do not alternate).
        """
        try:
            result = self.formatter(
                messages=[_template_message(m) for m in messages],  # type: ignore[misc]
                tools=list(tools) if tools else None,  # type: ignore[arg-type]
            )
        except Exception as exc:  # jinja2 errors and the template's raise_exception
            raise ConfigError(
                f"the chat template of {self.name} refused these messages: {exc}. Check the "
                "roles (many templates require user/assistant turns to alternate)."
            ) from exc
        prompt = result.prompt
        if self.add_bos and self.bos_text and prompt.startswith(self.bos_text):
            prompt = prompt[len(self.bos_text) :]
        if self.add_eos and self.eos_text and prompt.endswith(self.eos_text):
            prompt = prompt[: -len(self.eos_text)]
        stop = [s for s in [*(result.stop or []), *self.extra_stop] if s]
        return prompt, stop

    def prompt_tokens(
        self, messages: Sequence[ChatMessage], tools: Sequence[dict[str, Any]] | None = None
    ) -> tuple[list[int], list[str]]:
        """The token ids the model evaluates for `messages`, and the template's stop strings.

        Content is never read as special tokens (`collective.models.special_tokens`): when a
        message holds special-token text, the template's text is tokenized with special tokens
        and each content span as plain text; should the template transform content so that the
        spans cannot be found, the content is escaped as over HTTP.
        """
        prompt, stop = self.render(messages, tools)
        if not any(self._holds_specials(m.get("content")) for m in messages):
            ids = self.model.tokenize(prompt.encode("utf-8"), add_bos=self.add_bos, special=True)
        else:
            pieces = self._content_spans(messages, tools, prompt)
            if pieces is None:
                prompt, stop = self.render(escape_messages(messages), tools)
                pieces = [(prompt, False)]
            ids = [self.model.token_bos()] if self.add_bos else []
            for text, content in pieces:
                if text:
                    data = text.encode("utf-8")
                    ids += self.model.tokenize(data, add_bos=False, special=not content)
        if self.add_eos:
            ids.append(self.eos_id)
        return ids, stop

    def _holds_specials(self, content: object) -> bool:
        if not isinstance(content, str) or not content:
            return False
        data = content.encode("utf-8")
        special = self.model.tokenize(data, add_bos=False, special=True)
        return special != self.model.tokenize(data, add_bos=False, special=False)

    def _content_spans(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None,
        prompt: str,
    ) -> list[tuple[str, bool]] | None:
        """`prompt` as (text, is_content) pieces, or None when the spans cannot be located.

        Each content is rendered between private-use sentinels; the spans count only if the
        marked render, sentinels removed, is exactly `prompt` (content as given, or stripped
        for templates that `trim` it).
        """
        contents = [m.get("content") for m in messages]
        if any(isinstance(c, str) and (_OPEN in c or _CLOSE in c) for c in contents):
            return None
        for shape in (str, str.strip):
            marked = [
                {**m, "content": f"{_OPEN}{shape(c)}{_CLOSE}"} if isinstance(c, str) and c else m
                for m, c in zip(messages, contents, strict=True)
            ]
            try:
                text, _ = self.render(marked, tools)  # type: ignore[arg-type]
            except ConfigError:
                return None
            if text.replace(_OPEN, "").replace(_CLOSE, "") != prompt:
                continue
            pieces: list[tuple[str, bool]] = []
            pos = 0
            for match in _SPAN.finditer(text):
                pieces += [(text[pos : match.start()], False), (match.group(1), True)]
                pos = match.end()
            return [*pieces, (text[pos:], False)]
        return None


class LlamaCppCounter(TokenizerCounter):
    """Exact counts from a GGUF's tokenizer, chat template included in `count_messages`."""

    def __init__(self, kind: str, chat: GGUFChat) -> None:
        super().__init__(kind, chat.encode, chat.decode)
        self.chat = chat

    def count_messages(
        self, messages: Sequence[ChatMessage], tools: Sequence[dict[str, Any]] | None = None
    ) -> int:
        """Tokens of the whole templated prompt, as the model evaluates it."""
        return len(self.chat.prompt_tokens(messages, tools)[0])


@functools.cache
def gguf_vocab_counter(path: str) -> LlamaCppCounter:
    """An exact counter from a GGUF's vocabulary alone (`vocab_only`: no weights are loaded).

    Used where the model runs elsewhere (an Ollama blob on this host). Cached per path.

    Raises:
        ConfigError: The file cannot be read as a GGUF.
    """
    import llama_cpp
    from llama_cpp._internals import LlamaModel

    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    try:
        # Not `Llama(vocab_only=True)`: that also creates a context, which fails without weights.
        with quiet_native():
            model = LlamaModel(path_model=path, params=params, verbose=False)
    except (ValueError, RuntimeError, OSError) as exc:
        raise ConfigError(f"cannot read the vocabulary of GGUF {path}: {exc}") from exc
    return LlamaCppCounter("exact:gguf-vocab", GGUFChat(model, Path(path).stem))


class LlamaCppBackend(Backend):
    """A GGUF model run in this process, its calls served together by one `BatchEngine`.

    Args:
        model_path: The `.gguf` file.
        n_ctx: KV cells to allocate, shared by concurrent calls (a shared prompt prefix is held
            once); capped at the model's training context. One call may use them all.
        n_threads: CPU threads (default: the cores this process may use).
        n_batch: Tokens per decode step (prompt chunks and one per generating call).
        name: Model name in results (default: the file's stem).
        chat_template: A Jinja chat template that overrides the GGUF's own.
        repeat_penalty: The sampler's repetition penalty.
        repack: Load weights with llama.cpp's CPU repacking (`use_extra_bufts`); off only to
            measure what it gains.
        n_seq_max: Calls the context holds at once (plus the prefix cache); more wait.
        prefix_cache: Keep the last finished call's sequence for the next call to reuse; off,
            and with `n_seq_max=1`, calls run one at a time, each reading its whole prompt
            (the path before the engine, for benchmarks).
        lookup: Tokens drafted per step by prompt lookup while a call decodes alone
            (`GenerationRequest.lookup`; 0: none).
    """

    supports_json_schema = True  # via a grammar built from the schema
    in_process = True
    forces_tool_calls = True  # `required` opens the answer as the template's own `<tool_call>`

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        *,
        n_ctx: int = 32768,
        n_threads: int | None = None,
        n_batch: int = 512,
        name: str | None = None,
        chat_template: str | None = None,
        repeat_penalty: float = 1.0,
        repack: bool = True,
        n_seq_max: int = N_SEQ_MAX,
        prefix_cache: bool = True,
        lookup: int = PROMPT_LOOKUP,
    ) -> None:
        self.path = Path(model_path)
        self.chat_template = chat_template
        self.repeat_penalty = repeat_penalty
        self.spec = f"llamacpp:{self.path}"
        self.model = name or self.path.stem
        self.n_ctx_requested = n_ctx
        self.n_threads = n_threads or default_threads()
        self.n_batch = n_batch
        self.repack = repack
        self.n_seq_max = n_seq_max
        self.keep_idle = 1 if prefix_cache else 0
        self.lookup = lookup
        self._engine: BatchEngine | None = None
        self._chat: GGUFChat | None = None
        self._counter: LlamaCppCounter | None = None
        self._load_lock = threading.Lock()
        self._grammars: dict[str, LlamaGrammar] = {}
        self._tools: bool | None = None

    @property
    def supports_tools(self) -> bool:
        """Whether the chat template renders tools and Hermes-style `<tool_call>` turns.

        Read from the template (the GGUF's own through a vocabulary-only load: no weights), so
        a tool-calling model is known before it is loaded.
        """
        if self._tools is None:
            template = self.chat_template or (self._chat.template if self._chat else None)
            if template is None:
                try:
                    template = gguf_vocab_counter(str(self.path)).chat.template
                except ConfigError:
                    template = ""
            self._tools = template_has_tools(template)
        return self._tools

    @supports_tools.setter
    def supports_tools(self, value: bool) -> None:
        self._tools = value

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory."""
        return self._engine is not None

    @property
    def engine(self) -> BatchEngine:
        """The loaded model's engine (loads the model if needed)."""
        self._load_sync()
        assert self._engine is not None
        return self._engine

    def _load_sync(self) -> GGUFChat:
        with self._load_lock:
            if self._chat is None:
                if not self.path.is_file():
                    raise ConfigError(f"no GGUF model file at {self.path}; check the path")
                try:
                    # Shared with every other holder of this file (deep's reranker, another
                    # backend on it): one copy of the weights, a context each.
                    model = acquire_model(self.path, repack=self.repack)
                except (ValueError, RuntimeError, OSError) as exc:
                    raise ConfigError(f"llama.cpp could not load {self.path}: {exc}") from exc
                try:
                    self._engine = self._engine_on(model)
                except (ValueError, RuntimeError, OSError) as exc:
                    release_model(model)
                    raise ConfigError(f"llama.cpp could not load {self.path}: {exc}") from exc
                self._chat = GGUFChat(model, self.model, self.chat_template)
                self._counter = LlamaCppCounter("exact:llama.cpp", self._chat)
            return self._chat

    def _engine_on(self, model: LlamaModel) -> BatchEngine:
        # Beyond the training context the model degrades; the server caps slots the same way.
        n_train = model.n_ctx_train()
        n_ctx = self.n_ctx_requested
        if 0 < n_train < n_ctx:
            n_ctx = n_train
        return BatchEngine(
            model,
            n_ctx=n_ctx,
            n_batch=min(self.n_batch, n_ctx),
            n_threads=self.n_threads,
            n_seq_max=self.n_seq_max,
            keep_idle=self.keep_idle,
        )

    async def _loaded(self) -> GGUFChat:
        if self._chat is not None:
            return self._chat
        return await asyncio.to_thread(self._load_sync)

    async def context_window(self) -> int:
        """The context one call may use: all the engine's cells (loads the model if needed)."""
        await self._loaded()
        assert self._engine is not None
        return self._engine.n_ctx

    async def pool(self) -> ServerPool:
        """Calls run together on the engine, which admits them by its own cells.

        A call waits inside the engine until its uncached prompt and its output fit beside the
        others (a prefix shared with them is held once), so admission here only bounds how
        many run at once.
        """
        n_ctx = await self.context_window()
        slots = max(1, self.n_seq_max - self.keep_idle)  # an id for the prefix cache
        source = f"in process: the batch engine admits calls by its {n_ctx:,} cells"
        server = f"in-process:{self.path.name}"
        return ServerPool(server, slots, n_ctx, slots * n_ctx, False, source)

    async def token_counter(self) -> LlamaCppCounter:
        """The model's own tokenizer and template (`exact:llama.cpp`)."""
        await self._loaded()
        assert self._counter is not None
        return self._counter

    def _grammar(self, schema: dict[str, Any]) -> LlamaGrammar:
        from llama_cpp import LlamaGrammar

        key = json.dumps(schema, sort_keys=True)
        grammar = self._grammars.get(key)
        if grammar is None:
            try:
                grammar = LlamaGrammar.from_json_schema(key, verbose=False)
            except Exception as exc:  # the converter raises plain exceptions
                raise ConfigError(f"cannot turn this JSON schema into a grammar: {exc}") from exc
            self._grammars[key] = grammar
        return grammar

    def _complete_sync(
        self,
        messages: Sequence[ChatMessage],
        max_tokens: int,
        temperature: float,
        stop: Sequence[str] | None,
        json_schema: dict[str, Any] | None,
        tools: Sequence[dict[str, Any]] | None = None,
        tool_choice: str | None = None,
        on_text: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
        seed: int | None = None,
    ) -> ChatResult:
        """One chat completion on the engine, in a worker thread (see `chat`).

        Long: the request is built, decoded and read back in one place: a required call opens
        the answer and bounds it by its schema, and the cap, the prompt's fit and the finish
        reason are read against the same token counts.
        """
        chat = self._load_sync()
        engine = self.engine
        ids, template_stop = chat.prompt_tokens(messages, tools)
        opened = ""
        if tools and tool_choice == "required":
            # The answer is opened as a call and its JSON held to the tools' schemas.
            opened = "<tool_call>\n"
            prefix = chat.model.tokenize(opened.encode("utf-8"), add_bos=False, special=True)
            ids, max_tokens = ids + prefix, max_tokens - len(prefix)
            json_schema, on_text = tool_call_schema(tools, max_tokens), None
        n_ctx = engine.n_ctx
        if len(ids) + max_tokens > n_ctx:
            raise ContextOverflow(
                f"the prompt for {self.model} (in process) has {len(ids)} tokens and "
                f"{max_tokens} are reserved for output, but its context holds {n_ctx}. Refit "
                f"the prompt to n_ctx={n_ctx}.",
                n_prompt_tokens=len(ids),
                n_ctx=n_ctx,
            )
        grammar = self._grammar(json_schema) if json_schema is not None else None
        calls_allowed = bool(tools) and tool_choice != "none"
        # offered but refused: the answer ends where a call would start
        refused = ["<tool_call>"] if tools and not calls_allowed else []
        started = time.perf_counter()
        out = engine.generate(
            GenerationRequest(
                ids,
                max_tokens,
                temperature=temperature,
                repeat_penalty=self.repeat_penalty,
                grammar=grammar,
                stop=[*(stop or []), *template_stop, *refused],
                hold=["<tool_call>"] if calls_allowed else [],
                on_text=on_text,
                cancel=cancel or threading.Event(),
                lookup=self.lookup,
                seed=seed,
            )
        )
        wall_ms = (time.perf_counter() - started) * 1000
        text = f"{opened}{out.text}\n</tool_call>" if opened else out.text
        names = [t.get("function", {}).get("name") for t in tools or []]
        try:
            answer, calls = (
                parse_tool_calls(text, self.model, names) if calls_allowed else (text, [])
            )
        except InvalidResponse:
            if out.finish_reason != "length":
                raise
            answer, calls = text, []  # cut at its cap: the budgeted call's `text_calls` says so
        timings = {
            "wall_ms": wall_ms,
            "queued_ms": out.queued_ms,
            "prompt_n": float(out.prompt_n),
            "cache_n": float(out.cache_n),
        }
        if out.drafted:  # as llama-server reports its speculation
            timings["draft_n"] = float(out.drafted)
            timings["draft_n_accepted"] = float(out.accepted)
        if out.completion_tokens and wall_ms > 0:
            timings["predicted_per_second"] = out.completion_tokens / (wall_ms / 1000)
        return ChatResult(
            text=answer,
            tool_calls=calls,
            usage=Usage(out.prompt_tokens, out.completion_tokens, out.cache_n),
            model=self.model,
            finish_reason="tool_calls" if calls else out.finish_reason,
            timings=timings,
            confidence=token_confidence(out.logprobs),
            confidence_note=None if out.logprobs else "no token was generated",
        )

    async def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int,
        temperature: float = 0.2,
        stop: Sequence[str] | None = None,
        json_schema: dict[str, Any] | None = None,
        tools: Sequence[dict[str, Any]] | None = None,
        tool_choice: str | None = None,
        seed: int | None = None,
        n: int = 1,  # one completion a request (`most_samples`)
    ) -> AsyncIterator[ChatDelta]:
        """Generate in a worker thread, handing text over as it is written (`Backend.stream`).

        Closing the stream, or cancelling its consumer, stops the generation at the next token.

        Tools are rendered by the chat template and Hermes-style `<tool_call>` blocks in the
        answer become `tool_calls`; text is handed over up to the first `<tool_call>`.
        `tool_choice="none"` still renders the tools (the prompt, and so the prefix the KV
        holds, stays that of a call offering them) but ends the answer where a call would
        start; `"required"` opens the answer as a call whose JSON a grammar holds to the tools'
        schemas (nothing streams then).

        Raises:
            ConfigError: `tools` were given but the template cannot render them, or the
                template refused the messages.
            InvalidResponse: The model wrote a tool call that is not valid JSON.
        """
        if tools and not self.supports_tools:
            raise ConfigError(
                f"the chat template of {self.model} has no tool calling; route tool-using roles "
                "to a model whose template has (e.g. embedded:qwen2.5-coder-1.5b) or to "
                "llama-server / Ollama"
            )
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        cancel = threading.Event()

        def put(kind: str, value: Any) -> None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody listens
                loop.call_soon_threadsafe(queue.put_nowait, (kind, value))

        def work() -> None:
            try:
                result = self._complete_sync(
                    messages,
                    max_tokens,
                    temperature,
                    stop,
                    json_schema,
                    tools,
                    tool_choice,
                    on_text=lambda text: put("text", text),
                    cancel=cancel,
                    seed=seed,
                )
            except Exception as exc:
                put("error", exc)
            else:
                put("result", result)

        # A thread of its own, not the default executor's: the call waits in the engine while
        # others run, and K waiting members must not starve `asyncio.to_thread` elsewhere.
        threading.Thread(target=work, name=f"llamacpp-{self.model}", daemon=True).start()
        try:
            while True:
                kind, value = await queue.get()
                if kind == "error":
                    raise value
                if kind == "result":
                    yield ChatDelta(result=value)
                    return
                yield ChatDelta(value)
        finally:
            cancel.set()  # the consumer is gone (or done): the worker stops at its next token

    async def health(self) -> Health:
        """Ready when the model is loaded or its file is present (loading is lazy)."""
        if self._engine is not None:
            return Health(True, f"{self.model} is loaded in process")
        if self.path.is_file():
            return Health(True, f"{self.model} will load from {self.path} on first use")
        return Health(False, f"no GGUF model file at {self.path}")

    async def aclose(self) -> None:
        """Free the context, and the model unless others hold it (`release_model`).

        It reloads on next use; calls running on it end `cancelled`.
        """
        with self._load_lock:
            engine, self._engine = self._engine, None
            self._chat = self._counter = None
        if engine is not None:
            await asyncio.to_thread(engine.close)
            release_model(engine.model)


EMBEDDED_N_CTX = 32768
"""Context of the embedded model in process: its full training context."""


def _parse_llamacpp(spec: str, rest: str) -> BackendSpec:
    path = Path(rest).expanduser()
    if path.suffix != ".gguf":
        raise refuse(spec, f"{rest!r} is not a .gguf file path")
    return BackendSpec("llamacpp", path=str(path.resolve()))


def _parse_embedded(spec: str, rest: str) -> BackendSpec:
    from collective.models.embedded import embedded_model, embedded_model_path

    path = embedded_model_path(embedded_model(spec.strip()).key)
    return BackendSpec("llamacpp", path=str(path))


def _create(spec: BackendSpec) -> LlamaCppBackend:
    from collective.models.embedded import embedded_model_by_path

    if not Path(spec.path).is_file():
        raise ConfigError(f"llamacpp: no GGUF file at {spec.path}; check the path in config")
    # The one place the embedded model is recognised; its backend declares what it can do.
    embedded = embedded_model_by_path(spec.path)
    template = None
    if embedded and embedded.turn_template:
        template = resources.files("collective") / "data/templates" / embedded.turn_template
    backend = LlamaCppBackend(
        spec.path,
        n_ctx=EMBEDDED_N_CTX,
        name=embedded.name if embedded else None,
        chat_template=template.read_text() if template else None,
        repeat_penalty=embedded.repeat_penalty if embedded else 1.0,
    )
    if embedded:
        backend.output_cap = embedded.output_cap
    return backend


register(BackendKind("llamacpp", "llamacpp:/path/to/model.gguf", _parse_llamacpp, _create))


def _check_embedded(spec: str) -> None:
    from collective.models.embedded import embedded_model

    embedded_model(spec)  # the name only: the model is assembled on first use


register(
    BackendKind(
        "embedded",
        "embedded\nembedded:NAME (qwen2.5-coder-0.5b, qwen2.5-coder-1.5b, gemma-3-270m)",
        _parse_embedded,
        _create,
        _check_embedded,
    )
)
