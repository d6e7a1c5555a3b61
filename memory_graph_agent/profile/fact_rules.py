"""Rule-based extraction of facts the user states about themself ("my name is...").

A 135M model maps statements to the wrong keys, so with a local model
(``fact_rules='auto'``) these patterns win over its proposals. Questions never match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memory_graph_agent.prompting.guards import self_statements

_NAME = r"([A-Z][\w'-]+(?: [A-Z][\w'-]+){0,2})"
_PLACE = r"([A-Z][\w'-]+(?: [A-Z][\w'-]+){0,2})"
_THING = r"([A-Z][\w+#.-]*|[a-z][\w+#-]{1,20})"
PROGRAMMING = re.compile(
    r"\b(program\w*|cod(e|ing)|language|developer|software"
    r"|python|rust|golang|java|javascript|typescript|kotlin|swift|ruby|php|scala|haskell"
    r"|elixir|zig|clojure|julia|c\+\+|c#)\b",
    re.I,
)
"""A sentence about programming: a word of the trade, or a language's own name."""


@dataclass(frozen=True)
class Rule:
    """One pattern: the fact key it yields, its importance and the capture group."""

    key: str
    pattern: re.Pattern[str]
    importance: float
    needs: re.Pattern[str] | None = None


RULES = [
    Rule("name", re.compile(rf"\b(?:[Mm]y name is|[Cc]all me) {_NAME}"), 0.95),
    Rule(
        "city",
        re.compile(
            rf"\bI (?:now )?live in {_PLACE}|\bI(?:'m| am)(?: now)? living in {_PLACE}"
            rf"|\bI(?: have|'ve| just| recently)? (?:moved|relocated)"
            rf"(?: from {_PLACE})? to {_PLACE}"
            rf"|\bI'?m (?:now )?based in {_PLACE}"
        ),
        0.8,
    ),
    Rule(
        "customer_tier",
        re.compile(
            r"\bI(?:'m| am) an? (VIP|premium|gold|silver|platinum|basic|free)"
            r"(?: tier)? (?:customer|member|user)",
            re.I,
        ),
        0.8,
    ),
    Rule(
        "employer",
        re.compile(rf"\bI (?:now )?work (?:at|for) {_PLACE}"),
        0.8,
    ),
    Rule(
        "preferred_language",
        re.compile(
            rf"\bI (?:now |still |really )?prefer {_THING}"
            rf"|\bI(?: have|'ve)? (?:now )?switched (?:from {_THING} )?to {_THING}"
        ),
        0.7,
        needs=PROGRAMMING,
    ),
]

RULE_KEYS = frozenset(rule.key for rule in RULES)
"""Keys the rules decide alone when they are enabled."""


@dataclass(frozen=True)
class RuleFact:
    """A fact found by a rule, with the sentence it came from."""

    key: str
    value: str
    importance: float
    sentence: str


def rule_facts(user_text: str) -> list[RuleFact]:
    """Facts the user's self-statements state explicitly; the last statement of a key wins."""
    found: dict[str, RuleFact] = {}
    for sentence in self_statements(user_text):
        for rule in RULES:
            if rule.needs is not None and not rule.needs.search(sentence):
                continue
            match = rule.pattern.search(sentence)
            if not match:
                continue
            value = [g for g in match.groups() if g][-1]  # "from A to B": B holds now
            value = value.strip(" .,'")
            if rule.key == "customer_tier":
                value = value.upper() if value.lower() == "vip" else value.lower()
            if value:
                found[rule.key] = RuleFact(rule.key, value, rule.importance, sentence)
    return list(found.values())
