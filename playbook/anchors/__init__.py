"""Lessons anchored to code: the repository paths (globs) and symbols a lesson is about."""
