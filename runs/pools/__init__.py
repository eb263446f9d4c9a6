"""Scorer work kept off the event loop: process and thread pools, each project's
share of them, and the functions the processes run (math answers, JSON
schemas); and the loops in daemon threads that other background work runs on
(``loops.py``). Nothing here imports a plug-in, so a pool's process starts
light."""
