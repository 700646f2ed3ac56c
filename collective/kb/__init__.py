"""The knowledge base: stores, tagged context, citations and retrieval profiles."""
