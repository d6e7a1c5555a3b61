"""Recall's channels: each one search of the query, all fused by reciprocal rank.

`CHANNELS` is the one list: `retrieval.retrieve` searches with every channel in it at
once (`base.search_channels`) and `retrieval.fuse` fuses their rankings in its order
(ties go to the ranking listed first). Today:

- `summaries.Summaries`: the nearest summaries and reflections (and their turns);
- `dense_turns.DenseTurns`: the nearest raw turns;
- `speaker_turns.SpeakerTurns`: the nearest turns of whomever the query names, in the
  dense turns' ranking;
- `keyword_turns.KeywordTurns`: the raw turns with the query's rarest words.

To add a channel, write a module here with a class that implements
`base.RecallChannel`: its ``statements`` ask a store for the SQL of its search (only
``storage/`` writes SQL: add the statement builder there), its ``read`` turns the rows
into `base.Hit` records, best first. Then add an instance to `CHANNELS`. Nothing else
names a channel. The links that follow the fusion (a summary's turns, a turn's
neighbours, entities, topics) are not channels: they start from what the channels found
(`recall.linking`).
"""

from __future__ import annotations

from memory_graph_agent.recall.channels.base import RecallChannel
from memory_graph_agent.recall.channels.dense_turns import DenseTurns
from memory_graph_agent.recall.channels.keyword_turns import KeywordTurns
from memory_graph_agent.recall.channels.speaker_turns import SpeakerTurns
from memory_graph_agent.recall.channels.summaries import Summaries

CHANNELS: tuple[RecallChannel, ...] = (Summaries(), DenseTurns(), SpeakerTurns(), KeywordTurns())
"""Every channel recall searches, in fusion order."""

__all__ = ["CHANNELS", "RecallChannel"]
