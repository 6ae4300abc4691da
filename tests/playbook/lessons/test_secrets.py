"""The credential rule: each kind found with its place and never its value, ordinary lesson text
left alone, and every write of a lesson refused through `check_fields`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, update

from playbook.db import transaction
from playbook.lessons import bulk, checks, credential_scan, lifecycle, secrets
from playbook.lessons.fields import FieldProblem
from playbook.models import Bullet
from tests.secret_samples import IDS, ORDINARY, SAMPLES, Sample, counts


@pytest.mark.parametrize("sample", SAMPLES, ids=IDS)
def test_each_kind_is_found_with_its_place(sample: Sample) -> None:
    [finding] = secrets.find(sample.text)
    assert (finding.kind, finding.label) == (sample.kind, sample.what)
    line = sample.text.splitlines()[finding.line - 1]
    # The span covers the value (a key block: its first line), 1-based and inclusive.
    assert line[finding.start - 1 : finding.end] == sample.value
    assert sample.value not in finding.describe() and sample.value not in repr(finding)


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_lesson_text_holds_no_credential(text: str) -> None:
    assert secrets.find(text) == []
    assert checks.check_fields({"text": text})["text"] == text


@pytest.mark.parametrize(
    "text",
    [
        "password=xxxxxxxxxxxx",
        "sk_live_xxxxxxxxxxxxxxxxxxxxxxxx",
        "ghp_" + "*" * 36,
        "token: ${{ secrets.GITHUB_TOKEN }}",
        "Authorization: Bearer <token>",
        "https://user:${PASS}@host/x and https://user:<password>@host/y",
        "client_secret = settings.CLIENT_SECRET",
        "password = users.getProperty(user);",
    ],
)
def test_placeholders_and_references_are_no_credentials(text: str) -> None:
    assert secrets.find(text) == []


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("export GITHUB_TOKEN=Zq8r2Lk9Xw3Mv7Nb5Tc1", "a credential assigned to GITHUB_TOKEN"),
        ("spring.datasource.password: hU7nt3r-9xQ2zk", "a credential assigned to spring."),
        ("SECRET_KEY = 'django-insecure-8h$k2x9q!m3zr7w0p'", "a credential assigned to SECRET"),
        ('{"clientSecret": "f3Kq9ZpL2xWm8RtY"}', "a credential assigned to clientSecret"),
        ("curl -H 'Authorization: Bearer abc123XYZ789def456GHI'", "a bearer token"),
        ("-----BEGIN ENCRYPTED PRIVATE KEY-----", "a private key"),
    ],
)
def test_assignments_headers_and_blocks_the_library_leaves_out(text: str, what: str) -> None:
    [finding] = secrets.find(text)
    assert finding.label.startswith(what)


def test_two_credentials_are_counted_and_the_first_named() -> None:
    text = f"{SAMPLES[0].text}\nand {SAMPLES[1].text}"
    found = secrets.find(text)
    assert [f.line for f in found] == [1, 2]
    assert secrets.summary(found) == f"{found[0].describe()} and 1 more credential"


@pytest.mark.parametrize("sample", SAMPLES, ids=IDS)
def test_check_fields_refuses_text_naming_kind_and_place(sample: Sample) -> None:
    with pytest.raises(FieldProblem) as refused:
        checks.check_fields({"text": sample.text, "learned_from": "CTMS-1"})
    assert refused.value.field == "text"
    [finding] = secrets.find(sample.text)
    assert str(refused.value) == (
        f"text: holds {finding.describe()}; remove the credential "
        "(rotate it if it was real) and try again"
    )
    assert sample.value not in str(refused.value)


def test_a_source_url_with_a_password_is_refused() -> None:
    with pytest.raises(FieldProblem) as refused:
        checks.check_fields({"source_url": "https://bot:Zq8r2Lk9Xw3M@ci.example.com/job/7"})
    assert refused.value.field == "source_url" and "a password in a URL" in str(refused.value)
    assert "Zq8r2Lk9Xw3M" not in str(refused.value)
    fine = "https://github.com/acme/api/pull/7#issuecomment-12"
    assert checks.check_fields({"source_url": fine}) == {"source_url": fine}


def test_add_edit_and_import_write_nothing(engine: Engine) -> None:
    sample = SAMPLES[1]
    with transaction(engine) as session:
        lifecycle.add(session, "Keep this wording", learned_from="CTMS-1", actor="t")
    before = counts(engine)
    with transaction(engine) as session:
        with pytest.raises(FieldProblem):
            lifecycle.add(session, sample.text, learned_from="CTMS-2", actor="t")
        with pytest.raises(FieldProblem):
            lifecycle.edit(session, "pb-1", actor="t", text=sample.text)
        entries = [{"text": "A fine lesson", "learned_from": "C-1"}]
        with pytest.raises(FieldProblem):
            bulk.put_many(
                session, [*entries, {"text": sample.text, "learned_from": "C-2"}], actor="t"
            )
    assert counts(engine) == before
    with transaction(engine) as session:
        assert session.get(Bullet, "pb-1").text == "Keep this wording"


def test_stored_rows_holding_credentials_are_listed_by_status(engine: Engine) -> None:
    with transaction(engine) as session:
        for text in ("Retry with a key", "Close the HTTP client", "Pin chromium in CI"):
            lifecycle.add(session, text, learned_from="C-1", actor="t")
        # Rows from before the rule: written straight to the database.
        session.execute(update(Bullet).where(Bullet.id == "pb-1").values(text=SAMPLES[0].text))
        session.execute(
            update(Bullet)
            .where(Bullet.id == "pb-3")
            .values(status="deprecated", source_url=f"https://a:{SAMPLES[6].value}@h/x")
        )
    with transaction(engine) as session:
        found = list(credential_scan.holding(session))
    assert [(h.bullet_id, h.status, h.field) for h in found] == [
        ("pb-1", "active", "text"),
        ("pb-3", "deprecated", "source_url"),
    ]
    dumped = json.dumps([h.as_dict() for h in found])
    assert SAMPLES[0].value not in dumped and SAMPLES[6].value not in dumped
    assert found[0].as_dict()["findings"][0]["kind"] == "aws_access_key"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_any_text_is_scanned_without_error_and_spans_fit_it(text: str) -> None:
    lines = text.splitlines()
    for finding in secrets.find(text):
        assert 1 <= finding.start <= finding.end <= len(lines[finding.line - 1])


@pytest.mark.slow
def test_hostile_long_lines_are_scanned() -> None:
    # The library's keyword patterns would take minutes on the first; windows bound the rest.
    for text in ("password" * 12_500, "eyJ" * 33_000, "xoxb-1-" * 14_000, "a=" * 50_000):
        assert isinstance(secrets.find(text), list)


def test_the_library_still_names_its_findings_as_we_expect() -> None:
    """An upgrade of detect-secrets that renames a plugin's findings fails here, not silently."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    by_class = {cls.__name__: t for t, cls in get_mapping_from_secret_type_to_class().items()}
    for name, (secret_type, _, _) in secrets._PLUGINS.items():
        assert by_class[name] == secret_type


def test_scanning_leaves_the_process_warnings_as_they_were() -> None:
    shown = warnings.showwarning
    secrets.find(SAMPLES[0].text)
    assert warnings.showwarning is shown


def test_every_plugin_in_use_has_a_cue() -> None:
    assert set(secrets._LIBRARY_CUES) == set(secrets._PLUGINS)


def _library_patterns() -> list[tuple[str, str]]:
    """(plugin, pattern) for every pattern of every plugin we use, as the installed library has
    them: an upgrade that adds or changes one is checked against the cues too."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    classes = {cls.__name__: cls for cls in get_mapping_from_secret_type_to_class().values()}
    return [(name, regex.pattern) for name in secrets._PLUGINS for regex in classes[name].denylist]


@pytest.mark.parametrize(("plugin", "pattern"), _library_patterns())
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_whatever_a_library_pattern_matches_holds_a_cue(
    plugin: str, pattern: str, data: st.DataObject
) -> None:
    """Lines without a cue are not given to the library: that is safe only if every string its
    patterns match holds one."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    classes = {cls.__name__: cls for cls in get_mapping_from_secret_type_to_class().values()}
    [regex] = [r for r in classes[plugin].denylist if r.pattern == pattern]
    text = data.draw(st.from_regex(regex))
    assert re.search(regex, text)
    assert secrets._may_hold_library_credential(text), f"{plugin} matches {text!r} without a cue"


@pytest.mark.slow
def test_ordinary_prose_never_loads_the_library() -> None:
    # Prose without a URL or a 40-character run (a commit sha): what most lessons are.
    prose = [t for t in ORDINARY if "://" not in t and not re.search("[0-9a-f]{40}", t)]
    assert len(prose) >= 5
    probe = (
        "import sys; from playbook.lessons import secrets;"
        f"assert all(secrets.find(t) == [] for t in {prose!r});"
        "print('detect_secrets' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "False"


@pytest.mark.slow
def test_the_scanner_is_imported_only_when_text_is_checked() -> None:
    probe = (
        "import sys; import playbook.lessons.checks, bot.cli.search;"
        "print('detect_secrets' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "False"


def test_undoing_the_edit_that_took_a_credential_out_is_refused(engine: Engine) -> None:
    with transaction(engine) as session:
        lifecycle.add(session, "Call the API as the bot", learned_from="C-1", actor="t")
        # A lesson from before the rule, then the edit that cleaned it.
        session.execute(update(Bullet).where(Bullet.id == "pb-1").values(text=SAMPLES[1].text))
        lifecycle.edit(session, "pb-1", actor="t", text="Call the API as the bot, never")
        cleaning = lifecycle.history(session, "pb-1")[-1].id
    with transaction(engine) as session, pytest.raises(FieldProblem) as refused:
        lifecycle.revert(session, "pb-1", cleaning, actor="t")
    assert refused.value.field == "text" and SAMPLES[1].value not in str(refused.value)
    with transaction(engine) as session:
        assert session.get(Bullet, "pb-1").text == "Call the API as the bot, never"


def test_a_url_password_is_placed_on_the_password_not_the_same_word_elsewhere() -> None:
    text = "curl -XPOST http://admin:admin@localhost:8161/api/admin/queue"
    [finding] = secrets.find(text)
    assert (finding.kind, finding.start, finding.end) == ("url_password", 26, 30)


def test_a_refusal_repeats_a_name_only_when_it_is_made_of_words() -> None:
    token = SAMPLES[1].value
    for text in (f"{token}_token=Zq8r2Lk9Xw3Mv7Nb5Tc1", "db2_password=Zq8r2Lk9Xw3Mv7Nb5Tc1"):
        found = secrets.find(text)
        assert found[-1].label == "a credential assigned to a password, secret or token name"
        assert token not in json.dumps([f.label for f in found])


@pytest.mark.parametrize(
    "text",
    [
        "db at postgres://admin:hunter2secret@db.example.com/x",
        "password = 'MySecretPass1x'",
    ],
)
def test_a_password_holding_a_filler_word_is_still_a_password(text: str) -> None:
    assert [finding.kind for finding in secrets.find(text)] in (
        ["url_password"],
        ["assigned_secret"],
    )
