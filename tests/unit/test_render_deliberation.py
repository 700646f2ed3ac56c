from rich.console import Console

from collective.commands.render import render_result


def test_the_result_shows_peer_rankings_and_judge_tool_calls():
    console = Console(record=True, width=120)
    result = {
        "answer": "ASA [KB#mem_1]",
        "citations": [{"id": "mem_1", "source": "asa.md"}],
        "ranking_aggregate": [{"member": "specialist-2", "mean_rank": 1.5, "votes": 2}],
        "tool_calls": [
            {
                "round": 1,
                "name": "kb_get",
                "arguments": {"id": "mem_1"},
                "tokens": 40,
                "result_chars": 180,
            },
        ],
        "timings": {"total_ms": 10.0},
    }
    render_result(console, result, thread_id=None)
    text = console.export_text()
    assert "peer review: specialist-2 mean rank 1.50 (2 votes)" in text
    assert "judge tool call (round 1): kb_get({'id': 'mem_1'}) -> 40 tokens" in text
