"""Tests of playbook.search."""
