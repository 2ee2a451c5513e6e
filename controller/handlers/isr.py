"""ISR change notifications (Kafka's IsrChangeNotification handler).

How it works: leaders change ISRs themselves (conditional sets on the state znodes) and
then publish /isr_change_notification/isr_change_<seq> naming the partitions. Here: read
every notification, re-read those partitions' state znodes into the context, send
UpdateMetadata for them to every live broker, delete the notifications (fenced), and
re-check reassignments waiting for new replicas to join the ISR.
"""

from __future__ import annotations

from controller.active import ActiveController
from controller.handlers import reassignment


async def on_isr_change_notification(active: ActiveController, event: object = None) -> None:
    ctx = active.ctx
    paths, partitions = await active.store.read_isr_notifications()
    if not paths:
        return
    known = sorted(tp for tp in partitions if tp in ctx.replicas)
    for tp, state in (await active.store.read_states(known)).items():
        if state is not None:
            ctx.states[tp] = state
    if known:
        batch = active.batch()
        batch.add_update_metadata_to_all(known)
        active.send(batch)
    await active.store.delete_paths(paths)
    await reassignment.check_reassignments(active, [tp for tp in known if tp in ctx.reassignments])
