import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from collective.errors import ConfigError
from collective.memory.allowances import (
    COMPLEXITY_MULTIPLIERS,
    COMPLEXITY_ORDER,
    DEFAULT_PROFILES,
    BudgetProfile,
    ProfileAssignments,
    bump,
    detect_complexity,
    resolve_budget,
    split_budget,
)


@pytest.mark.parametrize(
    ("name", "base", "cap", "weights"),
    [
        ("specialist-narrow", 20_000, 50_000, (0.2, 0.3, 0.5)),
        ("specialist-broad", 35_000, 75_000, (0.25, 0.25, 0.5)),
        ("role-coordinator", 50_000, 100_000, (0.3, 0.2, 0.5)),
        ("role-architect", 75_000, 150_000, (0.35, 0.15, 0.5)),
    ],
)
def test_default_profiles_match_the_issue(name, base, cap, weights):
    profile = DEFAULT_PROFILES[name]
    assert (profile.base_budget, profile.max_budget) == (base, cap)
    assert profile.scope_weights == dict(zip(("global", "agent_recent", "agent_patterns"), weights))


def test_multipliers_and_cap():
    assert COMPLEXITY_MULTIPLIERS == {
        "simple": 0.5,
        "medium": 1.0,
        "complex": 1.5,
        "multi-system": 2.0,
    }
    narrow = DEFAULT_PROFILES["specialist-narrow"]
    assert [narrow.budget_for(c) for c in COMPLEXITY_ORDER] == [10_000, 20_000, 30_000, 40_000]
    tight = BudgetProfile(
        name="tight", base_budget=10_000, max_budget=12_000, scope_weights={"global": 1.0}
    )
    budget = resolve_budget(tight, "", override="multi-system")
    assert budget.budget == 12_000
    assert "capped at max_budget 12000" in budget.reason


@pytest.mark.parametrize(
    ("text", "level", "signal"),
    [
        (
            "Plan a migration from the monolith to microservices across multiple teams",
            "multi-system",
            "microservices",
        ),
        (
            "Wire the API, the database, the queue and the cache together",
            "multi-system",
            "4 systems",
        ),
        (
            "Refactor the retry loop; it has a race condition under load and we must fix it",
            "complex",
            "concurrency",
        ),
        ("What is a mutex?", "simple", "factual lookup"),
        ("Fix the typo in the README heading", "simple", "trivial edit"),
        (" ".join(["word"] * 200), "complex", "long task (200 words)"),
    ],
)
def test_detect_complexity_names_its_signals(text, level, signal):
    found = detect_complexity(text)
    assert found.level == level
    assert signal in found.reason
    assert any(signal in s for s in found.signals)


def test_detect_complexity_defaults_to_medium():
    found = detect_complexity(
        "Write a short story about a lighthouse keeper who finds a bottle on the beach one morning"
    )
    assert found.level == "medium"
    assert "default" in found.reason
    assert found.signals == []


def test_harder_signal_outranks_simple_one():
    found = detect_complexity("Quickly design a caching layer")
    assert found.level == "complex"
    assert "outranks simple" in found.reason


def test_resolve_budget_detects_or_takes_override():
    broad = DEFAULT_PROFILES["specialist-broad"]
    detected = resolve_budget(broad, "What is a mutex?")
    assert (detected.complexity, detected.budget) == ("simple", 17_500)
    assert detected.scope_budgets == {"global": 4375, "agent_recent": 4375, "agent_patterns": 8750}
    forced = resolve_budget(broad, "What is a mutex?", override="complex")
    assert (forced.complexity, forced.budget) == ("complex", 52_500)
    assert forced.reason == "complex: manual override"
    with pytest.raises(ConfigError, match="unknown complexity"):
        resolve_budget(broad, "x", override="huge")  # type: ignore[arg-type]


def test_bump_walks_tiers_up_to_the_cap_and_records_each_step():
    budget = resolve_budget(DEFAULT_PROFILES["role-architect"], "", override="medium")
    once = bump(budget)
    assert (once.complexity, once.budget) == ("complex", 112_500)
    assert once.bumps == ["bumped medium -> complex: budget 75000 -> 112500"]
    assert sum(once.scope_budgets.values()) == 112_500
    twice = bump(once)
    assert (twice.complexity, twice.budget) == ("multi-system", 150_000)
    assert twice.bumps[-1].endswith("(cap)")
    assert twice.at_cap
    refused = bump(twice)
    assert (refused.complexity, refused.budget) == ("multi-system", 150_000)
    assert len(refused.bumps) == 3 and refused.bumps[-1].startswith("no bump")
    assert budget.bumps == []  # bump returns a new budget; the original is unchanged


@given(
    base=st.integers(1, 200_000),
    extra=st.integers(0, 200_000),
    start=st.sampled_from(COMPLEXITY_ORDER),
)
def test_bumps_never_pass_the_cap_and_never_shrink(base, extra, start):
    profile = BudgetProfile(
        name="p", base_budget=base, max_budget=base + extra, scope_weights={"a": 0.3, "b": 0.7}
    )
    budget = resolve_budget(profile, "", override=start)
    for _ in range(5):
        nxt = bump(budget)
        assert budget.budget <= nxt.budget <= profile.max_budget
        assert sum(nxt.scope_budgets.values()) == nxt.budget
        budget = nxt


@given(
    budget=st.integers(0, 10**7),
    weights=st.lists(st.floats(0.01, 10), min_size=1, max_size=6),
)
def test_split_budget_sums_exactly_and_follows_weights(budget, weights):
    named = {f"s{i}": w for i, w in enumerate(weights)}
    parts = split_budget(budget, named)
    assert sum(parts.values()) == budget
    total = sum(weights)
    for scope, w in named.items():
        assert abs(parts[scope] - budget * w / total) < 1


def test_profile_validation():
    with pytest.raises(ValidationError, match="sum to"):
        BudgetProfile(name="x", base_budget=10, max_budget=20, scope_weights={"global": 0.5})
    with pytest.raises(ValidationError, match="below base_budget"):
        BudgetProfile(name="x", base_budget=10, max_budget=5, scope_weights={"global": 1.0})


def test_assignments_from_flat_and_structured_config():
    flat = ProfileAssignments.from_config({"specialist-1": "specialist-narrow"})
    assert flat.profile_for("specialist-1").name == "specialist-narrow"
    assert flat.profile_for("judge").name == "role-architect"  # built-in assignment kept
    assert flat.profile_for("someone-else").name == "specialist-broad"

    structured = ProfileAssignments.from_config(
        {
            "default": "lean",
            "assignments": {"judge": "role-coordinator"},
            "profiles": {
                "lean": {
                    "base_budget": 8_000,
                    "max_budget": 16_000,
                    "scope_weights": {"global": 0.5, "agent_recent": 0.2, "agent_patterns": 0.3},
                }
            },
        }
    )
    assert structured.profile_for("judge").name == "role-coordinator"
    assert structured.profile_for("specialist-2").base_budget == 8_000


@pytest.mark.parametrize(
    "config",
    [
        {"specialist-1": "no-such-profile"},
        {"default": "missing"},
        {"profiles": {"bad": {"base_budget": 10, "max_budget": 20, "scope_weights": {"g": 2.0}}}},
    ],
)
def test_bad_assignment_config_is_a_config_error(config):
    with pytest.raises(ConfigError, match="invalid budget profile configuration"):
        ProfileAssignments.from_config(config)
