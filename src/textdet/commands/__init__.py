"""What a user runs (floor 6): each module is one ``textdet`` subcommand; ``cli`` imports it inside its ``cmd_*``."""
