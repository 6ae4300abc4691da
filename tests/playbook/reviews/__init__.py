"""Tests of playbook.reviews."""
