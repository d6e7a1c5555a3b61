"""Token counts behind every budget: non-Latin text is not undercounted (issue 13, finding 6)."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.messages.utils import count_tokens_approximately

from memory_graph_agent.prompting.budgets import count_tokens, prompt_tokens

# (text, tokens SmolLM2's tokenizer really needs, measured with llama.cpp's tokenizer)
MEASURED = {
    "cjk": (
        "我的名字是张三。我住在柏林，我喜欢用Go语言编程，而不是Java。今天天气很好。" * 20,
        1260,
    ),
    "japanese": (
        "こんにちは、私の名前は田中です。東京に住んでいます。プログラミングが好きです。" * 20,
        1260,
    ),
    "korean": ("안녕하세요, 제 이름은 김철수입니다. 서울에 살고 있습니다." * 20, 1380),
    "russian": ("Привет, меня зовут Иван. Я живу в Москве и люблю программировать." * 20, 1020),
    "arabic": ("مرحبا، اسمي أحمد. أعيش في القاهرة وأحب البرمجة." * 20, 900),
    "emoji": ("😀🎉👍🏽❤️🔥" * 20, 380),
}


@pytest.mark.parametrize("text,real", list(MEASURED.values()), ids=list(MEASURED))
def test_non_latin_text_is_never_counted_below_what_the_model_needs(text, real) -> None:
    assert count_tokens([HumanMessage(text)]) >= real


def test_four_thousand_cjk_characters_count_as_at_least_four_thousand_tokens() -> None:
    assert count_tokens([HumanMessage("我" * 4000)]) >= 4000
    assert prompt_tokens("系统" * 100, []) >= 200


def test_ascii_costs_what_langchain_counts() -> None:
    messages = [
        HumanMessage("All work and no play makes Jack a dull boy. " * 30, name="jack"),
        AIMessage("", tool_calls=[{"name": "lookup", "args": {"q": "x"}, "id": "c1"}]),
        AIMessage("Sure: 12 + 30 = 42."),
    ]
    assert count_tokens(messages) == count_tokens_approximately(messages)


def test_the_counter_is_pluggable() -> None:
    from memory_graph_agent.core.tokens import use_token_counter

    text = "All work and no play makes Jack a dull boy."
    use_token_counter(len)  # one token a character
    try:
        assert count_tokens([HumanMessage(text)]) >= len(text)
    finally:
        use_token_counter(None)
    assert count_tokens([HumanMessage(text)]) == count_tokens_approximately([HumanMessage(text)])
