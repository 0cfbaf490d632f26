"""Runnable examples (importable from the project root: `examples.docs_agent`)."""
