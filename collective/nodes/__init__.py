"""The council's graph nodes, one per file.

retrieve, plan, specialist, quorum, review, judge, remember (names in `collective.agents`);
`model_call` is the nodes' side of the budgeted call.
"""
