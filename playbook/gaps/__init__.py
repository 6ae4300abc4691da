"""Gaps: recurring tickets the playbook had no lesson for, grouped so one lesson can cover them."""
