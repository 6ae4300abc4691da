"""Consolidation: a scope's size against its budget, groups of overlapping lessons, merges."""
