"""The consumer-group client: a group consumer's membership, commits and assignment
(Kafka 2.8's ConsumerCoordinator and AbstractCoordinator, eager rebalance protocol).

- `coordinator.py`: `ConsumerCoordinator`, the Trio side of the membership: joining and
  syncing, heartbeats, rebalance callbacks, leaving;
- `membership.py`: `GroupMembership`, the sans-IO state machine: states, generation,
  timers, and what every group response means for the member;
- `assignment.py`: `GroupAssignment`: what the member joins with (a subscription per
  assignor), the leader's plan, and when the leader must plan again;
- `channel.py`: the way to the group's coordinator (FindCoordinator, and a connection
  pool of its own for the group's requests);
- `commits.py`: `GroupCommits`: commits in order, auto-commit, and starting positions
  from the group's committed offsets;
- `offsets.py`: OffsetCommit and OffsetFetch requests and answers as offset maps
  (sans-IO, shared with the admin client);
- `assignors.py`: the partition assignors (range, roundrobin, sticky).
"""
