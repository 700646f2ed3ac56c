"""Prompt budgets: counting, plans, trimming, assembly and the per-call budget report.

How much conversation memory an agent may load (its allowance) and the monitor of that usage
live in `collective.memory` (`allowances`, `usage`).
"""
