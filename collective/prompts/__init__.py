"""Prompt templates, one file per role."""
