"""Token budgets: counting, plans, trimming, assembly, reports, agent profiles and the monitor."""
