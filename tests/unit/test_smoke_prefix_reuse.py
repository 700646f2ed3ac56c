"""`collective smoke`'s prefix-reuse line: per server, what each member reused of the prefix."""

from collective.commands.smoke import _prefix_reuse
from collective.graph import CouncilContext


def report(shared, reused):
    return {"shared_tokens": shared, "reused_tokens": reused}


def test_each_server_lists_its_members_reuse():
    ctx = CouncilContext(
        k=3,
        specialists=["llama-server:http://a:1", "llama-server:http://a:1", "ollama:m@http://b:2"],
    )
    reports = {
        "specialist-1": report(900, 0),
        "specialist-2": report(900, 880),
        "specialist-3": report(900, None),
    }
    checks = {c.target: c for c in _prefix_reuse(ctx, reports)}
    a = checks["llama-server:http://a:1"]
    assert a.status == "pass"
    assert a.detail == "reused/shared prefix tokens: specialist-1 0/900, specialist-2 880/900"
    b = checks["ollama:m@http://b:2"]
    assert b.status == "warn" and "specialist-3 ?/900" in b.detail and "does not say" in b.detail


def test_members_that_reused_nothing_warn():
    ctx = CouncilContext(k=2, specialists=["llama-server:http://a:1"])
    reports = {"specialist-1": report(900, 0), "specialist-2": report(900, 0)}
    (check,) = _prefix_reuse(ctx, reports)
    assert check.status == "warn" and "nothing reused" in check.detail
