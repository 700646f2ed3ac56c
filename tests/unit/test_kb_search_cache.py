"""The store's cached term statistics never outlive a change to the KB, from any connection."""

from collective.kb.sqlite_store import SqliteKnowledgeStore


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
