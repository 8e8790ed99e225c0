"""The backend core: handles, descriptors, graph, plans and execution behind the C shims."""
