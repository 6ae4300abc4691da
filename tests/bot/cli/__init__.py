"""Tests of bot.cli."""
