"""The council graph.

`graph` is the compiled default (no checkpointer: LangGraph's server and embedding apps supply
their own); `build_graph(checkpointer=..., store=...)` compiles one like any LangGraph app;
`council_node(...)` mounts it in a parent graph with its own state and context.

The three load on first use: the nodes read this package's schemas (`context`, `state`), so
importing a node or the settings must not import the builder that imports the nodes (that was
an import cycle: `import collective.nodes.plan` failed on its own).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from collective.graph.context import CouncilContext, council_context
from collective.graph.state import CouncilInput, CouncilOutput, CouncilState

if TYPE_CHECKING:
    from langgraph.graph.state import CompiledStateGraph

    from collective.graph.builder import build_graph, council_node

    graph: CompiledStateGraph

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


def __getattr__(name: str) -> Any:
    """`build_graph`, `council_node` and `graph` (`builder.graph`), loaded when first asked for."""
    if name not in ("build_graph", "council_node", "graph"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from collective.graph import builder

    value = getattr(builder, name)
    globals()[name] = value
    return value
