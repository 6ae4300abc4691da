"""Tests of playbook.lessons."""
