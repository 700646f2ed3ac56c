"""Backend spec strings: the forms users type, parsing, refusal and sharing."""

from __future__ import annotations

from pathlib import Path

import pytest

from collective.errors import ConfigError
from collective.models import registry
from collective.models.ollama_api import DEFAULT_OLLAMA_URL
from collective.models.registry import BackendSpec, backend_from_spec, parse_spec, valid_forms


def test_llama_server_spec() -> None:
    assert parse_spec("llama-server:http://127.0.0.1:8083/") == BackendSpec(
        "llama-server", url="http://127.0.0.1:8083"
    )


def test_ollama_spec_with_tagged_model_and_url() -> None:
    spec = parse_spec("ollama:gpt-oss:120b@http://10.0.0.5:11434")
    assert spec == BackendSpec("ollama", url="http://10.0.0.5:11434", model="gpt-oss:120b")
    assert spec.key == "ollama:gpt-oss:120b@http://10.0.0.5:11434"


def test_ollama_spec_without_url_uses_ollama_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", "127.0.0.1:9999")
    assert parse_spec("ollama:judge").url == "http://127.0.0.1:9999"
    monkeypatch.delenv("OLLAMA_HOST")
    assert parse_spec("ollama:judge").url == DEFAULT_OLLAMA_URL


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:11434"),  # was port 80
        ("0.0.0.0:8080", "http://0.0.0.0:8080"),
        ("ollama.internal", "http://ollama.internal:11434"),
        ("https://ollama.example.com", "https://ollama.example.com"),
    ],
)
def test_ollama_host_without_a_port_is_ollamas_default_port(
    monkeypatch: pytest.MonkeyPatch, host: str, url: str
) -> None:
    monkeypatch.setenv("OLLAMA_HOST", host)
    assert parse_spec("ollama:judge").url == url


def test_llamacpp_spec_resolves_the_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert parse_spec("llamacpp:m.gguf").path == str(tmp_path / "m.gguf")


@pytest.mark.parametrize(
    "spec",
    [
        "openai:gpt-4o",
        "llama-server:127.0.0.1:8083",
        "llama-server:",
        "ollama:@http://127.0.0.1:11434",
        "llamacpp:/models/model.bin",
        "embeded",
        "",
    ],
)
def test_invalid_specs_are_refused_with_the_valid_forms(spec: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_spec(spec)
    for form in valid_forms():
        assert form in str(info.value)


async def test_equal_specs_share_one_backend_and_close_all_forgets_them() -> None:
    a = backend_from_spec("llama-server:http://127.0.0.1:1/")
    b = backend_from_spec("llama-server:http://127.0.0.1:1")
    c = backend_from_spec("llama-server:http://127.0.0.1:2")
    assert a is b and a is not c
    assert a.spec == "llama-server:http://127.0.0.1:1"
    await registry.close_all()
    assert backend_from_spec("llama-server:http://127.0.0.1:1") is not a
    await registry.close_all()


def test_llamacpp_spec_for_a_missing_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no GGUF file"):
        backend_from_spec(f"llamacpp:{tmp_path / 'missing.gguf'}")


async def test_ollama_spec_creates_an_ollama_backend_without_connecting() -> None:
    b = backend_from_spec("ollama:gpt-oss-120b-judge@http://127.0.0.1:1")
    assert b.model == "gpt-oss-120b-judge"
    assert b.spec == "ollama:gpt-oss-120b-judge@http://127.0.0.1:1"
    await registry.close_all()


async def test_a_router_spec_names_its_model_and_each_model_is_its_own_backend() -> None:
    from collective.models.llama_server import LlamaServerBackend

    url = "http://127.0.0.1:8083"
    hf = f"llama-server:{url}?model=ggml-org%2Fgemma-3-4b-it-GGUF%3AQ4_K_M&kv=per-slot"
    try:
        small = backend_from_spec(f"llama-server:{url}?model=small")
        judge = backend_from_spec(hf)
        assert isinstance(small, LlamaServerBackend) and isinstance(judge, LlamaServerBackend)
        assert small is not judge and small is backend_from_spec(f"llama-server:{url}?model=small")
        assert judge.routed == judge.model == "ggml-org/gemma-3-4b-it-GGUF:Q4_K_M"
        assert judge.base_url == url and judge.kv_pool == "per-slot"
        assert judge.pool_key != small.pool_key  # each model's instance has its own KV pool
        assert small.spec == f"llama-server:{url}?model=small"
        # the model travels in every request body (chat included) and every GET's query
        assert small._extra_body() == {"cache_prompt": True, "model": "small"}
        plain = LlamaServerBackend(url)
        assert plain.routed is None and plain._extra_body() == {"cache_prompt": True}
        assert plain.spec == f"llama-server:{url}"
    finally:
        await registry.close_all()
