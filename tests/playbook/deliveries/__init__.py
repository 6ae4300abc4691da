"""Tests of playbook.deliveries."""
