"""The council graph.

`graph` is the compiled default (no checkpointer: LangGraph's server and embedding apps supply
their own); `build_graph(checkpointer=..., store=...)` compiles one like any LangGraph app.
"""

from collective.graph.builder import build_graph
from collective.graph.context import CouncilContext
from collective.graph.state import CouncilInput, CouncilOutput, CouncilState

__all__ = [
    "CouncilContext",
    "CouncilInput",
    "CouncilOutput",
    "CouncilState",
    "build_graph",
    "graph",
]

graph = build_graph()
