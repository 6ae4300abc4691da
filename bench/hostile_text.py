"""Hostile text: each parser of untrusted text on the inputs forged against it, beside English.

Usage: python bench/hostile_text.py [--size 100000] [--repeat 3] [--show 10]

The inputs are the tests' (tests/hostile_texts.py), which the tests run only under a hang guard:
the parsers' (tests/playbook/test_parsers.py), the tokenizer's texts in every script
(tests/playbook/search/test_text.py) and the runs of invisible characters that
`characters.visible` drops (tests/playbook/lessons/test_invisible_text.py, at twice the size).
Each call is timed (the best of --repeat) at --size characters and at four times that, and so
is the same call on English text of the same length, in the same run: the baseline. A linear
parser takes a small multiple of the baseline, and its time grows with the size to the power 1;
a pattern that backtracks grows to the power 2 or more, and takes seconds to minutes (a call
whose power seems above 1.5 is timed again, three times as often: a busy machine's pauses look
like growth). The tokenizer's cache of words is emptied before every call, so each text is new
to it. The parsers are the tests' PARSERS.

Prints, per family, the slowest calls with their ratio to English and their power, every call
whose power is above 1.5, and the claims the tests made before they stopped timing (each
parser under 0.5 s at 100,000 characters; a forged text under 20 times English plus 50 ms;
`visible` under 1 s at 200,000); ends with one JSON line with the machine.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import machine  # noqa: E402

from playbook.lessons import characters  # noqa: E402
from playbook.search import text as text_module  # noqa: E402
from tests.hostile_texts import ENGLISH, invisible, parser_inputs, repeated, scripts  # noqa: E402
from tests.playbook.test_parsers import PARSERS  # noqa: E402

GROWTH = 4  # the larger size, in times --size
POWER_FLAG = 1.5
TESTS_SIZE = 100_000
# What the tests asserted before they stopped timing, checked here instead (at the tests' size).
CLAIMS = {
    "parsers": "each call under 0.5 s at 100,000 characters",
    "scripts": "each text under 20 x English + 50 ms at 100,000 characters",
    "invisible": "each call under 1 s at 200,000 characters",
}


def seconds(call: Callable[[str], Any], text: str, repeat: int) -> float:
    """The best of ``repeat`` timings of ``call(text)``, each with the tokenizer's cache cold."""
    best = float("inf")
    for _ in range(repeat):
        text_module._identifier_tokens.cache_clear()
        started = time.perf_counter()
        call(text)
        best = min(best, time.perf_counter() - started)
    return best


def power(took: float, grown: float) -> float:
    """The power of the size the time grows with, from ``took`` at a size and ``grown`` at
    GROWTH times it: 1 for linear work, 2 for quadratic."""
    return math.log(max(grown, 1e-9) / max(took, 1e-9)) / math.log(GROWTH)


def family(
    name: str,
    calls: dict[str, Callable[[str], Any]],
    inputs: Callable[[int], dict[str, str]],
    size: int,
    repeat: int,
) -> list[dict[str, Any]]:
    """Every call of ``calls`` on every input at ``size`` and GROWTH times it, beside English."""
    small, large = inputs(size), inputs(GROWTH * size)
    english = repeated(size)(ENGLISH)
    rows = []
    for call_name, call in calls.items():
        call("warm up: é 连 ש")  # the first text outside ASCII reads the Unicode tables
        baseline = seconds(call, english, repeat)
        for input_name, text in small.items():
            took = seconds(call, text, repeat)
            grown = seconds(call, large[input_name], repeat)
            if took > 1e-3 and power(took, grown) > POWER_FLAG:
                took = seconds(call, text, 3 * repeat)
                grown = seconds(call, large[input_name], 3 * repeat)
            rows.append(
                {
                    "family": name,
                    "call": call_name,
                    "input": input_name,
                    "chars": len(text),
                    "ms": round(took * 1000, 2),
                    "english_ms": round(baseline * 1000, 2),
                    "ratio": round(took / baseline, 1) if baseline else None,
                    # Under a millisecond, the growth is mostly noise.
                    "power": round(power(took, grown), 2) if took > 1e-3 else None,
                }
            )
        print(f"  {name}: {call_name} done", file=sys.stderr)
    return rows


def claim_met(name: str, rows: list[dict[str, Any]]) -> bool:
    """Whether ``rows`` of family ``name`` meet what the tests used to assert (see CLAIMS)."""
    if name == "scripts":
        return all(r["ms"] < 20 * r["english_ms"] + 50 for r in rows)
    limit_ms = 500 if name == "parsers" else 1000
    return all(r["ms"] < limit_ms for r in rows)


def main() -> None:
    """Time every family, print the slowest calls and the claims, then one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=TESTS_SIZE, help="characters of each input")
    parser.add_argument("--repeat", type=int, default=3, help="timings per call (the best)")
    parser.add_argument("--show", type=int, default=10, help="slowest calls shown per family")
    args = parser.parse_args()
    families = {
        "parsers": (PARSERS, parser_inputs, args.size),
        "scripts": ({"tokenize": text_module.tokenize}, scripts, args.size),
        "invisible": ({"visible": characters.visible}, invisible, 2 * args.size),
    }
    report: dict[str, Any] = {"bench": "hostile_text", "size": args.size, "families": {}}
    for name, (calls, inputs, size) in families.items():
        rows = family(name, calls, inputs, size, args.repeat)
        slowest = sorted(rows, key=lambda r: -r["ms"])
        grew = [r for r in rows if r["power"] and r["power"] > POWER_FLAG]
        met = claim_met(name, rows) if args.size == TESTS_SIZE else None
        print(f"{name} at {size:,} characters (English baseline in the same run):")
        print(f"  ms        x English  power (at {GROWTH}x)  call / input")
        for r in slowest[: args.show]:
            print(
                f"  {r['ms']:>8.1f}  {r['ratio']!s:>9}  {r['power']!s:>14}  "
                f"{r['call']} / {r['input']!r}"
            )
        for r in grew:
            print(f"  grows to the power {r['power']}: {r['call']} / {r['input']!r}")
        verdict = "n/a at this size" if met is None else ("met" if met else "MISSED")
        print(f"  claim ({CLAIMS[name]}): {verdict}")
        report["families"][name] = {
            "calls": len(rows),
            "slowest": slowest[: args.show],
            "max_ratio": max((r["ratio"] or 0) for r in rows),
            "max_power": max((r["power"] or 0) for r in rows),
            "power_over_1_5": [f"{r['call']} / {r['input']}" for r in grew],
            "claim_met": met,
        }
    report["machine"] = machine.describe(None)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
