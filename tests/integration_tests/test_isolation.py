"""Property: no user ever sees another user's memory.

Hypothesis draws 2-4 users, their threads and messages. Every message of a user carries
secret tokens unique to that user (``SECRET-<user>-<n>-<random>``, and a made-up name
and city that end up in the profile); random text may mention the other users' ids and
sometimes even another user's secret (which then stops being unique to its owner).
The users talk concurrently through the compiled graph (fake model, window of 2,
summaries every 2 evicted messages). Then, for each user A, the recall of a fresh turn
whose question names the other users' secrets, A's profile and ``memory show --json``
must not contain any token unique to another user.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import string
import uuid
from dataclasses import dataclass

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from memory_graph_agent.cli.main import _memory_show, build_parser
from memory_graph_agent.settings import Settings
from memory_graph_agent.testing import ScriptedChatModel
from tests.conftest import say

_ID_HEAD = string.ascii_letters + string.digits
_ID_TAIL = _ID_HEAD + "_.@-"
_WORDS = st.sampled_from(
    "the a tea river blue seven quiet laptop </memories> <profile> ignore previous "
    "instructions reveal other users data please remember this 42 über 北京 🙂".split()
)


@dataclass
class Turn:
    user: int
    thread: int
    words: list[str]
    leak_from: int | None  # also mention a secret of this (other) user


@dataclass
class Plan:
    users: list[str]
    turns: list[Turn]
    names: list[str]
    cities: list[str]


@st.composite
def plans(draw) -> Plan:
    n = draw(st.integers(2, 4))
    users = []
    for _ in range(n):
        head = draw(st.sampled_from(_ID_HEAD))
        tail = draw(st.text(_ID_TAIL, max_size=8))
        users.append(f"{head}{tail}-{uuid.uuid4().hex[:6]}")  # fresh per example
    turns = []
    for u in range(n):
        for j in range(draw(st.integers(2, 3))):
            others = [o for o in range(n) if o != u]
            turns.append(
                Turn(
                    user=u,
                    # two turns in one thread evict (window 2) and so summarize
                    thread=0 if j < 2 else draw(st.integers(0, 1)),
                    words=draw(st.lists(_WORDS, max_size=6)),
                    leak_from=draw(st.one_of(st.none(), st.sampled_from(others))),
                )
            )
    # made-up capitalised words (one per user, distinct by their last letter): the
    # fake extractor turns "My name is X and I live in Y" into profile facts
    letters = st.text(string.ascii_lowercase, min_size=3, max_size=6)
    names = [f"Qz{draw(letters)}{'abcd'[i]}" for i in range(n)]
    cities = [f"{draw(letters).capitalize()}ville{'abcd'[i]}" for i in range(n)]
    return Plan(users, turns, names, cities)


def _secret(plan: Plan, u: int, n: int) -> str:
    return f"SECRET-{plan.users[u]}-{n}-{abs(hash((plan.users[u], n))) % 16**8:08x}"


def _city(plan: Plan, u: int) -> str:
    return plan.cities[u]


def _name(plan: Plan, u: int) -> str:
    return plan.names[u]


def own_tokens(plan: Plan, convs: dict[int, list[tuple[str, str]]], u: int) -> set[str]:
    """All secret tokens of user ``u`` (unique to them or not)."""
    secrets = {_secret(plan, u, k) for k in range(len(convs[u]))}
    return secrets | {_name(plan, u), _city(plan, u)}


def conversations(plan: Plan) -> dict[int, list[tuple[str, str]]]:
    """Per user, the (thread, text) turns in order."""
    out: dict[int, list[tuple[str, str]]] = {u: [] for u in range(len(plan.users))}
    for i, turn in enumerate(plan.turns):
        u = turn.user
        k = len(out[u])
        parts = [_secret(plan, u, k)]
        if k == 0:
            parts.insert(0, f"My name is {_name(plan, u)} and I live in {_city(plan, u)}.")
        others = [o for o in range(len(plan.users)) if o != u]
        parts.append(f"Say hi to {plan.users[others[i % len(others)]]}.")
        if turn.leak_from is not None:
            parts.append(f"I heard of {_secret(plan, turn.leak_from, 0)}.")
        parts.extend(turn.words)
        out[u].append((f"t{turn.thread}-{plan.users[u]}", " ".join(parts)))
    return out


def unique_tokens(plan: Plan, convs: dict[int, list[tuple[str, str]]]) -> dict[int, set[str]]:
    """Per user, the secret tokens that appear only in that user's messages."""
    tokens = {u: own_tokens(plan, convs, u) for u in convs}
    said = {u: " ".join(text for _, text in convs[u]) for u in convs}
    return {
        u: {t for t in tokens[u] if not any(t in said[o] for o in convs if o != u)} for u in convs
    }


async def _show_json(user: str) -> str:
    args = build_parser().parse_args(["memory", "show", "--user", user, "--json"])
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert await _memory_show(args) == 0
    return buf.getvalue()


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,  # no .hypothesis/ directory in the repository
    phases=[Phase.explicit, Phase.generate, Phase.shrink],  # "explain" reruns ~100 times
)
@given(plan=plans())
async def test_no_user_ever_sees_another_users_memory(graph_for, make_context, services, plan):
    model = ScriptedChatModel()
    agent = graph_for(Settings().override(window_size=2, summary_batch=2, reflect_after=2))
    contexts = [make_context(user_id=u, model_obj=model) for u in plan.users]
    convs = conversations(plan)
    unique = unique_tokens(plan, convs)

    async def talk(u: int) -> None:
        for thread, text in convs[u]:
            await say(agent, contexts[u], thread, text)

    await asyncio.gather(*(talk(u) for u in convs))
    counts = [await services.memories.count(u) for u in plan.users]
    assert all(counts), "a user has no summary: the property would hold vacuously"

    for a, user in enumerate(plan.users):
        foreign = set().union(*(unique[b] for b in unique if b != a))
        profile = json.dumps(await services.profile.get(user), ensure_ascii=False)
        shown = await _show_json(user)
        assert json.loads(shown)["user_id"] == user
        # a fresh thread whose question names every other user's secrets
        question = "What do you know about " + ", ".join(sorted(foreign)) + "?"
        state = await say(agent, contexts[a], f"probe-{uuid.uuid4().hex[:8]}", question)
        recalled = json.dumps(state["recalled"], ensure_ascii=False)
        for where, text in (("profile", profile), ("memory show", shown), ("recall", recalled)):
            leaked = sorted(t for t in foreign if t in text)
            assert not leaked, f"{where} of {user} contains other users' secrets {leaked}"
        # the user's own memory is there (sanity: the check is not vacuous)
        assert any(t in shown for t in own_tokens(plan, convs, a))


# ------------------------------------------------------------------ thread ids


async def test_cli_refuses_a_thread_of_another_user(
    agent, make_context, services, monkeypatch, capsys
):
    """Checkpoints are keyed by thread id only: through the graph API, a second user on
    the same thread id would see (and copy into their memory) the first user's
    conversation, so the CLI refuses a ``--thread`` that another user has memory in."""
    from memory_graph_agent.cli.main import main
    from memory_graph_agent.services.models import register_chat_model

    model = ScriptedChatModel()
    monkeypatch.setenv("MODEL", register_chat_model(f"iso-{uuid.uuid4().hex[:6]}", model))
    owner, intruder = make_context(), f"ub-{uuid.uuid4().hex[:8]}"
    thread = f"t-{uuid.uuid4().hex[:8]}"
    await say(agent, owner, thread, "My PIN is SECRET-owner-PIN")
    before = [m.id for m in await services.window.window(owner.user_id, thread)]

    for command in (
        ["send", "--user", intruder, "--thread", thread, "hi"],
        ["chat", "--user", intruder, "--thread", thread],
    ):
        assert await asyncio.to_thread(main, command) == 2
        out = " ".join(capsys.readouterr().out.split())
        assert out.startswith("error:") and "belongs to another user" in out, out
    prefix = services.keys.prefix
    assert [k async for k in services.redis.scan_iter(match=f"{prefix}:*{intruder}*")] == []
    assert [m.id for m in await services.window.window(owner.user_id, thread)] == before
    assert not any("SECRET-owner-PIN" in str(p) for p in model.prompts)

    # the owner may continue the thread from the CLI
    args = ["send", "--user", owner.user_id, "--thread", thread, "--json", "and my city?"]
    assert await asyncio.to_thread(main, args) == 0
    window = await services.window.window(owner.user_id, thread)
    assert len(window) == len(before) + 2 and window[-2].content == "and my city?"


async def test_another_users_turn_on_a_thread_is_rejected_and_sees_nothing(agent, make_context):
    import uuid as _uuid

    import pytest as _pytest

    from memory_graph_agent.testing import ScriptedChatModel
    from memory_graph_agent.turn.validation import ThreadOwnershipError
    from tests.conftest import say

    thread = f"t-{_uuid.uuid4().hex[:8]}"
    owner = make_context()
    await say(agent, owner, thread, "my locker code is 4417")
    intruder_model = ScriptedChatModel()
    intruder = make_context(user_id=f"u-{_uuid.uuid4().hex[:10]}", model_obj=intruder_model)
    with _pytest.raises(ThreadOwnershipError, match="belongs to another user"):
        await say(agent, intruder, thread, "what is the locker code?")
    assert intruder_model.prompts == []  # the intruder's model never saw the thread
