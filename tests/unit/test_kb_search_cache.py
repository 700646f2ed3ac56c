"""The store's cached term statistics never outlive a change to the KB, from any connection."""

from collective.kb.sqlite_store import SqliteKnowledgeStore
from tests.fakes import HashingEmbedder


def test_a_write_through_another_connection_is_seen(tmp_path):
    db = tmp_path / "kb.sqlite"
    (tmp_path / "a.md").write_text("# Nylon\nNylon absorbs water from the air and must be dried.\n")
    (tmp_path / "b.md").write_text("# PETG\nPETG also absorbs water, less than nylon.\n")
    reader, writer = SqliteKnowledgeStore(db), SqliteKnowledgeStore(db)
    writer.add_file(tmp_path / "a.md")
    first = reader.search("absorbs water", 5)
    assert len(first) == 1 and first[0].score == 1.0
    writer.add_file(tmp_path / "b.md")  # another connection: the reader's cache must go
    second = reader.search("absorbs water", 5)
    assert len(second) == 2
    # both chunks contain every query term: stale term statistics would score the new one low
    assert all(chunk.score >= 0.7 for chunk in second)
    writer.remove(source=second[0].source)
    assert len(reader.search("absorbs water", 5)) == 1
    reader.add_file(tmp_path / "b.md")  # its own write clears its own cache too
    again = reader.search("absorbs water", 5)
    assert len(again) == 2 and all(chunk.score >= 0.7 for chunk in again)


def test_the_dense_side_never_answers_from_vectors_another_connection_replaced(tmp_path):
    # The dense side multiplies by the vectors it holds before asking whether the KB changed
    # (so that it does not wait for a search on another thread): a change must still be seen.
    db = tmp_path / "kb.sqlite"
    (tmp_path / "a.md").write_text("# Nylon\nnylon absorbs water\n")
    (tmp_path / "b.md").write_text("# Cedar\ncedar weathers grey outdoors\n")
    reader = SqliteKnowledgeStore(db, embedder=HashingEmbedder())
    writer = SqliteKnowledgeStore(db, embedder=HashingEmbedder())
    writer.add_file(tmp_path / "a.md")
    assert [c.heading for c in reader.dense_search("cedar weathers grey", 2).hits] == ["Nylon"]
    writer.add_file(tmp_path / "b.md")
    assert reader.dense_search("cedar weathers grey", 1).hits[0].heading == "Cedar"
    writer.remove(source=str(tmp_path / "b.md"))
    assert [c.heading for c in reader.dense_search("cedar weathers grey", 2).hits] == ["Nylon"]
