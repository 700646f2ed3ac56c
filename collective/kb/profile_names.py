"""The retrieval profile names, defined once (light to import: the CLI's options use them)."""

from __future__ import annotations

from typing import Literal

__all__ = ["AppliedProfile", "Profile"]

AppliedProfile = Literal["lean", "balanced", "deep"]
"""The profiles a retrieval applies (`collective.kb.retrieval.PROFILES` holds their settings)."""

Profile = Literal[AppliedProfile, "auto"]
"""A profile a user may ask for: one of the three, or `auto` (chosen per query)."""
