"""Generated Jira issues in the shape of the shared Apache file, deterministic from a seed.

Summaries are built from templates over exception, class and method names and symptoms,
descriptions with prose, stack traces, log lines and Jira markup, all drawn from a vocabulary
with Zipf-like word frequencies and per-component topics; about 3% of the issues duplicate an
earlier one, reworded the way a second reporter would describe the same failure.
"""

from __future__ import annotations

import itertools
import random
import string
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

SEED = 14
# The share of issues that duplicate an earlier one (the real file: 224 pairs in 7,983).
DUPLICATE_SHARE = 0.03
# How a duplicate resembles its original: a second reporter names the same class, method and
# exception sometimes, retells the summary in other words or writes a new one, and quotes the
# original's first paragraph now and then. Tuned so that plain BM25 finds about as many
# originals in the top 5 as on the real file (Recall@5 0.55 with rank_bm25).
SAME_NAMES = 0.5
NEW_SUMMARY = 0.25
REWORD_DROP = 0.2
QUOTE_ORIGINAL = 0.4


# Projects with their share of issues and their components, shaped like the real file's.
PROJECTS: dict[str, tuple[float, tuple[str, ...]]] = {
    "MQ": (
        0.58,
        (
            "Broker",
            "Transport",
            "JMS client",
            "Message Store",
            "Connector",
            "AMQP",
            "STOMP",
            "Web console",
            "Test Cases",
            "Documentation",
        ),
    ),
    "STREAM": (
        0.19,
        ("core", "scheduler", "ui", "kafka spout", "metrics", "topology", "worker", "docs"),
    ),
    "COORD": (
        0.23,
        ("server", "java client", "c client", "quorum", "leader election", "tests", "recipes"),
    ),
}
LABELS = (
    "test",
    "newbie",
    "performance",
    "security",
    "documentation",
    "flaky",
    "regression",
    "memory-leak",
    "ssl",
    "windows",
    "patch-available",
    "build",
)
RESOLUTIONS = (
    ("Fixed", 0.63),
    (None, 0.17),
    ("Not A Problem", 0.047),
    ("Cannot Reproduce", 0.033),
    ("Won't Fix", 0.029),
    ("Incomplete", 0.029),
    ("Invalid", 0.025),
    ("Not A Bug", 0.003),
    ("Later", 0.002),
)

# The head of the vocabulary, most frequent first; the tail is made-up words (below).
_HEAD_WORDS = """
message broker client server connection session queue topic consumer producer thread lock
timeout request response configuration file log cluster node leader follower network socket
memory disk index journal store cache transaction commit rollback ack acknowledge destination
subscription durable persistent listener handler factory pool executor scheduler task worker
spout bolt tuple stream batch metric metrics counter gauge port host address url path property
option parameter value default version release build test unit integration jvm heap stack
frame buffer byte bytes size limit count number time second millisecond minute hour interval
delay retry reconnect failover restart shutdown startup start stop close open read write send
receive dispatch deliver publish subscribe create delete update load save parse serialize
deserialize encode decode compress expire purge schedule register unregister watch notify
election quorum ensemble snapshot epoch zxid znode ephemeral sequential watcher callback
event state status error warning exception failure problem issue bug crash hang deadlock leak
race condition wrong missing null empty invalid incorrect duplicate stale slow high low large
small new old first last next previous local remote master slave primary backup replica
shared exclusive concurrent async sync blocking nonblocking ssl tls certificate keystore
authentication authorization user password credential permission security admin console web
ui page jsp servlet http https rest api json xml protocol wire format header body payload
selector filter priority order ordering group virtual composite redelivery dead letter
prefetch window flow control producer flow credit link frame channel transport tcp nio udp
multicast discovery bridge network connector proxy gateway plugin broker-side client-side
kahadb leveldb jdbc database table sql statement cursor page file lock journal checkpoint
recovery replay gc garbage collection cpu usage load balance partition offset kafka zookeeper
curator topology nimbus supervisor executor ack acker emit anchor fail tick storm
"""
HEAD = list(dict.fromkeys(_HEAD_WORDS.split()))
_FUNCTION_WORDS = """
the a the to of and in is for on with when that it this not be after from by as at an but
or if are was we has have can which then but should does no all only also into
"""
FUNCTION = _FUNCTION_WORDS.split()
SYMPTOMS = (
    "hangs",
    "deadlocks",
    "leaks memory",
    "throws NullPointerException",
    "is not closed",
    "times out",
    "fails intermittently",
    "returns wrong result",
    "drops messages",
    "is never released",
    "uses 100% CPU",
    "loses data",
    "is slow",
    "does not reconnect",
    "blocks forever",
    "logs spurious warnings",
    "fails to start",
    "is ignored",
    "keeps growing",
    "is duplicated",
)
EVENTS = (
    "restart",
    "failover",
    "network partition",
    "upgrade",
    "session expiry",
    "leader election",
    "disk full",
    "broker shutdown",
    "client reconnect",
    "rebalance",
    "config reload",
    "long GC pause",
)
CONDITIONS = (
    "heavy load",
    "high concurrency",
    "many consumers",
    "large messages",
    "slow network",
    "low memory",
    "many topics",
    "SSL enabled",
    "Windows",
    "IBM JDK",
)
EXCEPTIONS = (
    "NullPointerException",
    "IllegalStateException",
    "ConcurrentModificationException",
    "IOException",
    "EOFException",
    "SocketTimeoutException",
    "ClassCastException",
    "OutOfMemoryError",
    "IllegalArgumentException",
    "ArrayIndexOutOfBoundsException",
    "InterruptedException",
    "KeeperException",
    "JMSException",
    "TimeoutException",
    "UnsupportedOperationException",
)
SUFFIXES = ("Manager", "Factory", "Handler", "Service", "Impl", "Listener", "Store", "Support", "")
VERBS = (
    "close",
    "open",
    "send",
    "receive",
    "dispatch",
    "create",
    "remove",
    "update",
    "load",
    "start",
    "stop",
    "flush",
    "commit",
    "process",
    "register",
    "handle",
)
# What a second reporter says instead: the paraphrases of a duplicate.
SYNONYMS = {
    "hangs": "freezes",
    "deadlocks": "gets stuck",
    "leaks": "keeps leaking",
    "memory": "heap",
    "closed": "released",
    "fails": "breaks",
    "intermittently": "sometimes",
    "wrong": "incorrect",
    "drops": "loses",
    "messages": "msgs",
    "slow": "very slow",
    "start": "come up",
    "restart": "restarting",
    "failover": "fail over",
    "connection": "socket",
    "consumer": "subscriber",
    "producer": "sender",
    "error": "exception",
    "when": "while",
    "after": "following",
    "under": "with",
    "heavy": "high",
    "load": "traffic",
    "forever": "indefinitely",
}


class _Zipf:
    """Words drawn with frequency falling as 1/rank**s: a few everywhere, most rare."""

    def __init__(self, words: Sequence[str], s: float = 1.05) -> None:
        self.words = list(words)
        self.cum = list(itertools.accumulate(1 / (rank + 2.7) ** s for rank in range(len(words))))

    def pick(self, rng: random.Random, k: int) -> list[str]:
        return rng.choices(self.words, cum_weights=self.cum, k=k)


def _made_up_words(rng: random.Random, count: int) -> list[str]:
    """Pronounceable, distinct words for the vocabulary's long tail."""
    onsets = [*"bcdfghjklmnprstvwz", "br", "ch", "cl", "dr", "fl", "gr", "pl", "st", "tr", "sh"]
    vowels = ["a", "e", "i", "o", "u", "ai", "ea", "io", "ou"]
    codas = ["", "", "n", "r", "s", "t", "l", "x", "nd", "rk", "st"]
    syllables = [onset + vowel for onset in onsets for vowel in vowels]
    words: dict[str, None] = {}
    while len(words) < count:
        word = "".join(rng.choices(syllables, k=rng.choice((2, 2, 3, 3, 4))))
        words[word + rng.choice(codas)] = None
    return list(words)


@dataclass
class _Topic:
    """A component's own words, classes and methods: its tickets share them."""

    project: str
    component: str
    package: str
    words: _Zipf
    classes: list[str]
    methods: list[str]


class _Generator:
    """Makes issues; one instance per seed."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        tail = [w for w in _made_up_words(self.rng, 30_000) if w not in HEAD]
        self.vocabulary = _Zipf(HEAD + tail)
        self.topics: dict[str, list[_Topic]] = {}
        for project, (_, components) in PROJECTS.items():
            self.topics[project] = [self._topic(project, c) for c in components]

    def _topic(self, project: str, component: str) -> _Topic:
        rng = self.rng
        # Mostly mid-frequency words: the very top is shared by everyone anyway.
        words = list(dict.fromkeys(self.vocabulary.pick(rng, 160)))
        nouns = [w for w in words if w.isalpha()] or HEAD
        classes = [
            "".join(w.capitalize() for w in rng.sample(nouns, rng.choice((1, 2, 2, 3))))
            + rng.choice(SUFFIXES)
            for _ in range(30)
        ]
        methods = [rng.choice(VERBS) + rng.choice(nouns).capitalize() for _ in range(20)]
        slug = "".join(ch for ch in component.lower() if ch in string.ascii_lowercase)
        package = f"org.example.{project.lower()}.{slug}"
        return _Topic(project, component, package, _Zipf(words), classes, methods)

    def _content(self, topic: _Topic, k: int) -> list[str]:
        """``k`` content words, half from the component's topic, half from everywhere."""
        rng = self.rng
        own = topic.words.pick(rng, k)
        common = self.vocabulary.pick(rng, k)
        bits = rng.getrandbits(k)  # one draw for k coin flips: this runs millions of times
        return [own[i] if bits >> i & 1 else common[i] for i in range(k)]

    def _sentence(self, topic: _Topic, length: int) -> str:
        rng = self.rng
        content = self._content(topic, length)
        glue = rng.choices(FUNCTION, k=length)
        bits = rng.getrandbits(length) | rng.getrandbits(length)  # 3 in 4 are content words
        words = [content[i] if bits >> i & 1 else glue[i] for i in range(length)]
        return " ".join(words).capitalize() + "."

    def _summary(self, topic: _Topic, cls: str, method: str, exception: str) -> str:
        rng = self.rng
        a, b, c = self._content(topic, 3)
        templates = (
            f"{cls}.{method} throws {exception} when {a} {b} is {rng.choice(('closed', 'empty'))}",
            f"{a.capitalize()} {b} {rng.choice(SYMPTOMS)} after {rng.choice(EVENTS)}",
            f"{topic.component}: {a} {b} {rng.choice(SYMPTOMS)} under {rng.choice(CONDITIONS)}",
            f"{exception} in {cls} during {a} {b}",
            f"{cls} {rng.choice(SYMPTOMS)} when {a} {c} {b}",
            f"Support {a} {b} in {topic.component}",
            f"{method}() {rng.choice(SYMPTOMS)} with {a} {b}",
        )
        return rng.choice(templates)

    def _description(self, topic: _Topic, cls: str, method: str, exception: str) -> str:
        rng = self.rng
        parts = [self._sentence(topic, rng.randint(8, 22)) for _ in range(rng.randint(1, 4))]
        if rng.random() < 0.5:
            parts.insert(
                1, f"When calling {cls}.{method}() the {topic.component} {rng.choice(SYMPTOMS)}."
            )
        if rng.random() < 0.3:
            version = f"{rng.randint(3, 5)}.{rng.randint(0, 15)}.{rng.randint(0, 4)}"
            parts.append(f"Seen in version {version}.")
        if rng.random() < 0.15:
            steps = "\n".join(
                f"{n}. {self._sentence(topic, rng.randint(5, 10))}" for n in range(1, 4)
            )
            parts.append(f"Steps to reproduce:\n{steps}")
        if rng.random() < 0.3:
            frames = "\n".join(
                f"\tat {topic.package}.{rng.choice(topic.classes)}.{rng.choice(topic.methods)}"
                f"({cls}.java:{rng.randint(40, 900)})"
                for _ in range(rng.randint(3, 7))
            )
            parts.append(
                f"{{code}}\njava.lang.{exception}: {self._sentence(topic, 5)}\n"
                f"\tat {topic.package}.{cls}.{method}({cls}.java:{rng.randint(40, 900)})\n"
                f"{frames}\n{{code}}"
            )
        if rng.random() < 0.2:
            day = f"2015-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
            parts.append(
                f"{day} 10:{rng.randint(0, 59):02d}:11,314 | WARN  | "
                f"{self._sentence(topic, 8)} | {topic.package}.{cls} | "
                f"{rng.choice(topic.methods)}-thread-{rng.randint(1, 40)}"
            )
        if rng.random() < 0.05:
            parts.append(f"See https://example.org/{topic.project.lower()}/{rng.randint(1, 999)}")
        return "\n\n".join(parts)

    def _reworded(self, text: str) -> str:
        """The same report in a second reporter's words: synonyms, dropped and added words."""
        rng = self.rng
        words = []
        for word in text.split():
            bare = word.strip(".,:()").lower()
            roll = rng.random()
            if roll < 0.25 and bare in SYNONYMS:
                words.append(SYNONYMS[bare])
            elif roll < 0.25 + REWORD_DROP:
                continue
            else:
                words.append(word)
            if rng.random() < 0.08:
                words.extend(self.vocabulary.pick(rng, 1))
        return " ".join(words) or text

    def issue(self, key: str, topic: _Topic, created: datetime, like: dict | None) -> dict:
        """One issue; ``like`` is the earlier issue it duplicates, if any."""
        rng = self.rng
        if like is not None and rng.random() < SAME_NAMES:
            cls, method, exception = like["_cls"], like["_method"], like["_exception"]
        else:
            cls, method = rng.choice(topic.classes), rng.choice(topic.methods)
            exception = rng.choice(EXCEPTIONS)
        if like is None:
            summary = self._summary(topic, cls, method, exception)
            description = self._description(topic, cls, method, exception)
        else:
            summary = (
                self._summary(topic, cls, method, exception)
                if rng.random() < NEW_SUMMARY
                else self._reworded(like["summary"])
            )
            original = like["description"].split("\n\n")[0]
            description = (
                f"{self._reworded(original)}\n\n{self._description(topic, cls, method, exception)}"
                if rng.random() < QUOTE_ORIGINAL
                else self._description(topic, cls, method, exception)
            )
        if like is not None:
            resolution: str | None = "Duplicate"
        else:
            names, weights = zip(*RESOLUTIONS, strict=True)
            resolution = rng.choices(names, weights=weights)[0]
        resolved = created + timedelta(days=rng.expovariate(1 / 30)) if resolution else None
        components = [topic.component] if rng.random() < 0.73 else []
        if components and rng.random() < 0.1:
            components.append(rng.choice(self.topics[topic.project]).component)
        return {
            "key": key,
            "project": topic.project,
            "created": _jira_time(created),
            "resolved": _jira_time(resolved) if resolved else None,
            "resolution": resolution,
            "summary": summary,
            "description": description,
            "labels": rng.sample(LABELS, rng.choice((1, 1, 2))) if rng.random() < 0.11 else [],
            "components": list(dict.fromkeys(components)),
            "links": [{"type": "Duplicate", "direction": "outward", "key": like["key"]}]
            if like is not None
            else [],
            "comments": [],
            "_cls": cls,
            "_method": method,
            "_exception": exception,
            "_topic": topic,
        }


def _jira_time(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.000+0000")


def generate(count: int, seed: int = SEED, years: float = 8.0) -> list[dict[str, Any]]:
    """``count`` synthetic issues over ``years``, oldest first, the same for the same seed."""
    maker = _Generator(seed)
    rng = maker.rng
    projects = list(PROJECTS)
    shares = [PROJECTS[p][0] for p in projects]
    numbers = dict.fromkeys(projects, 0)
    gap = years * 365 * 86400 / max(count, 1)
    at = datetime(2012, 1, 1, tzinfo=UTC)
    rows: list[dict[str, Any]] = []
    for i in range(count):
        at += timedelta(seconds=rng.expovariate(1 / gap))
        like = None
        if i > 50 and rng.random() < DUPLICATE_SHARE:
            # Duplicates are mostly reported soon after the original, sometimes years later.
            back = 1 + int(rng.expovariate(1 / 400))
            like = rows[i - back if back <= i else rng.randrange(i)]
            topic = like["_topic"]
        else:
            project = rng.choices(projects, weights=shares)[0]
            topic = rng.choice(maker.topics[project])
        numbers[topic.project] += 1
        rows.append(maker.issue(f"{topic.project}-{numbers[topic.project]}", topic, at, like))
    for row in rows:
        for private in ("_cls", "_method", "_exception", "_topic"):
            del row[private]
    return rows
