"""collective: a local multi-model council as a LangGraph state machine.

Every model call is assembled under an explicit token budget that fits the context the model
server really has. Nothing heavy is imported here: the CLI's start-up cost depends on it.
"""

__version__ = "0.1.0"
