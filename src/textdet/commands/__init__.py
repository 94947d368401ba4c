"""What a user runs (floor 6): each module is one ``textdet`` subcommand; ``cli`` imports it only when it runs."""
