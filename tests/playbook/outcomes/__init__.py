"""Tests of playbook.outcomes."""
