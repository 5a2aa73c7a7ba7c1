"""Choosing what to measure: adaptive sampling of a grid (adaptive.py), a tactic search per problem (tactics.py)."""
