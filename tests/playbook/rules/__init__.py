"""Tests of playbook.rules."""
