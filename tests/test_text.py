"""The tokenizer and query synthesis for engineering text."""

from __future__ import annotations

from playbook.text import Ticket, bullet_tokens, query_tokens, synthesize_query, tokenize


def test_identifiers_are_kept_whole_and_split() -> None:
    assert tokenize("getUserById") == ["getuserbyid", "get", "user", "id"]
    assert tokenize("user_id") == ["user_id", "user", "id"]
    # Words are stemmed, so "connection" and "connecting" meet at "connect".
    tokens = tokenize("ConnectionTimeoutException")
    assert tokens == ["connectiontimeoutexcept", "connect", "timeout", "except"]
    assert tokenize("HTTPServer") == ["httpserver", "http", "server"]
    assert tokenize("failing") == tokenize("fails") == ["fail"]


def test_paths_and_dotted_names() -> None:
    dotted = tokenize("org.apache.zookeeper.ClientCnxn")
    assert dotted[0] == "org.apache.zookeeper.clientcnxn"
    assert {"org", "zookeep", "client", "cnxn"} <= set(dotted)
    path = tokenize("src/main/java/Foo.java")
    assert path[0] == "src/main/java/foo.java" and {"src", "main", "java", "foo"} <= set(path)


def test_stop_words_and_noise_are_dropped() -> None:
    assert tokenize("The broker is NOT starting after 20231105123456") == ["broker", "start"]
    assert tokenize("Steps to reproduce: expected result") == []


def test_markup_is_ignored_but_words_kept() -> None:
    wiki = (
        "h2. Steps\n{code:java}client.close();{code} "
        "see [the docs|http://x.org/a] *bold* {{mono}} [~dana]"
    )
    assert tokenize(wiki) == ["client.close", "client", "close", "doc", "bold", "mono"]
    markdown = (
        "## Steps\n```python\nretry()\n```\nsee [docs](https://x.org) and <b>html</b> `inline`"
    )
    assert tokenize(markdown) == ["retri", "doc", "html", "inlin"]


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
    assert tokens.count("summari") == 2 and tokens.count("lbl") == 2  # weighted up


def test_a_lessons_headline_counts_three_times() -> None:
    tokens = bullet_tokens("Broker restart\nafter journal corruption", ["amq"])
    assert tokens.count("broker") == 3 and tokens.count("journal") == 1 and tokens[-1] == "amq"
    assert bullet_tokens("One line lesson about brokers").count("broker") == 1
