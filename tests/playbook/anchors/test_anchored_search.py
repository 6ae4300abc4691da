"""A ticket or search naming a file or symbol raises the lessons anchored there, and no other."""

from __future__ import annotations

from sqlalchemy import Engine

from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.search.retrieval import Retriever
from playbook.search.text import Ticket
from tests.playbook.search.test_retrieval import seed

TRACE = (
    "Checkout deadlocks when a payment is retried\n"
    "Seen in production after the retry change.\n"
    "Traceback (most recent call last):\n"
    '  File "/srv/app/src/orders/locking.py", line 88, in acquire\n'
    "    raise LockTimeout(order_id)\n"
)


def world(engine: Engine) -> dict[str, str]:
    """Lessons of the SHOP scope: one matching the ticket's words, some anchored."""
    seed(engine)
    ids: dict[str, str] = {}
    with transaction(engine) as session:

        def add(name: str, text: str, scope: str = "SHOP", **anchors: object) -> None:
            ids[name] = lifecycle.add(
                session, text, learned_from="SHOP-1", actor="t", scope=scope, **anchors
            ).bullet.id

        add("words", "Payment retries in checkout can deadlock: retry with backoff")
        # Shares no word with the ticket's summary: only its anchor can find it there.
        add(
            "anchored", "Release rows in id order inside one transaction", paths="orders/locking.py"
        )
        add("elsewhere", "Invoices are numbered without gaps", paths="billing/**")
        add("symbol", "Never hold OrderLock while calling the bank", symbols="OrderLock.acquire")
        add("other_scope", "Anchored in another team", scope="OPS", paths="orders/**")
        add("deprecated", "An old rule about the locking module", paths="orders/**")
        lifecycle.deprecate(session, ids["deprecated"], reason="wrong", actor="t")
    return ids


def search(engine: Engine, text: str, **kwargs: object) -> list:
    with transaction(engine) as session:
        ticket = Ticket.from_text(text, scope="SHOP", key="SHOP-9", **kwargs)  # type: ignore[arg-type]
        return Retriever.shared(session).search(session, ticket, k=5).hits


def test_a_stack_trace_naming_a_file_ranks_the_lesson_anchored_there_first(
    engine: Engine,
) -> None:
    ids = world(engine)
    hits = search(engine, TRACE)
    assert hits[0].bullet_id == ids["anchored"]
    assert hits[0].anchor == "orders/locking.py"
    assert (hits[0].relevance or 0) >= 0.5  # found by its file, not left below a floor
    shown = [hit.bullet_id for hit in hits]
    assert ids["words"] in shown  # the text match is still shown, after it
    for kept_out in ("elsewhere", "other_scope", "deprecated"):
        assert ids[kept_out] not in shown


def test_a_lesson_anchored_elsewhere_is_not_raised(engine: Engine) -> None:
    ids = world(engine)
    hits = search(engine, "Checkout deadlocks when a payment is retried\nin shipping/labels.py")
    assert [hit.bullet_id for hit in hits] == [ids["words"]]
    assert hits[0].anchor is None


def test_a_named_symbol_raises_the_lesson_that_names_it(engine: Engine) -> None:
    ids = world(engine)
    hits = search(engine, "Timeout in checkout\nat com.shop.orders.OrderLock.acquire(Lock.java:3)")
    assert hits[0].bullet_id == ids["symbol"] and hits[0].anchor == "OrderLock.acquire"


def test_a_search_may_name_the_files_outright(engine: Engine) -> None:
    ids = world(engine)
    plain = search(engine, "Checkout deadlocks when a payment is retried")
    assert ids["anchored"] not in [hit.bullet_id for hit in plain]
    hits = search(engine, "Checkout deadlocks when a payment is retried", paths=["src/orders/"])
    # A directory named is not a file: a glob on it (`orders/**`) would need a file under it.
    assert ids["anchored"] not in [hit.bullet_id for hit in hits]
    hits = search(
        engine, "Checkout deadlocks when a payment is retried", paths=["orders/locking.py"]
    )
    assert hits[0].bullet_id == ids["anchored"]


def test_an_edit_of_the_anchors_is_seen_by_the_next_search(engine: Engine) -> None:
    ids = world(engine)
    with transaction(engine) as session:
        lifecycle.edit(session, ids["anchored"], actor="t", paths="")
    hits = search(engine, TRACE)
    # Found by the words of the path now ("orders"), no longer raised by it.
    assert hits[0].bullet_id == ids["words"]
    assert all(hit.anchor is None for hit in hits)
    with transaction(engine) as session:
        lifecycle.edit(session, ids["elsewhere"], actor="t", paths="orders/*.py")
    hits = search(engine, TRACE)
    assert hits[0].bullet_id == ids["elsewhere"]
    assert hits[0].anchor == "orders/*.py (srv/app/src/orders/locking.py)"


def test_a_java_stack_trace_raises_the_lesson_anchored_to_its_class_file(engine: Engine) -> None:
    ids = world(engine)
    anchor = "zookeeper-server/src/main/java/org/apache/zookeeper/ClientCnxn.java"
    with transaction(engine) as session:
        lifecycle.edit(session, ids["elsewhere"], actor="t", paths=anchor)
    trace = (
        "Checkout deadlocks when a payment is retried\n"
        "java.io.IOException: Connection reset by peer\n"
        "\tat org.apache.zookeeper.ClientCnxn$SendThread.run(ClientCnxn.java:1063)\n"
    )
    hits = search(engine, trace)
    assert hits[0].bullet_id == ids["elsewhere"]
    # The class's full name is the first the trace names, read as its source file.
    assert hits[0].anchor == f"{anchor} (org/apache/zookeeper/ClientCnxn.java)"
    # A frame naming the file only still finds it, by its exact name.
    hits = search(engine, "Checkout deadlocks\n\tat run(ClientCnxn.java:1063)")
    assert hits[0].bullet_id == ids["elsewhere"]
    assert hits[0].anchor == f"{anchor} (ClientCnxn.java)"
