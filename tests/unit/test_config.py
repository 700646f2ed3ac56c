"""The layered configuration: defaults < file < .env < environment < command line."""

import json
from pathlib import Path

import pytest

from collective.budget.plans import JUDGE_PRESET, ModelBudget
from collective.config import load_config
from collective.errors import ConfigError

FILE = """
k = 2
planner = "llama-server:http://127.0.0.1:8083"
judge = "ollama:gpt-oss-120b-judge@http://127.0.0.1:11434"
retrieval = "deep"

[[specialists]]
backend = "llama-server:http://127.0.0.1:8083"
count = 2

[[specialists]]
backend = "ollama:gemma3:270m@http://127.0.0.1:11434"

[budgets]
judge = "judge"

[budgets.specialist]
n_ctx = 4096
output = 512
sections = { system = 500, kb_chunks = 2000, task = 300 }

[output_caps]
judge = 2000
"""


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for name in list(__import__("os").environ):
        if name.startswith("COLLECTIVE_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def write(tmp_path, text, name="c.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_no_file_is_the_embedded_default_with_every_source_default():
    effective = load_config(None)
    config = effective.config
    assert config.planner is None and config.judge == "embedded:qwen2.5-coder-1.5b"
    # the eval's best arm at its cost: the judge's answer weighed against two samples of its model
    assert config.members == 2 and config.specialist_backends == [config.judge] * 2
    assert config.chat_backend == config.judge
    assert {source for _, _, source in effective.rows()} == {"default"}
    ctx = config.council_context()
    assert ctx.k == 2 and ctx.kb is None and ctx.usage_log == ".collective/usage.jsonl"


def test_layers_override_in_order_and_each_value_names_its_source(tmp_path, monkeypatch):
    path = write(tmp_path, FILE)
    (tmp_path / ".env").write_text("COLLECTIVE_RETRIEVAL=lean\nCOLLECTIVE_QUORUM=1\n")
    monkeypatch.setenv("COLLECTIVE_RETRIEVAL", "balanced")
    monkeypatch.setenv("COLLECTIVE_OUTPUT_CAPS", json.dumps({"specialist": 300}))
    effective = load_config(path, {"k": 3, "review": None})
    config = effective.config
    assert config.k == 3 and effective.source_of("k") == "cli"
    assert config.retrieval == "balanced" and effective.source_of("retrieval") == "env"
    assert config.quorum == 1 and effective.source_of("quorum") == ".env"
    assert config.planner.startswith("llama-server:") and effective.source_of("planner") == "file"
    assert effective.source_of("review") == "default"  # None on the command line sets nothing
    # Tables merge key by key: the env cap joins the file's cap.
    assert config.output_caps == {"judge": 2000, "specialist": 300}
    assert effective.source_of("output_caps.judge") == "file"
    assert effective.source_of("output_caps.specialist") == "env"
    rows = {key: source for key, _, source in effective.rows()}
    assert rows["budgets.specialist.sections.kb_chunks"] == "file"


def test_specialist_groups_expand_and_cycle_to_k(tmp_path):
    config = load_config(write(tmp_path, FILE), {"k": 5}).config
    ctx = config.council_context()
    assert ctx.k == 5
    members = [ctx.member_backend(i) for i in range(5)]
    assert members[:3] == [
        "llama-server:http://127.0.0.1:8083",
        "llama-server:http://127.0.0.1:8083",
        "ollama:gemma3:270m@http://127.0.0.1:11434",
    ]
    assert members[3] == members[0]


def test_explicit_sections_become_a_budget_plan(tmp_path):
    config = load_config(write(tmp_path, FILE)).config
    plan = config.budget_plan("specialist")
    assert isinstance(plan, ModelBudget)
    assert (plan.n_ctx, plan.output_budget, plan.prompt_budget) == (4096, 512, 2800)
    assert dict(plan.sections) == {"system": 500, "kb_chunks": 2000, "task": 300}
    assert config.budget_plan("judge") is JUDGE_PRESET
    assert config.budget_plan("chat").name == "specialist"  # chat defaults to the specialist preset


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("k = 0", "k: Input should be greater than or equal to 1 (from file)"),
        ('judge = "olama:x"', "judge: invalid backend spec 'olama:x': unknown backend kind"),
        ('retrieval = "fast"', "retrieval: unknown profile 'fast'; use lean, balanced, deep"),
        ("[budgets]\njudge = 'huge'", "budgets.judge: unknown preset 'huge'"),
        ("[output_caps]\njudge = -1", "output_caps.judge: Input should be greater than 0"),
        ("[[specialists]]\ncount = 2", "specialists.0.backend: Field required"),
        ("quorum = 9", "quorum 9 is more than the 2 specialists"),
        ("colour = 'blue'", "colour: Extra inputs are not permitted"),
        (
            "[budgets.judge]\nn_ctx = 1000\noutput = 2000\nsections = {system = 10}",
            "budgets.judge: budget plan 'explicit': output_budget 2000 must be smaller than n_ctx",
        ),
    ],
)
def test_an_invalid_file_names_the_field_path_and_the_reason(tmp_path, text, expected):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert message.startswith(f"invalid config file {path}: ")
    assert expected in message
    assert "\n" not in message  # one line


def test_an_invalid_environment_value_names_the_variable_layer(monkeypatch):
    monkeypatch.setenv("COLLECTIVE_K", "many")
    with pytest.raises(ConfigError, match=r"k: Input should be a valid integer.*\(from env\)"):
        load_config(None)


def test_unreadable_and_malformed_files_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="does not exist; check the path"):
        load_config(tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match="is not valid TOML"):
        load_config(write(tmp_path, "k = = 3"))
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\xff\xfe\x00k")
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(binary)


def test_config_file_from_the_environment_and_the_working_directory(tmp_path, monkeypatch):
    write(tmp_path, "k = 4", name="collective.toml")
    assert load_config(None).config.k == 4  # ./collective.toml
    other = write(tmp_path, "k = 6", name="other.toml")
    monkeypatch.setenv("COLLECTIVE_CONFIG", str(other))
    effective = load_config(None)
    assert effective.config.k == 6 and effective.file == other


def test_dotenv_exports_other_variables_without_overriding_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", "127.0.0.1:1")
    monkeypatch.delenv("COLLECTIVE_TEST_ONLY_VAR", raising=False)
    (tmp_path / ".env").write_text("OLLAMA_HOST=10.0.0.1:11434\nCOLLECTIVE_TEST_ONLY_VAR=yes\n")
    load_config(None)
    import os

    assert os.environ["OLLAMA_HOST"] == "127.0.0.1:1"
    assert os.environ["COLLECTIVE_TEST_ONLY_VAR"] == "yes"
    monkeypatch.delenv("COLLECTIVE_TEST_ONLY_VAR")


def test_reference_deployment_config_is_valid():
    repo = Path(__file__).resolve().parents[2]
    config = load_config(repo / "ops" / "collective.toml").config
    assert config.members == 3
    assert config.specialist_backends == ["llama-server:http://127.0.0.1:8083?kv=per-slot"] * 3
    assert config.judge == "ollama:gpt-oss-120b-judge@http://127.0.0.1:11434"
    assert config.budget_plan("specialist").n_ctx == 32768
    assert config.budget_plan("judge").n_ctx == 131072
