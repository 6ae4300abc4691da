"""Learning from review feedback: the rules reviewers give, found without a model."""

from playbook.reviews.rules import Rule, cue_of, quote_found, rules_in

__all__ = ["Rule", "cue_of", "quote_found", "rules_in"]
