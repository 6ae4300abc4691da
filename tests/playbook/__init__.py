"""Tests of playbook."""
