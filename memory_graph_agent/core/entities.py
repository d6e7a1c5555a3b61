"""Entity keys of a turn, and the score they lend: the memory graph's entity links.

At write time every indexed turn is linked to its keys (`entity_keys`): the names and
multi-word proper nouns it mentions (``Lake Tahoe`` gives ``lake tahoe``, ``lake`` and
``tahoe``), lower-cased, a possessive or plural ``s`` dropped. No model, deterministic
and fast. At recall the best turns lend score to the user's other turns that share
their keys (`entity_bonus`), weighted by how rare each key is among the user's turns,
so a multi-hop question's first hits reach evidence that shares no word with the
question. The speaker of a turn is a link too (`speaker_named`): a question that names
someone favours what they said. Pure functions; the edges live in
`storage.entity_links`.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable

MIN_WORD = 4
"""Shorter words make no link."""
COMMON = frozenset(
    """about after again also always another because been before being between both
    could does doing done down during each even ever every from going gonna have having
    here into just know like made make many more most much must never only other over
    really same should since some still such sure than that their them then there these
    they thing things think this those though through time today totally very want
    well were what when where which while will with would yeah your yours""".split()
)
"""Words too common to link turns (topic links and entity keys alike)."""
MAX_KEYS = 40
"""Keys kept per turn (the first ones said): a pasted document links like a turn."""
_TOKEN = re.compile(r"[^\W_][\w'’-]*")
_NAME = re.compile(r"[A-Z][\w'’-]*(?:\s+(?:of\s+|the\s+)?[A-Z][\w'’-]*)*")
_SENTENCE_START = re.compile(r"(?:^|[.!?…]\s+|[\"“(]\s*)$")
STOP = frozenset(
    """a an and are as at be but by can did do for got had has he her him his how i if in is
    it its me my no not of off oh on or our out she so the to too up us was we who why yes
    you hey okay ok hi hello wow thanks thank lol haha yep nope cool great awesome nice
    amazing january february march april may june july august september october november
    december monday tuesday wednesday thursday friday saturday sunday""".split()
)
"""Words that make no link, on top of `COMMON` (months and days: dates, not names)."""


def _norm(word: str) -> str:
    word = word.lower().replace("’", "'")
    word = word.removesuffix("'s")
    if len(word) > MIN_WORD and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    return word


def _plain(word: str) -> bool:
    low = word.lower()
    return low in STOP or low in COMMON


def names(body: str) -> list[str]:
    """Proper nouns: capitalised runs, one word or several (``Lake Tahoe``), lower-cased.

    A capitalised word that starts a sentence counts only if it is not a plain word.
    """
    out = []
    for match in _NAME.finditer(body):
        words = match.group().split()
        start = bool(_SENTENCE_START.search(body[: match.start()]))
        if start and _plain(words[0]):
            words = words[1:]
            while words and words[0].lower() in ("of", "the"):
                words = words[1:]
        words = [w for w in words if w != "I"]
        if not words or (len(words) == 1 and _plain(words[0])):
            continue
        if len(words) > 1:
            out.append(" ".join(_norm(w) for w in words))
        out += [_norm(w) for w in words if not _plain(w) and w.lower() not in ("of", "the")]
    return out


def entity_keys(text: str) -> list[str]:
    """The names a turn (``Speaker: text``) links to, in order said, at most `MAX_KEYS`.

    Names only: linking by rarer content words too lost recall on LoCoMo (topic links
    weigh shared words inside the candidates instead).
    """
    body = text.partition(": ")[2] or text
    return list(dict.fromkeys(k for k in names(body) if k))[:MAX_KEYS]


def named_in(query: str) -> frozenset[str]:
    """The words of ``query`` a speaker may be named by: as written and normalized."""
    words = _TOKEN.findall(query)
    return frozenset(w.lower() for w in words) | {_norm(w) for w in words}


ROLE_SPEAKERS = frozenset({"user", "assistant"})
"""The speaker of a message without a name (`storage.episode_index.speaker`): a role, not
a person a question asks about ("Assistant, what did I say?")."""


def speaker_names(query: str) -> list[str]:
    """The words of ``query`` that may name a speaker whose turns are searched (speaker turns).

    Capitalised words that are not plain words (``Melanie``, not ``What`` or ``I``) nor
    `ROLE_SPEAKERS`, in `named_in`'s forms and as ``lower()`` gives them in a ``C``-locale
    database (``Émile``: ``émile`` and ``Émile``), in the order said: a question with no
    name searches no speaker's turns.
    """
    words = [w for w in _TOKEN.findall(query) if w[0].isupper() and not _plain(w)]
    forms = (form for w in words for form in (w.lower(), _norm(w), _ascii_lower(w)))
    return [w for w in dict.fromkeys(forms) if w not in ROLE_SPEAKERS]


def _ascii_lower(word: str) -> str:
    """``word`` as Postgres ``lower()`` gives it under the ``C`` locale (ASCII letters only)."""
    return "".join(c.lower() if c.isascii() else c for c in word)


def said_by(text: str, named: frozenset[str]) -> bool:
    """Whether the speaker of the turn ``text`` (``Speaker: text``) is in ``named``."""
    speaker = text.partition(": ")[0].lower()
    return bool(speaker) and speaker in named


def speaker_named(text: str, query: str) -> bool:
    """Whether ``query`` names the speaker of the turn ``text`` (``Speaker: text``)."""
    return said_by(text, named_in(query))


def query_keys(query: str) -> set[str]:
    """The keys of the question itself: they already search, they lend nothing."""
    return set(entity_keys(": " + query)) | {_norm(w) for w in _TOKEN.findall(query)}


def entity_bonus(
    seeds: Iterable[tuple[str, float, list[str]]],
    reached: dict[str, set[str]],
    df: dict[str, int],
    n: int,
    asked: set[str],
    weight: float,
) -> dict[str, float]:
    """The score each reached turn gets from the seeds it shares keys with.

    Args:
        seeds: ``(id, rrf, keys)`` of the best turns.
        reached: Each reached turn's id and the seeds' keys it has.
        df: How many of the user's turns have each key.
        n: How many turns the user has.
        asked: Keys of the query (lend nothing).
        weight: Share of a seed's RRF it lends in all.

    Each seed lends ``weight`` × its RRF, split over its keys (not asked) by idf; a turn
    gets the shares of the keys it has. A seed lends nothing to itself.
    """
    bonus: dict[str, float] = defaultdict(float)
    for seed_id, rrf, keys in seeds:
        # in key order: the sums never depend on hash order (`topics.link_topics`)
        ranked = sorted(set(keys) - asked)
        idf = {k: math.log(n / df[k]) for k in ranked if 0 < df.get(k, 0) < n}
        total = sum(idf.values())
        if total <= 0:
            continue
        for turn, shared in reached.items():
            if turn == seed_id:
                continue
            part = sum(idf.get(k, 0.0) for k in sorted(shared))
            if part:
                bonus[turn] += weight * rrf * part / total
    return dict(bonus)
