"""Any LangChain retriever as a knowledge store, with real langchain_core classes."""

from __future__ import annotations

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore

from collective.kb.citations import format_chunk, parse_citations
from collective.kb.retrieval import retrieve
from collective.kb.retriever_adapter import RetrieverKnowledgeStore
from collective.kb.store import KnowledgeStore, chunk_id

DOCS = [
    Document(
        page_content="ASA resists UV and keeps its colour outdoors.",
        metadata={"source": "asa.md", "tags": "filament, outdoor"},
    ),
    Document(
        page_content="PLA softens near 60 °C and sags in a hot car.",
        metadata={"source": "pla.md", "tags": ["filament"], "id": "mem_pla0000000000001"},
    ),
    Document(page_content="Editorial note: figures are typical.", metadata={"tags": ["meta"]}),
    Document(page_content="Nylon must be dried before printing.", metadata={"score": 0.42}),
]


class KeywordRetriever(BaseRetriever):
    """A real BaseRetriever: documents sharing words with the query, most overlap first."""

    docs: list[Document]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        words = set(query.lower().split())
        scored = [
            (len(words & set(d.page_content.lower().split())), i) for i, d in enumerate(self.docs)
        ]
        return [self.docs[i] for n, i in sorted(scored, key=lambda x: (-x[0], x[1])) if n]


def test_documents_become_chunks_with_ids_tags_and_scores() -> None:
    store = RetrieverKnowledgeStore(KeywordRetriever(docs=DOCS))
    assert isinstance(store, KnowledgeStore)
    hits = store.search("asa outdoors resists uv", 5)
    assert hits[0].id == chunk_id(DOCS[0].page_content, "asa.md")
    assert hits[0].tags == ("filament", "outdoor") and hits[0].source == "asa.md"
    assert hits[0].score == 1.0
    pla = store.search("pla hot car", 5)[0]
    assert pla.id == chunk_id(DOCS[1].page_content, "pla.md")  # a supplied id is not trusted
    nylon = store.search("nylon must be dried", 5)[0]
    assert nylon.score == 0.42  # a retriever-supplied score wins over the rank
    assert nylon.source == "langchain:KeywordRetriever"
    assert store.get(pla.id) is not None and store.get(pla.id).score == 0.0  # type: ignore[union-attr]
    assert store.get("mem_never_seen") is None
    assert store.search("", 5) == [] and store.search("asa", 0) == []


def test_retrieve_runs_profiles_over_a_vector_store_retriever() -> None:
    vectors = InMemoryVectorStore(DeterministicFakeEmbedding(size=64))
    vectors.add_documents(DOCS)
    store = RetrieverKnowledgeStore(vectors.as_retriever(search_kwargs={"k": 4}))
    first = retrieve(store, "outdoor filament for a hot car", "deep")
    second = retrieve(store, "outdoor filament for a hot car", "deep")
    assert [c.id for c in first.injected] == [c.id for c in second.injected]
    assert {c.source for c in first.injected} <= {
        "asa.md",
        "pla.md",
        "langchain:VectorStoreRetriever",
    }
    assert first.candidates == 4 and len(first.rewrites) >= 3
    shown = format_chunk(first.injected[0])
    assert shown.startswith(f"[KB#{first.injected[0].id}] [Score: ")


def test_a_document_cannot_choose_its_id() -> None:
    """A `mem_`-prefixed id from the retriever is not trusted (issue 11, point 5)."""
    real = chunk_id(DOCS[0].page_content, "asa.md")
    forged = [
        Document(page_content="grouped note", metadata={"id": "mem_a, mem_b", "source": "x.md"}),
        Document(page_content="borrowed note", metadata={"id": real, "source": "y.md"}),
        Document(page_content="document note", id="mem_c]", metadata={"source": "z.md"}),
    ]
    store = RetrieverKnowledgeStore(KeywordRetriever(docs=[DOCS[0], *forged]))
    hits = store.search("asa grouped borrowed document", 10)
    assert len({c.id for c in hits}) == 4  # the borrowed id did not merge two chunks
    for chunk in hits:
        assert chunk.id == chunk_id(chunk.text, chunk.source)
        assert parse_citations(format_chunk(chunk)) == [chunk.id]
    assert store.get(real).text == DOCS[0].page_content  # type: ignore[union-attr]
