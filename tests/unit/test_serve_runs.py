"""Admission of council runs in `collective serve` / `collective mcp` (`collective.serve.runs`).

What is admitted is decided when a run is started, before its task first runs: these tests
start runs and look at what was admitted, then cancel the tasks (their session is never used).
"""

from __future__ import annotations

import pytest

from collective.errors import ConfigError
from collective.serve.runs import Ask, Busy, Councils, ThreadBusy
from collective.serve.settings import ServeSettings
from collective.session import load_settings


@pytest.fixture
def councils(clean_cwd):
    config = load_settings(None, {}).config
    return Councils(None, {"collective": config}, ServeSettings(max_concurrent=3))  # type: ignore[arg-type]


async def _stop(councils):
    await councils.close()
    assert councils.running == 0


async def test_one_run_per_thread_and_no_more_than_the_limit(councils):
    first = councils.start(Ask("q1", thread="alice"))
    with pytest.raises(ThreadBusy, match="'alice' is answering another question"):
        councils.start(Ask("q2", thread="alice"))
    councils.start(Ask("q3", thread="bob"))
    councils.start(Ask("q4"))  # a new thread of its own
    with pytest.raises(Busy) as busy:
        councils.start(Ask("q5", thread="carol"))
    assert busy.value.retry_after_s == 5 and councils.running == 3
    assert first.events.get_nowait()["type"] == "run"
    await _stop(councils)
    councils.start(Ask("q6", thread="alice"))  # the thread is free again once its run ended
    await _stop(councils)


async def test_modes_have_no_thread_and_settings_are_checked(councils):
    run = councils.start(Ask("q", model="collective-single", thread="ignored"))
    assert run.thread is None and run.thread_id is None
    with pytest.raises(ConfigError, match="k"):
        councils.start(Ask("q", k=0))
    with pytest.raises(KeyError, match="collective-self-moa"):
        councils.start(Ask("q", model="gpt-4o"))
    await _stop(councils)
