"""Retrieval in every language: lessons written in one form are found by tickets in another."""

# Real sentences: their Cyrillic one-letter words and CJK punctuation are meant.
# ruff: noqa: RUF001

from __future__ import annotations

from dataclasses import dataclass

import pytest
from sqlalchemy import Engine

from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.search.retrieval import Retriever
from playbook.search.text import Ticket


@dataclass(frozen=True)
class Case:
    """A lesson, a ticket about the same problem worded otherwise, and one about another."""

    lesson: str
    ticket: str
    unrelated_lesson: str
    unrelated_ticket: str


CASES = {
    "chinese": Case(
        # "When the database connection pool is exhausted, requests time out: enlarge the pool
        # and set a timeout for getting a connection."
        lesson="数据库连接池耗尽时请求会超时，应调大连接池并设置获取连接的超时时间",
        # "API timeouts: the connection pool is full"
        ticket="接口超时：连接池满了",
        unrelated_lesson="前端静态资源发布后需要清除CDN缓存",
        # "Downloads fail when an uploaded file's name contains spaces"
        unrelated_ticket="用户上传的文件名包含空格时下载失败",
    ),
    "japanese": Case(
        lesson="データベースへの接続がタイムアウトした場合は、接続プールの上限を確認すること",
        # In half-width katakana, as some keyboards type it: "DB connections in production
        # time out often".
        ticket="本番環境でDB接続のﾀｲﾑｱｳﾄが頻発する",
        unrelated_lesson="ログイン画面のボタンが表示されない場合はキャッシュを削除する",
        unrelated_ticket="画像のアップロードに失敗する",
    ),
    "russian": Case(
        lesson="Соединение с базой данных обрывается по таймауту: увеличьте размер пула соединений",
        # Other cases and numbers of the same nouns and verb.
        ticket="Соединения с базой данных обрываются, таймауты под нагрузкой",
        unrelated_lesson="Кнопка входа не отображается на мобильном телефоне после обновления",
        unrelated_ticket="Отчёт о продажах выгружается с неверной кодировкой",
    ),
    "hebrew": Case(
        # "When the server does not answer, raise the limit of connections to the database."
        lesson="כאשר השרת לא מגיב, יש להגדיל את מגבלת החיבורים למסד הנתונים",
        # With vowel points, and "and the connections" for "the connections".
        ticket="הַשָּׁרָת אינו מגיב והחיבורים למסד נכשלים",
        unrelated_lesson="כפתור ההתחברות לא מופיע בטלפון הנייד",
        unrelated_ticket="הדוח החודשי נשלח ללקוחות עם תאריך שגוי",
    ),
    "arabic": Case(
        # "When the connection to the database drops, raise the connection timeout."
        lesson="عند انقطاع الاتصال بقاعدة البيانات يجب زيادة مهلة الاتصال",
        # With harakat and a hamza on the alef, as many people write it.
        ticket="انقطاع الإتصال بِقاعِدَة البيانات أثناء الضغط",
        unrelated_lesson="زر تسجيل الدخول لا يظهر على الهاتف المحمول",
        unrelated_ticket="التقرير الشهري يرسل إلى العملاء بتاريخ خاطئ",
    ),
    "french": Case(
        lesson="Élévation de privilèges : vérifier les droits d'accès à chaque requête",
        # Without accents, and "verification" for "vérifier".
        ticket="Elevation des privileges sans verification",
        unrelated_lesson="Le bouton « Connexion » n'apparaît pas sur mobile",
        unrelated_ticket="Le rapport mensuel est envoyé aux clients avec une date erronée",
    ),
    "german": Case(
        lesson="Zeitüberschreitung beim Abrufen großer Dateien: Timeout des Proxys erhöhen",
        # Without umlauts and ß, as on an English keyboard: "timeout under heavy load".
        ticket="Zeituberschreitung bei grosser Last",
        unrelated_lesson="Die Anmeldeschaltfläche wird auf dem Handy nicht angezeigt",
        unrelated_ticket="Der Monatsbericht wird mit falschem Datum an Kunden verschickt",
    ),
}
ENGLISH = (
    "Payment webhook retries must be idempotent",
    "Broker fails to restart after the journal is corrupted",
    "NullPointerException in ClientCnxn when the server closes the socket",
)
REDIS = (
    "Redis连接超时后客户端应当重试并退避"  # "after a Redis timeout the client retries, backing off"
)


@pytest.fixture
def playbook(engine: Engine) -> dict[str, str]:
    """Every language's lessons, English ones and a mixed one; returns the ids by text."""
    ids = {}
    with transaction(engine) as session:
        texts = [text for case in CASES.values() for text in (case.lesson, case.unrelated_lesson)]
        for text in [*texts, *ENGLISH, REDIS]:
            ids[text] = lifecycle.add(session, text, learned_from="T-1", actor="t").bullet.id
    return ids


def search(engine: Engine, text: str) -> list[str]:
    """The ids a ticket with this text is shown, best first."""
    with transaction(engine) as session:
        result = Retriever().search(session, Ticket.from_text(text, key="T-2"), k=5)
    return [hit.bullet_id for hit in result.hits]


@pytest.mark.parametrize("language", list(CASES))
def test_a_lesson_is_found_by_a_ticket_worded_otherwise(
    engine: Engine, playbook: dict[str, str], language: str
) -> None:
    case = CASES[language]
    found = search(engine, case.ticket)
    assert found and found[0] == playbook[case.lesson]
    assert playbook[case.unrelated_lesson] not in found


@pytest.mark.parametrize("language", list(CASES))
def test_a_ticket_about_something_else_does_not_bring_it(
    engine: Engine, playbook: dict[str, str], language: str
) -> None:
    case = CASES[language]
    assert playbook[case.lesson] not in search(engine, case.unrelated_ticket)


def test_english_tickets_do_not_bring_lessons_of_other_languages(
    engine: Engine, playbook: dict[str, str]
) -> None:
    found = search(engine, "Payment webhooks are retried twice")
    assert found == [playbook[ENGLISH[0]]]


def test_a_ticket_mixing_english_and_chinese_finds_the_mixed_lesson_first(
    engine: Engine, playbook: dict[str, str]
) -> None:
    found = search(engine, "redis 连接 超时")
    assert found[0] == playbook[REDIS]
    assert playbook[CASES["chinese"].lesson] in found  # it shares the Chinese words too


# The same lesson again, as a second agent would write it: one particle or letter changed,
# or written with other accents or width.
AGAIN = {
    "chinese": "数据库连接池耗尽时请求会超时，应调大连接池并设置获取连接的超时时间。",
    "japanese": "データベースへの接続がタイムアウトした場合は、接続プールの上限を確認する",
    "russian": (
        "Соединение с базой данных обрывается по таймауту: увеличьте размер пула соединений!"
    ),
    "french": "Elevation de privileges : verifier les droits d'acces a chaque requete",
}


@pytest.mark.parametrize("language", list(AGAIN))
def test_the_same_lesson_in_any_language_is_a_near_duplicate_at_add(
    engine: Engine, playbook: dict[str, str], language: str
) -> None:
    with transaction(engine) as session:
        again = lifecycle.add(session, AGAIN[language], learned_from="T-3", actor="t")
    assert not again.created
    assert again.bullet.id == playbook[CASES[language].lesson]


def test_another_lesson_in_the_same_script_is_not_a_near_duplicate(
    engine: Engine, playbook: dict[str, str]
) -> None:
    # Shares the script and a few pairs (连接, 超时) with the pool lesson, not its meaning.
    other = "消息队列连接超时后应自动重连并记录告警"
    with transaction(engine) as session:
        assert lifecycle.add(session, other, learned_from="T-3", actor="t").created


def test_accents_and_case_do_not_make_a_lesson_new() -> None:
    assert lifecycle.word_overlap("Vérifier le café", "verifier le CAFE") == 1.0
    assert lifecycle.word_overlap("Retry webhooks", "Do not retry webhooks") < 0.8
