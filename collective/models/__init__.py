"""Model backends, one file each, registered by their spec prefix.

* `base`: the `Backend` interface, `ChatResult`, `Usage`, `ToolCall`, `Health`.
* `registry`: `backend_from_spec("llama-server:http://...")`, shared per spec; `close_all()`;
  each backend module registers its kind (`register(BackendKind(...))`).
* `openai_compat`: the OpenAI-compatible chat API (body, SSE, responses, context errors).
* `llama_server`, `openai_api`, `ollama_api`, `llamacpp_in_process`: one backend each;
  `langchain_model`: a LangChain chat model as a member; `replicas`: equivalent servers.
* `admission`: each server's KV pool, reserved around every call and across replicas.
* `embedded`: the bundled GGUFs (Qwen2.5-Coder 0.5B and 1.5B; Gemma 3 270M for fast tests).

Nothing is imported here: backends load their libraries (and models) on first use.
"""
