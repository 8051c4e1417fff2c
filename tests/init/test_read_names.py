"""The guess `checkpoint init` makes from a tool's name when its server gives no hints: a read only when a word of
the name says it reads and none says it changes anything."""

from __future__ import annotations

import pytest

from checkpoint_mcp.init.read_names import CHANGE_WORDS, READ_WORDS, read_word, words


@pytest.mark.parametrize(
    ("name", "found"),
    [
        ("get_issue_comments", ["get", "issue", "comments"]),
        ("getIssueComments", ["get", "issue", "comments"]),
        ("search-docs", ["search", "docs"]),
        ("kb.query", ["kb", "query"]),
        ("listHTTPRoutes", ["list", "http", "routes"]),
        ("read file 2", ["read", "file", "2"]),
    ],
)
def test_a_name_is_cut_into_words_at_separators_and_camel_case_humps(name: str, found: list[str]) -> None:
    assert words(name) == found


@pytest.mark.parametrize(
    ("name", "word"),
    [
        ("get_status", "get"),
        ("list_items", "list"),
        ("search_docs", "search"),
        ("read_file", "read"),
        ("find_user", "find"),
        ("query_logs", "query"),
        ("describe_table", "describe"),
        ("show_config", "show"),
        ("view_invoice", "view"),
        ("lookup_customer", "lookup"),
        ("count_rows", "count"),
        ("issue_get", "get"),
        ("getSettings", "get"),
        ("fetch_page", "fetch"),
    ],
)
def test_a_name_that_says_it_reads_is_a_read(name: str, word: str) -> None:
    assert read_word(name) == word


@pytest.mark.parametrize(
    "name",
    [
        "get_and_delete",
        "create_list",
        "send_search_report",
        "find_and_replace",
        "list_then_purge",
        "query_and_update",
        "get_or_create_user",
        "search_and_post",
        "read_and_mark_read",
        "run_query",
        "push_search_index",
        "merge_list",
        "setStatus",
        "write_view",
        "listen",  # a whole word only: not "list"
        "status",  # no verb at all
        "send_email",
    ],
)
def test_a_name_that_says_it_changes_anything_or_says_nothing_is_not_a_read(name: str) -> None:
    assert read_word(name) is None


def test_no_word_is_both_a_read_and_a_change() -> None:
    assert not READ_WORDS & CHANGE_WORDS
    for word in ("create", "update", "delete", "send", "post", "write", "set", "push", "merge"):
        assert word in CHANGE_WORDS, "the words the issue names"
    for word in ("get", "list", "search", "read", "find", "query", "describe", "show", "view", "lookup", "count"):
        assert word in READ_WORDS, "the words the issue names"
