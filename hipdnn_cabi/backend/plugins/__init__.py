"""Engine-plugin host: discovery, loading, per-handle plugin handles (spec §3, §6)."""
