"""The tokenizer and query synthesis for engineering text."""

from __future__ import annotations

from playbook.text import Ticket, query_tokens, synthesize_query, tokenize


def test_identifiers_are_kept_whole_and_split() -> None:
    assert tokenize("getUserById") == ["getuserbyid", "get", "user", "id"]
    assert tokenize("user_id") == ["user_id", "user", "id"]
    tokens = tokenize("ConnectionTimeoutException")
    assert tokens == ["connectiontimeoutexception", "connection", "timeout", "exception"]
    assert tokenize("HTTPServer") == ["httpserver", "http", "server"]


def test_paths_and_dotted_names() -> None:
    dotted = tokenize("org.apache.zookeeper.ClientCnxn")
    assert dotted[0] == "org.apache.zookeeper.clientcnxn"
    assert {"org", "apache", "zookeeper", "clientcnxn", "client", "cnxn"} <= set(dotted)
    path = tokenize("src/main/java/Foo.java")
    assert path[0] == "src/main/java/foo.java" and {"src", "main", "java", "foo"} <= set(path)


def test_stop_words_and_noise_are_dropped() -> None:
    assert tokenize("The broker is NOT starting after 20231105123456") == ["broker", "starting"]


def test_markup_is_ignored_but_words_kept() -> None:
    wiki = (
        "h2. Steps\n{code:java}client.close();{code} "
        "see [the docs|http://x.org/a] *bold* {{mono}} [~dana]"
    )
    assert tokenize(wiki) == [
        "steps",
        "client.close",
        "client",
        "close",
        "see",
        "docs",
        "bold",
        "mono",
    ]
    markdown = (
        "## Steps\n```python\nretry()\n```\nsee [docs](https://x.org) and <b>html</b> `inline`"
    )
    assert tokenize(markdown) == ["steps", "retry", "see", "docs", "html", "inline"]


def test_jira_ticket_without_labels_and_with_null_description() -> None:
    ticket = Ticket.from_jira(
        {
            "key": "CTMS-1",
            "fields": {
                "summary": "Checkout fails",
                "description": None,
                "project": {"key": "CTMS"},
            },
        }
    )
    assert (ticket.key, ticket.description, ticket.labels, ticket.scope) == (
        "CTMS-1",
        None,
        (),
        "CTMS",
    )
    components = Ticket.from_jira(
        {
            "key": "AMQ-9",
            "fields": {"summary": "x", "labels": ["a"], "components": [{"name": "Broker"}]},
        }
    )
    assert components.labels == ("a", "Broker") and components.scope == "AMQ"


def test_github_ticket() -> None:
    ticket = Ticket.from_github(
        {"number": 12, "title": "Crash", "body": None, "labels": [{"name": "bug"}]}, "a/b"
    )
    assert (ticket.key, ticket.summary, ticket.labels, ticket.scope) == (
        "a/b#12",
        "Crash",
        ("bug",),
        "a/b",
    )


def test_description_is_cut_at_500_characters() -> None:
    ticket = Ticket(
        key="A-1",
        summary="Summary words",
        description="x" * 495 + " tail" + " hidden" * 50,
        labels=("lbl",),
    )
    query = synthesize_query(ticket)
    assert "tail" in query and "hidden" not in query and query.endswith("lbl")
    tokens = query_tokens(ticket)
    assert "hidden" not in tokens
    assert tokens.count("summary") == 2 and tokens.count("lbl") == 2  # weighted up
