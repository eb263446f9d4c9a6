"""Agents' trajectories: the steps of a result, read page by page."""
