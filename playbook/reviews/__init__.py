"""Learning from review feedback: the rules reviewers give, found without a model."""

from __future__ import annotations

from typing import Any

__all__ = ["Rule", "cue_of", "quote_found", "rules_in"]


def __getattr__(name: str) -> Any:
    """The rule finder's names, loaded on first use: the package is also imported by the
    settings (for `capture_from`), which must not pay for the Markdown parser."""
    if name in __all__:
        from playbook.reviews import rules

        return getattr(rules, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
