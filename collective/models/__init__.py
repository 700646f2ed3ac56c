"""Model backends: llama-server over HTTP, llama.cpp in-process, and Ollama."""
