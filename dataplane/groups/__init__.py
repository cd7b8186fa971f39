"""Consumer groups (classic protocol) and committed offsets in ``__consumer_offsets``.

Modules, from the handlers down:

- ``coordinator``: the facade the handlers call (lifecycle, replay, commits, admin).
- ``membership``: rebalances: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, expiry.
- ``group``: one group's members and state machine (no I/O, no timers).
- ``offsets``: the in-memory table of committed offsets.
- ``storage``: the compacted ``__consumer_offsets`` topic (placement, writes, replay).
- ``records``: Kafka's key/value formats of that topic.
- ``timer``: keyed one-shot timers on the event loop.
- ``api``: small helpers shared by the group handlers.
"""
