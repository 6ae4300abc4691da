"""Tests of playbook.transfer."""
