"""Retrieval profile and evidence mode names, defined once (light: the CLI's options use them)."""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["EVIDENCE_MODES", "PROFILE_NAMES", "AppliedProfile", "Evidence", "Profile"]

AppliedProfile = Literal["lean", "balanced", "deep"]
"""The profiles a retrieval applies (`collective.kb.retrieval.PROFILES` holds their settings)."""

Profile = Literal[AppliedProfile, "auto"]
"""A profile a user may ask for: one of the three, or `auto` (chosen per query)."""

PROFILE_NAMES: tuple[str, ...] = get_args(Profile)
"""`lean`, `balanced`, `deep`, `auto`."""

Evidence = Literal["shared", "split", "auto"]
"""How council members read the chunks (`collective.kb.evidence`): the same ones, a shared head
plus a slice each, or split when they do not fit one member's KB section."""

EVIDENCE_MODES: tuple[str, ...] = get_args(Evidence)
"""`shared`, `split`, `auto`."""
