"""The council graph."""
