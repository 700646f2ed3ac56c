import pytest

from collective.budget.counting import EstimateCounter, TokenCounter, tiktoken_counter
from collective.budget.trimming import (
    Scored,
    select_chunks,
    share_fairly,
    trim_text,
)

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike".split()


def words(n: int, offset: int = 0) -> str:
    return " ".join(WORDS[(i + offset) % len(WORDS)] for i in range(n))


@pytest.fixture(params=["tiktoken", "estimate"])
def counter(request) -> TokenCounter:
    return tiktoken_counter("cl100k_base") if request.param == "tiktoken" else EstimateCounter()


@pytest.mark.parametrize("keep", ["start", "end", "both"])
def test_trim_text_fits_and_marks_the_cut(counter, keep):
    text = words(400)
    fitted = trim_text(counter, text, 50, keep=keep)
    assert fitted.trimmed
    assert fitted.tokens == counter.count(fitted.text) <= 50
    assert "tokens trimmed" in fitted.text
    if keep in ("start", "both"):
        assert fitted.text.startswith("alpha bravo")
    if keep in ("end", "both"):
        assert fitted.text.rstrip().endswith(text.split()[-1])


def test_trim_text_leaves_fitting_text_alone(counter):
    fitted = trim_text(counter, "short text", 50)
    assert fitted.text == "short text" and not fitted.trimmed


def test_trim_cuts_on_token_boundaries():
    counter = tiktoken_counter("cl100k_base")
    text = words(100)
    kept = counter.head(text, 10)
    assert counter.count(kept) == 10
    assert text.startswith(kept)


def test_select_chunks_keeps_the_best_subset_and_does_not_stop_at_a_misfit():
    counter = tiktoken_counter("cl100k_base")
    big = Scored("big", words(300), 0.9)
    small = Scored("small", words(20, 3), 0.5)
    best = Scored("best", words(60, 5), 0.95)
    fitted = select_chunks(counter, [small, big, best], 150)
    assert fitted.kept == ("best", "small")  # big did not fit; the smaller, worse one did
    assert fitted.text.startswith("[Context trimmed to ")
    assert "showing 2/3 chunks]" in fitted.text
    assert fitted.tokens <= 150
    assert abs(counter.count(fitted.text) - fitted.tokens) <= len(fitted.kept)  # joins


def test_select_chunks_trims_the_best_chunk_rather_than_losing_it():
    counter = tiktoken_counter("cl100k_base")
    fitted = select_chunks(counter, [Scored("huge", words(1000), 1.0), Scored("b", "x", 0.1)], 100)
    assert fitted.kept[0] == "huge"
    assert "tokens trimmed" in fitted.text
    assert fitted.tokens <= 100


def test_select_chunks_without_drops_has_no_header():
    counter = tiktoken_counter("cl100k_base")
    fitted = select_chunks(counter, [Scored("a", "one", 0.2), Scored("b", "two", 0.9)], 100)
    assert fitted.text == "two\n\none" and not fitted.trimmed


def test_each_chunk_is_counted_once():
    class Counting(EstimateCounter):
        calls: list[str] = []

        def _count(self, text):
            self.calls.append(text)
            return super()._count(text)

    counter = Counting()
    chunks = [Scored(str(i), words(30, i), i / 10) for i in range(10)]
    select_chunks(counter, chunks, 200)
    select_chunks(counter, chunks, 150)
    for chunk in chunks:
        assert counter.calls.count(chunk.text) == 1


def test_share_fairly_gives_short_texts_what_they_need_and_the_rest_to_long_ones(counter):
    short, long_a, long_b = words(10), words(500), words(500, 1)
    parts = share_fairly(counter, [short, long_a, long_b], 300)
    assert parts[0].text == short and not parts[0].trimmed
    equal = 300 // 3
    assert parts[1].tokens > equal and parts[2].tokens > equal
    assert sum(p.tokens for p in parts) <= 300
    assert abs(parts[1].tokens - parts[2].tokens) <= 2
