"""Tests of playbook.experiment."""
