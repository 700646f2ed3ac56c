"""Sub-commands of the `collective` CLI, one module each, mounted by `collective.cli`."""
