"""Tests of bot.handlers."""
