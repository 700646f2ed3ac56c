"""Test-wide settings.

Every `embedded` spec runs the small gemma model here (`$COLLECTIVE_EMBEDDED_MODEL`): tests that
need *a* real model stay fast. Tests of the real embedded council (instruction-tuned Qwen models,
tool calls, the council evaluation smoke) unset it with `monkeypatch.delenv`. Deep retrieval's
reranker (a model call per deep retrieval) is off (`$COLLECTIVE_RERANK=none`) but in its own
tests (tests/unit/test_kb_rerank.py), and so is a model writing chunk expansions at `kb add`
(`$COLLECTIVE_KB_EXPANSION=none`) but in tests/unit/test_kb_expansion.py.
"""

import os

os.environ.setdefault("COLLECTIVE_EMBEDDED_MODEL", "gemma-3-270m")
os.environ.setdefault("COLLECTIVE_RERANK", "none")
os.environ.setdefault("COLLECTIVE_KB_EXPANSION", "none")

from tests.cli import clean_cwd  # noqa: E402, F401  (a fixture for tests of the command line)
