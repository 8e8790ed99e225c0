"""The HIP engine's operation families (the catalog's families, as in the CPU reference engine)."""
