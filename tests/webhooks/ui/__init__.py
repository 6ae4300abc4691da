"""Tests of webhooks.ui."""
