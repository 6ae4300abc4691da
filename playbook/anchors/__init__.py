"""Lessons anchored to code: the paths and names a lesson is about, and when they change."""
