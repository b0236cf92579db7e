//! The `-J file.json` writer (upstream schema version 3).
