"""A Python heuristic plugin for the tests: policy "PyHeuristic::Reverse" reverses the candidate
order; "PyHeuristic::Decline" always declines; traces say which device it saw."""
import json

from hipdnn_cabi.plugin_sdk import HeuristicPluginBase


class ReverseHeuristic(HeuristicPluginBase):
    name = "py_reverse_heuristic"
    version = "2.0.0"
    policy_names = ("PyHeuristic::Reverse", "PyHeuristic::Decline")

    def __init__(self):
        self.seen = {}

    def sorted_engine_ids(self, graph, engine_ids, device, policy):
        if policy == "PyHeuristic::Decline":
            return None
        self.seen = {"nodes": len(graph.nodes), "device_id": device["device_id"]}
        return list(reversed(engine_ids))

    def trace(self, policy, engine_id):
        return json.dumps({"policy": policy, **self.seen})


hipdnn_plugin = ReverseHeuristic
