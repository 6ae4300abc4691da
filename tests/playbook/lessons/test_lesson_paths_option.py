"""`/lesson --paths GLOBS TEXT`: the anchors a lesson's writer gives in the command."""

from __future__ import annotations

import pytest

from playbook.lessons.capture import Command, commands_in

TEXT = "Take the orders row lock once per transaction"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (f"/lesson {TEXT}", Command("lesson", text=TEXT)),
        (f"/lesson --paths orders/** {TEXT}", Command("lesson", text=TEXT, paths=["orders/**"])),
        (
            f"/lesson --paths=./orders/,web/app.py {TEXT}",
            Command("lesson", text=TEXT, paths=["orders/**", "web/app.py"]),
        ),
        (f"/lesson --PATHS orders/** {TEXT}", Command("lesson", text=TEXT, paths=["orders/**"])),
        # Only at the start: a lesson may mention the option in its text.
        (f"/lesson {TEXT} --paths x", Command("lesson", text=f"{TEXT} --paths x")),
        ("/lesson --paths orders/**", Command("lesson", problem="write the lesson after /lesson")),
        (
            f"/lesson --paths /etc/passwd {TEXT}",
            Command(
                "lesson",
                problem="--paths '/etc/passwd' is absolute; write it relative to the repository",
            ),
        ),
    ],
)
def test_the_option(line: str, expected: Command) -> None:
    assert commands_in(line) == [expected]


def test_a_huge_option_is_refused_in_one_sentence() -> None:
    globs = ",".join(f"p{n}" for n in range(20_000))
    [command] = commands_in(f"/lesson --paths {globs} {TEXT}")
    assert command.problem is not None and command.problem.startswith("--paths has")
