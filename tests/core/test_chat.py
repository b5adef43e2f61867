"""The chat-completions wire format both clients speak (discovery's LLM helper, the evaluation's client)."""
from __future__ import annotations

import pytest

from mmbu.core.chat import ChatAnswer, chat_body, chat_url, read_chat_answer


def test_request_body_and_endpoint():
    assert chat_url("http://host:8000/v1/") == "http://host:8000/v1/chat/completions"
    messages = [{"role": "user", "content": "Which organ?"}]
    assert chat_body("m", messages, max_tokens=64, temperature=0.0, seed=0) == {
        "model": "m", "messages": messages, "max_tokens": 64, "n": 1, "stream": False, "temperature": 0.0, "seed": 0}
    reasoning = chat_body("o3", messages, max_tokens=64, max_tokens_field="max_completion_tokens", extra={"top_p": 1})
    assert "temperature" not in reasoning and "seed" not in reasoning  # left out: APIs that refuse them
    assert reasoning["max_completion_tokens"] == 64 and reasoning["top_p"] == 1


@pytest.mark.parametrize("message, finish, expected", [
    ({"content": "Answer: B"}, "stop", ChatAnswer("Answer: B", "stop")),
    ({"content": [{"type": "text", "text": "Answer: "}, {"type": "text", "text": "C"}]}, "stop",
     ChatAnswer("Answer: C", "stop")),
    ({"content": None, "refusal": "I can't help with that."}, "stop", ChatAnswer("", "stop", refusal="I can't help with that.")),
    ({"content": ""}, "content_filter", ChatAnswer("", "content_filter", refusal="content_filter")),
    ({"content": "A", "reasoning_content": "the left lung"}, "stop", ChatAnswer("A", "stop", reasoning="the left lung")),
])
def test_answers_are_read_the_same_way_by_every_client(message, finish, expected):
    assert read_chat_answer({"choices": [{"message": message, "finish_reason": finish}]}) == expected


@pytest.mark.parametrize("payload, why", [
    ({}, "no choices"), ({"choices": []}, "no choices"), ([], "no choices"), ("error", "no choices"),
    ({"choices": [None]}, "no choices"), ({"choices": [{"message": "B"}]}, "message is a str"),
    ({"choices": [{"message": {"content": 7}}]}, "content is a int"),
    ({"choices": [{"message": {"content": [{"type": "text", "text": 7}]}}]}, "a content part's text is not text"),
])
def test_a_body_that_is_not_a_chat_completion_is_refused_saying_why(payload, why):
    with pytest.raises(ValueError, match=why):
        read_chat_answer(payload)


def test_a_malformed_usage_or_reasoning_is_dropped_not_fatal():
    answer = read_chat_answer({"choices": [{"message": {"content": "A", "reasoning": 3}, "finish_reason": 1}],
                               "usage": {1: 2}})
    assert answer == ChatAnswer("A")
