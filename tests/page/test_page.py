"""The page of `collective serve` in headless Chromium, against a council of real HTTP models.

The council's models are a scripted OpenAI-protocol server (`scripted_council`): its answers
quote a chunk their prompt shows, with its tag, so the verdict has a supported, cited line
whatever the KB's scores; everything else is the real thing: `collective serve` in its own
process, the council graph, the claim check, the budgets, the browser.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.page.scripted_council import ScriptedCouncilServer
from tests.page.serving import REPO, Serve

QUESTION = "Will a PLA part sag in a hot car?"
AXE = REPO / "tests" / "page" / "vendor" / "axe.min.js"
SHOTS = os.environ.get("COLLECTIVE_PAGE_SCREENSHOTS")
"""A directory to keep the screenshots in (docs/img when they are remade), else the test's."""


def council_toml(server: ScriptedCouncilServer) -> str:
    return (
        f'k = 2\njudge = "{server.spec("judge")}"\n'
        f'[[specialists]]\nbackend = "{server.spec("member-a")}"\ncount = 1\n'
        f'[[specialists]]\nbackend = "{server.spec("member-b")}"\ncount = 1\n'
    )


@pytest.fixture
def scripted() -> Iterator[ScriptedCouncilServer]:
    server = ScriptedCouncilServer(latency_s=2.0).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def served(clean_cwd: None, tmp_path: Path, scripted: ScriptedCouncilServer) -> Iterator[Serve]:
    (tmp_path / "collective.toml").write_text(council_toml(scripted))
    serve = Serve(tmp_path)
    try:
        yield serve
    finally:
        serve.stop()


def wait_for(what: Callable[[], Any], timeout: float = 120, message: str = "") -> Any:
    """Poll `what` until it returns something true (generous: two shared cores)."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = what()
        except (NoSuchElementException, StaleElementReferenceException):
            value = None  # not drawn yet, or drawn again
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting: {message or what}")


def cli_json(cwd: Path, config: str, question: str) -> dict[str, Any]:
    """`collective ask --json` with the same council, in a directory of its own."""
    cwd.mkdir()
    (cwd / "collective.toml").write_text(config)
    out = subprocess.run(
        [sys.executable, "-m", "collective.cli", "ask", question, "--json"],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(out.stdout)


def page_budgets(driver: Any) -> list[dict[str, Any]]:
    """Every budget figure's numbers, as the page shows them."""
    return driver.execute_script(
        """
        return [...document.querySelectorAll('#budget-list figure.budget')].map((f) => ({
          live: f.dataset.live, node: f.dataset.node,
          n_ctx: +f.querySelector('[data-n-ctx]').dataset.nCtx,
          prompt_tokens: +f.querySelector('[data-prompt]').dataset.prompt,
          max_output_tokens: +f.querySelector('[data-output]').dataset.output,
          bars: f.querySelectorAll('.bar').length,
          sections: [...f.querySelectorAll('tbody tr')].map((r) => ({
            name: r.dataset.section,
            used: +r.querySelector('[data-used]').dataset.used,
            allocated: +r.querySelector('[data-allocated]').dataset.allocated,
            slack: +r.querySelector('[data-slack]').dataset.slack,
            trimmed: r.querySelector('[data-trimmed]').dataset.trimmed === '1',
            shown: r.innerText,
          })),
        }));
        """
    )


def axe_violations(driver: Any) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations of the page as it stands."""
    driver.execute_script(AXE.read_text(encoding="utf-8"))
    found = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document).then((r) => done(r.violations), (e) => done([{id: String(e)}]));"
    )
    return [v for v in found if v.get("impact") in ("serious", "critical", None)]


def too_wide(driver: Any) -> list[str]:
    """The elements that reach past the window's right edge (none: no sideways scrolling)."""
    return driver.execute_script(
        """
        const width = document.documentElement.clientWidth;
        return [...document.querySelectorAll('body *')]
          .filter((e) => e.getBoundingClientRect().right > width + 1 && e.offsetParent !== null)
          .map((e) => `${e.tagName.toLowerCase()}#${e.id}.${e.className}`);
        """
    )


def shot(driver: Any, tmp_path: Path, name: str, width: int, height: int, at: str = "") -> None:
    """A screenshot of a `width` x `height` window, scrolled to the element `at` (else the top)."""
    driver.set_window_size(width, height)
    # set_window_size sizes the outer window: make the inner one the size asked.
    inner = driver.execute_script("return [window.innerWidth, window.innerHeight]")
    driver.set_window_size(2 * width - inner[0], 2 * height - inner[1])
    where = f"document.getElementById('{at}').scrollIntoView()" if at else "window.scrollTo(0, 0)"
    driver.execute_script(where)
    folder = Path(SHOTS) if SHOTS else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    assert driver.save_screenshot(str(folder / name))


@pytest.mark.timeout(600)
def test_a_run_on_the_page(
    served: Serve, scripted: ScriptedCouncilServer, browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    driver = browser
    expected = cli_json(tmp_path / "cli", council_toml(scripted), QUESTION)
    driver.get(served.url + "/")
    wait_for(lambda: driver.find_element(By.CSS_SELECTOR, "body[data-ready='1']"))
    modes = [
        o.get_attribute("value") for o in driver.find_elements(By.CSS_SELECTOR, "#mode option")
    ]
    assert "collective" in modes and "collective-self-moa" in modes  # serve's models

    # Keyboard only: the question, K, then Ctrl+Enter asks.
    question = driver.find_element(By.ID, "question")
    question.send_keys(QUESTION)
    driver.find_element(By.ID, "k").send_keys("2")
    question.send_keys(Keys.CONTROL, Keys.ENTER)

    def streaming() -> bool:  # a member's answer grows while the run still goes
        return driver.execute_script(
            "return document.body.dataset.run === 'going' && [...document.querySelectorAll"
            "('.member .answer')].some((a) => a.textContent.length > 0)"
        )

    wait_for(streaming, message="a member's answer streaming in while the run goes")
    live = page_budgets(driver)  # the calls made so far, from their `budget` events
    assert len(live) >= 2 and all(f["live"] == "1" for f in live), live
    wait_for(
        lambda: driver.execute_script("return document.body.dataset.run === 'ended'"),
        message="the run's end",
    )
    status = driver.find_element(By.ID, "status").text
    assert status.startswith("Done"), status

    members = driver.find_elements(By.CSS_SELECTOR, "#members .member")
    assert [m.get_attribute("data-node") for m in members] == ["specialist-1", "specialist-2"]
    for member, proposal in zip(members, expected["proposals"], strict=True):
        assert member.get_attribute("data-status") == "done"
        answer = member.find_element(By.CSS_SELECTOR, ".answer").text
        assert answer == proposal["text"]  # streamed in whole, as `ask --json` has it
        assert re.search(
            r"in \d+ · out \d+ · [\d.]+ m?s", member.find_element(By.CSS_SELECTOR, ".meta").text
        )

    # The thread's turns, read back from its memory: this one is there now.
    turns = wait_for(
        lambda: driver.find_elements(By.CSS_SELECTOR, "#turn-list li"), message="the turns"
    )
    assert [t.get_attribute("data-role") for t in turns] == ["user", "assistant"]
    assert turns[0].text == f"asked: {QUESTION}"
    assert turns[1].text.startswith("answered: ") and expected["answer"].split(" [KB#")[0] in (
        turns[1].text
    )

    # Retrieval's chunks with their tags, and the judge's row.
    chunks = driver.find_elements(By.CSS_SELECTOR, "#chunk-list li")
    assert [c.get_attribute("data-chunk") for c in chunks] == expected["retrieval"]["injected"]
    assert chunks[0].find_elements(By.CSS_SELECTOR, ".chip")
    opener = chunks[-1].find_element(By.CSS_SELECTOR, "button.tag")
    opener.send_keys(Keys.ENTER)  # a retrieved chunk opens from its tag too
    view = driver.find_element(By.ID, "chunk-view")
    wait_for(view.is_displayed, message="the chunk view")
    assert view.get_attribute("data-chunk") == chunks[-1].get_attribute("data-chunk")
    driver.switch_to.active_element.send_keys(Keys.ESCAPE)
    assert driver.switch_to.active_element == opener
    for member in members:  # a long answer scrolls in its column: by keyboard too
        assert member.find_element(By.CSS_SELECTOR, ".answer").get_attribute("tabindex") == "0"
    judge = driver.find_element(By.CSS_SELECTOR, "#stages [data-node='judge']")
    assert judge.get_attribute("data-status") == "done"

    # The verdict: its lines marked as `ask` marks them.
    lines = driver.find_elements(By.CSS_SELECTOR, "#verdict-lines li")
    claims = expected["claims"]
    assert lines and any(c["status"] == "supported" for c in claims)
    marked = [li for li in lines if "supported" in (li.get_attribute("data-marks") or "")]
    assert marked, [li.text for li in lines]
    assert marked[0].find_element(By.CSS_SELECTOR, ".mark.m-supported").text == "✓"

    # A tag, by keyboard: its chunk as the judge saw it; Escape closes and focus comes back.
    tag = marked[0].find_element(By.CSS_SELECTOR, "button.tag")
    tag.send_keys(Keys.ENTER)
    view = driver.find_element(By.ID, "chunk-view")
    wait_for(view.is_displayed, message="the chunk view")
    assert view.get_attribute("data-chunk") == tag.get_attribute("data-tag")
    sentence = re.sub(
        r"\s*\[KB#[^\]]+\]", "", marked[0].find_element(By.CSS_SELECTOR, ".line").text
    )
    assert sentence.strip() and sentence.strip() in view.find_element(By.CSS_SELECTOR, ".seen").text
    assert "As the judge's prompt showed it" in driver.find_element(By.ID, "chunk-view-meta").text
    driver.switch_to.active_element.send_keys(Keys.ESCAPE)
    assert not view.is_displayed()
    assert driver.switch_to.active_element == tag

    # One budget figure per model call, its numbers those of `ask --json`.
    shown = page_budgets(driver)
    reports = expected["budgets"]
    assert len(shown) == len(reports) and all(f["live"] == "0" for f in shown)
    for figure, report in zip(shown, reports, strict=True):
        assert figure["bars"] == 2
        for key in ("node", "n_ctx", "prompt_tokens", "max_output_tokens"):
            assert figure[key] == report[key], (key, figure, report)
        sections = [s for s in report["sections"] if s["allocated"] or s["used"]]
        assert [s["name"] for s in figure["sections"]] == [s["name"] for s in sections]
        for seen, section in zip(figure["sections"], sections, strict=True):
            slack = section["granted"] - section["allocated"] if section["granted"] else 0
            assert (seen["used"], seen["allocated"], seen["slack"], seen["trimmed"]) == (
                section["used"],
                section["allocated"],
                slack,
                section["trimmed"],
            )
            assert f"{section['used']:,}" in seen["shown"]

    # The timeline: a bar for each node that ran.
    rows = driver.find_elements(By.CSS_SELECTOR, "#timeline-rows .tl-row")
    assert {"retrieve", "specialist-1", "specialist-2", "judge"} <= {
        r.get_attribute("data-node") for r in rows
    }

    assert axe_violations(driver) == []
    tag.click()  # the pictures show a chunk as the judge saw it
    shot(driver, tmp_path, "page-1280x800.png", 1280, 800, at="council")
    height = driver.execute_script("return document.documentElement.scrollHeight")
    shot(driver, tmp_path, "page-1280-whole.png", 1280, height)
    assert too_wide(driver) == []
    shot(driver, tmp_path, "page-phone-390x844.png", 390, 844, at="council")
    assert too_wide(driver) == []  # nothing wider than a phone
    assert axe_violations(driver) == []  # the phone layout too


@pytest.mark.timeout(600)
def test_a_run_cancelled_from_the_page(clean_cwd: None, tmp_path: Path, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    slow = ScriptedCouncilServer(latency_s=2.0, latency={"member-a": 90, "member-b": 90}).start()
    (tmp_path / "collective.toml").write_text(council_toml(slow))
    serve = Serve(tmp_path)
    driver = browser
    try:
        driver.get(serve.url + "/")
        wait_for(lambda: driver.find_element(By.CSS_SELECTOR, "body[data-ready='1']"))
        driver.find_element(By.ID, "question").send_keys(QUESTION)
        driver.find_element(By.ID, "ask-button").click()

        def streamed() -> int:
            return driver.execute_script(
                "return [...document.querySelectorAll('.member .answer')]"
                ".reduce((n, a) => n + a.textContent.length, 0)"
            )

        wait_for(streamed, message="the members' answers streaming in")
        assert slow.in_flight >= 2  # both members are answering
        cancel = driver.find_element(By.ID, "cancel-button")
        assert cancel.is_enabled()
        cancel.click()
        wait_for(
            lambda: driver.find_element(By.ID, "status").text.startswith("Cancelled"),
            message="the page saying the run was cancelled",
        )
        statuses = [
            m.get_attribute("data-status")
            for m in driver.find_elements(By.CSS_SELECTOR, "#members .member")
        ]
        assert statuses == ["cancelled", "cancelled"]
        # The model calls were closed: the server's answers end (hung up) well before their 90 s.
        wait_for(lambda: slow.in_flight == 0, timeout=60, message="the model calls closed")
        assert slow.dropped >= 2
        assert not driver.find_elements(By.CSS_SELECTOR, "#verdict-lines li")
        assert driver.find_element(By.ID, "ask-button").is_enabled()
    finally:
        serve.stop()
        slow.stop()


@pytest.mark.timeout(600)
def test_a_trimmed_chunk_and_a_failed_member_on_the_page(
    clean_cwd: None, tmp_path: Path, browser: Any
) -> None:
    from importlib import resources

    from selenium.webdriver.common.by import By

    server = ScriptedCouncilServer(latency_s=1.0, failing=("member-x",)).start()
    # The judge's KB section holds about 100 tokens: the best chunk is cut to fit.
    (tmp_path / "collective.toml").write_text(
        council_toml(server).replace('"member-b"', '"member-x"').replace("member-b@", "member-x@")
        + "[budgets.judge]\nn_ctx = 8192\noutput = 256\nsections = { system = 130, "
        "conversation_summary = 0, kb_chunks = 100, proposals = 1, task = 100, "
        "safety_margin = 0 }\n"
    )
    serve = Serve(tmp_path)
    driver = browser
    try:
        driver.get(serve.url + "/")
        wait_for(lambda: driver.find_element(By.CSS_SELECTOR, "body[data-ready='1']"))
        driver.find_element(By.ID, "question").send_keys(QUESTION)
        driver.find_element(By.ID, "ask-button").click()
        wait_for(
            lambda: driver.execute_script("return document.body.dataset.run === 'ended'"),
            message="the run's end",
        )
        # The failed member: its column says so, and so do the faults.
        failed = driver.find_element(By.CSS_SELECTOR, "#members [data-node='specialist-2']")
        assert failed.get_attribute("data-status") == "failed", driver.find_element(
            By.ID, "notes"
        ).text
        faults = [f.text for f in driver.find_elements(By.CSS_SELECTOR, "#note-list .fault")]
        assert any(f.startswith("fault: specialist-2 failed") for f in faults), faults
        answered = driver.find_element(By.CSS_SELECTOR, "#members [data-node='specialist-1']")
        assert answered.get_attribute("data-status") == "done"

        # The judge's budget says its chunks were trimmed; the tag shows where.
        judge = [f for f in page_budgets(driver) if f["node"] == "judge"][-1]
        kb = next(s for s in judge["sections"] if s["name"] == "kb_chunks")
        assert kb["trimmed"] and "✂" in kb["shown"]
        line = driver.find_element(By.CSS_SELECTOR, "#verdict-lines li[data-marks~='supported']")
        line.find_element(By.CSS_SELECTOR, "button.tag").click()
        view = driver.find_element(By.ID, "chunk-view")
        seen = view.find_element(By.CSS_SELECTOR, ".seen").text
        marker = view.find_element(By.CSS_SELECTOR, ".trim-marker").text
        rest = view.find_element(By.CSS_SELECTOR, "del.trimmed").text
        assert "trimmed" in marker and seen and rest
        source = resources.files("collective").joinpath("data/demo_kb/applications.md")
        whole = " ".join(source.read_text("utf-8").split())
        assert " ".join(f"{seen}{rest}".split()) in whole  # the chunk, cut where it was cut
        assert " ".join(seen.split()) not in " ".join(rest.split())
    finally:
        serve.stop()
        server.stop()


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_the_embedded_council_on_the_page(clean_cwd: None, tmp_path: Path, browser: Any) -> None:
    """`collective serve` with no config: the embedded council (here the test's small gemma)."""
    from selenium.webdriver.common.by import By

    serve = Serve(tmp_path)
    driver = browser
    try:
        driver.get(serve.url + "/")
        wait_for(lambda: driver.find_element(By.CSS_SELECTOR, "body[data-ready='1']"))
        driver.find_element(By.ID, "question").send_keys(QUESTION)
        driver.find_element(By.ID, "k").send_keys("2")
        driver.find_element(By.ID, "ask-button").click()
        wait_for(
            lambda: driver.execute_script(
                "return document.body.dataset.run === 'going' && [...document.querySelectorAll"
                "('.member .answer')].filter((a) => a.textContent.length > 0).length === 2"
            ),
            timeout=600,
            message="both members' answers streaming in",
        )
        wait_for(
            lambda: driver.execute_script("return document.body.dataset.run === 'ended'"),
            timeout=600,
            message="the run's end",
        )
        assert driver.find_element(By.ID, "status").text.startswith("Done")
        members = driver.find_elements(By.CSS_SELECTOR, "#members .member")
        assert [m.get_attribute("data-status") for m in members] == ["done", "done"]
        figures = page_budgets(driver)
        nodes = [f["node"] for f in figures]
        assert {"specialist-1", "specialist-2", "judge"} <= set(nodes)
        for figure in figures:  # each bar's numbers add up within its window
            used = sum(s["used"] for s in figure["sections"])
            assert used <= figure["prompt_tokens"]
            assert figure["prompt_tokens"] + figure["max_output_tokens"] <= figure["n_ctx"]
            assert all(s["used"] <= s["allocated"] + s["slack"] for s in figure["sections"])
    finally:
        serve.stop()


@pytest.mark.timeout(300)
def test_the_page_asks_for_the_servers_key(
    clean_cwd: None,
    tmp_path: Path,
    scripted: ScriptedCouncilServer,
    browser: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    (tmp_path / "collective.toml").write_text(council_toml(scripted))
    monkeypatch.setenv("COLLECTIVE_SERVE_API_KEY", "page-test-key")
    serve = Serve(tmp_path)
    driver = browser
    try:
        driver.get(serve.url + "/")
        wait_for(lambda: driver.find_element(By.CSS_SELECTOR, "body[data-ready='1']"))
        status = driver.find_element(By.ID, "status")
        assert "missing or wrong API key" in status.text
        assert driver.find_element(By.ID, "key-box").get_attribute("open") is not None
        key = driver.find_element(By.ID, "key")
        key.send_keys("not-the-key", Keys.ENTER)
        wait_for(lambda: not status.text.startswith("Trying"), message="the wrong key tried")
        assert "missing or wrong API key" in status.text
        stored = driver.execute_script("return sessionStorage.getItem('collective-key')")
        assert stored == "not-the-key"  # it was tried, and refused
        assert len(driver.find_elements(By.CSS_SELECTOR, "#mode option")) == 1
        key.send_keys("page-test-key", Keys.ENTER)
        wait_for(lambda: status.text.startswith("Ready"), message="the key taken")
        models = driver.find_elements(By.CSS_SELECTOR, "#mode option")
        assert "collective-single" in [m.get_attribute("value") for m in models]
        assert driver.execute_script("return sessionStorage.getItem('collective-key')") == (
            "page-test-key"
        )
        assert driver.execute_script("return localStorage.length") == 0  # not kept past the tab
    finally:
        serve.stop()
