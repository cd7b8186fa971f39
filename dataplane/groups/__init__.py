"""Consumer groups (classic protocol) and committed offsets in __consumer_offsets."""
