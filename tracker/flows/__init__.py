"""Flows: the steps of a change (the PR) from its refs to its comment, spoken to a forge (tracker.flows.forge)."""
