"""maildir-backlog: a task queue of markdown files inside a git repository."""

__version__ = "0.1.0"
