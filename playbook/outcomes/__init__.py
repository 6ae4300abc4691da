"""Outcomes: loads and cites, pull requests and their evidence, how much a report weighs."""
