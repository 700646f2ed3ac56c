"""The council graph.

`graph` is the compiled default (no checkpointer: LangGraph's server and embedding apps supply
their own); `build_graph(checkpointer=..., store=...)` compiles one like any LangGraph app;
`council_node(...)` mounts it in a parent graph with its own state and context.
"""

from collective.graph.builder import build_graph, council_node
from collective.graph.context import CouncilContext, council_context
from collective.graph.state import CouncilInput, CouncilOutput, CouncilState

__all__ = [
    "CouncilContext",
    "CouncilInput",
    "CouncilOutput",
    "CouncilState",
    "build_graph",
    "council_context",
    "council_node",
    "graph",
]

graph = build_graph()
