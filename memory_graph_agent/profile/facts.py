"""Profile facts from text: schema-constrained extraction and grounding checks.

A fact is kept only if its key is an attribute name and every content word of its value
occurs in something the user said about themself.
"""

from __future__ import annotations

import re

from memory_graph_agent.profile.fact_rules import RULE_KEYS, rule_facts
from memory_graph_agent.prompting.guards import fact_is_grounded, fact_key_is_valid, self_statements
from memory_graph_agent.prompting.llm import invoke_structured
from memory_graph_agent.prompting.rendering import defang, limit_words
from memory_graph_agent.prompting.schemas import FactList
from memory_graph_agent.services.models import load_chat_model
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.profile import Fact, normalize_fact_key

SOURCE_WORDS = 600


_SHORT = re.compile(r"[A-Za-z0-9+#]{1,2}")


def value_is_grounded(value: str, source_text: str) -> bool:
    """Whether the user stated ``value`` about themself in ``source_text``.

    `fact_is_grounded` ignores words under 3 letters, so a short value ("Go", "C#",
    "R") could never be grounded; such a value counts when it occurs verbatim, same
    case, as a whole word of one self-statement ("I prefer Go." grounds ``Go``) and is
    not a lower-case word ("I go home" grounds no ``go``).
    """
    if fact_is_grounded(value, source_text):
        return True
    short = value.strip()
    if not _SHORT.fullmatch(short) or short.islower():  # "go", "am": words, not names
        return False
    word = re.compile(rf"(?<![\w+#]){re.escape(short)}(?![\w+#])")
    return any(word.search(s) for s in self_statements(source_text))


def facts_grounded(facts: list[Fact], source_text: str) -> list[Fact]:
    """The facts with a valid key whose value is grounded in ``source_text``, one per key.

    Keys are normalised; of two facts with the same key the more important one stays.
    """
    best: dict[str, Fact] = {}
    for fact in facts:
        if not fact_key_is_valid(fact.key) or not value_is_grounded(fact.value, source_text):
            continue
        key = normalize_fact_key(fact.key)
        if key and (key not in best or fact.importance > best[key].importance):
            best[key] = Fact(key, fact.value, fact.importance, list(fact.source_ids))
    return list(best.values())


def rules_enabled(settings: Settings, model: str) -> bool:
    """Whether rule-based extraction runs (`fact_rules`); 'auto' = with local models."""
    return settings.formation.fact_rules == "on" or (
        settings.formation.fact_rules == "auto" and model.startswith("local:")
    )


def merge_rule_facts(model_facts: list[Fact], user_text: str, source_ids: list[str]) -> list[Fact]:
    """Rule facts from ``user_text`` plus the model's facts on keys no rule covers.

    The keys the rules know (`memory_graph_agent.profile.fact_rules.RULE_KEYS`) are decided
    by the rules
    alone: a model that writes ``name: The user's preference for breakfast`` cannot
    overwrite a name the user stated. A model fact that puts a rule-found value under
    another key (``hobby: Zhang San``) is dropped as a mis-assignment too.
    """
    ruled = {
        f.key: Fact(f.key, f.value, f.importance, list(source_ids)) for f in rule_facts(user_text)
    }
    values = {f.value.lower() for f in ruled.values()}
    kept = [
        f for f in model_facts if f.key not in RULE_KEYS and f.value.strip().lower() not in values
    ]
    return [*ruled.values(), *kept]


async def extract_facts(
    settings: Settings,
    model: str,
    prompt: str,
    source_text: str,
    source_ids: list[str],
    user_text: str = "",
) -> list[Fact]:
    """Durable facts about the user in ``source_text`` (its first ``SOURCE_WORDS`` words).

    The model answers under the `FactList` schema; facts below
    ``formation.min_fact_importance``, with a placeholder key or whose value the user did not
    state about themself are dropped. Grounding checks ``user_text`` (the user's own
    words) when given: a summary is written in the third person ("The user ..."), so
    every phrase of it would pass as a self-statement. Each kept fact cites
    ``source_ids``. A failed model call yields no facts. With `rules_enabled`, explicit
    self-statements are extracted by rule and merged in (`merge_rule_facts`).
    """
    source = limit_words(source_text, SOURCE_WORDS)
    if not source:
        return []
    said = limit_words(user_text, SOURCE_WORDS) or source
    facts = await _model_facts(settings, model, prompt, source, said, source_ids)
    return merge_rule_facts(facts, said, source_ids) if rules_enabled(settings, model) else facts


async def _model_facts(
    settings: Settings, model: str, prompt: str, source: str, said: str, source_ids: list[str]
) -> list[Fact]:
    """The model's grounded proposals (see `extract_facts`)."""
    extracted = await invoke_structured(
        load_chat_model(model),
        FactList,
        prompt.format(summary=defang(source)),
        settings.limits.model_timeout_s,
        "extract_facts",
    )
    candidates = [
        Fact(f.key, f.value, f.importance, list(source_ids))
        for f in (extracted.facts if extracted else [])
        if f.importance >= settings.formation.min_fact_importance
    ]
    return facts_grounded(candidates, said)
