"""Tests of webhooks.ui.browser."""
