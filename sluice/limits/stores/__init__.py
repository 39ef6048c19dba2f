"""Where bucket debts live: ``memory`` (one process) or ``redis`` (shared)."""
