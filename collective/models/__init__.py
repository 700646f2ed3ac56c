"""Model backends: llama-server (HTTP), llama.cpp in process, and Ollama.

* `base`: the `Backend` interface, `ChatResult`, `Usage`, `ToolCall`, `Health`.
* `registry`: `backend_from_spec("llama-server:http://...")`, shared per spec; `close_all()`.
* `llama_server`, `llamacpp_in_process`, `ollama_api`: one backend each.
* `embedded`: the bundled GGUFs (Qwen2.5-Coder 0.5B and 1.5B; Gemma 3 270M for fast tests).

Nothing is imported here: backends load their libraries (and models) on first use.
"""
