"""Write the generated reference pages of docs/reference/ from the code (`--check` compares).

python docs/gen/reference.py          # rewrite the pages
python docs/gen/reference.py --check  # exit 1, naming each page, when one is out of date
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REFERENCE = HERE.parent / "reference"
# This checkout's code, before any other install of it the interpreter may know of (an
# editable install of another worktree): the pages describe the code beside them.
sys.path[:0] = [str(HERE.parents[1]), str(HERE)]

import api_page  # noqa: E402
import cli_page  # noqa: E402
import mcp_page  # noqa: E402
import repo_settings_page  # noqa: E402
import settings_page  # noqa: E402


def pages() -> dict[str, str]:
    """Each generated file's name under docs/reference/, with its text."""
    from playbook.repos.schema import schema_text

    api, openapi = api_page.render()
    return {
        "settings.md": settings_page.render(),
        "cli.md": cli_page.render(),
        "api.md": api,
        "openapi.json": openapi,
        "mcp.md": mcp_page.render(),
        "repo-settings.md": repo_settings_page.render(),
        # The settings file's schema where editors can be pointed at it, as the package ships it.
        "playbook-bot.schema.json": schema_text(),
    }


def stale(generated: dict[str, str]) -> list[str]:
    """The names whose committed text differs from ``generated``."""
    return [
        name
        for name, text in generated.items()
        if not (REFERENCE / name).is_file()
        or (REFERENCE / name).read_text(encoding="utf-8") != text
    ]


def main(argv: list[str]) -> int:
    """Rewrite the pages, or with --check say which are out of date."""
    generated = pages()
    if "--check" in argv:
        for name in stale(generated):
            print(f"docs/reference/{name} is out of date: run python docs/gen/reference.py")
        return 1 if stale(generated) else 0
    REFERENCE.mkdir(exist_ok=True)
    for name, text in generated.items():
        (REFERENCE / name).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
