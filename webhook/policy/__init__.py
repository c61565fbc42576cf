"""Pure admission decisions: plain dicts and small dataclasses in, decisions out. No I/O, no threads."""
