"""The tokenizer and query synthesis for engineering text, in any language."""

from __future__ import annotations

import string
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from playbook.search import text as text_module
from playbook.search.text import (
    TOKENIZER_VERSION,
    Ticket,
    bullet_tokens,
    fold,
    query_tokens,
    synthesize_query,
    tokenize,
)
from tests.hostile_texts import scripts
from tests.support import hang_guard


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


# --- Text in any language --------------------------------------------------------------------


def test_accents_case_and_compatibility_forms_are_one_spelling() -> None:
    assert tokenize("élévation") == tokenize("elevation") == ["elev"]
    assert tokenize("Café crème") == tokenize("cafe creme") == ["cafe", "creme"]
    assert tokenize("Straße") == tokenize("STRASSE") == tokenize("strasse")
    assert tokenize("naïve façade") == tokenize("naive facade")
    # A combining accent typed after its letter is the same as the precomposed letter.
    assert tokenize("re\u0301sume\u0301") == tokenize("résumé") == tokenize("resume")
    # Full-width letters, ligatures and half-width katakana are the letters they stand for.
    assert tokenize("\uff46\uff49\uff4c\uff45 \ufb01le") == ["file", "file"]
    assert tokenize("ﾀｲﾑｱｳﾄ") == tokenize("タイムアウト")
    assert tokenize("ПОДКЛЮЧЕНИЕ") == tokenize("подключение")
    assert tokenize("ΣΎΝΔΕΣΗ") == tokenize("σύνδεση") == tokenize("συνδεση")


def test_english_in_a_text_with_other_characters_gives_the_same_tokens() -> None:
    english = "Don't retry getUserById after a ConnectionTimeoutException in org.apache.Foo"
    assert tokenize(english.replace("'", "\u2019") + " \u2014 ok") == tokenize(english + " ok")
    assert tokenize("\u00a0\u00a0getUserById\u3000user_id") == tokenize("getUserById user_id")


def test_invisible_characters_do_not_split_or_join_words() -> None:
    assert tokenize("con\u00adnection") == tokenize("connection")  # soft hyphen
    assert tokenize("retry\u200bwebhook") == tokenize("retry webhook")  # zero-width space
    assert tokenize("اتصـــال") == tokenize("اتصال")  # Arabic tatweel stretches the word
    assert tokenize("версия ٢٠٢٤") == tokenize("версия 2024")  # Arabic-Indic digits


def test_chinese_is_indexed_as_overlapping_pairs() -> None:
    assert tokenize("连接超时") == ["连接", "接超", "超时"]
    assert tokenize("锁") == ["锁"]  # a run of one character is a word of its own
    assert tokenize("数据库\uff0c连接\u3002") == ["数据", "据库", "连接"]  # punctuation ends a run
    # Scripts are split first: the English word is a word, the Chinese run gives pairs.
    assert tokenize("Redis连接超时") == ["redi", "连接", "接超", "超时"]
    assert tokenize("getUserById超时") == ["get", "user", "id", "超时"]


def test_japanese_splits_kanji_kana_and_loanwords_and_drops_particles() -> None:
    tokens = tokenize("データベースへの接続がタイムアウトしました")
    assert tokens == ["デー", "ータ", "タベ", "ベー", "ース", "接続", *tokenize("タイムアウト")]
    # The same stem with other endings: the kanji and the loanword still meet.
    assert {"接続", "タイ", "ウト"} <= set(tokenize("接続するとタイムアウトになる"))
    assert tokenize("の が を に は") == []


def test_korean_and_thai_are_indexed_as_pairs() -> None:
    assert tokenize("서버가 응답") == ["서버", "버가", "응답"]
    assert "서버" in tokenize("서버를 재시작")  # the same noun with another particle
    thai = tokenize("การเชื่อมต่อฐานข้อมูล")  # "database connection"
    assert "ข้อ" in thai and "มูล" in thai
    # A Thai vowel or tone mark stays with its letter: no token starts with one.
    assert all(not unicodedata.category(token[0]).startswith("M") for token in thai)


def test_russian_words_are_stemmed_in_russian() -> None:
    forms = ["соединение", "соединения", "соединений", "соединениями", "Соединению"]
    assert {tuple(tokenize(form)) for form in forms} == {("соединен",)}
    assert tokenize("таймауты базы данных") == tokenize("таймаут базе данных")
    assert tokenize("ёмкость") == tokenize("емкость")
    # "й" is a letter of its own, not "и" with an accent: "новый" stems like an adjective.
    assert tokenize("новый") == tokenize("новая") == ["нов"]
    assert tokenize("и в на не по для что это") == []  # Russian stop words


def test_arabic_points_hamza_and_articles_are_folded() -> None:
    assert tokenize("الاتِّصَال") == tokenize("الإتصال") == tokenize("الاتصال") == ["اتصال"]
    # "the data" and "in the database": the article and the preposition go with the stemmer.
    assert (
        tokenize("بقاعدة البيانات") == tokenize("قاعدة") + tokenize("البيانات") == ["قاعد", "بيان"]
    )
    assert tokenize("في من على إلى") == []


def test_hebrew_points_and_prefixes() -> None:
    assert tokenize("הַשָּׁרָת") == tokenize("השרת") == ["השרת", "שרת"]
    # "to the server", "and the server": the bare noun is among the tokens of each.
    for form in ("לשרת", "והשרת", "שרת"):
        assert "שרת" in tokenize(form)
    assert tokenize("של את על לא") == []


def test_scripts_whose_marks_are_letters_keep_their_words_whole() -> None:
    assert tokenize("हिन्दी भाषा") == ["हिन्दी", "भाषा"]
    assert tokenize("नमस्ते") == ["नमस्ते"]


def test_function_words_of_french_german_and_spanish_are_dropped() -> None:
    assert tokenize("de la les dans pour avec") == []
    assert tokenize("der das und ist nicht mit für") == []
    assert tokenize("los las por una como pero") == []
    # ...but not the words that mean something in English engineering text.
    assert tokenize("LE election des cipher du command") == [
        "le",
        "elect",
        "des",
        "cipher",
        "du",
        "command",
    ]


def test_the_tokenizer_has_a_version() -> None:
    assert isinstance(TOKENIZER_VERSION, int) and TOKENIZER_VERSION >= 2


# Latin letters with the accents of European languages, which folding must take off.
ACCENTS = ["", "\u0300", "\u0301", "\u0302", "\u0303", "\u0308", "\u0327", "\u030a", "\u030c"]
accented_words = st.lists(
    st.tuples(st.sampled_from(string.ascii_letters), st.sampled_from(ACCENTS)), min_size=1
)


@settings(max_examples=300, deadline=None)
@given(st.lists(accented_words, max_size=12), st.sampled_from([" ", "_", ".", "-", ", "]))
def test_accents_never_change_the_tokens(words: list[list[tuple[str, str]]], sep: str) -> None:
    plain = sep.join("".join(letter for letter, _ in word) for word in words)
    accented = sep.join("".join(letter + accent for letter, accent in word) for word in words)
    precomposed = unicodedata.normalize("NFC", accented)
    assert tokenize(accented) == tokenize(precomposed) == tokenize(plain)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_tokens_of_any_text_are_folded_words(text: str) -> None:
    tokens = tokenize(text)
    for token in tokens:
        assert token and token == token.casefold()
        assert not any(char.isspace() for char in token)
        # No accent or vowel point survives.
        assert unicodedata.normalize("NFKD", token) == unicodedata.normalize("NFKD", fold(token))
    # Folding first changes nothing: a text and its one spelling are the same text.
    assert tokenize(fold(text)) == tokens


# Characters of every kind the tokenizer treats apart: scripts with and without spaces, marks
# folded away and marks that are letters, separators, invisible and compatibility characters.
SCRIPTS = (
    "aZé_.-/:$#\\ 9连接超时のがタイムアウト서버กเชื่соединйїΣσςשָׁבِاأـहि्\u0301\u0306\u0308"
    "\u200b\u200d\u00ad\ufdfa\u3300ﬁ٣"
)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=SCRIPTS, max_size=200))
def test_tokens_of_mixed_scripts_are_folded_words(text: str) -> None:
    tokens = tokenize(text)
    for token in tokens:
        assert token and token == token.casefold() and not any(c.isspace() for c in token)
        assert not any(mark in token for mark in "\u0301\u05b8\u05c1\u0650\u00ad\u200d")
    assert tokenize(fold(text)) == tokens


FORGED = scripts()


# Tokenizing a forged text takes well under a second; a pattern that backtracks takes minutes.
# The guard only stops such a hang: bench/hostile_text.py measures each forged text beside
# English text of the same length.
HANG_SECONDS = 10


@pytest.mark.parametrize("text", FORGED.values(), ids=list(FORGED))
def test_forged_text_in_any_script_is_tokenized_in_bounds(text: str) -> None:
    tokenize("é")  # the first text outside ASCII reads the Unicode tables, once per process
    # Words seen before are looked up, not split: the forged text's words are new here.
    text_module._identifier_tokens.cache_clear()
    with hang_guard(HANG_SECONDS, "tokenizing a forged text"):
        tokens = tokenize(text)
    # NFKC makes a character at most _MAX_GROWTH, and the character pairs of a script without
    # spaces hold each character twice: no text yields more.
    assert sum(map(len, tokens)) <= 2 * text_module._MAX_GROWTH * len(text)
    assert all(token and token == token.casefold() for token in tokens)
