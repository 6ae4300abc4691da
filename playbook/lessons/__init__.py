"""Lessons: writing them (lifecycle, fields, characters, ids), capturing and browsing them."""
