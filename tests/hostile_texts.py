"""Texts forged to make a parser of untrusted text backtrack, at any size: the tests run them
at SIZE under a hang guard, and bench/hostile_text.py times them beside English text."""

from __future__ import annotations

from collections.abc import Callable

SIZE = 100_000
# English text, the baseline a forged text is measured against.
ENGLISH = "Retry the webhook with an idempotency key "


def repeated(size: int) -> Callable[..., str]:
    """``run(unit, head, tail)``: ``head``, ``unit`` repeated, then ``tail``, about ``size``
    characters in all."""

    def run(unit: str, head: str = "", tail: str = "") -> str:
        return head + unit * ((size - len(head) - len(tail)) // len(unit)) + tail

    return run


def parser_inputs(size: int = SIZE) -> dict[str, str]:
    r"""Inputs that made a pattern of the parsers backtrack, by name, about ``size`` characters:
    an opener with no closer, repeated; long runs that two adjacent quantifiers can split many
    ways; runs that `^\s*` reads again from every line start."""
    run = repeated(size)
    return {
        "[": run("["),
        "![": run("!["),
        "[~": run("[~"),
        "{code:": run("{code:"),
        "{code": run("{code"),
        "<!--": run("<!--"),
        "<": run("<"),
        "(": run("("),
        "[a](": run("[a]("),
        "[a]": run("[a]"),
        "[a|": run("[a|"),
        "]": run("]", head="["),
        "spaces": run(" "),
        "spaces then x": run(" ", tail="x"),
        "newlines": run("\n"),
        "space newline": run(" \n"),
        "tabs": run("\t"),
        "line separators": run("\u2028"),
        "fixes spaces": run(" ", head="fixes"),
        "closes spaces colon": run(" ", head="closes", tail=":"),
        "fixes owner/repo": run("a", head="fixes a/"),
        "fixes key": run("1", head="Fixes AB-", tail="x"),
        "a.": run("a."),
        "a-": run("a-"),
        "a/": run("a/"),
        "upper case": run("A"),
        "upper case key": run("A", tail="-"),
        "key digits": run("1", head="AB-", tail="x"),
        "pb- digits": run("1", head="pb-", tail="x"),
        "** spaces": run(" ", head="**"),
        "lessons spaces": run(" ", head="## Lessons", tail=":x"),
        "/lesson spaces": run(" ", head="/lesson"),
        "/playbook spaces": run(" ", head="\n/playbook"),
        "- [ ] ": run("- [ ] "),
        "item digits": run("1", tail="x"),
        "#": run("#"),
        "# spaces": run(" ", head="#"),
        "h1. lines": run("\n", tail="h1."),
        "fence spaces": run(" ", head="```", tail="x"),
        "@": run("@"),
        "http://": run("http://"),
        "www.": run("www."),
        "camel case": run("aB"),
        "one long word": run("a"),
        "words": run("retry the webhook "),
        "a lessons section": run("- Hold no row lock across an HTTP call\n", head="## Lessons\n"),
        "commands": run("/playbook approve pb-12 fine\n"),
    }


A = "\u0430"  # the Cyrillic letter that looks like the Latin one


def scripts(size: int = SIZE) -> dict[str, str]:
    """Texts that make the tokenizer the most work per character, by name, about ``size`` long:
    a script change at every character, characters NFKC multiplies, words of one letter between
    separators, marks on every letter."""
    run = repeated(size)
    return {
        "han": run("连"),
        "latin and han": run("a连"),
        "latin and cyrillic": run(f"a{A}"),
        "every script": run(f"a连{A}بש의タ"),
        "dotted scripts": run(f"a.连.{A}."),
        "camel case and cyrillic": run(f"aB{A}"),
        "cyrillic letters and dots": run(f"{A}."),
        "cyrillic letters and underscores": run(f"{A}_"),
        "one cyrillic word": run(A),
        "one arabic word with harakat": run("بِ"),
        "ligature of 18 letters": run("\ufdfa"),
        "squared katakana": run("\u3300"),
        "combining accents": run("a\u0301"),
        "lone marks": run("\u0301"),
        "breves on i": run("и\u0306"),
        "hebrew prefixes": run("והשרת "),
        "thai": run("เชื่"),
        "zero-width spaces": run("a\u200b"),
        "arabic-indic digits": run("٣"),
    }


ZWJ, ZWNJ, RLO = "\u200d", "\u200c", "\u202e"


def invisible(size: int = 2 * SIZE) -> dict[str, str]:
    """Runs of joiners, direction overrides and right-to-left letters for
    ``characters.visible``, by name, about ``size`` characters."""
    run = repeated(size)
    return {
        "joiners": run(ZWJ),
        "latin joined": run(f"a{ZWJ}"),
        "hebrew joined": run(f"ש{ZWJ}"),
        "overrides": run(RLO),
        "hebrew non-joined": run(f"{ZWNJ}ש"),
        "hebrew": run("ש"),
    }
