"""Tests of webhooks."""
