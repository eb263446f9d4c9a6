"""Executing runs: the engine, its options, its storage and its launchers."""
