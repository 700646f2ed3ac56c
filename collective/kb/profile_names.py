"""The retrieval profile names, defined once (light to import: the CLI's options use them)."""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["PROFILE_NAMES", "AppliedProfile", "Profile"]

AppliedProfile = Literal["lean", "balanced", "deep"]
"""The profiles a retrieval applies (`collective.kb.retrieval.PROFILES` holds their settings)."""

Profile = Literal[AppliedProfile, "auto"]
"""A profile a user may ask for: one of the three, or `auto` (chosen per query)."""

PROFILE_NAMES: tuple[str, ...] = get_args(Profile)
"""`lean`, `balanced`, `deep`, `auto`."""
