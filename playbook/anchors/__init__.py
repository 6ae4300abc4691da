"""Lessons anchored to code: the paths and symbols a lesson is about, checked and matched."""
