"""The council's graph nodes, one per file: retrieve, plan, specialist, judge, remember."""
