"""Model backends: llama-server (HTTP), llama.cpp in process, and Ollama.

* `base`: the `Backend` interface, `ChatResult`, `Usage`, `ToolCall`, `Health`.
* `registry`: `backend_from_spec("llama-server:http://...")`, shared per spec; `close_all()`.
* `llama_server`, `llamacpp_in_process`, `ollama_api`: one backend each.
* `embedded`: `embedded_model_path()` of the bundled Gemma 3 270M GGUF.

Nothing is imported here: backends load their libraries (and models) on first use.
"""
